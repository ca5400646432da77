package qdot

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaBig is a*b + c rounded once to float32 through exact big.Float arithmetic.
func fmaBig(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(0).SetFloat64(float64(a))
	x.SetPrec(2048).Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// fma32 against exact rounding: random operands over the whole exponent range, products that
// fall exactly on a float32 midpoint with a small addend of either sign (where rounding twice
// goes wrong), and subnormal results.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	check := func(a, b, c float32) {
		t.Helper()
		got, want := fma32(a, b, c), fmaBig(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%08x), want %g (%08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	randF := func(spread int) float32 {
		e := 127 + r.IntN(2*spread+1) - spread
		return math.Float32frombits(uint32(r.IntN(2))<<31 | uint32(e)<<23 | uint32(r.IntN(1<<23)))
	}
	for range 200000 {
		check(randF(60), randF(60), randF(120))
		check(randF(10), randF(10), randF(10))
	}
	ties := 0
	for range 200000 {
		// a*b = m + half an ulp of m exactly: a = 1 + i/2^12 and b = 1 + j/2^12 give a 25-bit
		// product when the low bits allow it.
		a := 1 + float32(r.IntN(1<<12))/(1<<12)
		b := 1 + float32(r.IntN(1<<12))/(1<<12)
		p := float64(a) * float64(b)
		if float64(float32(p)) == p {
			continue
		}
		ties++
		tiny := float32(math.Ldexp(1+r.Float64(), -60-r.IntN(40)))
		check(a, b, tiny)
		check(a, b, -tiny)
		check(-a, b, tiny)
	}
	if ties < 1000 {
		t.Fatalf("only %d midpoint products", ties)
	}
	for range 100000 {
		a := float32(math.Ldexp(r.Float64()+0.5, -70-r.IntN(20)))
		b := float32(math.Ldexp(r.Float64()+0.5, -60-r.IntN(20)))
		check(a, b, float32(math.Ldexp(r.NormFloat64(), -130-r.IntN(20))))
	}
	// Non-finite operands and overflow: no rounding question, float64 FMA says what IEEE does.
	inf := float32(math.Inf(1))
	for _, c := range [][3]float32{{inf, 1, 2}, {inf, 0, 2}, {inf, 1, -inf}, {float32(math.NaN()), 1, 2},
		{3e38, 3e38, 0}, {-3e38, 3e38, 1}, {0, 5, float32(math.Copysign(0, -1))}, {1, -1, 1}} {
		got, want := fma32(c[0], c[1], c[2]), float32(math.FMA(float64(c[0]), float64(c[1]), float64(c[2])))
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", c[0], c[1], c[2], got, want)
		}
	}
}
