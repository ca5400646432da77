package qdot

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// int8Case is one weight for the int8 tests: MLX affine of some bits and group, or FP8.
type int8Case struct {
	bits, group int // bits 0: FP8
}

func (c int8Case) String() string {
	if c.bits == 0 {
		return "fp8"
	}
	return fmt.Sprintf("mlx%d-g%d", c.bits, c.group)
}

// make draws W [N, K] and quantizes it; it returns the weight and its dequantized values.
func (c int8Case) make(r *rand.Rand, N, K int) (Int8Weights, []float64) {
	w := randWeights(r, N, K)
	if c.bits == 0 {
		return quantizeFP8(w, N, K)
	}
	return quantizeAffine(w, N, K, c.bits, c.group)
}

// blocks are the activation blocks that go with the case's group.
func (c int8Case) blocks() []int {
	if c.bits == 0 {
		return []int{32}
	}
	var b []int
	for _, v := range Blocks {
		if c.group%v == 0 {
			b = append(b, v)
		}
	}
	return b
}

func int8Cases() []int8Case {
	var cs []int8Case
	for _, b := range AffineBits {
		for _, g := range AffineGroups {
			cs = append(cs, int8Case{b, g})
		}
	}
	return append(cs, int8Case{0, 32})
}

// refInt8 is the int8 arithmetic of the package documentation in float64: sum over the blocks
// of I_c s_g x_c plus sum over the groups of b_g xb_g, with the codes and scales the weight's
// row gives; and the rounding bound of the float32 evaluation, (steps + 3) u sum |terms| with
// steps the number of fma of an element (one per block, one per group with biases).
func refInt8(a *Int8Act, src *i8src) (want, bound []float64) {
	K, G, B := src.K, src.group, a.Block
	want = make([]float64, a.T*src.N)
	bound = make([]float64, a.T*src.N)
	q := make([]int32, K)
	s, b := make([]float32, K/G), make([]float32, K/G)
	steps := K / B
	if src.bias {
		steps += K / G
	}
	for n := 0; n < src.N; n++ {
		src.row(n, q, s, b)
		for t := 0; t < a.T; t++ {
			var sum, abs float64
			for c := 0; c < K/B; c++ {
				var isum, xsum int64
				var xs float32
				for k := c * B; k < (c+1)*B; k++ {
					qx, sx := a.At(t, k)
					isum += int64(qx) * int64(q[k])
					xsum += int64(qx)
					xs = sx
				}
				g := c * B / G
				term := float64(isum) * float64(s[g]) * float64(xs)
				sum += term
				abs += math.Abs(term)
				if src.bias {
					bt := float64(b[g]) * float64(xs) * float64(xsum)
					sum += bt
					abs += math.Abs(bt)
				}
			}
			want[t*src.N+n] = sum
			bound[t*src.N+n] = float64(steps+3) * 0x1p-24 * abs
		}
	}
	return want, bound
}

// The portable kernel against the float64 evaluation of the same arithmetic, within its
// rounding bound, for every weight case and activation block; and the dequantized product
// x~ w of the weight's decoded codes against the quantizer's own dequantized values.
func TestInt8Go(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const T, N, K = 7, 37, 384
	x := randActs(r, T, K)
	for _, c := range int8Cases() {
		w, deq := c.make(r, N, K)
		src, err := w.int8Source()
		if err != nil {
			t.Fatal(err)
		}
		if c.bits != 0 {
			// The decoded codes and scales give the quantizer's values exactly.
			q := make([]int32, K)
			s, b := make([]float32, K/c.group), make([]float32, K/c.group)
			for n := 0; n < N; n++ {
				src.row(n, q, s, b)
				for k := 0; k < K; k++ {
					if v := float64(s[k/c.group])*float64(q[k]) + float64(b[k/c.group]); v != deq[n*K+k] {
						t.Fatalf("%v: w[%d, %d] decodes to %g, quantized to %g", c, n, k, v, deq[n*K+k])
					}
				}
			}
		}
		for _, blk := range c.blocks() {
			var a Int8Act
			if err := QuantizeInt8(&a, x, T, K, blk); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, T*N)
			if err := MatMulInt8(y, N, &a, w, 0, N, Go); err != nil {
				t.Fatal(err)
			}
			want, bound := refInt8(&a, src)
			var worst float64
			for i := range y {
				d := math.Abs(float64(y[i]) - want[i])
				if !(d <= bound[i]) {
					t.Fatalf("%v block %d: y[%d] = %g, want %g (|diff| %.3g > bound %.3g)", c, blk, i, y[i], want[i], d, bound[i])
				}
				if bound[i] > 0 {
					worst = max(worst, d/bound[i])
				}
			}
			t.Logf("%v block %d: largest error %.3f of the bound", c, blk, worst)
		}
	}
}

