package metal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// metalTol scales optest's default tolerances for the Metal kernels (float32 sums in other
// orders, float32 exp and the GPU's norms where the CPU and the references use float64).
const metalTol = 4

// TestOpCases runs the op case table of op/optest, and each op's bad-argument table, on the
// Metal backend on the emulator against the float64 references. The host-data checks of
// the CPU backend (token ids, slot rows, expert indices, NaN logits: the value_* cases) do not
// apply inside a Metal Pass, whose inputs may be written by earlier ops of the same Pass; the op
// entry points check them on the host instead (strata.Device.Attention and friends). With
// -short only the cases optest marks short run.
func TestOpCases(t *testing.T) {
	b := testBackend(t)
	t0 := time.Now()
	optest.Run(t, b, optest.Options{Short: testing.Short(), TolScale: metalTol, NoValueChecks: true})
	t.Logf("op cases on the emulator in %v; %s", time.Since(t0).Round(time.Millisecond), b.Kernels())
}

// TestOpCasesVariants runs the op case table (short subset) with each kernel variant chosen
// by Prefer, against the float64 references, and checks that the variant ran: the attention
// variants qsa_attn_mm (qsa_flash's tolerances) and qsa_flash_ph (P in half: o within 1e-3
// relative, measured at most 2.9e-4), gdn_scan_chunk for the scan's default mode, moe_comb
// without the slot compaction, rms_norm for the grouped norm and the unfused
// gr_apply_moec + gr_norm_h4. TestVariantsBitwise checks the variants that must give the
// default kernel's bits.
func TestOpCasesVariants(t *testing.T) {
	for _, v := range []struct {
		op, kernel, ran string
		ops             []string
		tol             map[string]float64
	}{
		{"attention", attnMMKernel, "qsa_attn_mm_f32", []string{"Attention"}, nil},
		{"attention", attnFlashPHKernel, "qsa_flash_ph_f32", []string{"Attention"}, map[string]float64{"Attention.o": 1e-3}},
		{"gdn_scan", gdnScanChunkKernel, "gdn_scan_chunk_f32", []string{"GDNScan"}, nil},
		{"moe_comb", "moe_comb", "moe_comb_f32", []string{"MoECombine"}, nil},
		{"gr_norm_h4", "rms_norm", "rms_norm_f32_s", []string{"GRRead", "GRApplyMoEC", "GRWrite"}, nil},
		{"gr_norm_h_moec", "gr_apply_moec+gr_norm_h4", "gr_norm_h4_f32", []string{"GRApplyMoEC", "GRWrite"}, nil},
	} {
		t.Run(v.op+"="+v.kernel, func(t *testing.T) {
			b := testBackend(t)
			if err := b.Prefer(v.op, v.kernel); err != nil {
				t.Fatal(err)
			}
			run := func(name string) bool {
				for _, o := range v.ops {
					if strings.HasPrefix(name, o+"/") && !strings.Contains(name, "/bad/") {
						return true
					}
				}
				return false
			}
			optest.Run(t, b, optest.Options{Short: true, TolScale: metalTol, Tol: v.tol, NoValueChecks: true, Filter: run})
			checkVariant(t, b, v.ran)
		})
	}
}

// TestVariantsBitwise: the variants documented as bitwise equal to the default kernel give its
// bits on inputs of the real widths: moe_comb and moe_comb_slots; gr_norm_h4 and rms_norm for the
// grouped norm (through GRRead); gr_norm_h_moec and gr_apply_moec + gr_norm_h4; gr_stream_mean
// and gr_norm_h_stream_out (the read's output renormalising the raw streams).
func TestVariantsBitwise(t *testing.T) {
	r := &rng{s: 51}
	const T, S, K, D, rows, R = 5, 4, 10, 300, 40, 16
	H, beta, ye := r.fill(T*S*D, -3, 3), r.fill(T*S, 0, 2), r.fill(rows*D, -1, 1)
	rk := make([]int32, T*K)
	for i := range rk {
		rk[i] = int32(r.next()%uint64(rows+1)) - 1
	}
	w, norm, sh := r.fill(T*K, 0, 1), r.fill(S*D, -0.5, 0.5), r.fill(T*D, -1, 1)
	g := &op.GRWeights{S: S, D: D, R: R, Norm: norm}
	var err error
	if g.Down, _, err = optest.RandMatrix(1, R, S*D, op.BF16, 0.05); err != nil {
		t.Fatal(err)
	}
	if g.Up, _, err = optest.RandMatrix(2, S*D, R, op.BF16, 0.2); err != nil {
		t.Fatal(err)
	}
	if g.Inj, _, err = optest.RandMatrix(3, S, S*D, op.F32, 0.05); err != nil {
		t.Fatal(err)
	}
	run := func(b *Backend) [][]float32 {
		out := make([]float32, T*D)
		mc := op.MoECombine{Out: f32(out), YE: f32(ye), RK: i32(rk), W: f32(w), T: T, K: K, D: D}
		h, hn := append([]float32(nil), H...), make([]float32, len(H))
		ga := op.GRApplyMoEC{H: f32(h), Hn: f32(hn), Beta: f32(beta), YE: f32(ye), RK: i32(rk), W: f32(w), Shared: f32(sh),
			T: T, S: S, K: K, D: D, Norm: norm, Eps: 1e-6}
		x, bt := make([]float32, T*D), make([]float32, T*S)
		gr := op.GRRead{X: f32(x), Beta: f32(bt), H: f32(H), T: T, G: g, Eps: 1e-6}
		exec(t, b, func(p op.Pass) error {
			if err := p.MoECombine(mc); err != nil {
				return err
			}
			if err := p.GRApplyMoEC(ga); err != nil {
				return err
			}
			return p.GRRead(gr)
		}, &mc, &ga, &gr)
		return [][]float32{out, h, hn, x, bt}
	}
	want := run(testBackend(t))
	for _, v := range []struct{ op, kernel string }{
		{"moe_comb", "moe_comb"}, {"gr_norm_h4", "rms_norm"}, {"gr_norm_h_moec", "gr_apply_moec+gr_norm_h4"},
		{"gr_stream_mean", "gr_norm_h_stream_out"},
	} {
		b := testBackend(t)
		if err := b.Prefer(v.op, v.kernel); err != nil {
			t.Fatal(err)
		}
		for i, got := range run(b) {
			checkBitwise(t, fmt.Sprintf("%s=%s output %d", v.op, v.kernel, i), got, want[i])
		}
	}
}
