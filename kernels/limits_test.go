package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"math"
	"strings"
	"testing"
)

// TestElemLimits: shapes whose tensors exceed 2^31-1 elements are rejected with op.ErrShape naming
// the 32-bit limit, before any slice is touched (the slices here are tiny on purpose).
func TestElemLimits(t *testing.T) {
	w, _ := op.NewMatrixF32(1, 1<<16, make([]float32, 1<<16))
	big := 1 << 16 // T*K = 2^32
	cases := []struct {
		name string
		err  error
	}{
		{"MatMul", matMulChecked(make([]float32, 1), make([]float32, 1), big, w)},
		{"MoECombine", moeCombine(nil, nil, 1<<20, nil, nil, 1<<20, 10, 4096)},
		{"TopKRoute", topKRoute(nil, nil, nil, 1<<30, 512, 10, true)},
		{"RMSNorm1p", rmsNorm1p(nil, nil, 1<<20, 1<<12, nil, 1e-6)},
		{"GRApplyMoEC", grApplyMoEC(nil, nil, nil, 1, nil, nil, nil, 1<<20, 4, 10, 2560)},
	}
	for _, c := range cases {
		if !errors.Is(c.err, op.ErrShape) || !strings.Contains(c.err.Error(), "32-bit") {
			t.Errorf("%s: %v, want op.ErrShape naming the 32-bit limit", c.name, c.err)
		}
	}
	if err := checkElems("x", "t", 1<<40, 1<<40); err == nil {
		t.Error("int overflow of the product not caught")
	}
	if err := checkElems("x", "t", 46340, 46340); err != nil {
		t.Errorf("2^31-1 > 46340^2 rejected: %v", err)
	}
}

func TestElemLimitsAttentionGDN(t *testing.T) {
	for name, err := range map[string]error{
		"Attention": attention(nil, nil, nil, nil, nil, op.AttnParams{T: 1 << 20, Hq: 24, Hkv: 2, D: 256, Scale: 1}, nil),
		"QSASelect": qsaSelect(&op.Selection{}, nil, nil, nil, op.IndexerParams{T: 1 << 22, NHeads: 4, Dim: 128, Ratio: 4, Budget: 8, Rot: 64, Theta: 1e7}),
		"GDNScan":   gdnScan(nil, nil, nil, nil, nil, nil, nil, op.GDNParams{T: 1 << 20, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}, op.Chunked),
		"GDNPre":    gdnPre(nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, op.GDNParams{T: 1 << 20, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}),
	} {
		if !errors.Is(err, op.ErrShape) || !strings.Contains(err.Error(), "32-bit") {
			t.Errorf("%s: %v, want op.ErrShape naming the 32-bit limit", name, err)
		}
	}
}

// TestGDNScanNaNPropagates documents GDNScan's NaN contract: a NaN in g at one token reaches o
// and the final state of the value head that reads it, in both modes, and no other head.
func TestGDNScanNaNPropagates(t *testing.T) {
	p := op.GDNParams{T: 70, Hk: 1, Hv: 2, Dk: 8, Dv: 8, ConvK: 4}
	for _, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
		q := make([]float32, p.T*p.Hk*p.Dk)
		k := make([]float32, p.T*p.Hk*p.Dk)
		v := make([]float32, p.T*p.Hv*p.Dv)
		g := make([]float32, p.T*p.Hv)
		beta := make([]float32, p.T*p.Hv)
		for i := range q {
			q[i], k[i] = float32(i%7)*0.05, float32(i%5)*0.07
		}
		for i := range v {
			v[i] = float32(i%11) * 0.1
		}
		for i := range g {
			g[i], beta[i] = -0.1, 0.5
		}
		g[66*p.Hv+1] = float32(math.NaN()) // head 1, token 66 (second chunk)
		o := make([]float32, p.T*p.Hv*p.Dv)
		state := make([]float32, p.Hv*p.Dk*p.Dv)
		if err := gdnScan(o, state, q, k, v, g, beta, p, mode); err != nil {
			t.Fatal(err)
		}
		last := o[(p.T-1)*p.Hv*p.Dv:]
		if !math.IsNaN(float64(last[p.Dv])) || !math.IsNaN(float64(state[p.Dk*p.Dv])) {
			t.Errorf("mode %d: NaN in g did not reach head 1's output/state", mode)
		}
		for i := 0; i < p.T*p.Hv*p.Dv; i++ {
			if (i/p.Dv)%p.Hv == 0 && math.IsNaN(float64(o[i])) {
				t.Fatalf("mode %d: NaN leaked into head 0 at %d", mode, i)
			}
		}
		if math.IsNaN(float64(o[10*p.Hv*p.Dv+p.Dv])) {
			t.Errorf("mode %d: NaN reached head 1 before its chunk", mode)
		}
	}
}
