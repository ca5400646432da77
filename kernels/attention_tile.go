package kernels

import (
	"math"

	"github.com/stratakernels/strata/op"
)

// attnScratch is one worker's tile memory, reused across the units it runs.
type attnScratch struct {
	qT     []float32   // packed queries, transposed: [D, rp]
	ot     []float32   // output accumulators of a dense tile [rp, D]
	st     []float32   // scores, then probabilities: [attnBlockKeys, rp] (key-major)
	kbuf   []float32   // keys of a sparse block gathered for the panel kernel: [attnBlockKeys, D]
	m, l   []float32   // running max and sum of each row
	alpha  []float32   // rescale factor of each row for the current block
	limit  []int       // causal limit (absolute position) of each row
	keyPos []int       // positions of the current key block
	qTRows []*float32  // row table of qT
	qRows  [][]float32 // the tile's query rows in q
	kRows  [][]float32 // key rows of the current sparse block in k
	vRows  []*float32  // value rows of the current key block
	qPtr   []*float32  // query rows of attnScores4x3, padded to groups of 4
	kPtr   []*float32  // key rows of attnScores4x3, padded to groups of 3
	nPtr   []*float32  // rows attnScores4x3 prefetches, as kPtr
}

// attnRowPad rounds the tile's row count up to the 8 rows of the vector softmax.
func attnRowPad(rows int) int { return (rows + 7) &^ 7 }

func newAttnScratch(rowsMax, d int) *attnScratch {
	rp := attnRowPad(rowsMax)
	return &attnScratch{
		qT:     make([]float32, d*rp),
		ot:     make([]float32, rp*d),
		st:     make([]float32, attnBlockKeys*rp),
		kbuf:   make([]float32, attnBlockKeys*d),
		m:      make([]float32, rp),
		l:      make([]float32, rp),
		alpha:  make([]float32, rp),
		limit:  make([]int, rp),
		keyPos: make([]int, attnBlockKeys),
		qTRows: make([]*float32, d),
		qRows:  make([][]float32, rp),
		kRows:  make([][]float32, attnBlockKeys),
		vRows:  make([]*float32, attnBlockKeys),
		qPtr:   make([]*float32, rp),
		kPtr:   make([]*float32, attnBlockKeys),
		nPtr:   make([]*float32, attnBlockKeys),
	}
}

// attnTileRun computes the output rows of the dense query tokens [tl.t0, tl.t1) and query heads
// g*hpg..g*hpg+hpg-1 (KV head g). Row r of the tile is token t0 + r/hpg, head g*hpg + r%hpg.
// The row count is padded to a multiple of 8; pad rows have zero queries and are never
// written out.
//
// Per key block: scores S^T = K_block Q^T (keys x rows, into st), the online softmax over each
// row (column of st), then O = alpha O + P V_block. Both products run on the shared panel
// kernel (fmaGemm); K rows are read in place, V rows through a row table.
func attnTileRun(ws *attnScratch, o, lse, q, k, v []float32, p op.AttnParams, hpg, g int, tl attnTile) {
	d := p.D
	rows := (tl.t1 - tl.t0) * hpg
	rp := attnRowPad(rows)
	qT, ot := ws.qT[:d*rp], ws.ot[:rp*d]
	m, l, limit := ws.m[:rp], ws.l[:rp], ws.limit[:rp]
	qRows := ws.qRows[:rows]
	for r := range qRows {
		t := tl.t0 + r/hpg
		h := g*hpg + r%hpg
		qRows[r] = q[(t*p.Hq+h)*d : (t*p.Hq+h+1)*d : (t*p.Hq+h+1)*d]
		limit[r] = p.Pos0 + t
	}
	attnTransposeQ(qT, qRows, rp, d)
	for r := rows; r < rp; r++ {
		limit[r] = limit[rows-1]
	}
	fmaRowTable(ws.qTRows, qT, rp, rp)
	clear(ot)
	for r := range m {
		m[r] = float32(math.Inf(-1))
		l[r] = 0
	}
	ldkv := p.Hkv * d
	minLimit, maxLimit := p.Pos0+tl.t0, p.Pos0+tl.t1-1
	for kb := 0; kb <= maxLimit; kb += attnBlockKeys {
		nc := min(attnBlockKeys, maxLimit+1-kb)
		for c := 0; c < nc; c++ {
			ws.keyPos[c] = kb + c
		}
		fmaRowTable(ws.vRows[:nc], v[kb*ldkv+g*d:], ldkv, d)
		attnBlock(ws, ot, rows, rp, d, nc, p.Scale, kb+nc-1 > minLimit, k[kb*ldkv+g*d:], ldkv)
	}
	for r := 0; r < rows; r++ {
		t := tl.t0 + r/hpg
		h := g*hpg + r%hpg
		src := ot[r*d : (r+1)*d]
		lr := l[r]
		attnScaleRow(src, 1/lr)
		copy(o[(t*p.Hq+h)*d:(t*p.Hq+h+1)*d], src)
		if lse != nil {
			lse[t*p.Hq+h] = float32(float64(m[r]) + math.Log(float64(lr)))
		}
	}
}

