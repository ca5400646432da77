package kernels

import (
	"github.com/stratakernels/strata/op"

	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Tile sizes of the CPU attention kernel. attnTileRows is the target number of score rows per
// tile (HPG query heads times query tokens of one KV group share every K/V load); attnBlockKeys
// is the key block of the online softmax (scores of one tile: attnTileRows x attnBlockKeys; a
// multiple of the 6-row panels of the score product, and large enough that the per-block
// softmax and accumulator reloads stay small next to the two products).
const (
	attnTileRows  = 48
	attnBlockKeys = 72
)

// attention computes causal (optionally QSA-sparse) grouped-query attention for a prefill chunk:
//
//	o[t, h] = sum_s softmax_s(Scale * q[t, h] . k[s, h/HPG]) v[s, h/HPG]
//
// over the positions s that query row t may attend: 0..Pos0+t when sel is nil or sel.Dense[t],
// else the positions sel lists for row t. This is the attention core of transformers'
// Qwen3NextAttention / Qwen4ExpAttention (eager_attention_forward with the causal and QSA masks),
// computed as a blocked online softmax (FlashAttention, Dao et al. 2022): memory O(tile x block),
// never a T x T matrix. Accumulation is float32; the log of lse runs in float64. exp runs in
// float64 (portable kernels) or as a float32 polynomial with about 1e-7 relative error (AVX2
// kernels, Cephes expf reduction); AttentionKernel names the set in use.
//
// Shapes (float32, row-major): q [T, Hq, D]; k, v: the cache [>= Pos0+T, Hkv, D] (rows past
// Pos0+T-1 are ignored); o [T, Hq, D]; lse [T, Hq] receives the natural log-sum-exp of the scaled
// scores of each row (lse may be nil).
//
// NaN and Inf are not scanned for; they propagate under IEEE rules through the formula above
// into the rows that attend them, and only those. A NaN in a query row, or in a key row it
// attends, makes its output row and its lse NaN; a NaN in element j of a value row it attends
// makes element j of its output NaN (the other elements and lse are as without it). Infinities
// give what the arithmetic gives: a score of +Inf makes the row NaN (exp(Inf - Inf)), one of
// -Inf weighs its key 0, an infinite value element makes the output element infinite or NaN.
// A row's output and lse never depend on the key and value rows it does not attend (later
// positions, unlisted ones, other KV heads): masked scores are set to -Inf whatever the key
// held and masked value rows are never multiplied, not even by a zero weight. Every kernel set
// (AVX-512, AVX2, NEON, portable) follows the rule.
//
// Errors: op.ErrShape for non-positive sizes (T = 0 included) or slice lengths that do not match;
// op.ErrInvalidArgument for HPG not dividing Hq, a negative Pos0, a non-finite or non-positive Scale, or a
// malformed selection (wrong T, offsets, tokens not strictly ascending, out of range or beyond
// the causal limit, an empty sparse row). Nothing is written when an error is returned.
//
// Work: dense rows are split over (KV head, query tile) units, each owning its output rows;
// sparse rows run key-chunk-major (attnSparse). Every output row is computed in a fixed order
// whatever the worker count, so results are bitwise identical across runs and GOMAXPROCS.
func attention(o, lse []float32, q, k, v []float32, p op.AttnParams, sel *op.Selection) error {
	a := op.Attention{O: op.HostF32(o), Q: op.HostF32(q), K: op.HostF32(k), V: op.HostF32(v), P: p, Sel: sel}
	if lse != nil {
		a.LSE = op.HostF32(lse)
	}
	if sel != nil {
		a.Tok = op.HostI32(sel.Tokens)
	}
	return execAttention(a)
}

// execAttention is the CPU attention op: the selection's tokens are host memory and are checked
// (Selection.CheckTokens) before any work.
func execAttention(a op.Attention) error {
	if err := a.Check(); err != nil {
		return err
	}
	p, sel := a.P, a.Sel
	if sel != nil {
		tok := a.Tok.I32()
		if err := sel.CheckTokens("attention", p.T, p.Pos0, tok); err != nil {
			return err
		}
		s := *sel
		s.Tokens = tok
		sel = &s
	}
	o, q, k, v := a.O.F32(), a.Q.F32(), a.K.F32(), a.V.F32()
	var lse []float32
	if op.Present(a.LSE) {
		lse = a.LSE.F32()
	}
	hpg := p.Hq / p.Hkv
	tiles, sparse := attnPlanTiles(p, hpg, sel)
	attnDense(o, lse, q, k, v, p, hpg, tiles)
	attnSparse(o, lse, q, k, v, p, hpg, sel, sparse)
	return nil
}

// attnDense runs the dense tiles, each for every KV head.
func attnDense(o, lse, q, k, v []float32, p op.AttnParams, hpg int, tiles []attnTile) {
	nUnits := len(tiles) * p.Hkv
	if nUnits == 0 {
		return
	}
	rowsMax := 0
	for _, tl := range tiles {
		rowsMax = max(rowsMax, (tl.t1-tl.t0)*hpg)
	}
	run := func(ws *attnScratch, u int) {
		tl := tiles[u/p.Hkv]
		attnTileRun(ws, o, lse, q, k, v, p, hpg, u%p.Hkv, tl)
	}
	workers := min(runtime.GOMAXPROCS(0), nUnits)
	if workers <= 1 {
		ws := newAttnScratch(rowsMax, p.D)
		for u := 0; u < nUnits; u++ {
			run(ws, u)
		}
		return
	}
	// Units are claimed dynamically (most expensive first) for balance; every unit writes only
	// its own rows and does not depend on which worker runs it, so the result is deterministic.
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := newAttnScratch(rowsMax, p.D)
			for {
				u := int(next.Add(1) - 1)
				if u >= nUnits {
					return
				}
				run(ws, u)
			}
		}()
	}
	wg.Wait()
}

// attnTile is a run of dense query tokens [t0, t1) processed together for one KV head.
type attnTile struct {
	t0, t1 int
	cost   int64
}

// attnPlanTiles groups the dense rows into tiles of about attnTileRows score rows, ordered by
// decreasing cost (keys x rows), ties by position, and lists the sparse rows (ascending) apart.
func attnPlanTiles(p op.AttnParams, hpg int, sel *op.Selection) (tiles []attnTile, sparse []int) {
	bt := max(1, (attnTileRows+hpg-1)/hpg)
	t := 0
	for t < p.T {
		if sel != nil && !sel.Dense[t] {
			sparse = append(sparse, t)
			t++
			continue
		}
		t1 := t + 1
		for t1 < p.T && t1-t < bt && (sel == nil || sel.Dense[t1]) {
			t1++
		}
		tiles = append(tiles, attnTile{t0: t, t1: t1, cost: int64(p.Pos0+t1) * int64((t1-t)*hpg)})
		t = t1
	}
	sort.SliceStable(tiles, func(i, j int) bool { return tiles[i].cost > tiles[j].cost })
	return tiles, sparse
}
