package metal

import (
	"testing"

	"github.com/stratakernels/strata/op"
)

// The op goldens of transformers (testdata/goldens, at the full models' shapes) on the Metal
// kernels, each through op.Exec on host tensors (one command buffer).

// TestAttentionGolden: qsa_flash (and its variants qsa_attn_mm, qsa_flash_ph and the tensor-op
// qsa_attn_tensor, qsa_flash_tensor) on the golden at the full model's shapes (96 tokens at
// pos0 = 200, 24 q / 2 kv heads x 256). qsa_flash, qsa_attn_mm and qsa_attn_tensor within 5e-6
// (measured 1.5e-6), lse within 2e-6; qsa_flash_ph and qsa_flash_tensor round P to half: o
// within 1e-3 (measured 1.0e-4), lse with qsa_flash's tolerance.
func TestAttentionGolden(t *testing.T) {
	g := golden(t, "op_attn_moe.safetensors", "attn.q", "attn.k", "attn.v", "attn.o", "attn.lse")
	p := op.AttnParams{T: 96, Hq: 24, Hkv: 2, D: 256, Pos0: 200, Scale: 1.0 / 16}
	for _, c := range []struct {
		kernel string
		o, lse float64
	}{{attnFlashKernel, 1e-6, 1e-6}, {attnMMKernel, 5e-6, 2e-6}, {attnFlashPHKernel, 1e-3, 1e-6},
		{attnTensorPFKernel, 5e-6, 2e-6}, {attnTensorKernel, 1e-3, 2e-6}} {
		t.Run(c.kernel, func(t *testing.T) {
			b := testBackend(t)
			if err := b.Prefer("attention", c.kernel); err != nil {
				t.Fatal(err)
			}
			o, lse := make([]float32, len(g["attn.o"])), make([]float32, len(g["attn.lse"]))
			attention(t, b, o, lse, g["attn.q"], g["attn.k"], g["attn.v"], p, nil)
			checkClose(t, "attn.o", o, g["attn.o"], c.o)
			checkClose(t, "attn.lse", lse, g["attn.lse"], c.lse)
			checkVariant(t, b, c.kernel+"_f32_hpg12_tq1_")
		})
	}
}

// TestGDNScanGolden: gdn_scan (recurrent) and gdn_scan_chunk on the golden at the full model's
// shapes (T = 100, Hk 16, Hv 48, dk = dv = 128), q and k normalised first; 1e-6 relative.
func TestGDNScanGolden(t *testing.T) {
	g := golden(t, "op_gdn.safetensors", "q", "k", "v", "g", "beta", "state_in", "o", "state_out")
	p := op.GDNParams{T: 100, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}
	q, k := g["q"], g["k"]
	normQK(q, k, p.Dk)
	for _, mode := range []struct {
		name, variant string
		m             op.ScanMode
	}{{"recurrent", "gdn_scan_f32_dv32_nsg4", op.Recurrent}, {"chunked", "gdn_scan_chunk_f32_c64_dv32", op.Chunked}} {
		t.Run(mode.name, func(t *testing.T) {
			b := testBackend(t)
			p := p
			o, state := make([]float32, len(g["o"])), append([]float32(nil), g["state_in"]...)
			a := op.GDNScan{O: f32(o), State: f32(state), Q: f32(q), K: f32(k), V: f32(g["v"]), G: f32(g["g"]), Beta: f32(g["beta"]), P: p, Mode: mode.m}
			exec(t, b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
			checkClose(t, "o", o, g["o"], 1e-6)
			checkClose(t, "state", state, g["state_out"], 1e-6)
			checkVariant(t, b, mode.variant)
		})
	}
}

// TestMoECombineGolden: moe_comb_slots and moe_comb on the golden at D = 2560, top-10 (1e-6).
func TestMoECombineGolden(t *testing.T) {
	g := golden(t, "op_attn_moe.safetensors", "moe.ye", "moe.rk", "moe.w", "moe.out")
	rk := make([]int32, len(g["moe.rk"]))
	for i, v := range g["moe.rk"] {
		rk[i] = int32(v)
	}
	const T, K, D = 32, 10, 2560
	for _, kernel := range []string{"moe_comb_slots", "moe_comb"} {
		t.Run(kernel, func(t *testing.T) {
			b := testBackend(t)
			if err := b.Prefer("moe_comb", kernel); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, T*D)
			a := op.MoECombine{Out: f32(got), YE: f32(g["moe.ye"]), RK: i32(rk), W: f32(g["moe.w"]), T: T, K: K, D: D}
			exec(t, b, func(p op.Pass) error { return p.MoECombine(a) }, &a)
			checkClose(t, "moe.out", got, g["moe.out"], 1e-6)
			checkVariant(t, b, kernel+"_f32_k10")
		})
	}
}
