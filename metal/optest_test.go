package metal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// TestOpCases runs the op case table of op/optest, and each op's bad-argument table, on the
// Metal backend on the emulator against the float64 references. The host-data checks of
// the CPU backend (token ids, slot rows, expert indices, NaN logits: the value_* cases) do not
// apply inside a Metal Pass, whose inputs may be written by earlier ops of the same Pass; the op
// entry points check them on the host instead (strata.Device.Attention and friends), and NaN or
// infinite router logits are flagged by moe_route and refused at Commit
// (TestTopKRouteRefusesNonFiniteLogits). With
// -short only the cases optest marks short run.
func TestOpCases(t *testing.T) {
	b := testBackend(t)
	t0 := time.Now()
	optest.Run(t, b, optest.Options{Short: testing.Short(), TolScale: OpTolScale, NoValueChecks: true})
	t.Logf("op cases on the emulator in %v; %s", time.Since(t0).Round(time.Millisecond), b.Kernels())
}

// TestOpCasesVariants runs the op case table (short subset) with each non-default kernel of
// Alternatives chosen by Prefer (the Metal 4 tensor-op kernels among them: the emulator reports
// no Apple GPU family, so only Prefer reaches them here), and with each default kernel another
// one must reproduce, against the float64 references under the alternative's tolerances, and
// checks that the variant ran. Then every alternative documented as giving another kernel's
// bits (Bitwise: moe_comb, rms_norm for the grouped norm, the unfused GatedResidual write,
// gr_norm_h_stream_out, and on the emulator the tensor-op qsa_attn_tensor and gemm_tensor) must
// give them on every output of those cases. TestVariantsBitwise checks some of them again at
// real widths.
func TestOpCasesVariants(t *testing.T) {
	runs := map[string]map[string][]float32{}
	need := map[string]bool{}
	for _, v := range Alternatives() {
		if v.Bitwise != "" {
			need[v.Op+"="+v.Bitwise] = true
		}
	}
	for _, v := range Alternatives() {
		key := v.Op + "=" + v.Kernel
		if v.Default && !need[key] {
			continue
		}
		t.Run(key, func(t *testing.T) {
			b := testBackend(t)
			if err := b.Prefer(v.Op, v.Kernel); err != nil {
				t.Fatal(err)
			}
			outs, n := map[string][]float32{}, map[string]int{}
			optest.Run(t, b, optest.Options{Short: true, TolScale: OpTolScale, Tol: v.Tol, NoValueChecks: true, Filter: optest.OpsFilter(v.Cases),
				Observe: func(t *testing.T, o optest.Output) {
					k := o.Case + "/" + o.Name
					outs[fmt.Sprintf("%s#%d", k, n[k])] = o.Got
					n[k]++
				}})
			checkVariant(t, b, v.Ran)
			runs[key] = outs
		})
	}
	for _, v := range Alternatives() {
		if v.Bitwise == "" {
			continue
		}
		t.Run(v.Op+"="+v.Kernel+"=="+v.Bitwise, func(t *testing.T) {
			got, want := runs[v.Op+"="+v.Kernel], runs[v.Op+"="+v.Bitwise]
			if len(want) == 0 || len(got) != len(want) {
				t.Fatalf("%d outputs of %s, %d of %s", len(got), v.Kernel, len(want), v.Bitwise)
			}
			for k, w := range want {
				g, ok := got[k]
				if !ok {
					t.Fatalf("%s: no %s output", k, v.Kernel)
				}
				checkBitwise(t, k, g, w)
			}
			t.Logf("%d outputs bitwise equal", len(want))
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

// TestTimeCases runs the first table case of every op optest.Cases lists, and the GEMM peak at 4
// tokens, through optest.Time on the emulator (the timing mode --bench uses on every backend):
// each must run and report ordered, positive times.
func TestTimeCases(t *testing.T) {
	b := testBackend(t)
	cs := []optest.Case{optest.BenchPeak(optest.BenchOptions{LongT: 4})}
	seen := map[string]bool{}
	for _, c := range optest.Cases() {
		if op, _, _ := strings.Cut(c.Name, "/"); !seen[op] {
			seen[op] = true
			cs = append(cs, c)
		}
	}
	for _, c := range cs {
		r, err := optest.Time(b, c, 2)
		if err != nil {
			t.Fatal(err)
		}
		if r.Min <= 0 || r.Min > r.Median || r.Device <= 0 {
			t.Errorf("%s: %+v", c.Name, r)
		}
		t.Logf("%-50s %9.3f ms", c.Name, float64(r.Median.Microseconds())/1000)
	}
}
