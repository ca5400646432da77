package metal

import (
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// The kernels that share threadgroup memory run under the emulator's reversed and shuffled lane
// schedules (and, for the variants, in an AddressSanitizer build with every buffer at its exact
// length) and must give the forward schedule's bits: a missing barrier or an out-of-bounds
// access shows up as a difference or a failure.

// schedules are the emulator configurations every schedule test compares with the forward one.
var schedules = []emu.Options{
	{Threads: 2, Schedule: emu.Reversed},
	{Threads: 2, Schedule: emu.Shuffled, Seed: 5},
}

// compareSchedules runs run on the shared forward emulator and on each of opts, requiring the
// same bits, and returns the emulators' stats per configuration (for threadgroup memory checks).
func compareSchedules(t *testing.T, opts []emu.Options, prefer func(*Backend), run func(*Backend) [][]float32) []*emu.Device {
	t.Helper()
	fwd := testBackend(t)
	prefer(fwd)
	want := run(fwd)
	var devs []*emu.Device
	for _, o := range opts {
		b, dev := backendOn(t, o)
		prefer(b)
		got := run(b)
		name := o.Schedule.String()
		if o.ASan {
			name = "asan"
		}
		for i := range want {
			checkBitwise(t, name, got[i], want[i])
		}
		devs = append(devs, dev)
	}
	return devs
}

func noPrefer(*Backend) {}

// TestSchedules: qsa_flash, gdn_scan, gr_norm_h_moec, moe_comb_slots and moe_route.
func TestSchedules(t *testing.T) {
	r := &rng{s: 41}
	ac := optest.AttentionCases()[13] // T63_pos0, HPG 3, d 13
	q, k, v := ac.Inputs()
	ap := ac.Params()
	ap.Scale = 0.25
	gc := optest.GDNCases()[3] // r3_grouped_dk16_dv8, T 3
	gi := gc.Inputs()
	qn, kn := append([]float32(nil), gi.Q...), append([]float32(nil), gi.K...)
	normQK(qn, kn, gc.Dk)
	const T, S, K, D, rows = 5, 4, 10, 70, 60
	H, beta, ye := r.fill(T*S*D, -3, 3), r.fill(T*S, 0, 2), r.fill(rows*D, -1, 1)
	rk := optest.Slots(9, T, K, rows, 4)
	w, norm := r.fill(T*K, 0, 1), r.fill(S*D, -0.5, 0.5)
	logits := r.fill(T*64, -4, 4)
	compareSchedules(t, schedules, noPrefer, func(b *Backend) [][]float32 {
		o, lse := make([]float32, len(q)), make([]float32, ac.T*ac.Hq)
		attention(t, b, o, lse, q, k, v, ap, nil)
		gout, st := make([]float32, gc.T*gc.Hv*gc.Dv), append([]float32(nil), gi.State...)
		gdnScan(t, b, gout, st, qn, kn, gi.V, gi.G, gi.Beta, gc.Params())
		h, hn := append([]float32(nil), H...), make([]float32, len(H))
		mc, rw, ri := make([]float32, T*D), make([]float32, T*8), make([]int32, T*8)
		ga := op.GRApplyMoEC{H: f32(h), Hn: f32(hn), Beta: f32(beta), YE: f32(ye), RK: i32(rk), W: f32(w), T: T, S: S, K: K, D: D, Norm: norm, Eps: 1e-6}
		cm := op.MoECombine{Out: f32(mc), YE: f32(ye), RK: i32(rk), W: f32(w), T: T, K: K, D: D}
		rt := op.TopKRoute{W: f32(rw), Idx: i32(ri), Logits: f32(logits), T: T, E: 64, K: 8, Norm: true}
		exec(t, b, func(p op.Pass) error {
			return firstError(p.GRApplyMoEC(ga), p.MoECombine(cm), p.TopKRoute(rt))
		}, &ga, &cm, &rt)
		return [][]float32{o, lse, gout, st, h, hn, mc, rw, floats(ri)}
	})
}

// TestSchedulesPrefill: qsa_prep, the indexer with its radix top-k, ple_gate and the
// GatedResidual read.
func TestSchedulesPrefill(t *testing.T) {
	r := &rng{s: 47}
	const T, pos0, Hq, Hkv, D, nh, dim = 9, 40, 4, 1, 64, 2, 32
	qg, k, v := r.fill(T*Hq*2*D, -2, 2), r.fill(T*Hkv*D, -2, 2), r.fill(T*Hkv*D, -2, 2)
	qn, kn := r.fill(D, -0.5, 0.5), r.fill(D, -0.5, 0.5)
	ip := op.IndexerParams{T: T, Pos0: pos0, NHeads: nh, Dim: dim, Ratio: 4, Budget: 16, Rot: 16, Theta: 1e4, Eps: 1e-6}
	iqk, keys0 := r.fill(T*(nh+1)*dim, -2, 2), r.fill((pos0+T)*dim, -2, 2)
	iqn, ikn := r.fill(dim, -0.5, 0.5), r.fill(dim, -0.5, 0.5)
	const pT, pS, pD, heads, hd, prows = 6, 4, 40, 4, 8, 50
	pw := &op.PLEWeights{S: pS, D: pD, EmbedDim: heads * hd, HeadDim: hd, Dilation: 3,
		NormKey: r.fill(pS*pD, -0.5, 0.5), NormQuery: r.fill(pS*pD, -0.5, 0.5), NormConv: r.fill(pS*pD, -0.5, 0.5),
		ConvW: r.fill(pS*pD*4, -0.5, 0.5)}
	pw.Table = randMatrix(t, 1, prows, hd, op.BF16, 1)
	pw.Key = randMatrix(t, 2, pS*pD, pw.EmbedDim, op.BF16, 0.2)
	pw.Value = randMatrix(t, 3, pD, pw.EmbedDim, op.BF16, 0.2)
	ids := make([]int32, pT*heads)
	for i := range ids {
		ids[i] = int32(r.next() % prows)
	}
	pH := r.fill(pT*pS*pD, -2, 2)
	g := &op.GRWeights{S: 4, D: 40, R: 8, Norm: r.fill(160, -0.5, 0.5)}
	g.Down, g.Up, g.Inj = randMatrix(t, 4, 8, 160, op.F32, 0.1), randMatrix(t, 5, 160, 8, op.BF16, 0.2), randMatrix(t, 6, 4, 160, op.F16, 0.1)
	gH := r.fill(5*160, -2, 2)
	plan := op.QSAPlan(ip)
	compareSchedules(t, schedules, noPrefer, func(b *Backend) [][]float32 {
		q, gate := make([]float32, T*Hq*D), make([]float32, T*Hq*D)
		kc, vc := make([]float32, (pos0+T)*Hkv*D), make([]float32, (pos0+T)*Hkv*D)
		qp := op.QSAPrep{Q: f32(q), Gate: f32(gate), KC: f32(kc), VC: f32(vc), QG: f32(qg), K: f32(k), V: f32(v), QNorm: qn, KNorm: kn,
			T: T, Hq: Hq, Hkv: Hkv, D: D, Rot: 16, Pos0: pos0, Theta: 1e4, Eps: 1e-6}
		iq, keys, tok := make([]float32, T*nh*dim), append([]float32(nil), keys0...), make([]int32, plan.Offsets[T])
		qi := op.QSAIndex{Plan: plan, Tok: i32(tok), IQ: f32(iq), Keys: f32(keys), IQK: f32(iqk), QNorm: iqn, KNorm: ikn, P: ip}
		h, st := append([]float32(nil), pH...), make([]float32, pw.ConvStateLen())
		pa := op.PLEApply{H: f32(h), T: pT, IDs: i32(ids), W: pw, ConvState: f32(st), Eps: 1e-6}
		x, beta := make([]float32, 5*40), make([]float32, 5*4)
		gr := op.GRRead{X: f32(x), Beta: f32(beta), H: f32(gH), T: 5, G: g, Eps: 1e-6}
		exec(t, b, func(p op.Pass) error {
			return firstError(p.QSAPrep(qp), p.QSAIndex(qi), p.PLEApply(pa), p.GRRead(gr))
		}, &qp, &qi, &pa, &gr)
		return [][]float32{q, gate, kc, iq, floats(tok), h, st, x, beta}
	})
}

// TestAttentionVariantsSchedules: qsa_attn_mm and qsa_flash_ph, dense and sparse, under both
// schedules and ASan; their static threadgroup memory is qsa_attn_mm 11,008 B (+ 16 KiB of
// queries at D 256) and qsa_flash_ph 9,344 B (+ rows*D*4 B of queries); qsa_flash_ph's lse has
// qsa_flash's bits.
func TestAttentionVariantsSchedules(t *testing.T) {
	ac := optest.AttentionCases()[13]
	q, k, v := ac.Inputs()
	ap := ac.Params()
	r := &rng{s: 43}
	const sT, sPos0, sHq, sHkv, sD = 6, 70, 4, 1, 72
	sq, sk, sv := r.fill(sT*sHq*sD, -2, 2), r.fill((sPos0+sT)*sHkv*sD, -2, 2), r.fill((sPos0+sT)*sHkv*sD, -1, 1)
	sel := randomSelection(r, sT, sPos0)
	sp := op.AttnParams{T: sT, Hq: sHq, Hkv: sHkv, D: sD, Pos0: sPos0, Scale: 1.0 / 8}
	run := func(b *Backend) [][]float32 {
		o, lse := make([]float32, len(q)), make([]float32, ac.T*ac.Hq)
		attention(t, b, o, lse, q, k, v, ap, nil)
		so, slse := make([]float32, len(sq)), make([]float32, sT*sHq)
		attention(t, b, so, slse, sq, sk, sv, sp, sel)
		return [][]float32{o, lse, so, slse}
	}
	flash := run(testBackend(t))
	static := map[string]int{attnMMKernel: 11008, attnFlashPHKernel: 9344}
	for _, kernel := range []string{attnMMKernel, attnFlashPHKernel} {
		t.Run(kernel, func(t *testing.T) {
			prefer := func(b *Backend) {
				if err := b.Prefer("attention", kernel); err != nil {
					t.Fatal(err)
				}
			}
			devs := compareSchedules(t, append(schedules, emu.Options{Threads: 2, ASan: true}), prefer, func(b *Backend) [][]float32 {
				out := run(b)
				checkVariant(t, b, kernel+"_f32_hpg3_tq")
				return out
			})
			for _, dev := range devs {
				tgMem := -1
				for _, st := range dev.Stats() {
					if st.Kernel == kernel {
						tgMem = st.StaticThreadgroupMemory
					}
				}
				if tgMem != static[kernel] {
					t.Errorf("%s: %d B of static threadgroup memory, want %d", kernel, tgMem, static[kernel])
				}
			}
			if kernel == attnFlashPHKernel {
				b := testBackend(t)
				prefer(b)
				got := run(b)
				checkBitwise(t, "qsa_flash_ph lse vs qsa_flash", got[1], flash[1])
				checkBitwise(t, "qsa_flash_ph sparse lse vs qsa_flash", got[3], flash[3])
			}
		})
	}
}

// TestGDNScanChunkSchedules: gdn_scan_chunk on two chunks, a partial slab and both head maps
// under both schedules and ASan; its static threadgroup memory is 29,952 B.
func TestGDNScanChunkSchedules(t *testing.T) {
	cs := []optest.GDNCase{
		{T: 65, Hk: 2, Hv: 6, Dk: 48, Dv: 40, ConvK: 4, Seed: 81},
		{T: 70, Hk: 2, Hv: 6, Dk: 20, Dv: 8, ConvK: 4, Tiled: true, Seed: 82},
	}
	devs := compareSchedules(t, append(schedules, emu.Options{Threads: 2, ASan: true}), noPrefer, func(b *Backend) [][]float32 {
		var out [][]float32
		for _, c := range cs {
			in := c.Inputs()
			normQK(in.Q, in.K, c.Dk)
			o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
			a := op.GDNScan{O: f32(o), State: f32(st), Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(in.G), Beta: f32(in.Beta),
				P: c.Params(), Mode: op.Chunked}
			exec(t, b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
			out = append(out, o, st)
		}
		return out
	})
	for _, dev := range devs {
		for _, st := range dev.Stats() {
			if st.Kernel == gdnScanChunkKernel && st.StaticThreadgroupMemory != 29952 {
				t.Errorf("gdn_scan_chunk used %d B of threadgroup memory, want 29952", st.StaticThreadgroupMemory)
			}
		}
	}
}

func firstError(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func floats(x []int32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func randMatrix(t *testing.T, seed uint64, n, k int, dt op.DType, scale float32) *op.Matrix {
	t.Helper()
	m, _, err := optest.RandMatrix(seed, n, k, dt, scale)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
