package kernels

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/op"
)

// attnChunkBytes is the size of the K and V rows of one KV head over one key chunk of the
// sparse pass (attnSparse): every query row that selected keys in the chunk reads them while
// they are in cache. 2 MiB ran fastest on a Zen 3 (2 cores, 512 KiB L2 each, 32 MiB L3) among
// 1, 2, 4, 8, 16 and 64 MiB: the chunk's rows stay within an L3 share and, at 4 KiB pages,
// within the reach of the second-level TLB. A variable so that tests can run many chunks on
// small cases.
var attnChunkBytes = 2 << 20

// attnSparseGrain is how many query tokens a worker claims at once in the sparse pass.
const attnSparseGrain = 4

// attnChunkKeys is the key positions of one chunk of the sparse pass at head dim d: a multiple
// of attnBlockKeys (so that a row listing every position meets the key blocks of the dense
// tiles, and gets their bits) of at most attnChunkBytes of K and V (one block at least).
func attnChunkKeys(d int) int {
	return max(1, attnChunkBytes/(8*d)/attnBlockKeys) * attnBlockKeys
}

// attnSparse computes the output rows of the sparse query tokens toks (ascending; every head)
// from their selection lists. Selections of different tokens share few blocks (the indexer's
// top blocks of neighbouring rows overlap little), so the work runs key-chunk-major: for each
// KV head g and each chunk of attnChunkKeys cached positions in order, every token folds the
// keys of its list that fall in the chunk into its running online softmax (the hpg query heads
// of g as the rows of one tile, as attnTileRun does), so the chunk's K and V rows are fetched
// from memory about once and served from cache to the others. The unnormalised accumulators
// live in o, the running max and sum in m and l; each is finished after the last chunk. Each
// token's queries of the current KV head are transposed once (qT, n x D x 16 floats for 12
// heads a group) and read by every chunk.
//
// Within a chunk a token's keys run in blocks of up to attnBlockKeys from the chunk's first
// listed key. Each (token, head, chunk) unit depends only on its inputs and the previous
// chunk's state of the same rows, and the chunks run in order with a barrier between them,
// so the result does not depend on the worker count or on which worker ran a unit.
func attnSparse(o, lse, q, k, v []float32, p op.AttnParams, hpg int, sel *op.Selection, toks []int) {
	if len(toks) == 0 {
		return
	}
	d := p.D
	n := len(toks)
	m, l := make([]float32, n*hpg), make([]float32, n*hpg)
	cur := make([]int32, n)
	rp := attnRowPad(hpg)
	qT := make([]float32, n*d*rp) // each token's queries of the current KV head, transposed
	workers := max(1, min(runtime.GOMAXPROCS(0), (n+attnSparseGrain-1)/attnSparseGrain))
	ws := make([]*attnScratch, workers)
	for w := range ws {
		ws[w] = newAttnScratch(hpg, d)
	}
	chunk := attnChunkKeys(d)
	keys := p.Pos0 + toks[n-1] + 1 // the last token sees the most positions
	negInf := float32(math.Inf(-1))
	for g := 0; g < p.Hkv; g++ {
		attnForEach(ws, n, func(ws *attnScratch, i int) {
			t := toks[i]
			cur[i] = sel.Offsets[t]
			clear(o[(t*p.Hq+g*hpg)*d : (t*p.Hq+g*hpg+hpg)*d])
			qRows := ws.qRows[:hpg]
			for r := range qRows {
				h := g*hpg + r
				qRows[r] = q[(t*p.Hq+h)*d : (t*p.Hq+h+1)*d : (t*p.Hq+h+1)*d]
			}
			attnTransposeQ(qT[i*d*rp:(i+1)*d*rp], qRows, rp, d)
		})
		for i := range m {
			m[i], l[i] = negInf, 0
		}
		for c0 := 0; c0 < keys; c0 += chunk {
			attnForEach(ws, n, func(ws *attnScratch, i int) {
				attnSparseUnit(ws, o, qT[i*d*rp:(i+1)*d*rp], k, v, p, hpg, g, toks[i], sel, &cur[i], int32(c0+chunk), m[i*hpg:(i+1)*hpg], l[i*hpg:(i+1)*hpg])
			})
		}
		attnForEach(ws, n, func(_ *attnScratch, i int) {
			t := toks[i]
			for r := 0; r < hpg; r++ {
				h := g*hpg + r
				lr := l[i*hpg+r]
				attnScaleRow(o[(t*p.Hq+h)*d:(t*p.Hq+h+1)*d], 1/lr)
				if lse != nil {
					lse[t*p.Hq+h] = float32(float64(m[i*hpg+r]) + math.Log(float64(lr)))
				}
			}
		})
	}
}

// attnForEach runs fn(ws, i) for i < n on len(scratch) workers (worker w with scratch[w]),
// indices claimed in runs of attnSparseGrain, and returns when all are done.
func attnForEach(scratch []*attnScratch, n int, fn func(ws *attnScratch, i int)) {
	if len(scratch) == 1 {
		for i := 0; i < n; i++ {
			fn(scratch[0], i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, ws := range scratch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i0 := int(next.Add(attnSparseGrain)) - attnSparseGrain
				if i0 >= n {
					return
				}
				for i := i0; i < min(i0+attnSparseGrain, n); i++ {
					fn(ws, i)
				}
			}
		}()
	}
	wg.Wait()
}

// attnSparseUnit folds the keys of token t's list from *cur up to (not including) position
// limit into the running softmax of query heads g*hpg..g*hpg+hpg-1 (their queries transposed
// in qT [D, rp]; max m, sum l, accumulators the rows of o) and advances *cur past them.
func attnSparseUnit(ws *attnScratch, o, qT, k, v []float32, p op.AttnParams, hpg, g, t int, sel *op.Selection, cur *int32, limit int32, m, l []float32) {
	list := sel.Tokens[*cur:sel.Offsets[t+1]]
	nk := 0
	for nk < len(list) && list[nk] < limit {
		nk++
	}
	if nk == 0 {
		return
	}
	*cur += int32(nk)
	list = list[:nk]
	d, ldkv := p.D, p.Hkv*p.D
	rp := attnRowPad(hpg)
	fmaRowTable(ws.qTRows, qT, rp, rp)
	// Pad rows (zero queries) start afresh each unit; they are never written out.
	copy(ws.m, m)
	copy(ws.l, l)
	for r := hpg; r < rp; r++ {
		ws.m[r], ws.l[r] = float32(math.Inf(-1)), 0
	}
	ot := o[(t*p.Hq+g*hpg)*d : (t*p.Hq+g*hpg+hpg)*d]
	for i := 0; i < nk; i += attnBlockKeys {
		nc := min(attnBlockKeys, nk-i)
		for c := 0; c < nc; c++ {
			pos := int(list[i+c])
			copy(ws.kbuf[c*d:(c+1)*d], k[pos*ldkv+g*d:pos*ldkv+g*d+d])
			ws.vRows[c] = &v[pos*ldkv+g*d]
		}
		_ = v[int(list[i+nc-1])*ldkv+g*d+d-1]
		attnBlock(ws, ot, hpg, rp, d, nc, p.Scale, false, ws.kbuf, d)
	}
	copy(m, ws.m[:hpg])
	copy(l, ws.l[:hpg])
}