// attnBlock folds one block of nc keys (rows of kb with stride ldk; values through ws.vRows)
// into the running softmax of rp rows (ws.m, ws.l) and the accumulators ot [rows, d] of the
// first rows of them (the pad rows past rows get no output): scores S^T = K_block Q^T on the
// panel kernel (queries through ws.qTRows), then attnFold. With mask set (ws.keyPos the block's
// positions, ascending and contiguous; ws.limit non-decreasing over the rows), masked scores (key
// position past the row's causal limit) become -Inf, whatever the key held, and the value rows
// past a row's limit never enter its sum (attnMaskedPV).
func attnBlock(ws *attnScratch, ot []float32, rows, rp, d, nc int, scale float32, mask bool, kb []float32, ldk int) {
	st := ws.st[:nc*rp]
	clear(st)
	fmaGemm(st, rp, kb, ldk, 1, ws.qTRows, nc, rp, d)
	if mask {
		negInf := float32(math.Inf(-1))
		for c := 0; c < nc; c++ {
			pos := ws.keyPos[c]
			row := st[c*rp : (c+1)*rp]
			for r, lim := range ws.limit[:rp] {
				if pos > lim {
					row[r] = negInf
				}
			}
		}
	}
	attnFold(ws, ot, rows, rp, d, nc, scale, mask)
}

// attnFold is the online-softmax step of one block of nc keys whose raw scores are in ws.st
// ([nc, rp], key-major): each row's max, sum and rescale factor updated (ws.m, ws.l, ws.alpha),
// the scores turned into probabilities, the accumulators ot [rows, d] rescaled, then
// O += P V_block on the panel kernel (values through ws.vRows), each row over the keys it
// attends when masked is set (attnMaskedPV), else over all nc.
func attnFold(ws *attnScratch, ot []float32, rows, rp, d, nc int, scale float32, masked bool) {
	st := ws.st[:nc*rp]
	if useAsmVec() {
		for r := 0; r < rp; r += 8 {
			attnSoftmax8(&st[r], rp, nc, scale, &ws.m[r], &ws.l[r], &ws.alpha[r])
		}
	} else {
		attnSoftmaxGo(ws, st, rp, nc, scale)
	}
	for r := 0; r < rows; r++ {
		if a := ws.alpha[r]; a != 1 {
			attnScaleRow(ot[r*d:(r+1)*d], a)
		}
	}
	if masked {
		attnMaskedPV(ws, ot, rows, rp, d, nc)
		return
	}
	fmaGemm(ot[:rows*d], d, st, 1, rp, ws.vRows[:nc], rows, d, nc)
}