// TestInt8Kernels: every kernel of this CPU gives bitwise the portable kernel's result, for
// every weight case and activation block, with row counts around the tiles (1, 5, 6, 13),
// column ranges that start inside a panel and end in a partial one, and a padded y; K 256, and
// K 96 for groups of 32 (12 code words a row of 4-bit codes: the panel transpose's 8 x 8 blocks
// and a remainder).
func TestInt8Kernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ks := Int8Kernels()
	t.Logf("int8 kernels: %v", ks)
	var cases []struct {
		int8Case
		K int
	}
	for _, c := range int8Cases() {
		cases = append(cases, struct {
			int8Case
			K int
		}{c, 256})
		if c.group == 32 {
			cases = append(cases, struct {
				int8Case
				K int
			}{c, 96})
		}
	}
	for _, c := range cases {
		const N = 75
		K := c.K
		w, _ := c.make(r, N, K)
		for _, blk := range c.blocks() {
			for _, T := range []int{1, 5, 6, 13} {
				var a Int8Act
				if err := QuantizeInt8(&a, randActs(r, T, K), T, K, blk); err != nil {
					t.Fatal(err)
				}
				for _, cols := range [][2]int{{0, N}, {3, 70}, {40, 41}} {
					n0, n1 := cols[0], cols[1]
					ldy := n1 - n0 + 3
					want := make([]float32, T*ldy)
					if err := MatMulInt8(want, ldy, &a, w, n0, n1, Go); err != nil {
						t.Fatal(err)
					}
					for _, k := range ks[:len(ks)-1] {
						got := make([]float32, T*ldy)
						for i := range got {
							got[i] = float32(math.NaN()) // columns past n1 must keep it
						}
						if err := MatMulInt8(got, ldy, &a, w, n0, n1, k); err != nil {
							t.Fatal(err)
						}
						sameBits(t, fmt.Sprintf("%v %v block %d T %d cols [%d, %d)", k, c, blk, T, n0, n1), got, want, ldy, T, n1-n0)
						for i := 0; i < T; i++ {
							for j := n1 - n0; j < ldy && i*ldy+j < len(got); j++ {
								if !math.IsNaN(float64(got[i*ldy+j])) {
									t.Fatalf("%v %v: y[%d, %d] past the columns written", k, c, i, j)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestInt8F16Scales: MLX weights with IEEE half scales and biases (normal and subnormal halves
// of both signs) give with every kernel bitwise the portable kernel's product, which the
// float64 evaluation of the same codes and widened scales bounds.
func TestInt8F16Scales(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const T, N, K = 7, 70, 256
	var a Int8Act
	if err := QuantizeInt8(&a, randActs(r, T, K), T, K, 32); err != nil {
		t.Fatal(err)
	}
	for _, bits := range []int{4, 8, 3} {
		w, _ := quantizeAffine(randWeights(r, N, K), N, K, bits, 64)
		w.F16 = true
		for i := range w.Scales {
			// exponents 0 (subnormal) to 11: magnitudes up to 2^-4
			w.Scales[i] = uint16(r.IntN(0x3000))
			w.Biases[i] = uint16(r.IntN(0x3000)) | uint16(r.IntN(2))<<15
		}
		src, err := w.int8Source()
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, T*N)
		if err := MatMulInt8(want, N, &a, w, 0, N, Go); err != nil {
			t.Fatal(err)
		}
		ref, bound := refInt8(&a, src)
		for j := range want {
			if d := math.Abs(float64(want[j]) - ref[j]); !(d <= bound[j]) {
				t.Fatalf("%d-bit: y[%d] = %g, exact %g", bits, j, want[j], ref[j])
			}
		}
		for _, k := range Int8Kernels() {
			got := make([]float32, T*N)
			if err := MatMulInt8(got, N, &a, w, 0, N, k); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("%v %d-bit f16 scales", k, bits), got, want, N, T, N)
		}
	}
}

// ParallelInt8 gives the same bits for every worker count, and the same as one MatMulInt8.
func TestInt8Parallel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const T, N, K = 9, 300, 512
	w, _ := int8Case{4, 64}.make(r, N, K)
	var a Int8Act
	if err := QuantizeInt8(&a, randActs(r, T, K), T, K, 32); err != nil {
		t.Fatal(err)
	}
	k := BestInt8()
	want := make([]float32, T*N)
	if err := MatMulInt8(want, N, &a, w, 0, N, k); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 3, 7} {
		got := make([]float32, T*N)
		if err := ParallelInt8(got, N, &a, w, k, workers); err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("%d workers", workers), got, want, N, T, N)
	}
}

// TestInt8ActReuse: one Int8Act quantized again and again (new values, other row counts) and
// multiplied by every kernel and weight case in turn, split over goroutines, gives bitwise the
// product of a fresh Int8Act of the same values each time: the side tables the kernels share
// (one per layout) follow the codes they were made from.
func TestInt8ActReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	const N, K = 100, 256
	var ws []Int8Weights
	for _, c := range int8Cases() {
		w, _ := c.make(r, N, K)
		ws = append(ws, w)
	}
	var a Int8Act
	for i, T := range []int{13, 13, 5, 30, 1} {
		x := randActs(r, T, K)
		if err := QuantizeInt8(&a, x, T, K, 32); err != nil {
			t.Fatal(err)
		}
		for j, w := range ws {
			for _, k := range Int8Kernels() {
				var fresh Int8Act
				if err := QuantizeInt8(&fresh, x, T, K, 32); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, T*N)
				if err := MatMulInt8(want, N, &fresh, w, 0, N, k); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, T*N)
				if err := ParallelInt8(got, N, &a, w, k, 3); err != nil {
					t.Fatal(err)
				}
				sameBits(t, fmt.Sprintf("round %d T %d weight %d %v", i, T, j, k), got, want, N, T, N)
			}
		}
	}
}

// QuantizeInt8: codes in [-127, 127], |x - scale q| <= scale/2, the sums, zero and non-finite
// blocks, and bad arguments refused.
func TestQuantizeInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const T, K = 5, 256
	x := randActs(r, T, K)
	for i := 64; i < 96; i++ {
		x[i] = 0 // row 0, block 2 of 32 is zero
	}
	x[K+40] = float32(math.NaN())
	x[2*K+100] = float32(math.Inf(-1))
	var a Int8Act
	if err := QuantizeInt8(&a, x, T, K, 32); err != nil {
		t.Fatal(err)
	}
	for tt := 0; tt < T; tt++ {
		for c := 0; c < K/32; c++ {
			var sum int32
			bad := false
			for k := c * 32; k < (c+1)*32; k++ {
				q, s := a.At(tt, k)
				sum += int32(q)
				v := x[tt*K+k]
				bad = bad || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
				if q < -127 {
					t.Fatalf("code %d", q)
				}
				if !bad && math.Abs(float64(v)-float64(s)*float64(q)) > float64(s)/2*(1+1e-6) {
					t.Fatalf("x[%d, %d] = %g, %g * %d", tt, k, v, s, q)
				}
			}
			s := a.scale[tt*(K/32)+c]
			switch {
			case bad && !math.IsNaN(float64(s)):
				t.Fatalf("block (%d, %d) with a non-finite value has scale %g", tt, c, s)
			case tt == 0 && c == 2 && s != 0:
				t.Fatalf("zero block has scale %g", s)
			case sum != a.sum[tt*(K/32)+c]:
				t.Fatalf("block (%d, %d) sum %d, stored %d", tt, c, sum, a.sum[tt*(K/32)+c])
			}
		}
	}
	for _, bad := range []struct {
		T, K, block int
		n           int
		err         error
	}{{T, K, 16, T * K, ErrUnsupported}, {T, 100, 32, T * 100, ErrShape}, {T, K, 32, T*K - 1, ErrShape}, {-1, K, 32, 0, ErrShape}} {
		if err := QuantizeInt8(&a, make([]float32, bad.n), bad.T, bad.K, bad.block); !errors.Is(err, bad.err) {
			t.Errorf("QuantizeInt8 T %d K %d block %d len %d: %v, want %v", bad.T, bad.K, bad.block, bad.n, err, bad.err)
		}
	}
}

