package qdot

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// Int8Weights is a weight MatMulInt8 takes: *Affine (any MLX bit width), *FP8 (codes mapped
// to int8, see FP8Int8) or *Int8Rows (decoded by its owner), each read as stored.
type Int8Weights interface {
	int8Source() (*i8src, error)
}

// i8src is what the int8 driver needs of a weight.
type i8src struct {
	N, K, group int
	bias        bool
	nibbles     bool // 4-bit codes: panels hold the code words as stored (MLX) or as nibRow writes them
	signed      bool // codes in [-127, 127] (FP8); else unsigned, below 2^bits
	wide        bool // unsigned codes reach 128 (MLX 8-bit)
	// row writes row n's codes in natural order into q (len K; nil: not wanted), its group
	// scales into s and (bias) its group biases into b (len K/group).
	row func(n int, q []int32, s, b []float32)
	// codes, where set, is row in bytes (Int8Rows.Row): the packer transposes its codes into
	// octet order with the assembly transpose, with no per-element Go.
	codes func(n int, q []int8, s, b []float32)
	// nibRow, where set (with nibbles), writes row n's 4-bit codes two to a byte as MLX packs
	// them (Int8Rows.Nibbles), each nibOff below the true code.
	nibRow func(n int, c []byte, s, b []float32)
	nibOff int32
	// panels, where set (with nibbles), are the nibble panels packed at load
	// (Int8Rows.PackNibbles), read in place; scales then gives a row's scales and biases.
	panels []uint32
	scales func(n int, s, b []float32)
	// aff is a 4-bit or 8-bit MLX weight, whose panels are transposed from its code words as
	// stored (nibbles) or reordered (8-bit) and its scales and biases (Affine.panelScales);
	// nil for the other weights, which the panels take from row.
	aff *Affine
	// fp8 is an FP8 weight, whose panels take its codes through octetRow; nil for the others.
	fp8 *FP8
}

func (w *Affine) int8Source() (*i8src, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	src := &i8src{N: w.N, K: w.K, group: w.Group, bias: true, nibbles: w.Bits == 4, wide: w.Bits == 8,
		row: func(n int, q []int32, s, b []float32) {
			if q != nil {
				w.affineRow(n, q)
			}
			w.affineScales(n, s, b)
		},
	}
	if w.Bits == 4 || w.Bits == 8 {
		src.aff = w
	}
	return src, nil
}

// FP8Int8Group is the group of the int8 form of an FP8 weight: each run of 32 elements of a
// row gets its own power-of-two shift.
const FP8Int8Group = 32

// int8Source: FP8 as int8 (see FP8Int8).
func (w *FP8) int8Source() (*i8src, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.K%FP8Int8Group != 0 {
		return nil, fmt.Errorf("%w: FP8 weight [%d, %d] as int8 needs K a multiple of %d", ErrShape, w.N, w.K, FP8Int8Group)
	}
	return &i8src{N: w.N, K: w.K, group: FP8Int8Group, signed: true, fp8: w,
		row: func(n int, q []int32, s, _ []float32) { w.FP8Int8(n, q, s) }}, nil
}

// FP8Int8 maps row n of w to int8 codes q (len K) and one scale per FP8Int8Group elements
// (s, len K/32), so that W[n, k] is approximately s[k/32] * q[k]. An E4M3 value is v * 2^-9
// with v an integer of up to 18 bits; a run of 32 gets the smallest shift h >= 0 for which its
// largest |v| is at most 127 * 2^h, codes q = RNE(v / 2^h), and scale ScaleInv * 2^(h-9). Values
// within 8x of the run's largest are exact; smaller ones lose their low mantissa bits (at most
// half of 2^h, 1/254 of the run's largest |W|). A run holding a NaN code gets scale NaN.
func (w *FP8) FP8Int8(n int, q []int32, s []float32) {
	codes := w.Codes[n*w.K : (n+1)*w.K]
	for g := 0; g < w.K/FP8Int8Group; g++ {
		run := codes[g*FP8Int8Group : (g+1)*FP8Int8Group]
		qq := q[g*FP8Int8Group : (g+1)*FP8Int8Group]
		h, ok := fp8RunShift(run)
		s[g] = w.runScale(n, g, h, ok)
		if !ok {
			clear(qq)
			continue
		}
		tab := &fp8Codes[h]
		for i, c := range run {
			qq[i] = int32(tab[c])
		}
	}
}

