package qdot

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refBF16 is the bf16 arithmetic of the package documentation evaluated element by element: per
// K block, from +0, s = fma(x_{2p+1}, w_{2p+1}, s) then s = fma(x_{2p}, w_{2p}, s), a partial
// sum below 2^-126 in magnitude flushed to zero when ftz (VDPBF16PS) and kept otherwise (the
// emulation); then y = p_0 + p_1 + ... with p_b = s_b or float32(s_b * scale).
func refBF16(x *BF16Act, src *bsrc, ftz bool) []float32 {
	K, kc := src.K, src.kblock
	y := make([]float32, x.T*src.N)
	row := make([]uint16, K)
	f := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for n := 0; n < src.N; n++ {
		src.row(n, row)
		for t := 0; t < x.T; t++ {
			xr := x.x[t*K : (t+1)*K]
			var acc float32
			for kb, k0 := 0, 0; k0 < K; kb, k0 = kb+1, k0+kc {
				var s float32
				for k := k0; k < min(K, k0+kc); k += 2 {
					for _, e := range []int{k + 1, k} {
						s = fma32(f(xr[e]), f(row[e]), s)
						if ftz && math.Abs(float64(s)) < 0x1p-126 {
							s = float32(math.Copysign(0, float64(s)))
						}
					}
				}
				p := s
				if src.scaled {
					p = s * src.scale(n, kb)
				}
				if kb == 0 {
					acc = p
				} else {
					acc += p
				}
			}
			y[t*src.N+n] = acc
		}
	}
	return y
}

// bf16Case is one weight for the bf16 tests.
type bf16Case string

func (c bf16Case) make(r *rand.Rand, N, K int) (BF16Weights, []float64) {
	w := randWeights(r, N, K)
	switch c {
	case "fp8":
		return quantizeFP8(w, N, K)
	case "mlx4":
		return quantizeAffine(w, N, K, 4, 64)
	}
	b := &BF16{N: N, K: K, Bits: make([]uint16, N*K)}
	deq := make([]float64, N*K)
	for i, v := range w {
		b.Bits[i] = ToBF16(float32(v))
		deq[i] = float64(widen16(b.Bits[i], false))
	}
	return b, deq
}

var bf16Cases = []bf16Case{"bf16", "fp8", "mlx4"}

// TestBF16Kernels: every bf16 kernel of this CPU against the element-by-element evaluation,
// bitwise (VDPBF16PS with its flushing, the emulations without: on these inputs no partial sum
// is subnormal, so all agree), with row counts around the tile, K not a multiple of the K block
// (and, for FP8, of its scale blocks), column ranges inside panels and a padded y.
func TestBF16Kernels(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	t.Logf("bf16 kernels: %v", BF16Kernels())
	for _, c := range bf16Cases {
		for _, K := range []int{64, 320, 576} {
			const N = 75
			w, _ := c.make(r, N, K)
			if c == "mlx4" && K%64 != 0 {
				continue
			}
			src, err := w.bf16Source()
			if err != nil {
				t.Fatal(err)
			}
			for _, T := range []int{1, 5, 6, 13} {
				var x BF16Act
				if err := RoundBF16(&x, randActs(r, T, K), T, K); err != nil {
					t.Fatal(err)
				}
				ref := refBF16(&x, src, true)
				for _, cols := range [][2]int{{0, N}, {3, 70}, {40, 41}} {
					n0, n1 := cols[0], cols[1]
					ldy := n1 - n0 + 2
					want := make([]float32, T*ldy)
					for i := 0; i < T; i++ {
						copy(want[i*ldy:i*ldy+n1-n0], ref[i*N+n0:i*N+n1])
					}
					for _, k := range BF16Kernels() {
						got := make([]float32, T*ldy)
						if err := MatMulBF16(got, ldy, &x, w, n0, n1, k); err != nil {
							t.Fatal(err)
						}
						sameBits(t, fmt.Sprintf("%v %s K %d T %d cols [%d, %d)", k, c, K, T, n0, n1), got, want, ldy, T, n1-n0)
					}
				}
			}
		}
	}
}

