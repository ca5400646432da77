package metal

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// TestQSASelectOpCases: the indexer's selection on the device against kernels.QSASelect on the
// shared QSA case list: every row must list the same tokens (block keys and scores are float32
// on the device, float64 block keys on the CPU; no case has scores close enough at the keep
// boundary to swap).
func TestQSASelectOpCases(t *testing.T) {
	b := testBackend(t)
	for _, c := range opcases.QSACases() {
		t.Run(c.Name, func(t *testing.T) {
			iq, raw, kn, _, _, _ := c.Inputs()
			p := op.IndexerParams{T: c.T, Pos0: c.Pos0, NHeads: c.NHeads, Dim: c.Dim, Ratio: c.Ratio,
				Budget: c.Budget, Rot: c.Rot, Theta: c.Theta, Eps: c.Eps}
			var want, got kernels.Selection
			if err := kernels.QSASelect(&want, iq, raw, kn, p); err != nil {
				t.Fatal(err)
			}
			if err := b.QSASelect(&got, iq, raw, kn, p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Dense, want.Dense) || !slices.Equal(got.Offsets, want.Offsets) {
				t.Fatalf("row layout differs")
			}
			differ := 0
			for r := 0; r < c.T; r++ {
				a, e := want.Offsets[r], want.Offsets[r+1]
				if !slices.Equal(got.Tokens[a:e], want.Tokens[a:e]) {
					differ++
				}
			}
			if differ > 0 {
				t.Errorf("%d of %d rows select other tokens than the CPU op", differ, c.T)
			}
			sparse := 0
			for _, d := range want.Dense {
				if !d {
					sparse++
				}
			}
			t.Logf("%d sparse rows, %d tokens listed, all equal", sparse, len(want.Tokens))
		})
	}
	t.Log(b.Variants())
}

// TestQSAIndexPrep: QSAIndex's query preparation against kernels.RMSNorm1pRoPE (2e-6 relative)
// and the raw key append (bitwise), and its selection against QSASelect on the prepared queries.
func TestQSAIndexPrep(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 41}
	for _, c := range []struct{ T, Pos0 int }{{5, 0}, {40, 30}} {
		t.Run(fmt.Sprintf("T%d_pos%d", c.T, c.Pos0), func(t *testing.T) {
			const nh, dim = 4, 128
			p := op.IndexerParams{T: c.T, Pos0: c.Pos0, NHeads: nh, Dim: dim, Ratio: 4, Budget: 32, Rot: 64, Theta: 1e7, Eps: 1e-6}
			iqk := r.fill(c.T*(nh+1)*dim, -2, 2)
			qn, kn := r.fill(dim, -0.5, 0.5), r.fill(dim, -0.5, 0.5)
			keys := r.fill((c.Pos0+c.T+3)*dim, -2, 2)
			wantKeys := slices.Clone(keys)
			wantQ := make([]float32, c.T*nh*dim)
			for tt := 0; tt < c.T; tt++ {
				copy(wantQ[tt*nh*dim:(tt+1)*nh*dim], iqk[tt*(nh+1)*dim:])
				copy(wantKeys[(c.Pos0+tt)*dim:(c.Pos0+tt+1)*dim], iqk[(tt*(nh+1)+nh)*dim:])
			}
			if err := kernels.RMSNorm1pRoPE(wantQ, c.T, nh, dim, qn, 1e-6, 64, c.Pos0, 1e7); err != nil {
				t.Fatal(err)
			}
			gotQ := make([]float32, len(wantQ))
			var sel, ref kernels.Selection
			if err := b.QSAIndex(&sel, gotQ, keys, iqk, qn, kn, p); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "iq", gotQ, wantQ, 2e-6)
			checkBitwise(t, "keys", keys, wantKeys)
			if err := b.QSASelect(&ref, gotQ, keys, kn, p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sel.Tokens, ref.Tokens) || !slices.Equal(sel.Offsets, ref.Offsets) {
				t.Fatal("QSAIndex selection differs from QSASelect on its own queries")
			}
		})
	}
}

// TestQSAPrep: q/k norm + RoPE, gate split and the cache append against the CPU ops
// (kernels.RMSNorm1pRoPE; 2e-6 relative), gate and v bitwise, earlier cache rows untouched.
func TestQSAPrep(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 43}
	for _, c := range []struct{ T, Pos0, Hq, Hkv, D, Rot int }{{3, 0, 4, 2, 32, 8}, {17, 200, 12, 1, 256, 64}} {
		t.Run(fmt.Sprintf("T%d_pos%d_hq%d_hkv%d_d%d", c.T, c.Pos0, c.Hq, c.Hkv, c.D), func(t *testing.T) {
			qg := r.fill(c.T*c.Hq*2*c.D, -3, 3)
			k, v := r.fill(c.T*c.Hkv*c.D, -3, 3), r.fill(c.T*c.Hkv*c.D, -3, 3)
			qn, kn := r.fill(c.D, -0.5, 0.5), r.fill(c.D, -0.5, 0.5)
			rows := c.Pos0 + c.T + 2
			kc, vc := r.fill(rows*c.Hkv*c.D, -1, 1), r.fill(rows*c.Hkv*c.D, -1, 1)
			wantKC, wantVC := slices.Clone(kc), slices.Clone(vc)
			wantQ, wantG := make([]float32, c.T*c.Hq*c.D), make([]float32, c.T*c.Hq*c.D)
			for i := 0; i < c.T*c.Hq; i++ {
				copy(wantQ[i*c.D:(i+1)*c.D], qg[2*i*c.D:])
				copy(wantG[i*c.D:(i+1)*c.D], qg[(2*i+1)*c.D:])
			}
			kv := c.Hkv * c.D
			copy(wantKC[c.Pos0*kv:], k)
			copy(wantVC[c.Pos0*kv:], v)
			if err := kernels.RMSNorm1pRoPE(wantQ, c.T, c.Hq, c.D, qn, 1e-6, c.Rot, c.Pos0, 1e7); err != nil {
				t.Fatal(err)
			}
			if err := kernels.RMSNorm1pRoPE(wantKC[c.Pos0*kv:(c.Pos0+c.T)*kv], c.T, c.Hkv, c.D, kn, 1e-6, c.Rot, c.Pos0, 1e7); err != nil {
				t.Fatal(err)
			}
			q, g := make([]float32, len(wantQ)), make([]float32, len(wantG))
			if err := b.QSAPrep(q, g, kc, vc, qg, k, v, qn, kn, c.T, c.Hq, c.Hkv, c.D, c.Rot, c.Pos0, 1e7, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "q", q, wantQ, 2e-6)
			checkBitwise(t, "gate", g, wantG)
			checkClose(t, "k cache", kc, wantKC, 2e-6)
			checkBitwise(t, "k cache before pos0", kc[:c.Pos0*kv], wantKC[:c.Pos0*kv])
			checkBitwise(t, "v cache", vc, wantVC)
		})
	}
}