// octetRow is FP8Int8 for a panel: row n's int8 codes as bytes in octet order (each 8 elements
// as two words, elements 0 2 4 6 then 1 3 5 7), XORed with xor, into row (len K/4), and its
// scales into s.
func (w *FP8) octetRow(n int, row []uint32, s []float32, xor uint32) {
	codes := w.Codes[n*w.K : (n+1)*w.K]
	for g := 0; g < w.K/FP8Int8Group; g++ {
		run := codes[g*FP8Int8Group : (g+1)*FP8Int8Group]
		out := row[g*FP8Int8Group/4 : (g+1)*FP8Int8Group/4]
		h, ok := fp8RunShift(run)
		s[g] = w.runScale(n, g, h, ok)
		if !ok {
			for i := range out {
				out[i] = xor // zero codes
			}
			continue
		}
		tab := &fp8Codes[h]
		for i := 0; i < FP8Int8Group; i += 8 {
			c := run[i : i+8 : i+8]
			out[i/4] = (uint32(uint8(tab[c[0]])) | uint32(uint8(tab[c[2]]))<<8 | uint32(uint8(tab[c[4]]))<<16 | uint32(uint8(tab[c[6]]))<<24) ^ xor
			out[i/4+1] = (uint32(uint8(tab[c[1]])) | uint32(uint8(tab[c[3]]))<<8 | uint32(uint8(tab[c[5]]))<<16 | uint32(uint8(tab[c[7]]))<<24) ^ xor
		}
	}
}

// fp8RunShift is the shift of a run of FP8Int8Group E4M3 codes (fp8Shift of its largest
// magnitude code), and false when the run holds a NaN code. The magnitude codes 0..0x7e order as
// their values, and 0x7f (NaN) lies above them. The largest is found 8 codes at a time, in the
// bytes of a uint64 (maxBytes).
func fp8RunShift(run []uint8) (uint8, bool) {
	const mag = 0x7f7f7f7f7f7f7f7f
	m := maxBytes(binary.LittleEndian.Uint64(run[0:])&mag, binary.LittleEndian.Uint64(run[8:])&mag)
	m = maxBytes(m, maxBytes(binary.LittleEndian.Uint64(run[16:])&mag, binary.LittleEndian.Uint64(run[24:])&mag))
	m = maxBytes(m, m>>32)
	m = maxBytes(m, m>>16)
	top := uint8(maxBytes(m, m>>8))
	if top == 0x7f {
		return 0, false
	}
	return fp8Shift[top], true
}

// maxBytes is the bytewise maximum of a and b, whose bytes are all below 0x80: (a|0x80) - b
// keeps a byte's top bit exactly where a's byte is at least b's (no borrow crosses a byte).
func maxBytes(a, b uint64) uint64 {
	const hi = 0x8080808080808080
	ge := ((a | hi) - b) & hi // 0x80 where a >= b
	sel := ge - ge>>7         // 0x7f there (a's bits 0-6)
	sel |= ge                 // 0xff there
	return a&sel | b&^sel
}

// runScale is the int8 scale of run g of row n at shift h: ScaleInv * 2^(h-9), NaN for a run
// holding a NaN code (ok false).
func (w *FP8) runScale(n, g int, h uint8, ok bool) float32 {
	if !ok {
		return float32(math.NaN())
	}
	// A float32 times a power of two is exact in float64: one rounding, as Ldexp's.
	return float32(float64(w.scaleInv(n/FP8Block, g*FP8Int8Group/FP8Block)) * fp8Pow[h])
}

