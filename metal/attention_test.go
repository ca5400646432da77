package metal

import (
	"fmt"
	"math"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// TestAttentionOpCases runs qsa_flash on the shared attention case list against
// kernels.Attention: o within 5e-6 relative to max |o| (float32 exp and sums over up to 500 keys), lse within 2e-6.
func TestAttentionOpCases(t *testing.T) {
	b := testBackend(t)
	for _, c := range opcases.AttentionCases() {
		t.Run(c.Name, func(t *testing.T) {
			q, k, v := c.Inputs()
			p := op.AttnParams{T: c.T, Hq: c.Hq, Hkv: c.Hkv, D: c.D, Pos0: c.Pos0, Scale: float32(1 / math.Sqrt(float64(c.D)))}
			wo, wl := make([]float32, len(q)), make([]float32, c.T*c.Hq)
			if err := kernels.Attention(wo, wl, q, k, v, p, nil); err != nil {
				t.Fatal(err)
			}
			go_, gl := make([]float32, len(q)), make([]float32, c.T*c.Hq)
			if err := b.Attention(go_, gl, q, k, v, p, nil); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "o", go_, wo, 5e-6)
			checkClose(t, "lse", gl, wl, 2e-6)
		})
	}
	t.Log(b.Variants())
}

// TestAttentionGolden: the transformers golden at the full model's shapes (96 tokens at pos0 =
// 200, 24 q / 2 kv heads x 256), tolerance 1e-6 relative.
func TestAttentionGolden(t *testing.T) {
	g := golden(t, "op_attn_moe.safetensors", "attn.q", "attn.k", "attn.v", "attn.o", "attn.lse")
	p := op.AttnParams{T: 96, Hq: 24, Hkv: 2, D: 256, Pos0: 200, Scale: 1.0 / 16}
	b := testBackend(t)
	o, lse := make([]float32, len(g["attn.o"])), make([]float32, len(g["attn.lse"]))
	if err := b.Attention(o, lse, g["attn.q"], g["attn.k"], g["attn.v"], p, nil); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "attn.o", o, g["attn.o"], 1e-6)
	checkClose(t, "attn.lse", lse, g["attn.lse"], 1e-6)
}

// randomSelection makes a selection: every third row dense, the others a random ascending
// subset of 0..pos0+t (always including the row's own position).
func randomSelection(r *rng, T, pos0 int) *op.Selection {
	s := &op.Selection{T: T, Dense: make([]bool, T), Offsets: make([]int32, T+1)}
	for t := 0; t < T; t++ {
		if t%3 == 0 {
			s.Dense[t] = true
		} else {
			for pos := 0; pos <= pos0+t; pos++ {
				if pos == pos0+t || r.next()%3 == 0 {
					s.Tokens = append(s.Tokens, int32(pos))
				}
			}
		}
		s.Offsets[t+1] = int32(len(s.Tokens))
	}
	return s
}

// TestAttentionSparse: qsa_flash with a QSA selection (function constant qsa_sparse) against the
// CPU op, o 5e-6 and lse 2e-6 relative.
func TestAttentionSparse(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 29}
	for _, c := range []struct{ T, Pos0, Hq, Hkv, D int }{{5, 0, 6, 2, 13}, {40, 60, 24, 2, 64}, {9, 200, 12, 1, 256}} {
		t.Run(fmt.Sprintf("T%d_pos%d_hq%d_hkv%d_d%d", c.T, c.Pos0, c.Hq, c.Hkv, c.D), func(t *testing.T) {
			n := c.Pos0 + c.T
			q, k, v := r.fill(c.T*c.Hq*c.D, -2, 2), r.fill(n*c.Hkv*c.D, -2, 2), r.fill(n*c.Hkv*c.D, -1, 1)
			sel := randomSelection(r, c.T, c.Pos0)
			p := op.AttnParams{T: c.T, Hq: c.Hq, Hkv: c.Hkv, D: c.D, Pos0: c.Pos0, Scale: float32(1 / math.Sqrt(float64(c.D)))}
			wo, wl := make([]float32, len(q)), make([]float32, c.T*c.Hq)
			if err := kernels.Attention(wo, wl, q, k, v, p, sel); err != nil {
				t.Fatal(err)
			}
			go_, gl := make([]float32, len(q)), make([]float32, c.T*c.Hq)
			if err := b.Attention(go_, gl, q, k, v, p, sel); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "o", go_, wo, 5e-6)
			checkClose(t, "lse", gl, wl, 2e-6)
		})
	}
}
