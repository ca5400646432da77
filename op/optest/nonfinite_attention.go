package optest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stratakernels/strata/op"
)

// AttentionFunc runs op.Attention over host memory: o [T, Hq, D] and lse [T, Hq] from q
// [T, Hq, D] and the cache k, v [>= Pos0+T, Hkv, D], under sel when it is not nil.
type AttentionFunc func(o, lse, q, k, v []float32, p op.AttnParams, sel *op.Selection) error

// attnPoison is one non-finite input of AttentionNonFinite: value x at element j of the key,
// value or query row of token position pos (absolute in the cache for k and v, the query token
// for q) and KV head (k, v) or query head (q) head.
type attnPoison struct {
	tensor string // "k", "v" or "q"
	pos    int
	head   int
	j      int
	x      float32
}

// attends reports whether output row (t, h) reads the poisoned row.
func (pz attnPoison) attends(p op.AttnParams, sel *op.Selection, t, h int) bool {
	if pz.tensor == "q" {
		return t == pz.pos && h == pz.head
	}
	if h/(p.Hq/p.Hkv) != pz.head || pz.pos > p.Pos0+t {
		return false
	}
	if sel == nil || sel.Dense[t] {
		return true
	}
	return slices.Contains(sel.Tokens[sel.Offsets[t]:sel.Offsets[t+1]], int32(pz.pos))
}

// attnSameClass reports whether got is what the float64 reference want says: NaN where want
// is NaN, non-finite where want is infinite (a weight of 0 in float32 where the reference's is
// tiny turns 0 * Inf into NaN), else finite.
func attnSameClass(got float32, want float64) bool {
	g := float64(got)
	switch {
	case math.IsNaN(want):
		return math.IsNaN(g)
	case math.IsInf(want, 0):
		return math.IsNaN(g) || math.IsInf(g, 0)
	}
	return !math.IsNaN(g) && !math.IsInf(g, 0)
}

// firstBitDiff is the first index where a and b differ in their bits, or -1.
func firstBitDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// AttentionNonFiniteCases are the cases of AttentionNonFinite: tiles of several tokens with an
// empty and a filled cache, HPG 1 at an odd dim, and the model's heads (HPG 12, D 256).
func AttentionNonFiniteCases() []AttentionCase {
	return []AttentionCase{
		{Name: "hpg3", T: 100, Pos0: 0, Hq: 6, Hkv: 2, D: 64, Seed: 41},
		{Name: "hpg3_cached", T: 100, Pos0: 37, Hq: 6, Hkv: 2, D: 64, Seed: 42},
		{Name: "hpg1_d13", T: 60, Pos0: 90, Hq: 2, Hkv: 2, D: 13, Seed: 43},
		{Name: "hpg12_d256", T: 10, Pos0: 150, Hq: 24, Hkv: 2, D: 256, Seed: 44},
	}
}

