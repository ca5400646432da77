package metal

import (
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal/emu"
)

// TestSchedules runs the kernels that share threadgroup memory under the emulator's reversed and
// shuffled lane schedules and requires the forward schedule's bits: a missing barrier shows up
// as a difference.
func TestSchedules(t *testing.T) {
	fwd := testBackend(t)
	r := &rng{s: 41}
	ac := opcases.AttentionCases()[13] // T63_pos0, HPG 3, d 13
	q, k, v := ac.Inputs()
	ap := kernels.AttnParams{T: ac.T, Hq: ac.Hq, Hkv: ac.Hkv, D: ac.D, Pos0: ac.Pos0, Scale: 0.25}
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
