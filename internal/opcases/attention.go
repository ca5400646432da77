package opcases

import "fmt"

// AttentionCase is one attention prefill case: T query tokens at positions Pos0..Pos0+T-1,
// Hq query heads over Hkv KV heads (HPG = Hq/Hkv) of dim D, scale 1/sqrt(D), causal.
type AttentionCase struct {
	Name                string
	T, Pos0, Hq, Hkv, D int
	Seed                uint64
}

// HPG is the number of query heads per KV head.
func (c AttentionCase) HPG() int { return c.Hq / c.Hkv }

// AttentionCases lists the attention cases every backend runs: the edge token counts
// T = 1, 3, 63, 64, 65, 300 around the 64-row tiles, with an empty (pos0 = 0) and a filled
// (pos0 = 200) cache, HPG 1, 3 and 12, at the real head dim 256 and at an odd small dim (13)
// that exercises every remainder path.
func AttentionCases() []AttentionCase {
	var cs []AttentionCase
	seed := uint64(1)
	add := func(t, pos0, hq, hkv, d int) {
		cs = append(cs, AttentionCase{
			Name: fmt.Sprintf("T%d_pos%d_hq%d_hkv%d_d%d", t, pos0, hq, hkv, d),
			T:    t, Pos0: pos0, Hq: hq, Hkv: hkv, D: d, Seed: seed,
		})
		seed++
	}
	for _, t := range []int{1, 3, 63, 64, 65, 300} {
		for _, pos0 := range []int{0, 200} {
			for _, hpg := range []int{1, 3, 12} {
				add(t, pos0, 2*hpg, 2, 13)
			}
		}
	}
	// Real head dim; the full model's 24 q / 2 kv heads, plus HPG 1 and 3.
	for _, tp := range [][2]int{{1, 0}, {1, 200}, {3, 200}, {63, 0}, {64, 200}, {65, 200}, {300, 0}} {
		add(tp[0], tp[1], 24, 2, 256)
	}
	add(65, 0, 1, 1, 256)
	add(65, 200, 3, 1, 256)
	add(64, 200, 12, 1, 256)
	return cs
}

// Inputs returns the case's q [T, Hq, D] and cache k, v [Pos0+T, Hkv, D], uniform in [-1, 1)
// from the case seed (keys and queries scaled so that softmax rows are neither flat nor one-hot).
func (c AttentionCase) Inputs() (q, k, v []float32) {
	r := attnRNG{state: c.Seed * 0x9E3779B97F4A7C15}
	q = r.fill(c.T*c.Hq*c.D, 2)
	k = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 2)
	v = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 1)
	return q, k, v
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
}

// QSACases lists the indexer cases: the real indexer shape (4 heads x 128, rotary 64, blocks
// of 4) with the tiny checkpoint's budget of 32 tokens (sparse past 35 visible tokens), a budget
// covering the whole context (every row dense), and an odd small shape whose budget is not a
// multiple of the block size.
func QSACases() []QSACase {
	var cs []QSACase
	seed := uint64(1001)
	add := func(t, pos0, nh, dim, ratio, budget, rot, hq, hkv, d int) {
		cs = append(cs, QSACase{
			Name: fmt.Sprintf("T%d_pos%d_h%d_dim%d_r%d_b%d", t, pos0, nh, dim, ratio, budget),
			T:    t, Pos0: pos0, NHeads: nh, Dim: dim, Ratio: ratio, Budget: budget, Rot: rot,
			Theta: 1e7, Eps: 1e-6, Hq: hq, Hkv: hkv, D: d, Seed: seed,
		})
		seed++
	}
	for _, tp := range [][2]int{{1, 0}, {1, 200}, {3, 200}, {63, 0}, {64, 200}, {65, 0}, {300, 0}} {
		add(tp[0], tp[1], 4, 128, 4, 32, 64, 6, 2, 16)
	}
	add(65, 200, 4, 128, 4, 64, 64, 24, 2, 32)
	add(300, 200, 4, 128, 4, 2048, 64, 6, 2, 16)
	add(63, 200, 3, 12, 3, 10, 8, 3, 1, 13)
	add(300, 0, 2, 12, 5, 25, 4, 4, 2, 7)
	return cs
}

// Inputs returns the case's index queries q [T, NHeads, Dim], raw keys [Pos0+T, Dim], the
// k_layernorm weight [Dim], and attention q [T, Hq, D], k, v [Pos0+T, Hkv, D].
func (c QSACase) Inputs() (iq, rawKeys, kNorm, q, k, v []float32) {
	r := attnRNG{state: c.Seed * 0x9E3779B97F4A7C15}
	iq = r.fill(c.T*c.NHeads*c.Dim, 1)
	rawKeys = r.fill((c.Pos0+c.T)*c.Dim, 2)
	kNorm = r.fill(c.Dim, 0.5)
	q = r.fill(c.T*c.Hq*c.D, 2)
	k = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 2)
	v = r.fill((c.Pos0+c.T)*c.Hkv*c.D, 1)
	return
}

// attnRNG is splitmix64 (Steele et al. 2014): the same stream on every platform.
type attnRNG struct{ state uint64 }

func (r *attnRNG) next() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// fill returns n values uniform in [-amp, amp).
func (r *attnRNG) fill(n int, amp float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		u := float32(r.next()>>40) / (1 << 24) // [0, 1), exact in float32
		x[i] = (2*u - 1) * amp
	}
	return x
}
