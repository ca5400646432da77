package kernels

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/stratakernels/strata/internal/qdot"
	"github.com/stratakernels/strata/op"
)

// The compute modes (op.ComputeMode) on the CPU: Weights.Prepare gives each matrix whose format
// the mode takes a computeForm (op.Matrix.Compute) and matMul runs its products through package
// internal/qdot, whose package documentation defines the arithmetic:
//
//   - int8: QAffine (every MLX bit width), FP8Block and GGML weights (the GGUF block types);
//     activations quantized per row and block of int8Block elements (QuantizeInt8), on the
//     widest int8 kernel of the CPU (AVX-512 VNNI, AVX-VNNI, AVX2 or NEON SDOT). Every weight
//     runs from its data as stored: the kernels pack each panel of 32 columns per call into a
//     thread's scratch of 16 to 64 bytes per element of K (MLX 4-bit code words transposed,
//     8-bit codes reordered, FP8 and GGML codes mapped to int8 with a scale, and an offset,
//     per 32), so that a 4-bit file stays its size in memory (ggml_int8.go for the GGML
//     types; Q2_K, Q3_K and Q6_K groups whose two 16-element sub-blocks differ are
//     requantized there). The one exception: GGML Q4_0, Q4_1 and Q4_K codes are packed once at
//     load into the panels (packNibbles; heads and panels the size of the blocks), and the
//     loader lets the file's pages go. BF16, F16, F32 and QFloat weights
//     run in f32: an int8 form of them would requantize the weights, which this mode does not
//     do.
//   - bf16: BF16, FP8Block and QAffine weights (MLX codes dequantized and rounded to bfloat16
//     per call); activations rounded to bfloat16 (RoundBF16); VDPBF16PS where the CPU has
//     AVX512_BF16 and it wins the timing of qdot.BestBF16, else its FMA emulation (the same
//     bits but for subnormal partial sums). F16 and F32 weights (rounding them to bfloat16
//     would change them), QFloat and GGML run in f32. The emulation runs where the instruction is
//     missing although it is slower than f32 there (on a Zen 3, 0.4-0.6x on the qwen3next
//     slice: BENCHMARKS.md), so that the mode's results are those of every CPU; f32 is the
//     mode for speed on such CPUs, int8 faster still.
//
// Every element of a product depends only on its row of x and its column of W (the activation
// blocks are per row, the kernels' arithmetic is fixed by the definitions), so the results do
// not depend on T, on how a prompt is split into calls or steps, on GOMAXPROCS, or on the kernel
// (int8; bf16 up to subnormal partial sums).

// int8Block is the activation block of the int8 mode: it divides every MLX group (32, 64, 128)
// and FP8's int8 group (32), and the AVX2 4-bit kernel sums a block of 32 in 16 bits (in
// qdot's benchmark at 80 x 1280 x 2560 on a Zen 3 core: 162 GFLOP/s in blocks of 32 against
// 136 in blocks of 64), with the smaller rounding error of the two.
const int8Block = 32

// computeForm is the CPU's op.ComputeForm: a matrix's int8 or bf16 operand and its kernel.
type computeForm struct {
	mode op.ComputeMode
	i8   qdot.Int8Weights // int8: the weight as stored
	b16  qdot.BF16Weights // bf16
	k    qdot.Kernel
	what string // the weight's format, for reports
	// packed: the bytes of the panels and scale heads of a GGML 4-bit weight packed at load
	// (packNibbles); 0 for a form that reads the matrix's data as stored.
	packed int64
}

// Bytes is the packed panels and heads of a GGML Q4_0, Q4_1 or Q4_K weight in int8 mode (the
// size of its blocks); 0 for the others, which read the matrix's own data as stored (the
// kernels pack or convert each panel per call into a small scratch).
func (f *computeForm) Bytes() int64 { return f.packed }

// Packed reports whether the form holds the weight's values itself (Bytes > 0).
func (f *computeForm) Packed() bool { return f.packed > 0 }

func (f *computeForm) String() string {
	if f.mode == op.ComputeInt8 {
		return fmt.Sprintf("int8 %s for %s", qdot.Int8Name(f.k), f.what)
	}
	return fmt.Sprintf("bf16 %s for %s", qdot.BF16Name(f.k), f.what)
}

// computeState is the compute mode of one weight store and what Prepare did with each format.
type computeState struct {
	mode op.ComputeMode
	i8k  qdot.Kernel // the int8 kernel (qdot.BestInt8 unless a test picks one)
	b16k qdot.Kernel // the bf16 kernel (qdot.BestBF16 unless a test picks one)
	mu   sync.Mutex
	// routes counts the matrices per report entry ("int8 avx2 (vpmaddubsw) for MLX 4-bit ...",
	// "f32 for BF16 (...)").
	routes map[string]int
	packed int64 // bytes of the GGML 4-bit weights packed at load (packNibbles)
}

