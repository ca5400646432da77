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
// they are in cache. 4 MiB ran fastest on a Zen 3 (2 cores, 512 KiB L2 each, 32 MiB L3) among
// 2, 4, 6, 8 and 12 MiB at 24 / 2 heads of 256 after 30000 cached tokens (BenchmarkQSAAttention):
// fewer chunks mean fewer round trips of each row's accumulators through memory, larger ones
// lose the chunk's rows from the L3 share. A variable so that tests can run many chunks on
// small cases.
var attnChunkBytes = 4 << 20

// attnSparseGrain is how many query tokens a worker claims at once in the sparse pass.
const attnSparseGrain = 4

// attnChunkKeys is the key positions of one chunk of the sparse pass at head dim d: at most
// attnChunkBytes of K and V, one position at least.
func attnChunkKeys(d int) int { return max(1, attnChunkBytes/(8*d)) }

// attnSparse computes the output rows of the sparse query tokens toks (ascending; every head)
// from their selection lists. Selections of different tokens share few blocks (the indexer's
// top blocks of neighbouring rows overlap little), so the work runs key-chunk-major: for each
// KV head g and each chunk of attnChunkKeys cached positions in order, every token folds the
// keys of its list that fall in the chunk into its running online softmax (the hpg query heads
// of g as the rows of one block), so the chunk's K and V rows are fetched from memory about
// once and served from cache to the others. The unnormalised accumulators live in o, the
// running max and sum in m and l; each is finished after the last chunk.
//
// Within a chunk a token's keys run in blocks of up to attnBlockKeys from the chunk's first
// listed key: scores by attnScores (query and key rows read in place), then attnFold. Each
// (token, head, chunk) unit depends only on its inputs and the previous chunk's state of the
// same rows, and the chunks run in order with a barrier between them, so the result does not
// depend on the worker count or on which worker ran a unit.
func attnSparse(o, lse, q, k, v []float32, p op.AttnParams, hpg int, sel *op.Selection, toks []int) {
	if len(toks) == 0 {
		return
	}
	d := p.D
	n := len(toks)
	m, l := make([]float32, n*hpg), make([]float32, n*hpg)
	cur := make([]int32, n)
	workers := max(1, min(runtime.GOMAXPROCS(0), (n+attnSparseGrain-1)/attnSparseGrain))
	ws := make([]*attnScratch, workers)
	for w := range ws {
		ws[w] = newAttnScratch(hpg, d)
	}
	chunk := attnChunkKeys(d)
	keys := p.Pos0 + toks[n-1] + 1 // the last token sees the most positions
	negInf := float32(math.Inf(-1))
	for g := 0; g < p.Hkv; g++ {
		for i, t := range toks {
			cur[i] = sel.Offsets[t]
			clear(o[(t*p.Hq+g*hpg)*d : (t*p.Hq+g*hpg+hpg)*d])
		}
		for i := range m {
			m[i], l[i] = negInf, 0
		}
		for c0 := 0; c0 < keys; c0 += chunk {
			attnForEach(ws, n, func(ws *attnScratch, i int) {
				attnSparseUnit(ws, o, q, k, v, p, hpg, g, toks[i], sel, &cur[i], int32(c0+chunk), m[i*hpg:(i+1)*hpg], l[i*hpg:(i+1)*hpg])
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
// limit into the running softmax of query heads g*hpg..g*hpg+hpg-1 (max m, sum l, accumulators
// the rows of o) and advances *cur past them.
func attnSparseUnit(ws *attnScratch, o, q, k, v []float32, p op.AttnParams, hpg, g, t int, sel *op.Selection, cur *int32, limit int32, m, l []float32) {
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
	qRows := ws.qRows[:hpg]
	for r := range qRows {
		h := g*hpg + r
		qRows[r] = q[(t*p.Hq+h)*d : (t*p.Hq+h+1)*d : (t*p.Hq+h+1)*d]
	}
	// Pad rows start afresh each unit; they are never written out.
	copy(ws.m, m)
	copy(ws.l, l)
	for r := hpg; r < rp; r++ {
		ws.m[r], ws.l[r] = float32(math.Inf(-1)), 0
	}
	ot := o[(t*p.Hq+g*hpg)*d : (t*p.Hq+g*hpg+hpg)*d]
	for i := 0; i < nk; i += attnBlockKeys {
		nc := min(attnBlockKeys, nk-i)
		for c := 0; c < nc; c++ {
			row := int(list[i+c])*ldkv + g*d
			ws.kRows[c] = k[row : row+d : row+d]
			ws.vRows[c] = &v[row]
		}
		_ = v[int(list[i+nc-1])*ldkv+g*d+d-1]
		attnScores(ws, rp, qRows, ws.kRows[:nc], ws.vRows[:nc])
		attnFold(ws, ot, hpg, rp, d, nc, p.Scale, false)
	}
	copy(m, ws.m[:hpg])
	copy(l, ws.l[:hpg])
}

// attnScores writes the scores ws.st[c*rp + r] = q[r] . keys[c] (float32; every row of q and
// keys the same length D, len(q) <= rp) for r < len(q), c < len(keys) <= attnBlockKeys; next
// (as many as keys) point to the rows of D floats read after it (the block's values). The AVX2
// kernel (D a multiple of 8) reads the rows in place, four query rows by three keys at a time,
// each dot product in eight lanes added pairwise at the end, and prefetches the rows of next on
// the way (attnScores4x3); it reads the last query row and key again to fill a group, writing those sums to pad lanes
// past len(q) (within the row: rp is a multiple of 8) and to st rows past len(keys); lanes past
// the last group are set to zero. Otherwise the keys are gathered and the queries transposed
// for the panel kernel (as the dense tiles run), which writes zeros to the pad lanes.
func attnScores(ws *attnScratch, rp int, q, keys [][]float32, next []*float32) {
	nq, nk := len(q), len(keys)
	d := len(q[0])
	if !useAsmVec() || d%8 != 0 {
		attnTransposeQ(ws.qT[:d*rp], q, rp, d)
		fmaRowTable(ws.qTRows, ws.qT, rp, rp)
		for c, kr := range keys {
			copy(ws.kbuf[c*d:(c+1)*d], kr)
		}
		st := ws.st[:nk*rp]
		clear(st)
		fmaGemm(st, rp, ws.kbuf, d, 1, ws.qTRows, nk, rp, d)
		return
	}
	nq4, nk3 := (nq+3)/4, (nk+2)/3
	if 4*nq4 < rp {
		clear(ws.st[:nk*rp]) // the lanes past the last group of four
	}
	qp, kp, np := ws.qPtr[:4*nq4], ws.kPtr[:3*nk3], ws.nPtr[:3*nk3]
	for r := range qp {
		qp[r] = &q[min(r, nq-1)][0]
	}
	for c := range kp {
		kp[c] = &keys[min(c, nk-1)][0]
		np[c] = next[min(c, nk-1)]
	}
	_ = ws.st[(3*nk3-1)*rp+4*nq4-1]
	attnScores4x3(&ws.st[0], rp, &qp[0], nq4, &kp[0], nk3, d, &np[0])
}
