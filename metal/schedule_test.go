package metal

import (
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal/emu"
	"github.com/stratakernels/strata/op"
)

// TestSchedules runs the kernels that share threadgroup memory under the emulator's reversed and
// shuffled lane schedules and requires the forward schedule's bits: a missing barrier shows up
// as a difference.
func TestSchedules(t *testing.T) {
	fwd := testBackend(t)
	r := &rng{s: 41}
	ac := opcases.AttentionCases()[13] // T63_pos0, HPG 3, d 13
	q, k, v := ac.Inputs()
	ap := op.AttnParams{T: ac.T, Hq: ac.Hq, Hkv: ac.Hkv, D: ac.D, Pos0: ac.Pos0, Scale: 0.25}
	gc := opcases.GDNCases()[3] // r3_grouped_dk16_dv8, T 3
	gi := gc.Inputs()
	gp := gdnParams(gc)
	qn, kn := append([]float32(nil), gi.Q...), append([]float32(nil), gi.K...)
	if err := kernels.GDNNormQK(qn, kn, gc.T, gc.Hk, gc.Dk); err != nil {
		t.Fatal(err)
	}
	const T, S, K, D, rows = 5, 4, 10, 70, 40
	H, beta, ye := r.fill(T*S*D, -3, 3), r.fill(T*S, 0, 2), r.fill(rows*D, -1, 1)
	rk, w := moeSlots(r, T, K, rows)
	norm := r.fill(S*D, -0.5, 0.5)
	logits := r.fill(T*64, -4, 4)

	run := func(b *Backend) [][]float32 {
		o, lse := make([]float32, len(q)), make([]float32, ac.T*ac.Hq)
		if err := b.Attention(o, lse, q, k, v, ap, nil); err != nil {
			t.Fatal(err)
		}
		go_, st := make([]float32, gc.T*gc.Hv*gc.Dv), append([]float32(nil), gi.State...)
		if err := b.GDNScan(go_, st, qn, kn, gi.V, gi.G, gi.Beta, gp); err != nil {
			t.Fatal(err)
		}
		h, hn := append([]float32(nil), H...), make([]float32, len(H))
		if err := b.GRNormHMoEC(h, hn, beta, ye, rows, rk, w, nil, T, S, K, D, norm, 1e-6); err != nil {
			t.Fatal(err)
		}
		mc := make([]float32, T*D)
		if err := b.MoECombine(mc, ye, rows, rk, w, T, K, D); err != nil {
			t.Fatal(err)
		}
		rw, ri := make([]float32, T*8), make([]int32, T*8)
		if err := b.TopKRoute(rw, ri, logits, T, 64, 8, true); err != nil {
			t.Fatal(err)
		}
		rif := make([]float32, len(ri))
		for i, x := range ri {
			rif[i] = float32(x)
		}
		return [][]float32{o, lse, go_, st, h, hn, mc, rw, rif}
	}
	want := run(fwd)
	for _, s := range []emu.Schedule{emu.Reversed, emu.Shuffled} {
		dev, err := emu.Open(emu.Options{Threads: 2, Schedule: s, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(dev)
		got := run(b)
		for i := range want {
			checkBitwise(t, s.String(), got[i], want[i])
		}
		dev.Close()
	}
}

// TestSchedulesPrefill runs the prefill's preparation kernels that share threadgroup memory
// (qsa_prep, the indexer with its radix top-k, ple_gate, the GatedResidual read) under the
// reversed and shuffled lane schedules and requires the forward schedule's bits.
func TestSchedulesPrefill(t *testing.T) {
	fwd := testBackend(t)
	r := &rng{s: 47}
	const T, pos0, Hq, Hkv, D, nh, dim = 9, 40, 4, 1, 64, 2, 32
	qg, k, v := r.fill(T*Hq*2*D, -2, 2), r.fill(T*Hkv*D, -2, 2), r.fill(T*Hkv*D, -2, 2)
	qn, kn := r.fill(D, -0.5, 0.5), r.fill(D, -0.5, 0.5)
	ip := op.IndexerParams{T: T, Pos0: pos0, NHeads: nh, Dim: dim, Ratio: 4, Budget: 16, Rot: 16, Theta: 1e4, Eps: 1e-6}
	iqk, keys0 := r.fill(T*(nh+1)*dim, -2, 2), r.fill((pos0+T)*dim, -2, 2)
	iqn, ikn := r.fill(dim, -0.5, 0.5), r.fill(dim, -0.5, 0.5)
	pc := opcases.PLECase{T: 6, S: 4, D: 40, Heads: 4, HeadDim: 8, Rows: 50, ConvK: 4, Dilation: 3, DType: "BF16"}
	pw := &kernels.PLEWeights{S: pc.S, D: pc.D, EmbedDim: pc.Heads * pc.HeadDim, HeadDim: pc.HeadDim, Dilation: pc.Dilation,
		NormKey: r.fill(pc.S*pc.D, -0.5, 0.5), NormQuery: r.fill(pc.S*pc.D, -0.5, 0.5), NormConv: r.fill(pc.S*pc.D, -0.5, 0.5),
		ConvW: r.fill(pc.S*pc.D*pc.ConvK, -0.5, 0.5)}
	pw.Table = opMatrix(t, 1, pc.Rows, pc.HeadDim, "BF16", 1)
	pw.Key = opMatrix(t, 2, pc.S*pc.D, pw.EmbedDim, "BF16", 0.2)
	pw.Value = opMatrix(t, 3, pc.D, pw.EmbedDim, "BF16", 0.2)
	ids := make([]int32, pc.T*pc.Heads)
	for i := range ids {
		ids[i] = int32(r.next() % uint64(pc.Rows))
	}
	pH := r.fill(pc.T*pc.S*pc.D, -2, 2)
	g := &kernels.GRWeights{S: 4, D: 40, R: 8, Norm: r.fill(160, -0.5, 0.5)}
	g.Down, g.Up, g.Inj = opMatrix(t, 4, 8, 160, "F32", 0.1), opMatrix(t, 5, 160, 8, "BF16", 0.2), opMatrix(t, 6, 4, 160, "F16", 0.1)
	gH := r.fill(5*160, -2, 2)

	run := func(b *Backend) [][]float32 {
		q, gate := make([]float32, T*Hq*D), make([]float32, T*Hq*D)
		kc, vc := make([]float32, (pos0+T)*Hkv*D), make([]float32, (pos0+T)*Hkv*D)
		if err := b.QSAPrep(q, gate, kc, vc, qg, k, v, qn, kn, T, Hq, Hkv, D, 16, pos0, 1e4, 1e-6); err != nil {
			t.Fatal(err)
		}
		var sel kernels.Selection
		iq, keys := make([]float32, T*nh*dim), append([]float32(nil), keys0...)
		if err := b.QSAIndex(&sel, iq, keys, iqk, iqn, ikn, ip); err != nil {
			t.Fatal(err)
		}
		tok := make([]float32, len(sel.Tokens))
		for i, x := range sel.Tokens {
			tok[i] = float32(x)
		}
		h, st := append([]float32(nil), pH...), make([]float32, pw.ConvStateLen())
		if err := b.PLEApply(h, pc.T, ids, pw, st, 1e-6); err != nil {
			t.Fatal(err)
		}
		x, beta := make([]float32, 5*40), make([]float32, 5*4)
		if err := b.GRRead(x, beta, gH, 5, g, 1e-6); err != nil {
			t.Fatal(err)
		}
		return [][]float32{q, gate, kc, iq, tok, h, st, x, beta}
	}
	want := run(fwd)
	for _, s := range []emu.Schedule{emu.Reversed, emu.Shuffled} {
		dev, err := emu.Open(emu.Options{Threads: 2, Schedule: s, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(dev)
		got := run(b)
		for i := range want {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("%s: output %d has %d values, want %d", s, i, len(got[i]), len(want[i]))
			}
			checkBitwise(t, s.String(), got[i], want[i])
		}
		dev.Close()
	}
}
