package kernels

import (
	"math"
	"runtime"
	"sync"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/op"
)

// widenF32 returns an F32 copy of m (m itself when it is already F32): widening 16-bit weights
// once at load trades twice the memory for skipping the per-call widening in MatMul. A QAffine,
// FP8Block, QFloat or GGML weight is dequantized (for tools and tests: a model keeps its
// quantized weights packed).
// Errors wrap op.ErrShape or op.ErrDType.
func widenF32(m *op.Matrix) (*op.Matrix, error) {
	if err := m.Validate("WidenF32"); err != nil {
		return nil, err
	}
	switch m.DType {
	case op.F32:
		return m, nil
	case op.QAffine, op.FP8Block, op.QFloat, op.GGML:
		out, err := dequantF32(m)
		if err != nil {
			return nil, err
		}
		return &op.Matrix{N: m.N, K: m.K, DType: op.F32, F32: out}, nil
	}
	out := make([]float32, m.N*m.K)
	parallelFor(m.N, 64, func(lo, hi int) {
		widenU16(out[lo*m.K:hi*m.K], m.U16[lo*m.K:hi*m.K], m.DType)
	})
	return &op.Matrix{N: m.N, K: m.K, DType: op.F32, F32: out}, nil
}

// rowF32 widens (or, for the packed formats, dequantizes) row n of m into dst (length K); sb is
// scale scratch for packed rows (allocated when shorter than packedScratch of one row).
func rowF32(dst []float32, m *op.Matrix, n int, sb []float32) {
	switch {
	case m.DType == op.F32:
		copy(dst, m.F32[n*m.K:(n+1)*m.K])
	case isPacked(m):
		if len(sb) < packedScratch(m, 1) {
			sb = make([]float32, packedScratch(m, 1))
		}
		unpackRows(dst, m, n, n+1, sb)
	default:
		widenU16(dst, m.U16[n*m.K:(n+1)*m.K], m.DType)
	}
}

// bf16ToF32 widens bfloat16 bits exactly.
func bf16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

var (
	f16TableOnce sync.Once
	f16Table     []float32 // all 65536 half-precision values, widened
)

// f16ToF32 widens IEEE half-precision bits exactly (subnormals, infinities and NaNs included).
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal half: man * 2^-24, exact in float32
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// widenU16 converts len(dst) 16-bit values of dtype dt to float32, exactly. BF16 runs the
// AVX2 kernel (widen_amd64.s) where the CPU has it: per-call widening of expert weights that
// few rows multiply was a quarter of their GEMM time in the portable loop.
func widenU16(dst []float32, src []uint16, dt op.DType) {
	src = src[:len(dst)]
	if dt == op.BF16 {
		if n := len(dst) &^ 15; hasWidenAsm && n > 0 {
			widenBF16x16(&dst[0], &src[0], n)
			dst, src = dst[n:], src[n:]
		}
		for i, b := range src {
			dst[i] = math.Float32frombits(uint32(b) << 16)
		}
		return
	}
	tab := f16Tab()
	for i, b := range src {
		dst[i] = tab[b]
	}
}

// gemmBlockElems bounds one column block of a product: the rows of W that one SGEMM call
// multiplies (2 MiB as float32). A 16-bit block is widened into per-call scratch of this size,
// small enough to stay in cache while the GEMM reads it; x is packed once per block, so blocks
// much smaller than this would spend their time repacking x.
const gemmBlockElems = 1 << 19

// gemmBlockRows is the number of rows of W [N, K] per column block: a multiple of 32 (the
// widest micro-kernel tile of the libraries in use), at most N. It depends only on N and K,
// never on the core count, which is what keeps MatMul's bits independent of GOMAXPROCS.
func gemmBlockRows(N, K int) int {
	nb := max(32, gemmBlockElems/K/32*32)
	return min(nb, N)
}

var gemmScratch = sync.Pool{New: func() any { s := make([]float32, 0); return &s }}

