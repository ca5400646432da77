package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stratakernels/strata/op/optest"
)

// denseNormRef64 is the zero-centred RMSNorm of every group of D in float64 (optest.RefRMSNorm1p).
func denseNormRef64(x []float32, S, D int, w []float32, eps float64) []float64 {
	return optest.RefRMSNorm1p(optest.To64(x), S, D, w, eps)
}

func TestRMSNorm1pCases(t *testing.T) {
	const eps = 1e-6
	for i, c := range optest.NormCases() {
		name := fmt.Sprintf("T%d_S%d_D%d", c.T, c.S, c.D)
		x := optest.Floats(uint64(300+i), c.T*c.S*c.D, 3)
		w := optest.Floats(uint64(400+i), c.S*c.D, 0.5)
		want := denseNormRef64(x, c.S, c.D, w, eps)
		y := make([]float32, len(x))
		var err error
		if c.S == 1 {
			err = rmsNorm1p(y, x, c.T, c.D, w, eps)
		} else {
			err = rmsNorm1pGrouped(y, x, c.T, c.S, c.D, w, eps)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		denseCheck(t, name, y, want, 1e-6)
		// in place (y aliases x) gives the same bits
		xc := append([]float32(nil), x...)
		if c.S == 1 {
			err = rmsNorm1p(xc, xc, c.T, c.D, w, eps)
		} else {
			err = rmsNorm1pGrouped(xc, xc, c.T, c.S, c.D, w, eps)
		}
		if err != nil {
			t.Fatal(err)
		}
		for j := range y {
			if math.Float32bits(y[j]) != math.Float32bits(xc[j]) {
				t.Fatalf("%s: in-place result differs at %d", name, j)
			}
		}
	}
	x := optest.Floats(1, 300*4*256, 1)
	w := optest.Floats(2, 4*256, 0.5)
	denseSameAcrossProcs(t, "RMSNorm1pGrouped", func() []float32 {
		y := make([]float32, len(x))
		if err := rmsNorm1pGrouped(y, x, 300, 4, 256, w, 1e-6); err != nil {
			t.Fatal(err)
		}
		return y
	})
}

func TestRMSNorm1pErrors(t *testing.T) {
	x := make([]float32, 8)
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"short x", op.ErrShape, func() error { return rmsNorm1p(x, x[:7], 2, 4, x[:4], 1e-6) }},
		{"short w", op.ErrShape, func() error { return rmsNorm1p(x, x, 2, 4, x[:3], 1e-6) }},
		{"D zero", op.ErrShape, func() error { return rmsNorm1p(nil, nil, 2, 0, nil, 1e-6) }},
		{"eps NaN", op.ErrInvalidArgument, func() error { return rmsNorm1p(x, x, 2, 4, x[:4], float32(math.NaN())) }},
		{"grouped w", op.ErrShape, func() error { return rmsNorm1pGrouped(x, x, 1, 2, 4, x[:4], 1e-6) }},
		{"grouped S", op.ErrShape, func() error { return rmsNorm1pGrouped(x, x, 1, 0, 4, x[:4], 1e-6) }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}
