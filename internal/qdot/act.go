package qdot

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// rowPad: activations are stored with T rounded up to a multiple of rowPad rows (zero codes,
// zero scales), so that every kernel's row tile (6 rows for AVX-512, 4 for AVX2, AVX-VNNI and
// NEON) reads whole tiles; the padding rows' results are computed and dropped.
const rowPad = 12

// Int8Act is an activation matrix x [T, K] quantized per row and per block of Block elements
// (QuantizeInt8): element k of row t is approximately Scale(t, k/Block) * Q(t, k).
//
// The codes of a row are stored in octet order: each run of 8 elements as elements 0 2 4 6 1 3
// 5 7 of the run, which is the order of the two 4-code halves that the int8 kernels take out of
// a word of eight 4-bit MLX codes (its low and its high nibbles) without moving bytes. Packed
// 8-bit weights are put in the same order (packing).
type Int8Act struct {
	T, K, Block int
	rows        int
	q           []int8    // [rows, K], octet order
	scale       []float32 // [rows, K/Block]
	sum         []int32   // [rows, K/Block]: the sum of the block's codes
	// tabs are the assembly kernels' side tables of these codes, one per layout (i8Tables):
	// made by the first product that asks for a layout (int8Asm) and read by every product of
	// the same codes after it, on any goroutine, so that a product split into column ranges
	// does not remake them for each range. QuantizeInt8 marks them stale.
	mu   sync.Mutex
	tabs []i8Tables
}

// octetPos is the position within its run of 8 of element i in octet order.
var octetPos = [8]int{0, 4, 1, 5, 2, 6, 3, 7}

// At returns the code and scale of element k of row t.
func (a *Int8Act) At(t, k int) (q int8, scale float32) {
	return a.q[t*a.K+k&^7+octetPos[k&7]], a.scale[t*(a.K/a.Block)+k/a.Block]
}

// Blocks are the activation block sizes QuantizeInt8 takes.
var Blocks = []int{32, 64, 128}

// QuantizeInt8 quantizes x [T, K] (row-major, len T*K) into dst, reusing its storage when large
// enough. Block c of row t (elements [c*block, (c+1)*block)) gets the scale amax/127 (rounded
// to float32 from float64) and codes RNE(x * 127/amax) in [-127, 127] (float64 arithmetic,
// rounded to nearest even), amax being the block's largest |x|. A block of zeros has scale 0;
// a block holding NaN or an infinity has scale NaN and codes 0, so that every product it enters
// is NaN (the int8 codes cannot carry either). block is 32, 64 or 128 and divides K; the rows
// are quantized on up to GOMAXPROCS goroutines (rows are independent, so the result does not
// depend on it). Errors wrap ErrShape or ErrUnsupported.
func QuantizeInt8(dst *Int8Act, x []float32, T, K, block int) error {
	if block != 32 && block != 64 && block != 128 {
		return fmt.Errorf("%w: activation block %d (want 32, 64 or 128)", ErrUnsupported, block)
	}
	if T < 0 || K <= 0 || K%block != 0 || len(x) != T*K {
		return fmt.Errorf("%w: QuantizeInt8 x of %d values as [%d, %d] in blocks of %d (K must be a multiple of the block)", ErrShape, len(x), T, K, block)
	}
	rows := (T + rowPad - 1) / rowPad * rowPad
	nb := K / block
	dst.T, dst.K, dst.Block, dst.rows = T, K, block, rows
	dst.q = grow(dst.q, rows*K)
	dst.scale = grow(dst.scale, rows*nb)
	dst.sum = grow(dst.sum, rows*nb)
	clear(dst.q[T*K:])
	clear(dst.scale[T*nb:])
	clear(dst.sum[T*nb:])
	for i := range dst.tabs {
		dst.tabs[i].ok = false
	}
	parallelRows(T, 2048*64/K, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			for c := 0; c < nb; c++ {
				i := t*K + c*block
				dst.scale[t*nb+c], dst.sum[t*nb+c] = quantBlock(dst.q[i:i+block], x[i:i+block])
			}
		}
	})
	return nil
}