// attnMaskedPV is O += P V_block for a dense block whose last keys lie past the causal limit of
// some rows (ws.keyPos ascending and contiguous, ws.limit non-decreasing over the rows): a row
// multiplies only the value rows it attends, so that one it must not attend never enters its sum
// (a zero weight would not hide a NaN or an infinity there: 0 * NaN is NaN). The keys every row
// attends run as one product over all rows, the rest per run of rows with the same limit (the
// query heads of one token); a product split along k gives the bits of one call, so each
// element sums its terms in key order as the unmasked blocks do.
func attnMaskedPV(ws *attnScratch, ot []float32, rows, rp, d, nc int) {
	st, kb := ws.st[:nc*rp], ws.keyPos[0]
	visible := func(r int) int { return max(0, min(nc, ws.limit[r]-kb+1)) }
	all := visible(0)
	fmaGemm(ot[:rows*d], d, st, 1, rp, ws.vRows[:all], rows, d, all)
	for r0 := 0; r0 < rows; {
		r1 := r0 + 1
		for r1 < rows && ws.limit[r1] == ws.limit[r0] {
			r1++
		}
		if n := visible(r0); n > all {
			fmaGemm(ot[r0*d:r1*d], d, st[all*rp+r0:], 1, rp, ws.vRows[all:n], r1-r0, d, n-all)
		}
		r0 = r1
	}
}

// attnSoftmaxGo is the portable online-softmax step of every row (exp in float64), as
// attnSoftmax8 computes it: NaN scores are left out of the max and give NaN probabilities, so a
// NaN score makes its row's sum NaN; -Inf scores give exact zeros.
func attnSoftmaxGo(ws *attnScratch, st []float32, rp, nc int, scale float32) {
	negInf := float32(math.Inf(-1))
	for r := 0; r < rp; r++ {
		mOld := ws.m[r]
		bmax := negInf
		for c := 0; c < nc; c++ {
			s := st[c*rp+r] * scale
			st[c*rp+r] = s
			if s > bmax {
				bmax = s
			}
		}
		mNew := max(mOld, bmax)
		var sum float32
		for c := 0; c < nc; c++ {
			e := float32(math.Exp(float64(st[c*rp+r] - mNew)))
			st[c*rp+r] = e
			sum += e
		}
		alpha := float32(math.Exp(float64(mOld - mNew)))
		ws.l[r] = ws.l[r]*alpha + sum
		ws.m[r] = mNew
		ws.alpha[r] = alpha
	}
}

// attnScaleRow multiplies x by s (a single rounding per element on either path).
func attnScaleRow(x []float32, s float32) {
	n8 := 0
	if useAsmVec() {
		n8 = len(x) &^ 7
		if n8 > 0 {
			attnScale8(&x[0], n8, s)
		}
	}
	for i := n8; i < len(x); i++ {
		x[i] *= s
	}
}

// attnTransposeQ writes qT[i*rp + r] = rows[r][i] for i < d, r < rp (zeros past len(rows)):
// eight rows at a time, so that each step reads eight sequential streams and writes 32
// contiguous bytes.
func attnTransposeQ(qT []float32, rows [][]float32, rp, d int) {
	var zero [1]float32
	for r0 := 0; r0 < rp; r0 += 8 {
		var src [8][]float32
		for j := range src {
			if r0+j < len(rows) {
				src[j] = rows[r0+j][:d]
			} else {
				src[j] = nil
			}
		}
		if r0+8 <= len(rows) {
			s0, s1, s2, s3 := src[0][:d], src[1][:d], src[2][:d], src[3][:d]
			s4, s5, s6, s7 := src[4][:d], src[5][:d], src[6][:d], src[7][:d]
			for i := 0; i < d; i++ {
				dst := qT[i*rp+r0 : i*rp+r0+8 : i*rp+r0+8]
				dst[0], dst[1], dst[2], dst[3] = s0[i], s1[i], s2[i], s3[i]
				dst[4], dst[5], dst[6], dst[7] = s4[i], s5[i], s6[i], s7[i]
			}
			continue
		}
		for i := 0; i < d; i++ {
			dst := qT[i*rp+r0 : i*rp+r0+8 : i*rp+r0+8]
			for j := range dst {
				if src[j] != nil {
					dst[j] = src[j][i]
				} else {
					dst[j] = zero[0]
				}
			}
		}
	}
}