// MatMulInt8 refuses bad arguments by name.
func TestInt8Errors(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	w, _ := int8Case{4, 64}.make(r, 40, 128)
	var a Int8Act
	if err := QuantizeInt8(&a, randActs(r, 3, 128), 3, 128, 128); err != nil {
		t.Fatal(err)
	}
	var a32, aK Int8Act
	if err := QuantizeInt8(&a32, randActs(r, 3, 128), 3, 128, 32); err != nil {
		t.Fatal(err)
	}
	if err := QuantizeInt8(&aK, randActs(r, 3, 256), 3, 256, 32); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, 3*40)
	bad := *w.(*Affine)
	bad.Codes = bad.Codes[1:]
	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"block above group", ErrUnsupported, func() error { return MatMulInt8(y, 40, &a, w, 0, 40, Go) }},
		{"K mismatch", ErrShape, func() error { return MatMulInt8(y, 40, &aK, w, 0, 40, Go) }},
		{"short codes", ErrShape, func() error { return MatMulInt8(y, 40, &a32, &bad, 0, 40, Go) }},
		{"columns", ErrShape, func() error { return MatMulInt8(y, 40, &a32, w, 10, 41, Go) }},
		{"y short", ErrShape, func() error { return MatMulInt8(y[:100], 40, &a32, w, 0, 40, Go) }},
		{"ldy", ErrShape, func() error { return MatMulInt8(y, 20, &a32, w, 0, 40, Go) }},
		{"kernel", ErrUnsupported, func() error { return MatMulInt8(y, 40, &a32, w, 0, 40, AVX512BF16) }},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if err := MatMulInt8(y, 40, &a32, w, 0, 40, Go); err != nil || !slices.Contains(Int8Kernels(), Go) {
		t.Fatalf("valid call: %v", err)
	}
}

