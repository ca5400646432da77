package metal

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
)

// A NaN or infinite router logit fails the Pass at Commit (moe_route flags it on the device)
// naming the first such token; finite logits, in the same Pass's later Commit or in a fresh
// Pass, raise nothing.
func TestTopKRouteRefusesNonFiniteLogits(t *testing.T) {
	b := testBackend(t)
	const T, E, K = 5, 8, 2
	route := func(bad map[int]float32) error {
		t.Helper()
		logits := make([]float32, T*E)
		for i := range logits {
			logits[i] = float32(i%E) * 0.25
		}
		for i, v := range bad {
			logits[i] = v
		}
		tl, err := b.NewTensor(op.F32, T*E)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free(tl)
		copy(tl.F32(), logits)
		tw, _ := b.NewTensor(op.F32, T*K)
		ti, _ := b.NewTensor(op.I32, T*K)
		defer b.Free(tw)
		defer b.Free(ti)
		p, err := b.Begin(b.NewWeights(op.WeightOptions{}), b.NewScratch())
		if err != nil {
			t.Fatal(err)
		}
		if err := p.TopKRoute(op.TopKRoute{Logits: tl, W: tw, Idx: ti, T: T, E: E, K: K, Norm: true}); err != nil {
			p.Abandon()
			t.Fatalf("encoding: %v", err)
		}
		_, err = p.Commit()
		return err
	}
	if err := route(nil); err != nil {
		t.Fatalf("finite logits: %v", err)
	}
	for _, c := range []struct {
		name string
		bad  map[int]float32
		tok  string
	}{
		{"NaN", map[int]float32{3*E + 5: float32(math.NaN())}, "token 3"},
		{"+Inf", map[int]float32{1*E + 0: float32(math.Inf(1))}, "token 1"},
		{"-Inf and NaN", map[int]float32{4*E + 7: float32(math.Inf(-1)), 2*E + 1: float32(math.NaN())}, "token 2"},
	} {
		err := route(c.bad)
		if !errors.Is(err, op.ErrInvalidArgument) || !strings.Contains(err.Error(), c.tok) {
			t.Errorf("%s: error %v, want ErrInvalidArgument naming %s", c.name, err, c.tok)
		}
	}
	if err := route(nil); err != nil {
		t.Fatalf("finite logits after refused passes: %v", err)
	}
}