// fp8Pow[h] is 2^(h-9), the weight of a code at shift h (h <= 11).
var fp8Pow = func() (t [12]float64) {
	for h := range t {
		t[h] = math.Ldexp(1, h-9)
	}
	return
}()

// fp8Shift is the shift h of a run whose largest magnitude code is c: the smallest h >= 0 with
// e4m3Int[c] <= 127 * 2^h (at most 11: 127 * 2^11 >= 229376).
var fp8Shift = func() (t [128]uint8) {
	for c := range 127 {
		for e4m3Int[c] > 127<<t[c] {
			t[c]++
		}
	}
	return
}()

// fp8Codes[h][c] is the int8 code of E4M3 code c at shift h: e4m3Int[c] / 2^h rounded to
// nearest even (for codes whose magnitude fits the shift; the rest are never looked up).
var fp8Codes = func() (t [12][256]int8) {
	for h := range 12 {
		for c := range 256 {
			v := e4m3Int[c&0x7f]
			if e4m3NaN[c] || v > 127<<h {
				continue
			}
			r := v >> h
			if rem := v - r<<h; h > 0 && (rem > 1<<(h-1) || rem == 1<<(h-1) && r&1 == 1) {
				r++
			}
			if c&0x80 != 0 {
				r = -r
			}
			t[h][c] = int8(r)
		}
	}
	return
}()

// MatMulInt8 computes columns [n0, n1) of y [T, N] = x W^T in the int8 arithmetic (package
// documentation) with kernel k: y[t*ldy + j] is column n0 + j of row t (ldy >= n1 - n0). a is
// x quantized (QuantizeInt8); its block must divide the weight's group (32 for FP8). It runs on
// the calling goroutine; the result does not depend on the column range it is asked for or
// on the kernel. Errors wrap ErrShape or ErrUnsupported (the kernel, the block).
func MatMulInt8(y []float32, ldy int, a *Int8Act, w Int8Weights, n0, n1 int, k Kernel) error {
	src, err := checkInt8(y, ldy, a, w, n0, n1, k)
	if err != nil || n0 == n1 || a.T == 0 {
		return err
	}
	if k == Go {
		int8Go(y, ldy, a, src, n0, n1)
		return nil
	}
	int8Asm(y, ldy, a, src, n0, n1, k)
	return nil
}

// ParallelInt8 is MatMulInt8 over all N columns of w, split into panels of columns taken by
// up to workers goroutines (bitwise the same result for every workers >= 1).
func ParallelInt8(y []float32, ldy int, a *Int8Act, w Int8Weights, k Kernel, workers int) error {
	src, err := w.int8Source()
	if err != nil {
		return err
	}
	return parallelCols(src.N, a.T, workers, func(n0, n1 int) error {
		return MatMulInt8(y[n0:], ldy, a, w, n0, n1, k)
	})
}

// checkInt8 validates MatMulInt8's arguments.
func checkInt8(y []float32, ldy int, a *Int8Act, w Int8Weights, n0, n1 int, k Kernel) (*i8src, error) {
	if err := checkKernel("int8", k, int8Kernels); err != nil {
		return nil, err
	}
	if a == nil || w == nil {
		return nil, fmt.Errorf("%w: MatMulInt8 with a nil activation or weight", ErrShape)
	}
	src, err := w.int8Source()
	if err != nil {
		return nil, err
	}
	if a.K != src.K {
		return nil, fmt.Errorf("%w: MatMulInt8 activations [%d, %d], weight [%d, %d]", ErrShape, a.T, a.K, src.N, src.K)
	}
	if src.group%a.Block != 0 {
		return nil, fmt.Errorf("%w: activation block %d does not divide the weight's group %d", ErrUnsupported, a.Block, src.group)
	}
	if err := checkOut(y, ldy, a.T, n0, n1, src.N); err != nil {
		return nil, err
	}
	return src, nil
}

