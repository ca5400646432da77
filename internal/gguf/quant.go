package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// QuantizeTypes are the tensor types Quantize writes.
var QuantizeTypes = []op.GGMLType{op.GGMLF32, op.GGMLF16, op.GGMLBF16, op.GGMLQ8_0, op.GGMLQ4_0, op.GGMLQ5_0,
	op.GGMLQ4_K, op.GGMLQ5_K, op.GGMLQ6_K, op.GGMLIQ4_NL, op.GGMLIQ4_XS}

// Quantize encodes x, rows of k values each (len(x) a multiple of k), as tensor type t in ggml's
// block layouts (op.GGMLBlocks documents them; op/optest's float64 reference decodes them):
// F32, F16 and BF16 by rounding to nearest even; Q8_0 (d = amax / 127), Q4_0 and Q5_0 (d = the
// value of largest magnitude over -8 or -16, so it maps to the end of the code range) rounding
// each element to its nearest code; Q4_K and Q5_K (per sub-block of 32 a scale and a min <= 0
// fitted by least squares to the rounded codes, then both quantized to 6 bits against the
// block's d and dmin); Q6_K (per sub-block of 16 a signed scale, int8 against the block's d);
// IQ4_NL and IQ4_XS (per block or sub-block of 32 a signed scale chosen among candidates that
// map the extreme value onto either end of the non-linear table, refitted by least squares;
// IQ4_NL stores it as float16, IQ4_XS in 6 bits against d; each element its nearest table
// entry). Every code is chosen with the scales as stored (after their
// float16 and 6- or 8-bit rounding), so the error of an element is at most half a step of its
// sub-block where it lies inside the code range. The method is this package's own, in the
// spirit of ggml's reference quantizers (without an importance matrix); its results differ
// from llama-quantize's in the low bits. Rows are quantized in parallel over GOMAXPROCS
// goroutines. Errors: a type not in QuantizeTypes, k not a multiple of the type's block or
// len(x) of k, a NaN or infinite value, or a block whose scale overflows float16 (named by row).
func Quantize(t op.GGMLType, x []float32, k int) ([]byte, error) {
	bs, ts := t.BlockSize(), t.TypeSize()
	enc := encoders[t]
	if enc == nil {
		return nil, fmt.Errorf("%w: quantizing to %v (writes %v)", op.ErrUnsupported, t, QuantizeTypes)
	}
	if k <= 0 || k%bs != 0 || len(x)%k != 0 {
		return nil, fmt.Errorf("%w: quantizing %d values in rows of %d to %v (blocks of %d)", op.ErrShape, len(x), k, t, bs)
	}
	rows := len(x) / k
	rowBytes := k / bs * ts
	out := make([]byte, rows*rowBytes)
	workers := min(runtime.GOMAXPROCS(0), max(1, len(x)/(1<<16)))
	per := (rows + workers - 1) / max(workers, 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*per, min(rows, (w+1)*per)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := lo; r < hi; r++ {
				xr := x[r*k : (r+1)*k]
				for _, v := range xr {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						errs[w] = fmt.Errorf("%w: row %d holds %v, which %v cannot encode", op.ErrInvalidArgument, r, v, t)
						return
					}
				}
				for b := 0; b < k/bs; b++ {
					if !enc(out[r*rowBytes+b*ts:r*rowBytes+(b+1)*ts], xr[b*bs:(b+1)*bs]) {
						errs[w] = fmt.Errorf("%w: row %d, block %d: its scale overflows float16 (values up to %g)", op.ErrInvalidArgument, r, b, amax(xr[b*bs:(b+1)*bs]))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// encoders write one block of x into b; false when a scale overflows float16.
var encoders = map[op.GGMLType]func(b []byte, x []float32) bool{
	op.GGMLF32: func(b []byte, x []float32) bool {
		binary.LittleEndian.PutUint32(b, math.Float32bits(x[0]))
		return true
	},
	op.GGMLF16: func(b []byte, x []float32) bool {
		h := float16.Fromfloat32(x[0])
		binary.LittleEndian.PutUint16(b, h.Bits())
		return !h.IsInf(0) || math.IsInf(float64(x[0]), 0)
	},
	op.GGMLBF16: func(b []byte, x []float32) bool {
		binary.LittleEndian.PutUint16(b, BF16(x[0]))
		return true
	},
	op.GGMLQ8_0:   encodeQ8_0,
	op.GGMLQ4_0:   func(b []byte, x []float32) bool { return encodeQx0(b, x, 4) },
	op.GGMLQ5_0:   func(b []byte, x []float32) bool { return encodeQx0(b, x, 5) },
	op.GGMLQ4_K:   func(b []byte, x []float32) bool { return encodeQxK(b, x, 4) },
	op.GGMLQ5_K:   func(b []byte, x []float32) bool { return encodeQxK(b, x, 5) },
	op.GGMLQ6_K:   encodeQ6K,
	op.GGMLIQ4_NL: encodeIQ4NL,
	op.GGMLIQ4_XS: encodeIQ4XS,
}

// BF16 rounds f to the nearest bfloat16, ties to even (NaN stays NaN).
func BF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// half rounds v to float16 and returns its bits and its value; ok false on overflow.
func half(v float64) (uint16, float64, bool) {
	h := float16.Fromfloat32(float32(v))
	return h.Bits(), float64(h.Float32()), !h.IsInf(0)
}

// halfUp rounds v >= 0 up to float16 (so that a scale d = max/n never leaves the largest value
// past code n), returning its bits and value; ok false on overflow.
func halfUp(v float64) (uint16, float64, bool) {
	h := float16.Fromfloat32(float32(v))
	if float64(h.Float32()) < v {
		h = float16.Frombits(h.Bits() + 1)
	}
	return h.Bits(), float64(h.Float32()), !h.IsInf(0)
}

func amax(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// extreme is the value of x of largest magnitude (the first of equals).
func extreme(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		if math.Abs(float64(v)) > math.Abs(m) {
			m = float64(v)
		}
	}
	return m
}

func clampRound(v float64, lo, hi int) int {
	return min(hi, max(lo, int(math.RoundToEven(v))))
}

// inv is 1/d, or 0 for d = 0 (every code then rounds to the zero point).
func inv(d float64) float64 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

func encodeQ8_0(b []byte, x []float32) bool {
	hb, d, ok := halfUp(amax(x) / 127)
	binary.LittleEndian.PutUint16(b, hb)
	id := inv(d)
	for i, v := range x {
		b[2+i] = byte(int8(clampRound(float64(v)*id, -128, 127)))
	}
	return ok
}

// encodeQx0 writes a Q4_0 (bits 4) or Q5_0 (bits 5) block.
func encodeQx0(b []byte, x []float32, bits int) bool {
	zero := 1 << (bits - 1)
	hb, d, ok := half(extreme(x) / -float64(zero))
	binary.LittleEndian.PutUint16(b, hb)
	id := inv(d)
	qs := b[2:]
	if bits == 5 {
		qs = b[6:]
	}
	var qh uint32
	for j := range 16 {
		lo := clampRound(float64(x[j])*id+float64(zero), 0, 2*zero-1)
		hi := clampRound(float64(x[j+16])*id+float64(zero), 0, 2*zero-1)
		qs[j] = byte(lo&15 | (hi&15)<<4)
		qh |= uint32(lo>>4&1)<<j | uint32(hi>>4&1)<<(j+16)
	}
	if bits == 5 {
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
	return ok
}

// fitAffine fits x ~ scale*q + min with q in [0, nmax], min <= 0, by a few rounds of rounding
// to codes and least squares; it returns scale >= 0 and -min >= 0.
func fitAffine(x []float32, nmax int) (scale, negMin float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range x {
		lo, hi = min(lo, float64(v)), max(hi, float64(v))
	}
	lo = min(lo, 0)
	if hi <= lo {
		return 0, -lo
	}
	best := math.Inf(1)
	s, m := (hi-lo)/float64(nmax), lo
	bs, bm := s, m
	for range 6 {
		// codes for (s, m), their error, then the least-squares (s, m) for those codes
		var sq, sx, sqq, sqx, e float64
		n := float64(len(x))
		is := inv(s)
		for _, v := range x {
			q := float64(clampRound((float64(v)-m)*is, 0, nmax))
			r := s*q + m - float64(v)
			e += r * r
			sq, sx, sqq, sqx = sq+q, sx+float64(v), sqq+q*q, sqx+q*float64(v)
		}
		if e < best {
			best, bs, bm = e, s, m
		}
		det := n*sqq - sq*sq
		if det <= 0 {
			break
		}
		ns := (n*sqx - sq*sx) / det
		nm := (sx - ns*sq) / n
		if nm > 0 {
			nm = 0
			ns = sqx / sqq
		}
		if ns <= 0 {
			break
		}
		s, m = ns, nm
	}
	return bs, -bm
}

// putScaleMinK4 stores the 6-bit scale sc and min m of sub-block s in the 12 scale bytes b of a
// Q4_K / Q5_K block (the inverse of the layout op.GGMLBlocks documents).
func putScaleMinK4(b []byte, s, sc, m int) {
	if s < 4 {
		b[s] = b[s]&0xc0 | byte(sc)
		b[s+4] = b[s+4]&0xc0 | byte(m)
		return
	}
	b[s+4] = byte(sc&15 | (m&15)<<4)
	b[s-4] = b[s-4]&63 | byte(sc>>4)<<6
	b[s] = b[s]&63 | byte(m>>4)<<6
}

// encodeQxK writes a Q4_K (bits 4) or Q5_K (bits 5) block of 256.
func encodeQxK(b []byte, x []float32, bits int) bool {
	nmax := 1<<bits - 1
	var sc, mn [8]float64
	var msc, mmn float64
	for s := range 8 {
		sc[s], mn[s] = fitAffine(x[32*s:32*s+32], nmax)
		msc, mmn = max(msc, sc[s]), max(mmn, mn[s])
	}
	hd, d, ok1 := halfUp(msc / 63)
	hm, dmin, ok2 := halfUp(mmn / 63)
	binary.LittleEndian.PutUint16(b, hd)
	binary.LittleEndian.PutUint16(b[2:], hm)
	sb := b[4:16]
	clear(sb)
	qs := b[16:]
	if bits == 5 {
		clear(b[16:48])
		qs = b[48:]
	}
	clear(qs[:128])
	for s := range 8 {
		isc := clampRound(sc[s]*inv(d), 0, 63)
		im := clampRound(mn[s]*inv(dmin), 0, 63)
		putScaleMinK4(sb, s, isc, im)
		step, off := d*float64(isc), dmin*float64(im)
		is := inv(step)
		c, half := s/2, s%2
		for l := range 32 {
			q := clampRound((float64(x[32*s+l])+off)*is, 0, nmax)
			qs[32*c+l] |= byte(q&15) << (4 * half)
			if bits == 5 {
				b[16+l] |= byte(q>>4&1) << s
			}
		}
	}
	return ok1 && ok2
}

func encodeQ6K(b []byte, x []float32) bool {
	var sc [16]float64
	var ms float64
	for s := range 16 {
		sc[s] = extreme(x[16*s:16*s+16]) / -32
		ms = max(ms, math.Abs(sc[s]))
	}
	hd, d, ok := halfUp(ms / 127)
	binary.LittleEndian.PutUint16(b[208:], hd)
	clear(b[:192])
	for s := range 16 {
		isc := clampRound(sc[s]*inv(d), -127, 127)
		b[192+s] = byte(int8(isc))
		is := inv(d * float64(isc))
		for j := range 16 {
			e := 16*s + j
			q := clampRound(float64(x[e])*is, -32, 31) + 32
			h, r := e/128, e%128
			k, l := r/32, r%32
			b[64*h+l+32*(k%2)] |= byte(q&15) << (4 * (k / 2))
			b[128+32*h+l] |= byte(q>>4) << (2 * k)
		}
	}
	return ok
}

// kvaluesIQ4NL is ggml's non-linear 4-bit table (IQ4_NL, IQ4_XS), increasing.
var kvaluesIQ4NL = [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// nearestIQ4 is the index of the table entry nearest v.
func nearestIQ4(v float64) int {
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if v < kvaluesIQ4NL[mid] {
			hi = mid
		} else {
			lo = mid
		}
	}
	if v-kvaluesIQ4NL[lo] <= kvaluesIQ4NL[hi]-v {
		return lo
	}
	return hi
}

// fitIQ4 chooses a signed scale for 32 values: candidates mapping the extreme value near
// either end of the table, each refitted by least squares to its codes; the least error wins.
func fitIQ4(x []float32) float64 {
	xm := extreme(x)
	if xm == 0 {
		return 0
	}
	best, bestS := math.Inf(1), 0.0
	try := func(s float64) {
		var kx, kk, e float64
		is := 1 / s
		for _, v := range x {
			k := kvaluesIQ4NL[nearestIQ4(float64(v)*is)]
			kx, kk = kx+k*float64(v), kk+k*k
		}
		if kk == 0 {
			return
		}
		s2 := kx / kk
		if s2 == 0 {
			return
		}
		is = 1 / s2
		for _, v := range x {
			r := s2*kvaluesIQ4NL[nearestIQ4(float64(v)*is)] - float64(v)
			e += r * r
		}
		if e < best {
			best, bestS = e, s2
		}
	}
	for t := -8; t <= 8; t++ {
		try(xm / (-127 + float64(t)))
		try(xm / (113 + float64(t)))
	}
	return bestS
}

func encodeIQ4XS(b []byte, x []float32) bool {
	var sc [8]float64
	var ms float64
	for s := range 8 {
		sc[s] = fitIQ4(x[32*s : 32*s+32])
		ms = max(ms, math.Abs(sc[s]))
	}
	hd, d, ok := halfUp(ms / 31)
	binary.LittleEndian.PutUint16(b, hd)
	var sh uint16
	clear(b[4:8])
	for s := range 8 {
		l := clampRound(sc[s]*inv(d), -32, 31)
		ls := l + 32
		b[4+s/2] |= byte(ls&15) << (4 * (s % 2))
		sh |= uint16(ls>>4) << (2 * s)
		putIQ4(b[8+16*s:8+16*s+16], x[32*s:32*s+32], d*float64(l))
	}
	binary.LittleEndian.PutUint16(b[2:], sh)
	return ok
}

// putIQ4 writes the codes of 32 values for the scale d (nearest table entries) as IQ4_NL's qs[16].
func putIQ4(qs []byte, x []float32, d float64) {
	is := inv(d)
	for j := range 16 {
		lo, hi := nearestIQ4(float64(x[j])*is), nearestIQ4(float64(x[j+16])*is)
		if is == 0 { // a zero scale: every code decodes to 0 whatever it is
			lo, hi = 8, 8
		}
		qs[j] = byte(lo | hi<<4)
	}
}

func encodeIQ4NL(b []byte, x []float32) bool {
	hb, d, ok := half(fitIQ4(x))
	binary.LittleEndian.PutUint16(b, hb)
	putIQ4(b[2:18], x, d)
	return ok
}