// TestInt8Extremes: codes at the ends of their range against activations at +-127 (every
// block's values +-1), where a 16-bit pair sum would saturate if the recentring or the |w| *
// sign(x, w) pairing were wrong: every kernel equals the portable one and the exact sums.
func TestInt8Extremes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const T, N, K = 6, 40, 256
	// Rows 0-2 all +1 (codes +127: the largest sums of one sign), rows 3-5 random signs.
	x := make([]float32, T*K)
	for i := range x {
		x[i] = 1
		if i >= 3*K {
			x[i] = float32(1 - 2*r.IntN(2))
		}
	}
	var a Int8Act
	if err := QuantizeInt8(&a, x, T, K, 32); err != nil {
		t.Fatal(err)
	}
	var ws []Int8Weights
	for _, bits := range []int{4, 6, 8} {
		w := &Affine{N: N, K: K, Bits: bits, Group: 32, Codes: make([]uint32, N*K*bits/32),
			Scales: make([]uint16, N*K/32), Biases: make([]uint16, N*K/32)}
		for n := 0; n < N; n++ {
			for k := 0; k < K; k++ {
				if n%2 == 0 || r.IntN(4) != 0 { // the largest code (all of it in even rows): the worst pairs
					bit := (n*K + k) * bits
					v := uint64(1)<<bits - 1
					w.Codes[bit/32] |= uint32(v << (bit % 32))
					if bit%32+bits > 32 {
						w.Codes[bit/32+1] |= uint32(v >> (32 - bit%32))
					}
				}
			}
		}
		for i := range w.Scales {
			w.Scales[i], w.Biases[i] = ToBF16(0.01), ToBF16(-0.5)
		}
		ws = append(ws, w)
	}
	f := &FP8{N: N, K: K, Codes: make([]uint8, N*K), ScaleInv: make([]float32, 1*2)}
	for i := range f.Codes {
		f.Codes[i] = []uint8{0x7e, 0xfe, 0x00, 0x7e}[r.IntN(4)] // +-448
	}
	f.ScaleInv[0], f.ScaleInv[1] = 1, 0.5
	ws = append(ws, f)
	for i, w := range ws {
		src, err := w.int8Source()
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, T*N)
		if err := MatMulInt8(want, N, &a, w, 0, N, Go); err != nil {
			t.Fatal(err)
		}
		ref, bound := refInt8(&a, src)
		for j := range want {
			if d := math.Abs(float64(want[j]) - ref[j]); !(d <= bound[j]) {
				t.Fatalf("weight %d: y[%d] = %g, exact %g", i, j, want[j], ref[j])
			}
		}
		for _, k := range Int8Kernels() {
			got := make([]float32, T*N)
			if err := MatMulInt8(got, N, &a, w, 0, N, k); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("%v weight %d", k, i), got, want, N, T, N)
		}
	}
}

