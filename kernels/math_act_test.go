package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stratakernels/strata/op/optest"
)

// actUlp is the spacing of float32 values at |w| (the smallest subnormal at 0).
func actUlp(w float64) float64 {
	a := float32(math.Abs(w))
	if math.IsInf(float64(a), 0) {
		return math.Inf(1)
	}
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// actGrid is a dense grid over [-120, 120] (step 1/2048 near 0, widening outwards), the
// float32 neighbours of the exp clamp and flush points, and extremes.
func actGrid() []float32 {
	var xs []float32
	for i := -245760; i <= 245760; i++ {
		xs = append(xs, float32(i)/2048)
	}
	for _, v := range []float32{87, 87.3, 87.33, 87.34, 87.5, 87.68, 88, 88.7, 89, 103.9, 104, 1e4, 1e30, math.MaxFloat32, 1e-30, 1e-45} {
		for _, s := range []float32{1, -1} {
			x := s * v
			xs = append(xs, x, math.Nextafter32(x, 0), math.Nextafter32(x, float32(math.Inf(1))))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		// random bit patterns: every exponent, NaN and Inf excluded here (tested apart)
		b := r.Uint32()
		if b&0x7f800000 == 0x7f800000 {
			continue
		}
		xs = append(xs, math.Float32frombits(b))
	}
	return xs
}

// TestActAccuracy: sigmoid, silu (with the GatedResidual divisor) and SwiGLU of each kernel set
// against float64 definitions over actGrid. The assembly set must be within 3 float32 ulp of the
// exact value for sigmoid, 4 for silu and 5 for SwiGLU (one more rounding each), or within
// |x| 2^-126 where it flushes e^x to 0 (x < -87.7); the portable set within 1.2e-7 relative
// (1.8e-7 for SwiGLU, whose float32 product with u rounds again). Reports the largest error in
// ulp outside the flushed and subnormal range.
func TestActAccuracy(t *testing.T) { forEachKernel(t, testActAccuracy) }

func testActAccuracy(t *testing.T) {
	xs := actGrid()
	n := len(xs)
	u := optest.Floats(7, n, 3)
	got := make([]float32, n)
	asm := useAsmAct()
	const tiny = 0x1p-126
	// floor(i) is the absolute error allowed where e^x flushes (assembly) or a result is
	// subnormal (both sets).
	check := func(name string, want func(i int) float64, floor func(i int) float64, ulpAsm, relGo float64) {
		t.Helper()
		worst := 0.0
		for i := range n {
			w := want(i)
			if float64(got[i]) == w || (math.IsInf(float64(float32(w)), 0) && got[i] == float32(w)) {
				continue // exact, or overflowing float32 as the float32 rounding of w does
			}
			d := math.Abs(float64(got[i]) - w)
			ulps := d / actUlp(w)
			// below x = -87.7 e^x flushes to 0: sigmoid's exact value is under 2^-126 there,
			// silu's under |x| 2^-126
			ok := ulps <= ulpAsm || d <= floor(i)
			if !asm {
				ok = d <= relGo*math.Abs(w) || d <= floor(i)
			}
			if !ok {
				t.Fatalf("%s(%g) = %g, want %g (%.2f ulp)", name, xs[i], got[i], w, ulps)
			}
			if d > floor(i) {
				worst = max(worst, ulps)
			}
		}
		t.Logf("%s (%s): max error %.2f ulp over %d values", name, ActKernel(), worst, n)
	}
	sig := func(v float64) float64 {
		if v >= 0 {
			return 1 / (1 + math.Exp(-v))
		}
		e := math.Exp(v)
		return e / (1 + e)
	}
	floorX := func(i int) float64 { return tiny * max(1, math.Abs(float64(xs[i]))) }
	sigmoidRow(got, xs, 1)
	check("sigmoid", func(i int) float64 { return sig(float64(xs[i])) }, floorX, 3, 1.2e-7)
	for _, div := range []float32{1, 4, 3} {
		siluRow(got, xs, div)
		check(fmt.Sprintf("silu(x/%g)", div), func(i int) float64 {
			v := float64(xs[i] / div)
			return v * sig(v)
		}, floorX, 4, 1.2e-7)
	}
	copy(got, u)
	sigmoidMulRow(got, xs)
	check("sigmoid*o", func(i int) float64 {
		return float64(float32(sig(float64(xs[i])))) * float64(u[i])
	}, func(i int) float64 { return tiny * max(1, math.Abs(float64(u[i]))) }, 4, 1.8e-7)
	swigluRow(got, xs, u)
	check("swiglu", func(i int) float64 {
		v := float64(xs[i])
		// the product with u is one more rounding of the rounded silu
		return float64(float32(v*sig(v))) * float64(u[i])
	}, func(i int) float64 { return floorX(i) * max(1, math.Abs(float64(u[i]))) }, 5, 1.8e-7)
}

// TestActSpecialValues: NaN propagates; the infinities, zeros and saturated arguments give the
// documented values, in both kernel sets.
func TestActSpecialValues(t *testing.T) { forEachKernel(t, testActSpecialValues) }

func testActSpecialValues(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negz := float32(math.Copysign(0, -1))
	in := []float32{nan, inf, -inf, 0, negz, 200, -200, 1e38, -1e38}
	type want struct{ sig, silu float32 }
	wants := []want{{nan, nan}, {1, inf}, {0, nan}, {0.5, 0}, {0.5, 0}, {1, 200}, {0, 0}, {1, 1e38}, {0, 0}}
	sg, sl, sw, sm := make([]float32, len(in)), make([]float32, len(in)), make([]float32, len(in)), make([]float32, len(in))
	sigmoidRow(sg, in, 1)
	siluRow(sl, in, 1)
	ones := make([]float32, len(in))
	for i := range ones {
		ones[i] = 1
	}
	swigluRow(sw, in, ones)
	copy(sm, ones)
	sigmoidMulRow(sm, in)
	same := func(a, b float32) bool { return a == b || (a != a && b != b) }
	for i, x := range in {
		if !same(sg[i], wants[i].sig) || !same(sl[i], wants[i].silu) || !same(sw[i], wants[i].silu) || !same(sm[i], wants[i].sig) {
			t.Errorf("x=%g: sigmoid %g silu %g swiglu %g, want %g, %g, %g", x, sg[i], sl[i], sw[i], wants[i].sig, wants[i].silu, wants[i].silu)
		}
	}
	// NaN in the gate or the values of the stream mean makes that column NaN, nowhere else.
	const S, D = 4, 20
	a, h := optest.Floats(1, S*D, 2), optest.Floats(2, S*D, 1)
	a[1*D+3], h[2*D+17] = nan, nan
	x := make([]float32, D)
	grMeanSigmoidRow(x, a, h, S, make([]float32, 2*S*8))
	for d, v := range x {
		if isNaN := v != v; isNaN != (d == 3 || d == 17) {
			t.Errorf("stream mean column %d = %g", d, v)
		}
	}
}

// TestGRMeanSigmoid: the fused sigmoid-gated stream mean against float64 over S = 1..5 and
// widths with and without a tail of 8, to 4 ulp of the sum of the terms' magnitudes.
func TestGRMeanSigmoid(t *testing.T) { forEachKernel(t, testGRMeanSigmoid) }

func testGRMeanSigmoid(t *testing.T) {
	for _, S := range []int{1, 2, 4, 5} {
		for _, D := range []int{1, 7, 8, 13, 64, 203} {
			a, h := optest.Floats(uint64(S*1000+D), S*D, 12), optest.Floats(uint64(S*1000+D+1), S*D, 3)
			x := make([]float32, D)
			grMeanSigmoidRow(x, a, h, S, make([]float32, 2*S*8))
			for d := range D {
				var want, mag float64
				for s := range S {
					term := float64(h[s*D+d]) / (1 + math.Exp(-float64(a[s*D+d])))
					want += term
					mag += math.Abs(term)
				}
				want, mag = want/float64(S), mag/float64(S)
				if e := math.Abs(float64(x[d]) - want); e > 4*0x1p-24*mag+1e-30 {
					t.Fatalf("S%d D%d column %d: %g, want %g (error %.3g of magnitude %.3g)", S, D, d, x[d], want, e, mag)
				}
			}
		}
	}
}

// TestActSplitBitwise: an element's bits do not depend on where it sits in a row or how the
// row is cut (the tails go through the same kernel), for every row kernel.
func TestActSplitBitwise(t *testing.T) { forEachKernel(t, testActSplitBitwise) }

func testActSplitBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 203
	x, u := optest.Floats(11, n, 20), optest.Floats(12, n, 2)
	run := func(cuts []int) [4][]float32 {
		out := [4][]float32{make([]float32, n), make([]float32, n), make([]float32, n), append([]float32(nil), u...)}
		lo := 0
		for _, hi := range append(cuts, n) {
			sigmoidRow(out[0][lo:hi], x[lo:hi], 4)
			siluRow(out[1][lo:hi], x[lo:hi], 4)
			swigluRow(out[2][lo:hi], x[lo:hi], u[lo:hi])
			sigmoidMulRow(out[3][lo:hi], x[lo:hi])
			lo = hi
		}
		return out
	}
	ref := run(nil)
	for trial := range 50 {
		var cuts []int
		for c := r.IntN(9); c < n; c += 1 + r.IntN(23) {
			cuts = append(cuts, c)
		}
		got := run(cuts)
		for k := range ref {
			denseBitwise(t, fmt.Sprintf("trial %d kernel %d", trial, k), got[k], ref[k])
		}
	}
	// A column of the stream mean has the same bits in a narrow row (all of it a tail) and
	// in a wide one (inside the vector part).
	const S = 4
	for _, D := range []int{3, 13} {
		a, h := optest.Floats(uint64(D), S*D, 6), optest.Floats(uint64(D+1), S*D, 2)
		const W = 40
		aw, hw := make([]float32, S*W), make([]float32, S*W)
		for s := range S {
			copy(aw[s*W+16:], a[s*D:(s+1)*D])
			copy(hw[s*W+16:], h[s*D:(s+1)*D])
		}
		xn, xw := make([]float32, D), make([]float32, W)
		sc := make([]float32, 2*S*8)
		grMeanSigmoidRow(xn, a, h, S, sc)
		grMeanSigmoidRow(xw, aw, hw, S, sc)
		denseBitwise(t, fmt.Sprintf("stream mean D%d", D), xw[16:16+D], xn)
	}
}

// BenchmarkActivations: nanoseconds per element of each row kernel in each kernel set over a
// row of 10240 (one token's S*D gate for the GatedResidual read).
func BenchmarkActivations(b *testing.B) {
	const n, S = 10240, 4
	x, u := optest.Floats(1, n, 4), optest.Floats(2, n, 1)
	out := make([]float32, n)
	for _, ks := range kernelSets() {
		if ks.avx512 {
			continue // the activations have no AVX-512 form: the same kernels as "asm"
		}
		restore := ks.use()
		set := ks.name
		for _, k := range []struct {
			name string
			f    func()
		}{
			{"sigmoid", func() { sigmoidRow(out, x, 1) }},
			{"silu", func() { siluRow(out, x, 1) }},
			{"swiglu", func() { swigluRow(out, x, u) }},
			// refilled each time: repeated gating would drive out into subnormals
			{"sigmoidmul+copy", func() { copy(out, u); sigmoidMulRow(out, x) }},
			{"grmean", func() { grMeanSigmoidRow(out[:n/S], x, u, S, nil) }},
		} {
			b.Run(k.name+"/"+set, func(b *testing.B) {
				for b.Loop() {
					k.f()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
			})
		}
		restore()
	}
}

// TestSigmoidMul: the exported gate against float64 on a tensor whose length is not a multiple
// of 8, the same bits at GOMAXPROCS 1, 2 and 4, and a length mismatch rejected.
func TestSigmoidMul(t *testing.T) { forEachKernel(t, testSigmoidMul) }

func testSigmoidMul(t *testing.T) {
	const n = 3*(1<<14) + 5
	gate, o0 := optest.Floats(21, n, 8), optest.Floats(22, n, 2)
	run := func() []float32 {
		o := append([]float32(nil), o0...)
		if err := sigmoidMul(o, gate); err != nil {
			t.Fatal(err)
		}
		return o
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = float64(o0[i]) / (1 + math.Exp(-float64(gate[i])))
	}
	denseCheck(t, "SigmoidMul", run(), want, 1e-6)
	denseSameAcrossProcs(t, "SigmoidMul", run)
	if err := sigmoidMul(make([]float32, 3), make([]float32, 4)); !errors.Is(err, op.ErrShape) {
		t.Fatalf("length mismatch: %v", err)
	}
}