// matMulChecked computes y [T, N] = x [T, K] * W^T for a weight W [N, K] (transformers' nn.Linear
// without bias), with float32 activations and accumulation.
//
// The product is split into column blocks of y (gemmBlockRows rows of W each, a split that
// depends only on N and K); each block is one single-threaded SGEMM (package internal/blas:
// OpenBLAS, Accelerate or strata's SGEMM) writing the columns it owns, and the blocks run on up to
// GOMAXPROCS goroutines, taken in order from a shared counter. A weight of fewer blocks (or, in
// a compute mode, 32-column panels) than GOMAXPROCS runs in tiles of token rows instead
// (rowMatMul): bitwise the same with strata's SGEMM and the compute forms; with a native BLAS
// a weight of fewer than 8 blocks runs in tiles of a fixed 128 rows when T is larger, so its
// bits depend on T but not on the cores. op.BF16 and op.F16 weights are
// widened exactly, and op.QAffine, op.FP8Block, op.QFloat and op.GGML weights dequantized (scale *
// q + bias rounded once, the assembly kernels of quant.go; code * scale, those of fpquant.go;
// ggml's block values, ggml.go), block by
// block into the scratch of the goroutine that
// multiplies the block, so the conversion runs in parallel and stays in cache while the packed
// weight is read once per call. Every block has the same shape and inputs whichever goroutine
// runs it, so results are bitwise identical across runs, GOMAXPROCS and core counts (for one
// BLAS build; see internal/blas). A row's bits may depend on T (the BLAS blocks small and large
// products differently), so a stream run in chunks agrees with one run to rounding, not bitwise.
// When the library cannot be entered concurrently (internal/blas Concurrent is false) the blocks
// run one after another and the library spreads each one over its own threads. Widening per
// call (an AVX2 kernel for bf16 where the CPU has it) costs about a twentieth of the product
// for a block multiplied with 80 rows (an expert at T = 512) and a fifth in the portable loop
// (BENCHMARKS.md); callers with memory to spare may widen 16-bit weights once with WidenF32.
// T may be 0 (nothing to do). len(x) must be T*K and len(y) T*N.
// Errors wrap op.ErrShape, op.ErrInvalidArgument (nil weight), op.ErrUnsupported (a bit width
// or group size outside MLX's) or op.ErrDType.
func matMulChecked(y, x []float32, T int, w *op.Matrix) error {
	return execMatMul(op.MatMul{Y: op.HostF32(y), X: op.HostF32(x), T: T, W: w})
}

func execMatMul(a op.MatMul) error {
	if err := a.Check(); err != nil {
		return err
	}
	return matMul(a.Y.F32(), a.X.F32(), a.T, a.W)
}

// matMul is MatMul after validation: the column blocks over the cores (matMulBlock each), a
// compute form's panels (matMulCompute), or a thin weight's row tiles (rowMatMul).
func matMul(y []float32, x []float32, T int, w *op.Matrix) error {
	if T == 0 {
		return nil
	}
	nb := gemmBlockRows(w.N, w.K)
	nblk := (w.N + nb - 1) / nb
	workers := runtime.GOMAXPROCS(0)
	if f := computeOf(w); f != nil {
		// The compute kernels split columns in 32-column panels, each reading all of x: fewer
		// panels than cores would leave cores idle.
		if (w.N+31)/32 >= workers {
			return matMulCompute([][]float32{y}, w.N, x, T, []*op.Matrix{w}, true)
		}
		return rowMatMul(y, x, T, w, rowTile(T, w, T))
	}
	switch {
	case !blas.Concurrent():
	case blas.Native():
		// A native BLAS's row bits may depend on the rows of the call: whether and how a
		// product is cut into row tiles must not depend on the cores.
		if nblk < nativeThinBlocks && T > nativeRowTile {
			return rowMatMul(y, x, T, w, nativeRowTile)
		}
	case nblk < workers:
		return rowMatMul(y, x, T, w, rowTile(T, w, T))
	}
	concurrent := blas.Concurrent()
	if concurrent {
		// A block below ~1 MFLOP is not worth a goroutine.
		workers = min(workers, nblk, max(1, 2*T*w.N*w.K/(1<<20)))
	} else {
		workers = 1
	}
	return overTiles(workers, nblk, func() (func(int) error, func()) {
		sp, scratch := gemmScratchOf(matMulScratch(w))
		return func(b int) error { return matMulBlock(y, w.N, x, T, w, b, scratch, concurrent) },
			func() { gemmScratch.Put(sp) }
	})
}

// gemmScratchOf takes a buffer of at least need float32 from gemmScratch (Put sp back when
// done) and returns it at its whole capacity.
func gemmScratchOf(need int) (sp *[]float32, scratch []float32) {
	sp = gemmScratch.Get().(*[]float32)
	if cap(*sp) < need {
		*sp = make([]float32, need)
	}
	return sp, (*sp)[:cap(*sp)]
}