// FP8Int8 against the E4M3 values: per run of 32, the smallest shift that fits (the largest
// code magnitude above 63 unless the shift is 0), every code within half a step of the value
// and exact for values within 8x of the run's largest, each code rounded to nearest even, and
// a NaN code making the run's scale NaN.
func TestFP8Int8(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const N, K = 8, 1024
	w := &FP8{N: N, K: K, Codes: make([]uint8, N*K), ScaleInv: make([]float32, 8)}
	for i := range w.Codes {
		c := uint8(r.IntN(256))
		if c&0x7f == 0x7f {
			c = 0x10 // no NaN here
		}
		w.Codes[i] = c
		if i/32%5 == 1 { // some runs of small values only
			w.Codes[i] &= 0x9f
		}
	}
	for i := range w.ScaleInv {
		w.ScaleInv[i] = float32(1 + r.Float64())
	}
	w.Codes[3*K+70] = 0xff // NaN in row 3, run 2
	q := make([]int32, K)
	s := make([]float32, K/32)
	for n := 0; n < N; n++ {
		w.FP8Int8(n, q, s)
		for g := 0; g < K/32; g++ {
			if n == 3 && g == 2 {
				if !math.IsNaN(float64(s[g])) {
					t.Fatalf("run with a NaN has scale %g", s[g])
				}
				continue
			}
			sc := float64(w.scaleInv(n/128, g*32/128))
			step := float64(s[g]) / sc * 512 // 2^h
			h := int(math.Round(math.Log2(step)))
			var amax, qmax int32
			for k := g * 32; k < (g+1)*32; k++ {
				amax = max(amax, e4m3Int[w.Codes[n*K+k]&0x7f])
				qmax = max(qmax, q[k], -q[k])
			}
			if qmax > 127 || h > 0 && qmax <= 63 {
				t.Fatalf("row %d run %d: shift %d, largest code %d", n, g, h, qmax)
			}
			for k := g * 32; k < (g+1)*32; k++ {
				v := e4m3Int[w.Codes[n*K+k]]
				d := float64(v) - float64(q[k])*step
				if math.Abs(d) > step/2 || (8*abs32(v) >= amax && d != 0) {
					t.Fatalf("row %d k %d: e4m3 %d*2^-9, code %d * 2^%d", n, k, v, q[k], h-9)
				}
				if math.Abs(d) == step/2 && q[k]&1 != 0 {
					t.Fatalf("row %d k %d: tie %d rounded to odd %d", n, k, v, q[k])
				}
			}
		}
	}
}