func newComputeState(mode op.ComputeMode) *computeState {
	c := &computeState{mode: mode, routes: map[string]int{}}
	switch mode {
	case op.ComputeInt8:
		c.i8k = qdot.BestInt8()
	case op.ComputeBF16:
		c.b16k = qdot.BestBF16()
	}
	return c
}

// weightFormat names a matrix's format for reports.
func weightFormat(m *op.Matrix) string {
	switch m.DType {
	case op.QAffine:
		return fmt.Sprintf("MLX %d-bit (groups of %d)", m.Q.Bits, m.Q.Group)
	case op.FP8Block:
		return "FP8 E4M3 (128 x 128 blocks)"
	case op.QFloat:
		return "MLX " + m.QF.Mode.String()
	case op.GGML:
		return "GGML " + m.GG.Type.String()
	}
	return m.DType.String()
}

// f32Reason says why a matrix of m's format runs in f32 in mode c ("" when it does not).
func f32Reason(c op.ComputeMode, m *op.Matrix) string {
	switch c {
	case op.ComputeInt8:
		switch m.DType {
		case op.QAffine:
			return ""
		case op.FP8Block:
			if m.K%qdot.FP8Int8Group == 0 {
				return ""
			}
			return fmt.Sprintf("K %d is not a multiple of %d", m.K, qdot.FP8Int8Group)
		case op.QFloat:
			return "no int8 kernel for MLX float codes"
		case op.GGML:
			return ""
		}
		return "int8 would requantize the weights"
	case op.ComputeBF16:
		switch m.DType {
		case op.BF16, op.QAffine:
			return ""
		case op.FP8Block:
			if m.K%2 == 0 {
				return ""
			}
			return fmt.Sprintf("K %d is odd", m.K)
		case op.QFloat:
			return "no bf16 kernel for MLX float codes"
		case op.GGML:
			return "no bf16 kernel for GGML blocks"
		}
		return "bf16 would round the weights"
	}
	return ""
}

// form makes m's compute form, or returns nil with the reason the matrix runs in f32.
func (c *computeState) form(m *op.Matrix) (*computeForm, string, error) {
	if c.mode == op.ComputeF32 {
		return nil, "", nil
	}
	if why := f32Reason(c.mode, m); why != "" {
		return nil, why, nil
	}
	f := &computeForm{mode: c.mode, what: weightFormat(m)}
	var aff *qdot.Affine
	var fp8 *qdot.FP8
	switch m.DType {
	case op.QAffine:
		aff = &qdot.Affine{N: m.N, K: m.K, Bits: m.Q.Bits, Group: m.Q.Group, Codes: m.Q.Codes,
			Scales: m.Q.Scales, Biases: m.Q.Biases, F16: m.Q.ScaleDType == op.F16}
	case op.FP8Block:
		fp8 = &qdot.FP8{N: m.N, K: m.K, Codes: m.FP8.Codes}
		if m.FP8.ScaleDType == op.F32 {
			fp8.ScaleInv = m.FP8.ScalesF32
		} else {
			fp8.ScaleInvBF16 = m.FP8.Scales
		}
	}
	if c.mode == op.ComputeInt8 {
		var w qdot.Int8Weights = aff
		switch {
		case fp8 != nil:
			w = fp8
		case m.DType == op.GGML:
			r := ggmlInt8(m)
			w = r
			if r.Nibbles != nil && c.i8k != qdot.Go {
				// 4-bit blocks: packed once into the kernels' panels, the size of the
				// blocks; the file's pages can then go.
				n, err := packNibbles(r, m.GG, m.N, m.K, runtime.GOMAXPROCS(0))
				if err != nil {
					return nil, "", err
				}
				f.packed = n
				c.mu.Lock()
				c.packed += n
				c.mu.Unlock()
			}
		}
		// The others read as stored: the kernels pack each panel of 32 columns per call into
		// a small scratch, so that the weight adds no resident bytes to the mapped file.
		f.k, f.i8 = c.i8k, w
		return f, "", nil
	}
	f.k = c.b16k
	switch {
	case aff != nil:
		f.b16 = aff
	case fp8 != nil:
		f.b16 = fp8
	default:
		f.b16 = &qdot.BF16{N: m.N, K: m.K, Bits: m.U16}
	}
	return f, "", nil
}

// note counts one matrix under a report entry.
func (c *computeState) note(entry string) {
	c.mu.Lock()
	c.routes[entry]++
	c.mu.Unlock()
}

