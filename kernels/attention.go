package kernels

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Selection lists, per query row t, the key positions that row may attend (the QSA indexer's
// output, see QSASelect). A row is either dense (Dense[t]: every position 0..pos0+t, no tokens
// listed, so long dense prompts cost no index memory) or sparse: the absolute positions
// Tokens[Offsets[t]:Offsets[t+1]], strictly ascending, each in 0..pos0+t, at least one.
//
// Shapes: Dense [T], Offsets [T+1] with Offsets[0] = 0 and Offsets[T] = len(Tokens). Dense rows
// list no tokens (Offsets[t+1] = Offsets[t]).
type Selection struct {
	T       int
	Dense   []bool
	Offsets []int32
	Tokens  []int32
}

// AttnParams describes one attention prefill call.
//
//	T     new query tokens, at absolute positions Pos0..Pos0+T-1
//	Hq    query heads; Hkv KV heads; HPG = Hq/Hkv query heads per KV head (query head h reads KV head h/HPG)
//	D     head dim (256 in both real models)
//	Pos0  tokens already in the cache before this call
//	Scale score scale (1/sqrt(D) = 1/16 in the real models)
type AttnParams struct {
	T, Hq, Hkv, D, Pos0 int
	Scale               float32
}

// Tile sizes of the CPU attention kernel. attnTileRows is the target number of score rows per
// tile (HPG query heads times query tokens of one KV group share every K/V load); attnBlockKeys
// is the key block of the online softmax (scores of one tile: attnTileRows x attnBlockKeys; a
// multiple of the 6-row panels of the score product, and large enough that the per-block
// softmax and accumulator reloads stay small next to the two products).
const (
	attnTileRows  = 48
	attnBlockKeys = 72
)

// Attention computes causal (optionally QSA-sparse) grouped-query attention for a prefill chunk:
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
// Errors: ErrShape for non-positive sizes (T = 0 included) or slice lengths that do not match;
// ErrArg for HPG not dividing Hq, a negative Pos0, a non-finite or non-positive Scale, or a
// malformed selection (wrong T, offsets, tokens not strictly ascending, out of range or beyond
// the causal limit, an empty sparse row). Nothing is written when an error is returned.
//
// Work is split over (KV head, query tile) units; each unit owns its output rows and computes
// them in a fixed order, so results are bitwise identical across runs and GOMAXPROCS.
func Attention(o, lse []float32, q, k, v []float32, p AttnParams, sel *Selection) error {
	if err := firstErr(checkElems("Attention", "q", p.T, p.Hq, p.D), checkElems("Attention", "k/v cache", p.Pos0+p.T, p.Hkv, p.D)); err != nil {
		return err
	}
	if err := attnCheck(o, lse, q, k, v, p, sel); err != nil {
		return err
	}
	hpg := p.Hq / p.Hkv
	tiles := attnPlanTiles(p, hpg, sel)
	nUnits := len(tiles) * p.Hkv
	rowsMax := 0
	for _, tl := range tiles {
		rowsMax = max(rowsMax, (tl.t1-tl.t0)*hpg)
	}
	run := func(ws *attnScratch, u int) {
		tl := tiles[u/p.Hkv]
		attnTileRun(ws, o, lse, q, k, v, p, hpg, u%p.Hkv, tl, sel)
	}
	workers := min(runtime.GOMAXPROCS(0), nUnits)
	if workers <= 1 {
		ws := newAttnScratch(rowsMax, p.D)
		for u := 0; u < nUnits; u++ {
			run(ws, u)
		}
		return nil
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
	return nil
}

// attnTile is a run of query tokens [t0, t1) processed together for one KV head. A sparse tile
// holds one token whose keys come from its selection list.
type attnTile struct {
	t0, t1 int
	sparse bool
	cost   int64
}

// attnPlanTiles groups dense rows into tiles of about attnTileRows score rows and gives each
// sparse row its own tile, ordered by decreasing cost (keys x rows), ties by position.
func attnPlanTiles(p AttnParams, hpg int, sel *Selection) []attnTile {
	bt := max(1, (attnTileRows+hpg-1)/hpg)
	var tiles []attnTile
	t := 0
	for t < p.T {
		if sel != nil && !sel.Dense[t] {
			n := int64(sel.Offsets[t+1] - sel.Offsets[t])
			tiles = append(tiles, attnTile{t0: t, t1: t + 1, sparse: true, cost: n * int64(hpg)})
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
	return tiles
}

func attnCheck(o, lse []float32, q, k, v []float32, p AttnParams, sel *Selection) error {
	if p.T <= 0 || p.Hq <= 0 || p.Hkv <= 0 || p.D <= 0 {
		return fmt.Errorf("attention: T=%d Hq=%d Hkv=%d D=%d must be positive: %w", p.T, p.Hq, p.Hkv, p.D, ErrShape)
	}
	if p.Pos0 < 0 {
		return fmt.Errorf("attention: pos0=%d is negative: %w", p.Pos0, ErrArg)
	}
	if p.Hq%p.Hkv != 0 {
		return fmt.Errorf("attention: Hkv=%d does not divide Hq=%d (HPG must be an integer): %w", p.Hkv, p.Hq, ErrArg)
	}
	if !(p.Scale > 0) || math.IsInf(float64(p.Scale), 1) {
		return fmt.Errorf("attention: scale=%v must be finite and positive: %w", p.Scale, ErrArg)
	}
	const lim = 1 << 40
	if p.T > lim || p.Hq > lim || p.D > lim || p.Pos0 > lim ||
		float64(p.Pos0+p.T)*float64(p.Hq)*float64(p.D) > lim {
		return fmt.Errorf("attention: sizes T=%d pos0=%d Hq=%d D=%d too large: %w", p.T, p.Pos0, p.Hq, p.D, ErrShape)
	}
	nq := p.T * p.Hq * p.D
	nkv := (p.Pos0 + p.T) * p.Hkv * p.D
	if len(q) != nq {
		return fmt.Errorf("attention: len(q)=%d, want T*Hq*D=%d: %w", len(q), nq, ErrShape)
	}
	if len(o) != nq {
		return fmt.Errorf("attention: len(o)=%d, want T*Hq*D=%d: %w", len(o), nq, ErrShape)
	}
	if lse != nil && len(lse) != p.T*p.Hq {
		return fmt.Errorf("attention: len(lse)=%d, want T*Hq=%d: %w", len(lse), p.T*p.Hq, ErrShape)
	}
	if len(k) < nkv || len(k)%(p.Hkv*p.D) != 0 {
		return fmt.Errorf("attention: len(k)=%d, want a multiple of Hkv*D=%d and >= (pos0+T)*Hkv*D=%d: %w", len(k), p.Hkv*p.D, nkv, ErrShape)
	}
	if len(v) < nkv || len(v)%(p.Hkv*p.D) != 0 {
		return fmt.Errorf("attention: len(v)=%d, want a multiple of Hkv*D=%d and >= (pos0+T)*Hkv*D=%d: %w", len(v), p.Hkv*p.D, nkv, ErrShape)
	}
	if sel != nil {
		return sel.check(p.T, p.Pos0)
	}
	return nil
}

// check validates a selection for T query rows at positions pos0..pos0+T-1.
func (s *Selection) check(T, pos0 int) error {
	if s.T != T || len(s.Dense) != T || len(s.Offsets) != T+1 {
		return fmt.Errorf("attention: selection T=%d len(Dense)=%d len(Offsets)=%d, want T=%d and %d offsets: %w",
			s.T, len(s.Dense), len(s.Offsets), T, T+1, ErrArg)
	}
	if s.Offsets[0] != 0 || int(s.Offsets[T]) != len(s.Tokens) {
		return fmt.Errorf("attention: selection offsets run %d..%d, want 0..len(Tokens)=%d: %w",
			s.Offsets[0], s.Offsets[T], len(s.Tokens), ErrArg)
	}
	for t := 0; t < T; t++ {
		a, b := s.Offsets[t], s.Offsets[t+1]
		if b < a || int(b) > len(s.Tokens) {
			return fmt.Errorf("attention: selection offsets of row %d (%d..%d) decrease or exceed %d tokens: %w", t, a, b, len(s.Tokens), ErrArg)
		}
		if s.Dense[t] {
			if b != a {
				return fmt.Errorf("attention: dense selection row %d lists %d tokens: %w", t, b-a, ErrArg)
			}
			continue
		}
		if b == a {
			return fmt.Errorf("attention: sparse selection row %d lists no tokens: %w", t, ErrArg)
		}
		limit := int64(pos0 + t)
		prev := int64(-1)
		for _, tok := range s.Tokens[a:b] {
			if int64(tok) <= prev || int64(tok) > limit {
				return fmt.Errorf("attention: selection row %d (position %d): token %d after %d is not ascending within 0..%d: %w",
					t, limit, tok, prev, limit, ErrArg)
			}
			prev = int64(tok)
		}
	}
	return nil
}