func abs32(v int32) int32 { return max(v, -v) }

// TestQuantizeAsm: the AVX2 quantization kernels give bitwise the portable loop's codes, scales
// and sums, in blocks of 32, 64 and 128: random rows, a block of exact halves (amax 127, so
// codes RNE(k + 0.5) of both signs), subnormals and signed zeros, a zero block, NaN and an
// infinity.
func TestQuantizeAsm(t *testing.T) {
	if !hasQuantAsm {
		t.Skip("no AVX2 quantization kernel on this CPU and build")
	}
	defer func(v bool) { quantAsm = v }(quantAsm)
	r := rand.New(rand.NewPCG(11, 12))
	const T, K = 9, 512
	x := randActs(r, T, K)
	for i := 0; i < 128; i++ {
		x[i] = float32(i%127) - 63.5 // exact halves
	}
	x[0] = 127
	for i := 128; i < 192; i++ {
		x[i] = math.Float32frombits(uint32(r.IntN(1 << 23))) // subnormals
	}
	x[130] = float32(math.Copysign(0, -1))
	for i := K; i < K+128; i++ {
		x[i] = 0
	}
	x[2*K+33] = float32(math.NaN())
	x[3*K+200] = float32(math.Inf(1))
	for i := 4 * K; i < 5*K; i++ {
		x[i] *= 1e30
	}
	for _, block := range Blocks {
		var a, b Int8Act
		quantAsm = true
		if err := QuantizeInt8(&a, x, T, K, block); err != nil {
			t.Fatal(err)
		}
		quantAsm = false
		if err := QuantizeInt8(&b, x, T, K, block); err != nil {
			t.Fatal(err)
		}
		for i := range b.q {
			if a.q[i] != b.q[i] {
				t.Fatalf("block %d: code %d (row %d) %d, portable %d", block, i, i/K, a.q[i], b.q[i])
			}
		}
		for i := range b.scale {
			if math.Float32bits(a.scale[i]) != math.Float32bits(b.scale[i]) || a.sum[i] != b.sum[i] {
				t.Fatalf("block %d: block %d scale %g sum %d, portable %g %d", block, i, a.scale[i], a.sum[i], b.scale[i], b.sum[i])
			}
		}
	}
}

// TestFP8RunShift: the shift and NaN flag of a run found 8 codes at a time are those of its
// largest magnitude code found one at a time: every code at every position of a run of smaller
// ones, and random runs.
func TestFP8RunShift(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	check := func(run []uint8) {
		var top uint8
		for _, c := range run {
			top = max(top, c&0x7f)
		}
		h, ok := fp8RunShift(run)
		if ok != (top != 0x7f) || ok && h != fp8Shift[top] {
			t.Fatalf("run %x: shift %d ok %v, largest magnitude code %#x (shift %d)", run, h, ok, top, fp8Shift[top])
		}
	}
	run := make([]uint8, FP8Int8Group)
	for c := range 256 {
		for i := range run {
			for j := range run {
				run[j] = uint8(r.IntN(256)) & (0x80 | uint8(c&0x7f)>>1)
			}
			run[i] = uint8(c)
			check(run)
		}
	}
	for range 10000 {
		for j := range run {
			run[j] = uint8(r.IntN(256))
		}
		check(run)
	}
}
