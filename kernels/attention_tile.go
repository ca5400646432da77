package kernels

import "math"

// attnScratch is one worker's tile memory, reused across the units it runs.
type attnScratch struct {
	qt, ot, st []float32 // packed queries [rp, D], output accumulators [rp, D], scores/probabilities [BK, rp]
	m, l       []float32 // running max and sum of each row
	limit      []int     // causal limit (absolute position) of each row
	keyPos     []int     // positions of the current key block
	kr, vr     [][]float32
}

func newAttnScratch(rowsMax, d int) *attnScratch {
	rp := rowsMax + rowsMax&1
	return &attnScratch{
		qt:     make([]float32, rp*d),
		ot:     make([]float32, rp*d),
		st:     make([]float32, attnBlockKeys*rp),
		m:      make([]float32, rp),
		l:      make([]float32, rp),
		limit:  make([]int, rp),
		keyPos: make([]int, attnBlockKeys),
		kr:     make([][]float32, attnBlockKeys),
		vr:     make([][]float32, attnBlockKeys),
	}
}

// attnTileRun computes the output rows of query tokens [tl.t0, tl.t1) and query heads
// g*hpg..g*hpg+hpg-1 (KV head g). Row r of the tile is token t0 + r/hpg, head g*hpg + r%hpg.
// The row count is padded to even for the 2-row micro-kernels; the pad row has zero queries
// and is never written out.
func attnTileRun(ws *attnScratch, o, lse, q, k, v []float32, p AttnParams, hpg, g int, tl attnTile, sel *Selection) {
	d := p.D
	rows := (tl.t1 - tl.t0) * hpg
	rp := rows + rows&1
	qt, ot := ws.qt[:rp*d], ws.ot[:rp*d]
	m, l, limit := ws.m[:rp], ws.l[:rp], ws.limit[:rp]
	for r := 0; r < rows; r++ {
		t := tl.t0 + r/hpg
		h := g*hpg + r%hpg
		copy(qt[r*d:(r+1)*d], q[(t*p.Hq+h)*d:(t*p.Hq+h+1)*d])
		limit[r] = p.Pos0 + t
	}
	if rp > rows {
		clear(qt[rows*d:])
		limit[rows] = limit[rows-1]
	}
	clear(ot)
	for r := range m {
		m[r] = float32(math.Inf(-1))
		l[r] = 0
	}
	ldkv := p.Hkv * d
	load := func(nc int) {
		for c := 0; c < nc; c++ {
			off := ws.keyPos[c]*ldkv + g*d
			ws.kr[c] = k[off : off+d : off+d]
			ws.vr[c] = v[off : off+d : off+d]
		}
	}
	if tl.sparse {
		list := sel.Tokens[sel.Offsets[tl.t0]:sel.Offsets[tl.t0+1]]
		for i := 0; i < len(list); i += attnBlockKeys {
			nc := min(attnBlockKeys, len(list)-i)
			for c := 0; c < nc; c++ {
				ws.keyPos[c] = int(list[i+c])
			}
			load(nc)
			attnBlock(ws, rp, d, nc, p.Scale, false)
		}
	} else {
		minLimit, maxLimit := p.Pos0+tl.t0, p.Pos0+tl.t1-1
		for kb := 0; kb <= maxLimit; kb += attnBlockKeys {
			nc := min(attnBlockKeys, maxLimit+1-kb)
			for c := 0; c < nc; c++ {
				ws.keyPos[c] = kb + c
			}
			load(nc)
			attnBlock(ws, rp, d, nc, p.Scale, kb+nc-1 > minLimit)
		}
	}
	for r := 0; r < rows; r++ {
		t := tl.t0 + r/hpg
		h := g*hpg + r%hpg
		dst := o[(t*p.Hq+h)*d : (t*p.Hq+h+1)*d]
		src := ot[r*d : (r+1)*d]
		src = src[:len(dst)]
		lr := l[r]
		for i := range dst {
			dst[i] = src[i] / lr
		}
		if lse != nil {
			lse[t*p.Hq+h] = float32(float64(m[r]) + math.Log(float64(lr)))
		}
	}
}

// attnBlock folds one block of nc keys (ws.kr, ws.vr) into the running softmax of rp rows.
// Masked scores (key position past the row's causal limit) become -Inf and contribute exact
// zeros, so a dense tile gives bitwise the same rows as the explicit list 0..pos0+t.
func attnBlock(ws *attnScratch, rp, d, nc int, scale float32, mask bool) {
	st := ws.st[:nc*rp]
	attnScores(st, ws.qt[:rp*d], rp, d, ws.kr[:nc])
	negInf := float32(math.Inf(-1))
	for r := 0; r < rp; r++ {
		mOld := ws.m[r]
		bmax := negInf
		lim := ws.limit[r]
		for c := 0; c < nc; c++ {
			s := st[c*rp+r] * scale
			if mask && ws.keyPos[c] > lim {
				s = negInf
			}
			st[c*rp+r] = s
			if s > bmax {
				bmax = s
			}
		}
		mNew := max(mOld, bmax)
		if mNew == negInf {
			// No visible key yet for this row (cannot happen for key position 0 first, kept
			// so that probabilities stay finite).
			for c := 0; c < nc; c++ {
				st[c*rp+r] = 0
			}
			continue
		}
		var sum float32
		for c := 0; c < nc; c++ {
			e := float32(math.Exp(float64(st[c*rp+r] - mNew)))
			st[c*rp+r] = e
			sum += e
		}
		alpha := float32(math.Exp(float64(mOld - mNew)))
		ws.l[r] = ws.l[r]*alpha + sum
		ws.m[r] = mNew
		if alpha != 1 {
			row := ws.ot[r*d : (r+1)*d]
			for i := range row {
				row[i] *= alpha
			}
		}
	}
	attnPV(ws.ot[:rp*d], st, rp, d, ws.vr[:nc])
}