// TestBF16Subnormal: inputs whose partial sums fall below 2^-126. VDPBF16PS flushes them (it
// equals the evaluation with flushing), the FMA emulations keep them (they equal the evaluation
// without), and the two evaluations differ on these inputs, which is the one difference
// between the kernels; the portable kernel also rounds products that underflow.
func TestBF16Subnormal(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const T, N, K = 6, 33, 64
	xs := make([]float32, T*K)
	for i := range xs {
		xs[i] = float32(math.Ldexp(r.NormFloat64(), -64))
	}
	var x BF16Act
	if err := RoundBF16(&x, xs, T, K); err != nil {
		t.Fatal(err)
	}
	wb := &BF16{N: N, K: K, Bits: make([]uint16, N*K)}
	for i := range wb.Bits {
		wb.Bits[i] = ToBF16(float32(math.Ldexp(r.NormFloat64(), -63)))
	}
	src, _ := wb.bf16Source()
	flushed, kept := refBF16(&x, src, true), refBF16(&x, src, false)
	differ := 0
	for i := range flushed {
		if math.Float32bits(flushed[i]) != math.Float32bits(kept[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("no partial sum was subnormal: the inputs do not test the difference")
	}
	t.Logf("%d of %d results differ between flushing and keeping subnormal partial sums", differ, len(flushed))
	for _, k := range BF16Kernels() {
		got := make([]float32, T*N)
		if err := MatMulBF16(got, N, &x, wb, 0, N, k); err != nil {
			t.Fatal(err)
		}
		switch k {
		case AVX512BF16:
			sameBits(t, k.String(), got, flushed, N, T, N)
		case Go:
			// The portable panel kernel multiplies, then adds: a product that underflows is
			// rounded there (exact everywhere else). Its results stay within a few subnormal
			// ulps (2^-149 each) of the evaluation that keeps subnormals.
			for i := range got {
				if d := math.Abs(float64(got[i]) - float64(kept[i])); d > K*0x1p-149 {
					t.Fatalf("%v: y[%d] = %g, want %g", k, i, got[i], kept[i])
				}
			}
		default:
			sameBits(t, k.String(), got, kept, N, T, N)
		}
	}
}

// TestBF16SubnormalWeights: BF16 weights with subnormal elements, which row flushes to zero
// and the VDPBF16PS packing passes as stored (the instruction reads them as zero): every
// kernel gives the flushing evaluation's bits, with K/2 not a multiple of the packing's 8
// words and panels cut at both ends.
func TestBF16SubnormalWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	const T, N, K = 7, 70, 86
	var x BF16Act
	if err := RoundBF16(&x, randActs(r, T, K), T, K); err != nil {
		t.Fatal(err)
	}
	wb := &BF16{N: N, K: K, Bits: make([]uint16, N*K)}
	subnormal := 0
	for i := range wb.Bits {
		wb.Bits[i] = ToBF16(float32(r.NormFloat64()))
		if r.IntN(3) == 0 {
			wb.Bits[i] = uint16(r.IntN(0x7f)+1) | uint16(r.IntN(2))<<15 // exponent 0, mantissa != 0
			subnormal++
		}
	}
	src, err := wb.bf16Source()
	if err != nil {
		t.Fatal(err)
	}
	want := refBF16(&x, src, true)
	t.Logf("%d of %d weights subnormal", subnormal, N*K)
	for _, k := range BF16Kernels() {
		for _, cols := range [][2]int{{0, N}, {5, 69}, {32, 64}} {
			n0, n1 := cols[0], cols[1]
			got := make([]float32, T*(n1-n0))
			if err := MatMulBF16(got, n1-n0, &x, wb, n0, n1, k); err != nil {
				t.Fatal(err)
			}
			sub := make([]float32, T*(n1-n0))
			for i := 0; i < T; i++ {
				copy(sub[i*(n1-n0):(i+1)*(n1-n0)], want[i*N+n0:i*N+n1])
			}
			sameBits(t, fmt.Sprintf("%v cols [%d, %d)", k, n0, n1), got, sub, n1-n0, T, n1-n0)
		}
	}
}

// The bf16 kernels against float64 products of the rounded operands, within the bound of
// float32 sums in blocks: (kc + K/kc + 2) u sum |x~ w~| per element.
func TestBF16Bound(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const T, N, K = 5, 40, 1024
	for _, c := range bf16Cases {
		w, _ := c.make(r, N, K)
		src, _ := w.bf16Source()
		var x BF16Act
		if err := RoundBF16(&x, randActs(r, T, K), T, K); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, T*N)
		if err := MatMulBF16(y, N, &x, w, 0, N, BestBF16()); err != nil {
			t.Fatal(err)
		}
		row := make([]uint16, K)
		var worst float64
		for n := 0; n < N; n++ {
			src.row(n, row)
			for tt := 0; tt < T; tt++ {
				var s, abs float64
				for k := 0; k < K; k++ {
					v := float64(widen16(x.x[tt*K+k], false)) * float64(widen16(row[k], false))
					if src.scaled {
						v *= float64(src.scale(n, k/src.kblock))
					}
					s += v
					abs += math.Abs(v)
				}
				bound := float64(src.kblock+K/src.kblock+2) * 0x1p-24 * abs
				d := math.Abs(float64(y[tt*N+n]) - s)
				if !(d <= bound) {
					t.Fatalf("%s: y[%d, %d] = %g, want %g (|diff| %.3g > %.3g)", c, tt, n, y[tt*N+n], s, d, bound)
				}
				worst = max(worst, d/bound)
			}
		}
		t.Logf("%s: largest error %.4f of the bound", c, worst)
	}
}

