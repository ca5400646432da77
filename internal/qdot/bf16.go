package qdot

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/stratakernels/strata/internal/panel"
)

// BF16Weights is a weight MatMulBF16 takes: *BF16, *FP8 (decoded to bfloat16 exactly, its
// block scales applied per K block) or *Affine (dequantized, w = s*q + b rounded once to
// float32, then rounded to bfloat16: lossy, unlike the int8 path's use of the codes).
type BF16Weights interface {
	bf16Source() (*bsrc, error)
}

// bsrc is what the bf16 driver needs of a weight.
type bsrc struct {
	N, K   int
	kblock int  // K block of the partial sums: K (one chain), or FP8Block
	scaled bool // FP8: each block's sum is multiplied by its scale
	// row writes row n as bfloat16 bits (subnormals flushed) into dst (len K).
	row func(n int, dst []uint16)
	// pairs, when set, is the weight as stored, [N][K/2] words of two bfloat16 each (element
	// 2p in the low half), which the VDPBF16PS kernel's packing transposes as they are: the
	// instruction reads subnormal inputs as zero, as row's flush does.
	pairs []uint32
	scale func(n, kb int) float32
}

// flush16 is a bfloat16 with subnormals flushed to zero of their sign.
func flush16(h uint16) uint16 {
	if h&0x7f80 == 0 {
		return h & 0x8000
	}
	return h
}

func (w *BF16) bf16Source() (*bsrc, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	src := &bsrc{N: w.N, K: w.K, kblock: w.K, row: func(n int, dst []uint16) {
		for i, h := range w.Bits[n*w.K : (n+1)*w.K] {
			dst[i] = flush16(h)
		}
	}}
	if w.K%2 == 0 && len(w.Bits) > 0 {
		src.pairs = unsafe.Slice((*uint32)(unsafe.Pointer(&w.Bits[0])), len(w.Bits)/2)
	}
	return src, nil
}

func (w *FP8) bf16Source() (*bsrc, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.K%2 != 0 {
		return nil, fmt.Errorf("%w: FP8 weight [%d, %d] in bf16 needs K even", ErrShape, w.N, w.K)
	}
	return &bsrc{N: w.N, K: w.K, kblock: FP8Block, scaled: true,
		row: func(n int, dst []uint16) {
			for i, c := range w.Codes[n*w.K : (n+1)*w.K] {
				dst[i] = e4m3BF16[c]
			}
		},
		scale: func(n, kb int) float32 { return w.scaleInv(n/FP8Block, kb) },
	}, nil
}

func (w *Affine) bf16Source() (*bsrc, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	q := make([]int32, w.K)
	s, b := make([]float32, w.K/w.Group), make([]float32, w.K/w.Group)
	// With fewer codes than a group has elements (2 to 4 bits; 5 bits in groups of 64 or 128),
	// each group's values are made once per code and looked up.
	var lut []uint16
	if 1<<w.Bits < w.Group {
		lut = make([]uint16, 1<<w.Bits)
	}
	var mu sync.Mutex
	return &bsrc{N: w.N, K: w.K, kblock: w.K, row: func(n int, dst []uint16) {
		mu.Lock()
		defer mu.Unlock()
		w.affineRow(n, q)
		w.affineScales(n, s, b)
		for g := range s {
			qg, dg := q[g*w.Group:(g+1)*w.Group], dst[g*w.Group:(g+1)*w.Group]
			sg, bg := float64(s[g]), float64(b[g])
			if lut == nil {
				for k, c := range qg {
					dg[k] = ToBF16(float32(sg*float64(c) + bg))
				}
				continue
			}
			for c := range lut {
				lut[c] = ToBF16(float32(sg*float64(c) + bg))
			}
			for k, c := range qg {
				dg[k] = lut[c]
			}
		}
	}}, nil
}

// MatMulBF16 computes columns [n0, n1) of y [T, N] = x W^T in the bf16 arithmetic (package
// documentation) with kernel k: y[t*ldy + j] is column n0 + j of row t (ldy >= n1 - n0). x is
// the activations rounded by RoundBF16. It runs on the calling goroutine. AVX512BF16 and the
// emulation kernels give the same bits unless a partial sum is subnormal (package
// documentation). Errors wrap ErrShape or ErrUnsupported (the kernel).
func MatMulBF16(y []float32, ldy int, x *BF16Act, w BF16Weights, n0, n1 int, k Kernel) error {
	if err := checkKernel("bf16", k, bf16Kernels); err != nil {
		return err
	}
	if x == nil || w == nil {
		return fmt.Errorf("%w: MatMulBF16 with a nil activation or weight", ErrShape)
	}
	src, err := w.bf16Source()
	if err != nil {
		return err
	}
	if x.K != src.K {
		return fmt.Errorf("%w: MatMulBF16 activations [%d, %d], weight [%d, %d]", ErrShape, x.T, x.K, src.N, src.K)
	}
	if err := checkOut(y, ldy, x.T, n0, n1, src.N); err != nil || n0 == n1 || x.T == 0 {
		return err
	}
	if k == AVX512BF16 {
		bf16Asm(y, ldy, x, src, n0, n1)
		return nil
	}
	bf16Emu(y, ldy, x, src, n0, n1, emuSet(k))
	return nil
}