// rowMatMul is matMul for a thin weight (fewer column blocks than cores; with a native BLAS,
// fewer than nativeThinBlocks) in tiles of rb token rows by one column block of matMul (all
// columns for an int8 or bf16 compute form, whose rows each tile quantizes or rounds itself)
// over every core, so that a narrow weight (a router of 256 experts, a GDN layer's a and b
// projections, a shared expert's gate) does not run on one core while the others wait. A row's
// bits do not depend on the rows beside it with strata's SGEMM and the compute kernels, so the
// result is then bitwise matMul's whatever rb (rowTile's); a native BLAS (whose row bits may
// depend on the rows of the call) takes a fixed rb (nativeRowTile).
func rowMatMul(y, x []float32, T int, w *op.Matrix, rb int) error {
	N, K := w.N, w.K
	f := computeOf(w)
	ncb := rowMatMulBlocks(w)
	tiles := (T + rb - 1) / rb * ncb
	// A tile below ~1 MFLOP is not worth a goroutine (as in matMul).
	workers := min(runtime.GOMAXPROCS(0), max(1, 2*T*N*K/(1<<20)))
	concurrent := blas.Concurrent()
	need := 0
	if f == nil {
		need = matMulScratch(w)
	}
	return overTiles(workers, tiles, func() (func(int) error, func()) {
		sp, scratch := gemmScratchOf(need)
		return func(i int) error {
				t0 := i / ncb * rb
				t1 := min(T, t0+rb)
				if f == nil {
					return matMulBlock(y[t0*N:t1*N], N, x[t0*K:t1*K], t1-t0, w, i%ncb, scratch, concurrent)
				}
				return matMulCompute([][]float32{y[t0*N : t1*N]}, N, x[t0*K:t1*K], t1-t0, []*op.Matrix{w}, false)
			},
			func() { gemmScratch.Put(sp) }
	})
}

// rowMatMulBlocks is the column blocks of a rowMatMul tile row: matMul's for an f32 product, one
// for a compute form (all its columns).
func rowMatMulBlocks(w *op.Matrix) int {
	if computeOf(w) != nil {
		return 1
	}
	nb := gemmBlockRows(w.N, w.K)
	return (w.N + nb - 1) / nb
}

// rowTile is the token rows of a rowMatMul tile where a row's bits do not depend on the tile:
// about two tiles a core, at least rowMatMulMin rows and at most maxRows.
func rowTile(T int, w *op.Matrix, maxRows int) int {
	cores := runtime.GOMAXPROCS(0)
	return min(maxRows, max(rowMatMulMin, (T*rowMatMulBlocks(w)+2*cores-1)/(2*cores)))
}

// rowMatMulMin is the fewest token rows of a rowMatMul tile: each tile repacks its weight block
// (or decodes its compute form's scales) once.
const rowMatMulMin = 48

// With a native BLAS (which may block a call of fewer rows differently) a weight of fewer than
// nativeThinBlocks column blocks runs in rowMatMul tiles of nativeRowTile token rows when T is
// larger: both fixed, so that the bits do not depend on the core count.
const (
	nativeThinBlocks = 8
	nativeRowTile    = 128
)

// matMulScratch is the scratch one worker of matMul needs for w's column blocks (float32
// values): a block's rows widened or dequantized, then (packed formats) their scales; 0 for F32.
func matMulScratch(w *op.Matrix) int {
	nb := gemmBlockRows(w.N, w.K)
	switch {
	case w.DType == op.BF16 || w.DType == op.F16:
		return nb * w.K
	case isPacked(w):
		return nb*w.K + packedScratch(w, nb)
	}
	return 0
}

// matMulBlock computes column block b of matMul's product (columns [b*nb, min((b+1)*nb, N)) of
// y = x W^T, nb = gemmBlockRows(N, K)) for the T rows of x, on the calling goroutine but for
// the widening or dequantization, which runs over the cores when concurrent is false (the
// library then runs the product on its own threads). scratch holds matMulScratch(w) values.
// The block is one SGEMM call of shape [T, rows, K]: with strata's SGEMM a row's bits do not
// depend on T (internal/blas), so callers may split the rows of x; with a native library they
// may not.
func matMulBlock(y []float32, ldy int, x []float32, T int, w *op.Matrix, b int, scratch []float32, concurrent bool) error {
	N, K := w.N, w.K
	nb := gemmBlockRows(N, K)
	n0 := b * nb
	rows := min(nb, N-n0)
	var wb []float32
	switch {
	case w.DType == op.F32:
		wb = w.F32[n0*K : (n0+rows)*K]
	case isPacked(w):
		wb = scratch[:rows*K]
		sb := scratch[nb*K:]
		if concurrent {
			unpackRows(wb, w, n0, n0+rows, sb)
		} else {
			parallelFor(rows, 32, func(lo, hi int) {
				unpackRows(wb[lo*K:hi*K], w, n0+lo, n0+hi, sb[packedScratch(w, lo):])
			})
		}
	default:
		wb = scratch[:rows*K]
		src := w.U16[n0*K : (n0+rows)*K]
		if concurrent {
			widenU16(wb, src, w.DType)
		} else {
			parallelFor(rows, 32, func(lo, hi int) {
				widenU16(wb[lo*K:hi*K], src[lo*K:hi*K], w.DType)
			})
		}
	}
	return blas.Sgemm(false, true, T, rows, K, 1, x, K, wb, K, 0, y[n0:], ldy)
}

// BLASImpl names the SGEMM implementation MatMul runs on (internal/blas.Impl).
func BLASImpl() string { return blas.Impl() }
