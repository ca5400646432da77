package kernels

import (
	"errors"
	"strings"
	"testing"
)

// TestElemLimits: shapes whose tensors exceed 2^31-1 elements are rejected with ErrShape naming
// the 32-bit limit, before any slice is touched (the slices here are tiny on purpose).
func TestElemLimits(t *testing.T) {
	w, _ := NewMatrixF32(1, 1<<16, make([]float32, 1<<16))
	big := 1 << 16 // T*K = 2^32
	cases := []struct {
		name string
		err  error
	}{
		{"MatMul", MatMul(make([]float32, 1), make([]float32, 1), big, w)},
		{"MoECombine", MoECombine(nil, nil, 1<<20, nil, nil, 1<<20, 10, 4096)},
		{"TopKRoute", TopKRoute(nil, nil, nil, 1<<30, 512, 10, true)},
		{"RMSNorm1p", RMSNorm1p(nil, nil, 1<<20, 1<<12, nil, 1e-6)},
		{"GRApplyMoEC", GRApplyMoEC(nil, nil, nil, 1, nil, nil, nil, 1<<20, 4, 10, 2560)},
	}
	for _, c := range cases {
		if !errors.Is(c.err, ErrShape) || !strings.Contains(c.err.Error(), "32-bit") {
			t.Errorf("%s: %v, want ErrShape naming the 32-bit limit", c.name, c.err)
		}
	}
	if err := checkElems("x", "t", 1<<40, 1<<40); err == nil {
		t.Error("int overflow of the product not caught")
	}
	if err := checkElems("x", "t", 46340, 46340); err != nil {
		t.Errorf("2^31-1 > 46340^2 rejected: %v", err)
	}
}