// ParallelBF16 is MatMulBF16 over all N columns of w, split into panels of columns taken by up
// to workers goroutines (bitwise the same result for every workers >= 1).
func ParallelBF16(y []float32, ldy int, x *BF16Act, w BF16Weights, k Kernel, workers int) error {
	src, err := w.bf16Source()
	if err != nil {
		return err
	}
	return parallelCols(src.N, x.T, workers, func(n0, n1 int) error {
		return MatMulBF16(y[n0:], ldy, x, w, n0, n1, k)
	})
}

// Emulation blocking: columns in blocks of emuCols, rows in chunks of emuRows, K in blocks of
// emuK widened once per column block into a row table for the panel kernels (a block of
// emuK x emuCols float32 stays in L2 while the row chunks read it).
const (
	emuCols = 128
	emuRows = 96
	emuK    = 256
	emuPad  = 16 // pads a packed row past its columns (as internal/blas does)
)

// emuScratch is one call's decoded rows, packed K block, row table and partial sums.
type emuScratch struct {
	rows []uint16
	p    []float32
	tab  []*float32
	tile []float32
}

var emuScratchPool = sync.Pool{New: func() any { return new(emuScratch) }}

// bf16Emu is the emulation: the panel kernels of set s (one fused multiply-add per term, in
// index order) on the pair-swapped activations and weight rows, so that every chain runs
// x_{2p+1} w_{2p+1} before x_{2p} w_{2p} as VDPBF16PS does; the products of bfloat16 values are
// exact in float32, so each step rounds only its sum, as there. The panel kernels add onto C,
// and a K split into calls that each add onto C gives the bits of one call, so one chain over
// K is made in y itself, block after block of emuK; FP8's chains per scale block are made in a
// tile and added scaled.
func bf16Emu(y []float32, ldy int, x *BF16Act, src *bsrc, n0, n1 int, s panel.Set) {
	a := x.emuOperand()
	K := src.K
	kc := emuK
	if src.scaled {
		kc = src.kblock
	}
	sc := emuScratchPool.Get().(*emuScratch)
	defer emuScratchPool.Put(sc)
	ldp := emuCols + emuPad
	sc.rows = grow(sc.rows, emuCols*K)
	sc.p = grow(sc.p, kc*ldp)
	sc.tab = grow(sc.tab, kc)
	sc.tile = grow(sc.tile, emuRows*emuCols)
	var scales [emuCols]float32
	for c0 := n0; c0 < n1; c0 += emuCols {
		nn := min(emuCols, n1-c0)
		for j := 0; j < nn; j++ {
			src.row(c0+j, sc.rows[j*K:(j+1)*K])
		}
		for kb, k0 := 0, 0; k0 < K; kb, k0 = kb+1, k0+kc {
			kk := min(kc, K-k0)
			// Row i of the block is weight element k0 + (i ^ 1): the pairs swapped.
			for i := 0; i < kk; i++ {
				pr := sc.p[i*ldp : i*ldp+nn]
				e := k0 + (i ^ 1)
				for j := range pr {
					pr[j] = math.Float32frombits(uint32(sc.rows[j*K+e]) << 16)
				}
			}
			panel.RowTable(sc.tab[:kk], sc.p, ldp, nn)
			if src.scaled {
				for j := 0; j < nn; j++ {
					scales[j] = src.scale(c0+j, kb)
				}
			}
			for t0 := 0; t0 < x.T; t0 += emuRows {
				m := min(emuRows, x.T-t0)
				yc := y[t0*ldy+c0-n0:]
				at := a[t0*K+k0:]
				switch {
				case !src.scaled || kb == 0:
					if kb == 0 {
						for i := 0; i < m; i++ {
							clear(yc[i*ldy : i*ldy+nn])
						}
					}
					panel.Gemm(s, yc, ldy, at, K, 1, sc.tab[:kk], m, nn, kk)
					if src.scaled {
						for i := 0; i < m; i++ {
							scaleRow(yc[i*ldy:i*ldy+nn], scales[:nn])
						}
					}
				default:
					tile := sc.tile[:m*nn]
					clear(tile)
					panel.Gemm(s, tile, nn, at, K, 1, sc.tab[:kk], m, nn, kk)
					for i := 0; i < m; i++ {
						addScaledRow(yc[i*ldy:i*ldy+nn], tile[i*nn:(i+1)*nn], scales[:nn])
					}
				}
			}
		}
	}
}

// addScaledRow sets y += float32(t * s), the product rounded before the sum.
func addScaledRow(y, t, s []float32) {
	t, s = t[:len(y)], s[:len(y)]
	for j, v := range t {
		y[j] += float32(v * s[j])
	}
}

// scaleRow sets y *= s.
func scaleRow(y, s []float32) {
	s = s[:len(y)]
	for j := range y {
		y[j] *= s[j]
	}
}