// quantBlock quantizes one block of x into q (octet order) and returns its scale and the sum
// of its codes. The largest |x| is found on the bits (non-negative floats order as their bit
// patterns; NaN and the infinities lie above the largest finite value). A code is x * 127/amax
// in float64 rounded to nearest even by the 1.5 * 2^52 addition (exact for |v| < 2^51; |v| <=
// 127 here), so it never exceeds 127 in magnitude.
// Where the CPU has AVX2 the same arithmetic runs in act_amd64.s (VCVTPS2PD, VMULPD, and
// VCVTPD2DQ in the default rounding mode, nearest even), bitwise these results.
func quantBlock(q []int8, x []float32) (scale float32, sum int32) {
	var amax uint32
	if quantAsm {
		amax = amaxBitsAVX2(&x[0], len(x))
	} else {
		for _, v := range x {
			amax = max(amax, math.Float32bits(v)&0x7fffffff)
		}
	}
	switch {
	case amax > 0x7f7fffff:
		clear(q)
		return float32(math.NaN()), 0
	case amax == 0:
		clear(q)
		return 0, 0
	}
	am := float64(math.Float32frombits(amax))
	inv := 127 / am
	if quantAsm {
		return float32(am / 127), codesAVX2(&q[0], &x[0], len(x), inv)
	}
	const magic = 0x1.8p52
	rne := func(v float32) int32 { return int32(int64(float64(float64(v)*inv)+magic) - int64(magic)) }
	for j := 0; j < len(x); j += 8 {
		o := x[j : j+8 : j+8]
		d := q[j : j+8 : j+8]
		c0, c1, c2, c3 := rne(o[0]), rne(o[1]), rne(o[2]), rne(o[3])
		c4, c5, c6, c7 := rne(o[4]), rne(o[5]), rne(o[6]), rne(o[7])
		d[0], d[1], d[2], d[3] = int8(c0), int8(c2), int8(c4), int8(c6)
		d[4], d[5], d[6], d[7] = int8(c1), int8(c3), int8(c5), int8(c7)
		sum += c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7
	}
	return float32(am / 127), sum
}

// quantAsm selects the AVX2 quantization kernels (amaxBitsAVX2, codesAVX2; len(x) a multiple
// of 32), a variable so that the tests run both.
var quantAsm = hasQuantAsm

// BF16Act is an activation matrix x [T, K] rounded to bfloat16 (RoundBF16).
type BF16Act struct {
	T, K int
	rows int
	x    []uint16 // [rows, K] bfloat16 bits
	// emu is the emulation kernels' operand: the values as float32 with the two elements of
	// every pair swapped, [rows, K]; made on first use (emuOperand).
	mu  sync.Mutex
	emu []float32
	ok  bool
}

// RoundBF16 rounds x [T, K] (len T*K, K even) to bfloat16 into dst, reusing its storage:
// round to nearest even, results that are subnormal in bfloat16 flushed to zero of their sign
// (VDPBF16PS reads them as zero), NaN kept quiet. Errors wrap ErrShape.
func RoundBF16(dst *BF16Act, x []float32, T, K int) error {
	if T < 0 || K <= 0 || K%2 != 0 || len(x) != T*K {
		return fmt.Errorf("%w: RoundBF16 x of %d values as [%d, %d] (K even)", ErrShape, len(x), T, K)
	}
	rows := (T + rowPad - 1) / rowPad * rowPad
	dst.mu.Lock()
	defer dst.mu.Unlock()
	dst.T, dst.K, dst.rows, dst.ok = T, K, rows, false
	dst.x = grow(dst.x, rows*K)
	clear(dst.x[T*K:])
	parallelRows(T, 4096*64/K, func(t0, t1 int) { roundBF16(dst.x[t0*K:t1*K], x[t0*K:t1*K]) })
	return nil
}

// roundBF16 sets dst[i] = ToBF16(x[i]): with the AVX2 kernel where quantAsm says (bitwise the
// same), 16 values at a time, the last len%16 in Go.
func roundBF16(dst []uint16, x []float32) {
	n := 0
	if quantAsm {
		n = len(x) &^ 15
		if n > 0 {
			_ = dst[n-1]
			roundBF16AVX2(&dst[0], &x[0], n)
		}
	}
	for i, v := range x[n:] {
		dst[n+i] = ToBF16(v)
	}
}

// ToBF16 rounds v to bfloat16 as RoundBF16 does (nearest even, subnormals flushed to zero,
// NaN quiet).
func ToBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v {
		return uint16(b>>16) | 0x0040
	}
	h := uint16((b + 0x7fff + (b>>16)&1) >> 16)
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return h
}

// emuOperand returns the emulation kernels' operand (see BF16Act.emu), making it once per
// rounding.
func (a *BF16Act) emuOperand() []float32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ok {
		a.emu = grow(a.emu, a.rows*a.K)
		x := a.x[:a.rows*a.K]
		parallelRows(a.rows, 4096*64/a.K, func(t0, t1 int) {
			for i := t0 * a.K; i < t1*a.K; i += 2 {
				a.emu[i] = math.Float32frombits(uint32(x[i+1]) << 16)
				a.emu[i+1] = math.Float32frombits(uint32(x[i]) << 16)
			}
		})
		a.ok = true
	}
	return a.emu
}

// grow returns s resized to n elements, reallocated when its capacity is short.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// parallelRows runs f over [0, T) in row ranges of at least minRows rows on up to GOMAXPROCS
// goroutines.
func parallelRows(T, minRows int, f func(t0, t1 int)) {
	workers := min(runtime.GOMAXPROCS(0), T/max(1, minRows))
	if workers <= 1 {
		f(0, T)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w*T/workers, (w+1)*T/workers)
		}()
	}
	wg.Wait()
}
