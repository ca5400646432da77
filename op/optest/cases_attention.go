package optest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stratakernels/strata/op"
)

// AttentionCase is one attention prefill case: T query tokens at positions Pos0..Pos0+T-1,
// Hq query heads over Hkv KV heads (HPG = Hq/Hkv) of dim D, scale 1/sqrt(D), causal.
type AttentionCase struct {
	Name                string
	T, Pos0, Hq, Hkv, D int
	Seed                uint64
	Short               bool
}

// HPG is the number of query heads per KV head.
func (c AttentionCase) HPG() int { return c.Hq / c.Hkv }

// Params is the case's op.AttnParams (Scale 1/sqrt(D)).
func (c AttentionCase) Params() op.AttnParams {
	return op.AttnParams{T: c.T, Hq: c.Hq, Hkv: c.Hkv, D: c.D, Pos0: c.Pos0, Scale: float32(1 / math.Sqrt(float64(c.D)))}
}

// AttentionCases lists the attention cases every backend runs: the edge token counts
// T = 1, 3, 63, 64, 65, 300 around the 64-row tiles, with an empty (pos0 = 0) and a filled
// (pos0 = 200) cache, HPG 1, 3 and 12, at the real head dim 256 and at an odd small dim (13)
// that exercises every remainder path; then T = 17 and T = 2050 (more than the 2048-token
// budget of a QSA layer) at the small dim.
func AttentionCases() []AttentionCase {
	var cs []AttentionCase
	seed := uint64(1)
	add := func(t, pos0, hq, hkv, d int, short bool) {
		cs = append(cs, AttentionCase{
			Name: fmt.Sprintf("T%d_pos%d_hq%d_hkv%d_d%d", t, pos0, hq, hkv, d),
			T:    t, Pos0: pos0, Hq: hq, Hkv: hkv, D: d, Seed: seed, Short: short,
		})
		seed++
	}
	for _, t := range []int{1, 3, 63, 64, 65, 300} {
		for _, pos0 := range []int{0, 200} {
			for _, hpg := range []int{1, 3, 12} {
				add(t, pos0, 2*hpg, 2, 13, shortT(t) && hpg != 3)
			}
		}
	}
	// Real head dim; the full model's 24 q / 2 kv heads, plus HPG 1 and 3.
	for _, tp := range [][2]int{{1, 0}, {1, 200}, {3, 200}, {63, 0}, {64, 200}, {65, 200}, {300, 0}} {
		add(tp[0], tp[1], 24, 2, 256, tp[0] == 1 && tp[1] == 200)
	}
	add(65, 0, 1, 1, 256, false)
	add(65, 200, 3, 1, 256, false)
	add(64, 200, 12, 1, 256, false)
	for _, pos0 := range []int{0, 200} {
		for _, hpg := range []int{1, 3, 12} {
			add(17, pos0, 2*hpg, 2, 13, false)
		}
	}
	add(2050, 0, 3, 1, 13, false)
	return cs
}

// Inputs returns the case's q [T, Hq, D] and cache k, v [Pos0+T, Hkv, D], uniform in [-1, 1)
// from the case seed (keys and queries scaled so that softmax rows are neither flat nor one-hot).
func (c AttentionCase) Inputs() (q, k, v []float32) {
	r := splitmix{state: c.Seed * 0x9E3779B97F4A7C15}
	q = r.fill(c.T*c.Hq*c.D, 2)
	k = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 2)
	v = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 1)
	return q, k, v
}

// Selection returns a host selection for the case (a QSA-like list, not the indexer's): each
// row lists a random ascending subset of 0..Pos0+t (about a third, never empty), every fifth row
// dense; deterministic from the case seed.
func (c AttentionCase) Selection() *op.Selection {
	rng := rand.New(rand.NewPCG(c.Seed, 11))
	s := &op.Selection{T: c.T, Dense: make([]bool, c.T), Offsets: make([]int32, c.T+1)}
	for t := 0; t < c.T; t++ {
		s.Offsets[t] = int32(len(s.Tokens))
		if t%5 == 4 {
			s.Dense[t] = true
			continue
		}
		n0 := len(s.Tokens)
		for pos := 0; pos <= c.Pos0+t; pos++ {
			if rng.IntN(3) == 0 {
				s.Tokens = append(s.Tokens, int32(pos))
			}
		}
		if len(s.Tokens) == n0 {
			s.Tokens = append(s.Tokens, int32(rng.IntN(c.Pos0+t+1)))
		}
	}
	s.Offsets[c.T] = int32(len(s.Tokens))
	return s
}

// QSACase is one QSA indexer case (index queries [T, NHeads, Dim], raw index keys
// [Pos0+T, Dim], blocks of Ratio tokens, Budget tokens, rotary dim Rot, theta) with the
// attention shape (Hq, Hkv, D) that consumes its selection.
type QSACase struct {
	Name                                     string
	T, Pos0, NHeads, Dim, Ratio, Budget, Rot int
	Theta                                    float64
	Eps                                      float32
	Hq, Hkv, D                               int
	Seed                                     uint64
	Short                                    bool
}

// Params is the case's op.IndexerParams.
func (c QSACase) Params() op.IndexerParams {
	return op.IndexerParams{T: c.T, Pos0: c.Pos0, NHeads: c.NHeads, Dim: c.Dim, Ratio: c.Ratio,
		Budget: c.Budget, Rot: c.Rot, Theta: c.Theta, Eps: c.Eps}
}

