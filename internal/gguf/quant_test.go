package gguf

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// quantRows draws rows of k values: Gaussian of a different scale per row, a row with outliers,
// a row of zeros, a row of one positive constant and a row of small positive values (a min
// above 0).
func quantRows(rng *rand.Rand, k int) []float32 {
	var x []float32
	for r := range 8 {
		std := math.Pow(10, float64(r%5)-3)
		for i := range k {
			v := rng.NormFloat64() * std
			switch r {
			case 5:
				if i%97 == 3 {
					v *= 20
				}
			case 6:
				v = 0
			case 7:
				v = 0.25 + 0.01*math.Abs(v)/std
			}
			x = append(x, float32(v))
		}
	}
	return x
}

// TestQuantizeError: every type Quantize writes, decoded by op/optest's float64 reference,
// gives back the input within the type's error: per element at most the given fraction of its
// block's largest magnitude (half a code step of the format, or a whole step at the clamped
// end of the asymmetric Q4_0 / Q5_0 / Q6_K / IQ4 ranges; for the K types plus what rounding the
// sub-block scales to 6 or 8 bits moves the end of a sub-block's range), and an RMS error over Gaussian rows below
// the given fraction of their RMS. The float types round exactly.
func TestQuantizeError(t *testing.T) {
	cases := []struct {
		typ      op.GGMLType
		perBlock float64 // max |err| / max |x| of the block
		rms      float64 // RMS error / RMS over the Gaussian rows
	}{
		{op.GGMLQ8_0, 0.5/127 + 1e-3, 0.006},
		{op.GGMLQ4_0, 1.0 / 8, 0.12},
		{op.GGMLQ5_0, 1.0 / 16, 0.06},
		{op.GGMLQ4_K, 1.0/15 + 1.0/63, 0.085},
		{op.GGMLQ5_K, 1.0/31 + 1.0/63, 0.045},
		{op.GGMLQ6_K, 1.0/32 + 1.0/254, 0.025},
		{op.GGMLIQ4_NL, 0.12, 0.085},
		{op.GGMLIQ4_XS, 0.12, 0.085},
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const k = 512
	x := quantRows(rng, k)
	for _, c := range cases {
		b, err := Quantize(c.typ, x, k)
		if err != nil {
			t.Fatalf("%v: %v", c.typ, err)
		}
		m, err := op.NewMatrixGGML(len(x)/k, k, &op.GGMLBlocks{Type: c.typ, Data: b})
		if err != nil {
			t.Fatal(err)
		}
		w := optest.DequantGGML(m)
		bs := c.typ.BlockSize()
		var se, sx float64
		worst := 0.0
		for blk := 0; blk < len(x)/bs; blk++ {
			xs, ws := x[blk*bs:(blk+1)*bs], w[blk*bs:(blk+1)*bs]
			a := amax(xs)
			for i := range xs {
				e := math.Abs(float64(xs[i]) - float64(ws[i]))
				if e > c.perBlock*a*(1+1e-6) {
					t.Fatalf("%v: block %d element %d: %g decoded as %g (error %.3g of the block's max %g, allowed %.3g)", c.typ, blk, i, xs[i], ws[i], e/a, a, c.perBlock)
				}
				if a > 0 {
					worst = max(worst, e/a)
				}
				if blk*bs < 5*k {
					se += e * e
					sx += float64(xs[i]) * float64(xs[i])
				}
			}
		}
		rel := math.Sqrt(se / sx)
		t.Logf("%v: RMS error %.4f of the RMS, worst element %.4f of its block's max", c.typ, rel, worst)
		if rel > c.rms {
			t.Errorf("%v: RMS error %.4f of the RMS, want at most %.3f", c.typ, rel, c.rms)
		}
	}
	for _, typ := range []op.GGMLType{op.GGMLF32, op.GGMLF16, op.GGMLBF16} {
		b, err := Quantize(typ, x, k)
		if err != nil {
			t.Fatal(err)
		}
		tn := &Tensor{Name: "x", Type: typ, Elements: int64(len(x)), Data: b}
		got, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			want := v
			switch typ {
			case op.GGMLF16:
				want = float32(halfValue(v))
			case op.GGMLBF16:
				want = math.Float32frombits(uint32(BF16(v)) << 16)
			}
			if got[i] != want {
				t.Fatalf("%v: element %d: %g read back as %g, want %g", typ, i, v, got[i], want)
			}
		}
	}
}

func halfValue(v float32) float64 { _, h, _ := half(float64(v)); return h }

// TestQuantizeRefused: bad shapes, an unsupported type, non-finite values and overflowing
// scales are refused with the error kinds of op.
func TestQuantizeRefused(t *testing.T) {
	x := make([]float32, 256)
	if _, err := Quantize(op.GGMLQ4_K, x[:128], 128); !errors.Is(err, op.ErrShape) {
		t.Errorf("rows of 128 to Q4_K: %v", err)
	}
	if _, err := Quantize(op.GGMLQ8_0, x[:100], 64); !errors.Is(err, op.ErrShape) {
		t.Errorf("100 values in rows of 64: %v", err)
	}
	if _, err := Quantize(op.GGMLQ2_K, x, 256); !errors.Is(err, op.ErrUnsupported) {
		t.Errorf("Q2_K: %v", err)
	}
	x[7] = float32(math.NaN())
	if _, err := Quantize(op.GGMLQ8_0, x, 256); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("NaN: %v", err)
	}
	x[7] = 1e30
	if _, err := Quantize(op.GGMLQ8_0, x, 256); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("1e30 in Q8_0: %v", err)
	}
}