// AttentionNonFinite is the rule op.Attention documents for NaN and Inf, checked on attention:
// a NaN or an infinity in one element of a key, value or query row, dense and under a selection
// (AttentionCase.Selection), with the poisoned key/value position in the cached prefix (every
// row attends it), in the middle of the chunk (the rows before it must not attend it) and at the
// last token, for each of cases. Rows that do not read the poisoned row (earlier tokens, the
// other KV head's query heads, sparse rows that do not list it) are bitwise the result without
// the poison. Rows that read it follow IEEE arithmetic on the formula as the float64 reference
// (RefAttention) computes it: NaN where it is NaN (a NaN key or query: the whole row and its
// lse), non-finite where it is infinite, finite elsewhere and within tol of the reference
// (relative to the row's largest element; lse within tol too); a value poison leaves the row's
// other elements and its lse bitwise as they were.
func AttentionNonFinite(t *testing.T, cases []AttentionCase, tol float64, attention AttentionFunc) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range cases {
		q0, k0, v0 := c.Inputs()
		p := c.Params()
		g, j := c.Hkv-1, c.D/2
		var poisons []attnPoison
		kvPos := []int{c.Pos0 + c.T/2, c.Pos0 + c.T - 1}
		if c.Pos0 > 0 {
			kvPos = append(kvPos, c.Pos0/2)
		}
		for _, pos := range kvPos {
			for _, x := range []float32{nan, inf, -inf} {
				poisons = append(poisons, attnPoison{"k", pos, g, j, x}, attnPoison{"v", pos, g, j, x})
			}
		}
		poisons = append(poisons, attnPoison{"q", c.T / 2, c.Hq - 1, j, nan}, attnPoison{"q", c.T / 2, 0, j, inf})
		for _, s := range []*op.Selection{nil, c.Selection()} {
			clean, cleanLSE := make([]float32, len(q0)), make([]float32, c.T*c.Hq)
			if err := attention(clean, cleanLSE, q0, k0, v0, p, s); err != nil {
				t.Fatal(err)
			}
			for _, pz := range poisons {
				name := fmt.Sprintf("%s/sel=%v/%s[%d,%d,%d]=%v", c.Name, s != nil, pz.tensor, pz.pos, pz.head, pz.j, pz.x)
				t.Run(name, func(t *testing.T) {
					q, k, v := q0, k0, v0
					switch pz.tensor {
					case "k":
						k = slices.Clone(k0)
						k[(pz.pos*c.Hkv+pz.head)*c.D+pz.j] = pz.x
					case "v":
						v = slices.Clone(v0)
						v[(pz.pos*c.Hkv+pz.head)*c.D+pz.j] = pz.x
					case "q":
						q = slices.Clone(q0)
						q[(pz.pos*c.Hq+pz.head)*c.D+pz.j] = pz.x
					}
					o, lse := make([]float32, len(q)), make([]float32, c.T*c.Hq)
					if err := attention(o, lse, q, k, v, p, s); err != nil {
						t.Fatal(err)
					}
					wo, wl := RefAttention(q, k, v, p, s)
					attended := 0
					for tt := 0; tt < c.T; tt++ {
						for h := 0; h < c.Hq; h++ {
							i0 := (tt*c.Hq + h) * c.D
							row, cleanRow, wantRow := o[i0:i0+c.D], clean[i0:i0+c.D], wo[i0:i0+c.D]
							l, cl, wlr := lse[tt*c.Hq+h], cleanLSE[tt*c.Hq+h], wl[tt*c.Hq+h]
							if !pz.attends(p, s, tt, h) {
								if e := firstBitDiff(row, cleanRow); e >= 0 || math.Float32bits(l) != math.Float32bits(cl) {
									t.Fatalf("row (t %d, h %d) does not read the poison but changed: o[%d] %v (was %v), lse %v (was %v)", tt, h, e, row[max(e, 0)], cleanRow[max(e, 0)], l, cl)
								}
								continue
							}
							attended++
							if !attnSameClass(l, wlr) {
								t.Fatalf("row (t %d, h %d): lse %v, reference %v", tt, h, l, wlr)
							}
							var md, mw float64
							for e := range row {
								if !attnSameClass(row[e], wantRow[e]) {
									t.Fatalf("row (t %d, h %d) element %d: %v, reference %v", tt, h, e, row[e], wantRow[e])
								}
								if pz.tensor == "v" && e != pz.j && math.Float32bits(row[e]) != math.Float32bits(cleanRow[e]) {
									t.Fatalf("row (t %d, h %d) element %d: %v, without the poison %v", tt, h, e, row[e], cleanRow[e])
								}
								if !math.IsNaN(wantRow[e]) && !math.IsInf(wantRow[e], 0) {
									md = math.Max(md, math.Abs(float64(row[e])-wantRow[e]))
									mw = math.Max(mw, math.Abs(wantRow[e]))
								}
							}
							if pz.tensor == "v" && math.Float32bits(l) != math.Float32bits(cl) {
								t.Fatalf("row (t %d, h %d): lse %v, without the poison %v", tt, h, l, cl)
							}
							if mw > 0 && md/mw > tol {
								t.Fatalf("row (t %d, h %d): finite elements off the reference by %.3g", tt, h, md/mw)
							}
							if !math.IsNaN(wlr) && !math.IsInf(wlr, 0) && math.Abs(float64(l)-wlr) > tol*math.Max(1, math.Abs(wlr)) {
								t.Fatalf("row (t %d, h %d): lse %v, reference %v", tt, h, l, wlr)
							}
						}
					}
					if attended == 0 {
						t.Fatal("no row reads the poison")
					}
				})
			}
		}
	}
}
