package optest

import (
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/op"
)

// RefAttention is causal grouped-query attention in float64 (op.Attention): for each row t and
// query head h, the full softmax of Scale * q . k over the visible positions (0..Pos0+t, or the
// row's listed tokens when sel is given and the row is sparse), then the weighted sum of values.
// It returns o [T, Hq, D] and the natural log-sum-exp lse [T, Hq] of the scaled scores. k, v are
// the cache [>= Pos0+T, Hkv, D].
func RefAttention(q, k, v []float32, p op.AttnParams, sel *op.Selection) (o, lse []float64) {
	o = make([]float64, p.T*p.Hq*p.D)
	lse = make([]float64, p.T*p.Hq)
	// Rows are independent: split them over the CPUs (the long cases cost ~1e9 multiply-adds).
	parallelRows(p.T, func(rows func() (int, bool)) {
		var keys []int
		var sc []float64
		for t, ok := rows(); ok; t, ok = rows() {
			keys = keys[:0]
			if sel == nil || sel.Dense[t] {
				for s := 0; s <= p.Pos0+t; s++ {
					keys = append(keys, s)
				}
			} else {
				for _, s := range sel.Tokens[sel.Offsets[t]:sel.Offsets[t+1]] {
					keys = append(keys, int(s))
				}
			}
			sc = slices.Grow(sc[:0], len(keys))[:len(keys)]
			for h := 0; h < p.Hq; h++ {
				lse[t*p.Hq+h] = refAttnRow(o[(t*p.Hq+h)*p.D:(t*p.Hq+h+1)*p.D], q[(t*p.Hq+h)*p.D:(t*p.Hq+h+1)*p.D], k, v, keys, sc, h/(p.Hq/p.Hkv), p)
			}
		}
	})
	return o, lse
}

// refAttnRow writes out = softmax(Scale q . k_s) v_s over the positions keys of KV head g and
// returns the log-sum-exp (sc is scratch of len(keys)).
func refAttnRow(out []float64, qr, k, v []float32, keys []int, sc []float64, g int, p op.AttnParams) float64 {
	d := p.D
	mx := math.Inf(-1)
	for i, s := range keys {
		kr := k[(s*p.Hkv+g)*d : (s*p.Hkv+g+1)*d]
		var acc float64
		for j, qv := range qr {
			acc += float64(qv) * float64(kr[j])
		}
		sc[i] = acc * float64(p.Scale)
		mx = math.Max(mx, sc[i])
	}
	var sum float64
	for i := range sc {
		sc[i] = math.Exp(sc[i] - mx)
		sum += sc[i]
	}
	for i, s := range keys {
		vr := v[(s*p.Hkv+g)*d : (s*p.Hkv+g+1)*d]
		w := sc[i] / sum
		for j := range out {
			out[j] += w * float64(vr[j])
		}
	}
	return mx + math.Log(sum)
}

// parallelRows runs one worker per CPU; each calls rows for the next row index of [0, n) until
// it reports false. The references' rows are independent, so the split changes no result.
func parallelRows(n int, worker func(rows func() (int, bool))) {
	var next atomic.Int64
	rows := func() (int, bool) {
		t := int(next.Add(1) - 1)
		return t, t < n
	}
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(rows)
		}()
	}
	wg.Wait()
}

// RefQSAPrep is qsa_prep in float64: q, gate [T, Hq, D] from qg [T, Hq, 2D] ([query | gate] per
// head), q = RoPE(RMSNorm1p(query; qNorm)) and kRot = RoPE(RMSNorm1p(k; kNorm)) [T, Hkv, D] at
// positions pos0+t.
func RefQSAPrep(qg, k []float32, qNorm, kNorm []float32, T, Hq, Hkv, D, rot, pos0 int, theta, eps float64) (q, gate, kRot []float64) {
	query := make([]float64, T*Hq*D)
	gate = make([]float64, T*Hq*D)
	for r := 0; r < T*Hq; r++ {
		for j := 0; j < D; j++ {
			query[r*D+j] = float64(qg[r*2*D+j])
			gate[r*D+j] = float64(qg[r*2*D+D+j])
		}
	}
	pos := make([]float64, T)
	for t := range pos {
		pos[t] = float64(pos0 + t)
	}
	q = RefRoPE(RefRMSNorm1p(query, 1, D, qNorm, eps), T, Hq, D, rot, pos, theta)
	kRot = RefRoPE(RefRMSNorm1p(To64(k), 1, D, kNorm, eps), T, Hkv, D, rot, pos, theta)
	return q, gate, kRot
}

// qsaRefRow is the float64 reference selection of one query row.
type qsaRefRow struct {
	dense  bool
	blocks []int     // selected blocks, ascending
	scores []float64 // score of every complete block
	kth    float64   // score of the last kept block in rank order
	tokens []int32
}

// refQSASelect recomputes the indexer's selection in float64 from its definition: pooled mean,
// RMSNorm1p, RoPE at the block's first position with cos/sin of pos*theta^(-2i/rot),
// relu-summed head dots over the prepared queries q [T, NHeads, Dim], then a full stable sort
// by score descending (ties to the lower block).
func refQSASelect(q []float64, rawKeys, kNorm []float32, p op.IndexerParams) []qsaRefRow {
	dim := p.Dim
	nbMax := (p.Pos0 + p.T) / p.Ratio
	keys := make([][]float64, nbMax)
	for b := range keys {
		x := make([]float64, dim)
		for j := range x {
			var s float64
			for i := 0; i < p.Ratio; i++ {
				s += float64(rawKeys[(b*p.Ratio+i)*dim+j])
			}
			x[j] = s / float64(p.Ratio)
		}
		x = RefRMSNorm1p(x, 1, dim, kNorm, float64(p.Eps))
		keys[b] = RefRoPE(x, 1, 1, dim, p.Rot, []float64{float64(b * p.Ratio)}, p.Theta)
	}
	rows := make([]qsaRefRow, p.T)
	for t := range rows {
		pos := p.Pos0 + t
		nb := (pos + 1) / p.Ratio
		keep := min(p.Budget/p.Ratio, nb)
		if keep == nb {
			rows[t].dense = true
			continue
		}
		sc := make([]float64, nb)
		for b := range sc {
			for h := 0; h < p.NHeads; h++ {
				var d float64
				for j := 0; j < dim; j++ {
					d += q[(t*p.NHeads+h)*dim+j] * keys[b][j]
				}
				sc[b] += math.Max(d, 0)
			}
			sc[b] /= math.Sqrt(float64(dim))
		}
		order := make([]int, nb)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(i, j int) bool { return sc[order[i]] > sc[order[j]] })
		blocks := slices.Clone(order[:keep])
		slices.Sort(blocks)
		var toks []int32
		for _, b := range blocks {
			for i := 0; i < p.Ratio; i++ {
				toks = append(toks, int32(b*p.Ratio+i))
			}
		}
		for tok := nb * p.Ratio; tok <= pos; tok++ {
			toks = append(toks, int32(tok))
		}
		rows[t] = qsaRefRow{blocks: blocks, scores: sc, kth: sc[order[keep-1]], tokens: toks}
	}
	return rows
}