// checkOut validates an output y for columns [n0, n1) of N over T rows.
func checkOut(y []float32, ldy, T, n0, n1, N int) error {
	if n0 < 0 || n1 < n0 || n1 > N {
		return fmt.Errorf("%w: columns [%d, %d) of %d", ErrShape, n0, n1, N)
	}
	if T > 0 && n1 > n0 && (ldy < n1-n0 || len(y) < (T-1)*ldy+n1-n0) {
		return fmt.Errorf("%w: y of %d values with row stride %d for [%d, %d]", ErrShape, len(y), ldy, T, n1-n0)
	}
	return nil
}

// xbSums is xb[t, g] for the weight's group: the sum over the blocks c of group g of
// scale(t, c) * sum(t, c), in float64, rounded once; rows beyond T are zero.
func xbSums(dst []float32, a *Int8Act, group int) []float32 {
	nb, ng, per := a.K/a.Block, a.K/group, group/a.Block
	dst = grow(dst, a.rows*ng)
	clear(dst[a.T*ng:])
	for t := 0; t < a.T; t++ {
		for g := 0; g < ng; g++ {
			var s float64
			for c := g * per; c < (g+1)*per; c++ {
				s += float64(a.scale[t*nb+c]) * float64(a.sum[t*nb+c])
			}
			dst[t*ng+g] = float32(s)
		}
	}
	return dst
}

// goScratch is one call's rows of codes, scales and biases for the portable kernel.
type goScratch struct {
	q    []int32
	s, b []float32
	xb   []float32
}

var goScratchPool = sync.Pool{New: func() any { return new(goScratch) }}

// int8Go is the portable kernel: column by column, the row's codes in octet order (the order
// of the activations), then every row of x, the arithmetic of the package documentation.
func int8Go(y []float32, ldy int, a *Int8Act, src *i8src, n0, n1 int) {
	sc := goScratchPool.Get().(*goScratch)
	defer goScratchPool.Put(sc)
	K, G, B := src.K, src.group, a.Block
	sc.q = grow(sc.q, 2*K)
	sc.s = grow(sc.s, K/G)
	sc.b = grow(sc.b, K/G)
	if src.bias {
		sc.xb = xbSums(sc.xb, a, G)
	}
	nat, q := sc.q[:K], sc.q[K:]
	nb, ng, per := K/B, K/G, G/B
	for n := n0; n < n1; n++ {
		src.row(n, nat, sc.s, sc.b)
		for k := 0; k < K; k += 8 {
			for i := range 8 {
				q[k+octetPos[i]] = nat[k+i]
			}
		}
		for t := 0; t < a.T; t++ {
			xq := a.q[t*K : (t+1)*K]
			xs := a.scale[t*nb : (t+1)*nb]
			var acc float32
			for g := 0; g < ng; g++ {
				for c := g * per; c < (g+1)*per; c++ {
					var isum int32
					for i, v := range xq[c*B : (c+1)*B] {
						isum += int32(v) * q[c*B+i]
					}
					acc = fma32(float32(isum), sc.s[g]*xs[c], acc)
				}
				if src.bias {
					acc = fma32(sc.b[g], sc.xb[t*ng+g], acc)
				}
			}
			y[t*ldy+n-n0] = acc
		}
	}
}

// parallelCols runs f over the columns [0, N) in panels of whole 32-column panels (about four
// per worker, at least 32 columns) on up to workers goroutines, and joins their errors.
func parallelCols(N, T, workers int, f func(n0, n1 int) error) error {
	panels := ceilDiv(N, panelCols)
	per := max(1, panels/(4*max(1, workers)))
	blocks := ceilDiv(panels, per)
	workers = min(max(1, workers), blocks)
	if workers == 1 || T == 0 {
		return f(0, N)
	}
	errs := make([]error, blocks)
	var next sync.Mutex
	b := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				i := b
				b++
				next.Unlock()
				if i >= blocks {
					return
				}
				n0 := i * per * panelCols
				errs[i] = f(n0, min(N, n0+per*panelCols))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// panelCols is the width of a packed weight panel: 32 columns (two 512-bit or four 256-bit
// vectors of int32 lanes).
const panelCols = 32