// ParallelBF16 gives the same bits for every worker count.
func TestBF16Parallel(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	const T, N, K = 7, 200, 256
	w, _ := bf16Case("bf16").make(r, N, K)
	var x BF16Act
	if err := RoundBF16(&x, randActs(r, T, K), T, K); err != nil {
		t.Fatal(err)
	}
	for _, k := range BF16Kernels() {
		want := make([]float32, T*N)
		if err := MatMulBF16(want, N, &x, w, 0, N, k); err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{2, 3, 5} {
			got := make([]float32, T*N)
			if err := ParallelBF16(got, N, &x, w, k, workers); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("%v %d workers", k, workers), got, want, N, T, N)
		}
	}
}

// ToBF16: nearest even, ties both ways, overflow to infinity, subnormal results flushed with
// their sign, NaN kept quiet; RoundBF16 refuses odd K.
func TestToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},
		{0x7f7fffff, 0x7f80}, {0x00400000, 0x0000}, {0x80400000, 0x8000}, {0x00800000, 0x0080},
		{0x007fffff, 0x0080}, {0x7fc00001, 0x7fc0}, {0xff800001, 0xffc0},
	} {
		if got := ToBF16(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("ToBF16(%08x) = %04x, want %04x", tc.in, got, tc.want)
		}
	}
	var x BF16Act
	if err := RoundBF16(&x, make([]float32, 6), 2, 3); !errors.Is(err, ErrShape) {
		t.Errorf("odd K: %v", err)
	}
}

// BestBF16 is one of this CPU's kernels, and says why when it had to choose.
func TestBestBF16(t *testing.T) {
	k := BestBF16()
	if !slices.Contains(BF16Kernels(), k) {
		t.Fatalf("BestBF16 %v not in %v", k, BF16Kernels())
	}
	t.Logf("best %v: %q", k, BF16Choice())
	if slices.Contains(BF16Kernels(), AVX512BF16) && BF16Choice() == "" {
		t.Fatal("no reason given for the choice")
	}
}

// TestAffineBF16Rows: an MLX weight's bfloat16 rows (a table per group where the codes are
// fewer than the group's elements) are element by element ToBF16(float32(s q + b)), the
// product and sum in float64, for every bit width and group size.
func TestAffineBF16Rows(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, bits := range AffineBits {
		for _, g := range AffineGroups {
			const N, K = 3, 384
			w, _ := quantizeAffine(randWeights(r, N, K), N, K, bits, g)
			src, err := w.bf16Source()
			if err != nil {
				t.Fatal(err)
			}
			row := make([]uint16, K)
			for n := 0; n < N; n++ {
				src.row(n, row)
				for k := 0; k < K; k++ {
					gi := n*(K/g) + k/g
					v := float64(widen16(w.Scales[gi], w.F16))*float64(w.affineCode(n, k)) + float64(widen16(w.Biases[gi], w.F16))
					if want := ToBF16(float32(v)); row[k] != want {
						t.Fatalf("%d bits, groups of %d: W[%d, %d] = %#04x, want %#04x", bits, g, n, k, row[k], want)
					}
				}
			}
		}
	}
}

// TestRoundBF16Asm: the AVX2 rounding gives ToBF16's bits, 16 values at a time, on random bit
// patterns (every exponent, NaNs of both signs and payloads, infinities, subnormals, signed
// zeros), ties at every exponent, values that round up into the smallest normal and past the
// largest finite, and lengths around the 16-value step.
func TestRoundBF16Asm(t *testing.T) {
	if !hasQuantAsm {
		t.Skip("no AVX2 rounding kernel on this CPU and build")
	}
	r := rand.New(rand.NewPCG(29, 30))
	var x []float32
	for range 1 << 16 {
		x = append(x, math.Float32frombits(r.Uint32()))
	}
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 0x8000, 0x18000, 0x7fff, 0x7fffff, 0x7f8000, 0x7f7fff, 1} {
			x = append(x, math.Float32frombits(e<<23|m), math.Float32frombits(1<<31|e<<23|m))
		}
	}
	x = append(x, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001))
	for _, n := range []int{len(x), 1, 15, 16, 17, 33} {
		got := make([]uint16, n)
		roundBF16(got, x[:n])
		for i, v := range x[:n] {
			if want := ToBF16(v); got[i] != want {
				t.Fatalf("n %d: x %#08x rounds to %#04x, ToBF16 %#04x", n, math.Float32bits(v), got[i], want)
			}
		}
	}
}