// attnScoresGo writes st[c*rp + r] = qt[r] . kr[c] for rp (even) rows and len(kr) keys with the
// 2x4 register tile (the fastest scalar tile measured on amd64: 8 accumulators, no spills).
func attnScoresGo(st, qt []float32, rp, d int, kr [][]float32) {
	nc := len(kr)
	for r := 0; r+1 < rp; r += 2 {
		q0 := qt[r*d : (r+1)*d]
		q1 := qt[(r+1)*d : (r+2)*d]
		c := 0
		for ; c+4 <= nc; c += 4 {
			a00, a01, a02, a03, a10, a11, a12, a13 := attnDot2x4(q0, q1, kr[c], kr[c+1], kr[c+2], kr[c+3])
			st[c*rp+r], st[c*rp+r+1] = a00, a10
			st[(c+1)*rp+r], st[(c+1)*rp+r+1] = a01, a11
			st[(c+2)*rp+r], st[(c+2)*rp+r+1] = a02, a12
			st[(c+3)*rp+r], st[(c+3)*rp+r+1] = a03, a13
		}
		for ; c < nc; c++ {
			a0, a1 := attnDot2x1(q0, q1, kr[c])
			st[c*rp+r], st[c*rp+r+1] = a0, a1
		}
	}
}

// attnDot2x4 returns the 8 dot products of rows q0, q1 with k0..k3 (all of len(q0)), each
// summed in index order.
func attnDot2x4(q0, q1, k0, k1, k2, k3 []float32) (a00, a01, a02, a03, a10, a11, a12, a13 float32) {
	q1 = q1[:len(q0)]
	k0 = k0[:len(q0)]
	k1 = k1[:len(q0)]
	k2 = k2[:len(q0)]
	k3 = k3[:len(q0)]
	for i := range q0 {
		x0, x1 := q0[i], q1[i]
		y0, y1, y2, y3 := k0[i], k1[i], k2[i], k3[i]
		a00 += x0 * y0
		a01 += x0 * y1
		a02 += x0 * y2
		a03 += x0 * y3
		a10 += x1 * y0
		a11 += x1 * y1
		a12 += x1 * y2
		a13 += x1 * y3
	}
	return
}

// attnDot2x1 is attnDot2x4 for one key; each sum runs in the same order, so a score does not
// depend on whether its key fell in a group of four.
func attnDot2x1(q0, q1, k0 []float32) (a0, a1 float32) {
	q1 = q1[:len(q0)]
	k0 = k0[:len(q0)]
	for i := range q0 {
		y := k0[i]
		a0 += q0[i] * y
		a1 += q1[i] * y
	}
	return
}

// attnPVGo adds ot[r] += sum_c st[c*rp + r] * vr[c] for rp (even) rows, keys in index order.
func attnPVGo(ot, st []float32, rp, d int, vr [][]float32) {
	for r := 0; r+1 < rp; r += 2 {
		attnPV2(ot[r*d:(r+1)*d], ot[(r+1)*d:(r+2)*d], st, rp, r, vr)
	}
}

// attnPV2 is the 2-row x 4-column register tile of the P.V product: the output tile stays in
// registers while the keys of the block stream past.
func attnPV2(o0, o1, st []float32, rp, r int, vr [][]float32) {
	o1 = o1[:len(o0)]
	d := 0
	for ; d+4 <= len(o0); d += 4 {
		oa := o0[d : d+4 : d+4]
		ob := o1[d : d+4 : d+4]
		a0, a1, a2, a3 := oa[0], oa[1], oa[2], oa[3]
		b0, b1, b2, b3 := ob[0], ob[1], ob[2], ob[3]
		for c, vrow := range vr {
			vv := vrow[d : d+4 : d+4]
			pp := st[c*rp+r : c*rp+r+2 : c*rp+r+2]
			p0, p1 := pp[0], pp[1]
			v0, v1, v2, v3 := vv[0], vv[1], vv[2], vv[3]
			a0 += p0 * v0
			a1 += p0 * v1
			a2 += p0 * v2
			a3 += p0 * v3
			b0 += p1 * v0
			b1 += p1 * v1
			b2 += p1 * v2
			b3 += p1 * v3
		}
		oa[0], oa[1], oa[2], oa[3] = a0, a1, a2, a3
		ob[0], ob[1], ob[2], ob[3] = b0, b1, b2, b3
	}
	for ; d < len(o0); d++ {
		a, b := o0[d], o1[d]
		for c, vrow := range vr {
			x := vrow[d]
			a += st[c*rp+r] * x
			b += st[c*rp+r+1] * x
		}
		o0[d], o1[d] = a, b
	}
}