// AttnParams is the op.AttnParams of the attention that consumes the selection (Scale 1/sqrt(D)).
func (c QSACase) AttnParams() op.AttnParams {
	return op.AttnParams{T: c.T, Hq: c.Hq, Hkv: c.Hkv, D: c.D, Pos0: c.Pos0, Scale: float32(1 / math.Sqrt(float64(c.D)))}
}

// QSACases lists the indexer cases: the real indexer shape (4 heads x 128, rotary 64, blocks
// of 4) with the tiny checkpoint's budget of 32 tokens (sparse past 35 visible tokens), a budget
// covering the whole context (every row dense), and odd small shapes whose budget is not a
// multiple of the block size; then T = 17 and T = 2050 (the real budget of 2048 with its dense
// edge at 2051 visible tokens crossed by the last rows, and a small budget).
func QSACases() []QSACase {
	var cs []QSACase
	seed := uint64(1001)
	add := func(t, pos0, nh, dim, ratio, budget, rot, hq, hkv, d int, short bool) {
		cs = append(cs, QSACase{
			Name: fmt.Sprintf("T%d_pos%d_h%d_dim%d_r%d_b%d", t, pos0, nh, dim, ratio, budget),
			T:    t, Pos0: pos0, NHeads: nh, Dim: dim, Ratio: ratio, Budget: budget, Rot: rot,
			Theta: 1e7, Eps: 1e-6, Hq: hq, Hkv: hkv, D: d, Seed: seed, Short: short,
		})
		seed++
	}
	for _, tp := range [][2]int{{1, 0}, {1, 200}, {3, 200}, {63, 0}, {64, 200}, {65, 0}, {300, 0}} {
		add(tp[0], tp[1], 4, 128, 4, 32, 64, 6, 2, 16, tp == [2]int{1, 200} || tp == [2]int{65, 0})
	}
	add(65, 200, 4, 128, 4, 64, 64, 24, 2, 32, false)
	add(300, 200, 4, 128, 4, 2048, 64, 6, 2, 16, false)
	add(63, 200, 3, 12, 3, 10, 8, 3, 1, 13, true)
	add(300, 0, 2, 12, 5, 25, 4, 4, 2, 7, false)
	add(17, 200, 4, 128, 4, 32, 64, 6, 2, 16, false)
	add(2050, 3, 2, 12, 4, 2048, 4, 2, 1, 8, false)
	add(2050, 0, 2, 12, 4, 256, 4, 2, 1, 8, false)
	return cs
}

// Inputs returns the case's index queries q [T, NHeads, Dim], raw keys [Pos0+T, Dim], the
// k_layernorm weight [Dim], and attention q [T, Hq, D], k, v [Pos0+T, Hkv, D].
func (c QSACase) Inputs() (iq, rawKeys, kNorm, q, k, v []float32) {
	r := splitmix{state: c.Seed * 0x9E3779B97F4A7C15}
	iq = r.fill(c.T*c.NHeads*c.Dim, 1)
	rawKeys = r.fill((c.Pos0+c.T)*c.Dim, 2)
	kNorm = r.fill(c.Dim, 0.5)
	q = r.fill(c.T*c.Hq*c.D, 2)
	k = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 2)
	v = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 1)
	return
}

// QNorm returns the case's index q_layernorm weight [Dim] (QSAIndex normalises the raw queries
// of Inputs with it).
func (c QSACase) QNorm() []float32 { return Floats(c.Seed+7, c.Dim, 0.3) }

// QSAPrepCase is one qsa_prep case: T tokens of Hq query heads (query | gate) and Hkv KV heads of
// dim D at positions Pos0.., rotary dim Rot, base Theta.
type QSAPrepCase struct {
	T, Hq, Hkv, D, Rot, Pos0 int
	Theta                    float64
	Seed                     uint64
	Short                    bool
}

// Name is the case's subtest name.
func (c QSAPrepCase) Name() string {
	return fmt.Sprintf("T%d_hq%d_hkv%d_d%d_rot%d_pos%d", c.T, c.Hq, c.Hkv, c.D, c.Rot, c.Pos0)
}

// QSAPrepCases: the attention heads of RoPECases (256, rot 64, theta 1e7, pos0 200) at every T,
// indexer-sized heads from an empty cache, a full rotation at a large position, a 32K position
// (the cache must hold every row before it), and an odd head dim with a short rotation.
func QSAPrepCases() []QSAPrepCase {
	var cs []QSAPrepCase
	for _, T := range DenseT {
		cs = append(cs, QSAPrepCase{T: T, Hq: 6, Hkv: 2, D: 256, Rot: 64, Pos0: 200, Theta: 1e7, Seed: uint64(3000 + T), Short: T == 1 || T == 17})
	}
	cs = append(cs,
		QSAPrepCase{T: 17, Hq: 5, Hkv: 1, D: 128, Rot: 64, Pos0: 0, Theta: 1e7, Seed: 3401},
		QSAPrepCase{T: 3, Hq: 2, Hkv: 2, D: 64, Rot: 64, Pos0: 4000, Theta: 1e4, Seed: 3402, Short: true},
		QSAPrepCase{T: 1, Hq: 4, Hkv: 1, D: 64, Rot: 64, Pos0: 32767, Theta: 1e7, Seed: 3403},
		QSAPrepCase{T: 65, Hq: 3, Hkv: 1, D: 14, Rot: 6, Pos0: 5, Theta: 1e4, Seed: 3404, Short: true},
	)
	return cs
}