// report is Weights.Compute.
func (c *computeState) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.mode.String()
	switch c.mode {
	case op.ComputeInt8:
		s += fmt.Sprintf(" (activations in blocks of %d, weights read as stored: panels packed per call, none at load", int8Block)
		if c.packed > 0 {
			s += fmt.Sprintf(" but GGML Q4_0, Q4_1 and Q4_K blocks, packed at load into panels of their size, %.1f MiB", float64(c.packed)/(1<<20))
		}
		s += ")"
	case op.ComputeBF16:
		best, why := qdot.BestBF16(), qdot.BF16Choice()
		switch {
		case c.b16k != best: // a kernel a test picked
			s += fmt.Sprintf(" (%s picked, not this CPU's best, %s)", qdot.BF16Name(c.b16k), qdot.BF16Name(best))
		case why != "" && c.b16k == qdot.AVX512BF16:
			s += " (VDPBF16PS: " + why + ")"
		case why != "":
			s += " (VDPBF16PS not used: " + why + ")"
		case c.b16k != qdot.AVX512BF16:
			s += " (no VDPBF16PS: the CPU lacks AVX512_BF16; emulated with FMA on widened pairs, the same bits but for subnormal partial sums, and slower than f32)"
		}
	}
	if len(c.routes) == 0 {
		return s
	}
	keys := make([]string, 0, len(c.routes))
	for k := range c.routes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, c.routes[k])
	}
	return s + ": " + strings.Join(parts, "; ")
}

var (
	int8ActPool = sync.Pool{New: func() any { return new(qdot.Int8Act) }}
	bf16ActPool = sync.Pool{New: func() any { return new(qdot.BF16Act) }}
)

// computeOf is w's compute form, nil when its products run in f32.
func computeOf(w *op.Matrix) *computeForm {
	f, _ := w.Compute.(*computeForm)
	return f
}

// matMulCompute is matMul through a compute form: x [T, K] quantized (int8) or rounded (bf16)
// once, then the columns over GOMAXPROCS goroutines when parallel (the bits do not depend on
// the split). ys and ws (one or more, every ws[i] of f's mode, each K = ws[0].K) are products
// of the same x: y_i = x ws[i]^T, row t at ys[i][t*ldy:].
func matMulCompute(ys [][]float32, ldy int, x []float32, T int, ws []*op.Matrix, parallel bool) error {
	workers := 1
	if parallel {
		workers = runtime.GOMAXPROCS(0)
	}
	K, mode := ws[0].K, computeOf(ws[0]).mode
	wrap := func(w *op.Matrix, err error) error {
		return fmt.Errorf("cpu: %w: %s product of [%d, %d] by %s [%d, %d]: %v", op.ErrShape, mode, T, K, computeOf(w).what, w.N, w.K, err)
	}
	if mode == op.ComputeInt8 {
		a := int8ActPool.Get().(*qdot.Int8Act)
		defer int8ActPool.Put(a)
		if err := qdot.QuantizeInt8(a, x, T, K, int8Block); err != nil {
			return wrap(ws[0], err)
		}
		for i, w := range ws {
			f := computeOf(w)
			if err := qdot.ParallelInt8(ys[i], ldy, a, f.i8, f.k, workers); err != nil {
				return wrap(w, err)
			}
		}
		return nil
	}
	a := bf16ActPool.Get().(*qdot.BF16Act)
	defer bf16ActPool.Put(a)
	if err := qdot.RoundBF16(a, x, T, K); err != nil {
		return wrap(ws[0], err)
	}
	for i, w := range ws {
		f := computeOf(w)
		if err := qdot.ParallelBF16(ys[i], ldy, a, f.b16, f.k, workers); err != nil {
			return wrap(w, err)
		}
	}
	return nil
}

// ComputeKernels describes what each compute mode runs on this CPU and build, whatever the
// model: the int8 and bf16 kernels (and why bf16 is emulated) and the weight formats each mode
// takes, the rest running in f32.
func ComputeKernels() string {
	b16 := qdot.BestBF16()
	bw := qdot.BF16Name(b16)
	if b16 != qdot.AVX512BF16 {
		if why := qdot.BF16Choice(); why != "" {
			bw += ": " + why
		} else {
			bw += ", no AVX512_BF16 on this CPU"
		}
	}
	return fmt.Sprintf("int8 %s (activations in blocks of %d) for MLX affine, FP8 and GGML weights, the rest in f32; "+
		"bf16 %s for BF16, FP8 and MLX affine weights, the rest in f32; f32 %s", qdot.Int8Name(qdot.BestInt8()), int8Block, bw, BLASImpl())
}
