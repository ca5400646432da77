package metal

import (
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

func gdnParams(c opcases.GDNCase) op.GDNParams {
	p := op.GDNParams{T: c.T, Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv, ConvK: c.ConvK}
	if c.Tiled {
		p.Map = op.Tiled
	}
	return p
}

// TestGDNOpCases runs gdn_pre (+ conv state update), gdn_scan and gdn_post on the shared GDN
// case list against the CPU ops (the scan against its Recurrent mode). Tolerances, relative to
// max |want|: pre 2e-6, conv state exact, scan 2e-6 (o and state), post 2e-6.
func TestGDNOpCases(t *testing.T) {
	b := testBackend(t)
	for _, c := range opcases.GDNCases() {
		t.Run(c.Name+"_T"+itoa(c.T), func(t *testing.T) {
			in := c.Inputs()
			p := gdnParams(c)
			nqk, nv, nh := c.T*c.Hk*c.Dk, c.T*c.Hv*c.Dv, c.T*c.Hv

			// gdn_pre
			wq, wk, wv, wg, wb := make([]float32, nqk), make([]float32, nqk), make([]float32, nv), make([]float32, nh), make([]float32, nh)
			wcs := append([]float32(nil), in.ConvState...)
			if err := kernels.GDNPre(wq, wk, wv, wg, wb, in.QKV, in.A, in.B, wcs, in.ConvW, in.ALog, in.DtBias, p); err != nil {
				t.Fatal(err)
			}
			gq, gk, gv, gg, gb := make([]float32, nqk), make([]float32, nqk), make([]float32, nv), make([]float32, nh), make([]float32, nh)
			gcs := append([]float32(nil), in.ConvState...)
			if err := b.GDNPre(gq, gk, gv, gg, gb, in.QKV, in.A, in.B, gcs, in.ConvW, in.ALog, in.DtBias, p); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "pre q", gq, wq, 2e-6)
			checkClose(t, "pre k", gk, wk, 2e-6)
			checkClose(t, "pre v", gv, wv, 2e-6)
			checkClose(t, "pre g", gg, wg, 2e-6)
			checkClose(t, "pre beta", gb, wb, 2e-6)
			checkBitwise(t, "conv state", gcs, wcs)

			// gdn_scan on normalised q, k from the CPU
			q, k := append([]float32(nil), in.Q...), append([]float32(nil), in.K...)
			if err := kernels.GDNNormQK(q, k, c.T, c.Hk, c.Dk); err != nil {
				t.Fatal(err)
			}
			wo, ws := make([]float32, nv), append([]float32(nil), in.State...)
			if err := kernels.GDNScan(wo, ws, q, k, in.V, in.G, in.Beta, p, kernels.Recurrent); err != nil {
				t.Fatal(err)
			}
			gotO, gotS := make([]float32, nv), append([]float32(nil), in.State...)
			if err := b.GDNScan(gotO, gotS, q, k, in.V, in.G, in.Beta, p); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "scan o", gotO, wo, 2e-6)
			checkClose(t, "scan state", gotS, ws, 2e-6)

			// gdn_post, both gate activations
			for _, act := range []op.GateAct{op.ActSigmoid, op.ActSilu} {
				wy, gy := make([]float32, nv), make([]float32, nv)
				if err := kernels.GDNPost(wy, wo, in.Z, c.T, c.Hv, c.Dv, in.NormW, 1e-6, act); err != nil {
					t.Fatal(err)
				}
				if err := b.GDNPost(gy, wo, in.Z, c.T, c.Hv, c.Dv, in.NormW, 1e-6, act); err != nil {
					t.Fatal(err)
				}
				checkClose(t, "post y", gy, wy, 2e-6)
			}
		})
	}
	t.Log(b.Variants())
}

// TestGDNScanGolden: gdn_scan at the full model's shapes against the transformers golden
// (T = 100, Hk 16, Hv 48, dk = dv = 128); tolerance 1e-6 relative to max |o|, max |state|.
func TestGDNScanGolden(t *testing.T) {
	g := golden(t, "op_gdn.safetensors", "q", "k", "v", "g", "beta", "state_in", "o", "state_out")
	p := op.GDNParams{T: 100, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}
	q, k := g["q"], g["k"]
	if err := kernels.GDNNormQK(q, k, p.T, p.Hk, p.Dk); err != nil {
		t.Fatal(err)
	}
	b := testBackend(t)
	o, state := make([]float32, len(g["o"])), append([]float32(nil), g["state_in"]...)
	if err := b.GDNScan(o, state, q, k, g["v"], g["g"], g["beta"], p); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "o", o, g["o"], 1e-6)
	checkClose(t, "state", state, g["state_out"], 1e-6)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
