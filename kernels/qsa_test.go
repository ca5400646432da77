package kernels

import (
	"fmt"

	"github.com/stratakernels/strata/op"

	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/stratakernels/strata/op/optest"
)

// qsaNaiveRow is the float64 reference selection of one query row.
type qsaNaiveRow struct {
	dense  bool
	blocks []int     // selected blocks, ascending
	scores []float64 // score of every complete block
	kth    float64   // score of the last kept block in rank order
	tokens []int32
}

// qsaNaive recomputes the indexer in float64 from its definition: pooled mean, RMSNorm1p, RoPE
// with cos/sin of pos*theta^(-2i/rot), relu-summed head dots, then a full sort by
// (score descending, block ascending).
func qsaNaive(q, rawKeys, kNorm []float32, p op.IndexerParams) []qsaNaiveRow {
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
		var ms float64
		for _, xv := range x {
			ms += xv * xv / float64(dim)
		}
		r := 1 / math.Sqrt(ms+float64(p.Eps))
		for j := range x {
			x[j] = x[j] * r * (1 + float64(kNorm[j]))
		}
		y := slices.Clone(x)
		h := p.Rot / 2
		for i := 0; i < h; i++ {
			ang := float64(b*p.Ratio) * math.Pow(p.Theta, -2*float64(i)/float64(p.Rot))
			y[i] = x[i]*math.Cos(ang) - x[i+h]*math.Sin(ang)
			y[i+h] = x[i+h]*math.Cos(ang) + x[i]*math.Sin(ang)
		}
		keys[b] = y
	}
	rows := make([]qsaNaiveRow, p.T)
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
					d += float64(q[(t*p.NHeads+h)*dim+j]) * keys[b][j]
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
		rows[t] = qsaNaiveRow{blocks: blocks, scores: sc, kth: sc[order[keep-1]], tokens: toks}
	}
	return rows
}

func qsaParams(c optest.QSACase) op.IndexerParams {
	return op.IndexerParams{T: c.T, Pos0: c.Pos0, NHeads: c.NHeads, Dim: c.Dim, Ratio: c.Ratio,
		Budget: c.Budget, Rot: c.Rot, Theta: c.Theta, Eps: c.Eps}
}

// qsaCompare checks a selection against the reference. Blocks whose float64 scores lie within
// a relative 1e-5 of the row's cut-off may swap (float32 scoring of a near tie); any other
// difference fails. It returns the number of such near-tie swaps.
func qsaCompare(t *testing.T, sel *op.Selection, ref []qsaNaiveRow, p op.IndexerParams) int {
	t.Helper()
	if sel.T != p.T || len(sel.Dense) != p.T || len(sel.Offsets) != p.T+1 {
		t.Fatalf("selection shape T=%d dense=%d offsets=%d", sel.T, len(sel.Dense), len(sel.Offsets))
	}
	if err := sel.CheckTokens("qsa", p.T, p.Pos0, sel.Tokens); err != nil {
		t.Fatalf("selection does not validate: %v", err)
	}
	swaps := 0
	for r, want := range ref {
		if sel.Dense[r] != want.dense {
			t.Fatalf("row %d: dense %v, want %v", r, sel.Dense[r], want.dense)
		}
		if want.dense {
			continue
		}
		got := sel.Tokens[sel.Offsets[r]:sel.Offsets[r+1]]
		if len(got) != len(want.tokens) {
			t.Fatalf("row %d: %d tokens, want %d", r, len(got), len(want.tokens))
		}
		if slices.Equal(got, want.tokens) {
			continue
		}
		gotBlocks := map[int]bool{}
		for i := 0; i < len(got); i++ {
			if int(got[i]) >= len(want.scores)*p.Ratio { // tail
				if got[i] != want.tokens[i] {
					t.Fatalf("row %d: tail token %d, want %d", r, got[i], want.tokens[i])
				}
				continue
			}
			if got[i]%int32(p.Ratio) == 0 {
				gotBlocks[int(got[i])/p.Ratio] = true
			}
		}
		wantBlocks := map[int]bool{}
		for _, b := range want.blocks {
			wantBlocks[b] = true
		}
		tol := 1e-5 * math.Max(1, math.Abs(want.kth))
		for b := range gotBlocks {
			if !wantBlocks[b] {
				if math.Abs(want.scores[b]-want.kth) > tol {
					t.Fatalf("row %d: block %d (score %.9g) selected, cut-off %.9g", r, b, want.scores[b], want.kth)
				}
				swaps++
			}
		}
		for b := range wantBlocks {
			if !gotBlocks[b] && math.Abs(want.scores[b]-want.kth) > tol {
				t.Fatalf("row %d: block %d (score %.9g) missing, cut-off %.9g", r, b, want.scores[b], want.kth)
			}
		}
	}
	return swaps
}

func TestQSASelectCases(t *testing.T) {
	for _, c := range optest.QSACases() {
		t.Run(c.Name, func(t *testing.T) {
			iq, rawKeys, kNorm, q, k, v := c.Inputs()
			p := qsaParams(c)
			var sel op.Selection
			if err := qsaSelect(&sel, iq, rawKeys, kNorm, p); err != nil {
				t.Fatal(err)
			}
			ref := qsaNaive(iq, rawKeys, kNorm, p)
			if swaps := qsaCompare(t, &sel, ref, p); swaps > 0 {
				t.Logf("%d near-tie block swaps", swaps)
			}
			nSparse := 0
			for _, d := range sel.Dense {
				if !d {
					nSparse++
				}
			}
			ap := op.AttnParams{T: c.T, Hq: c.Hq, Hkv: c.Hkv, D: c.D, Pos0: c.Pos0, Scale: float32(1 / math.Sqrt(float64(c.D)))}
			o, lse := make([]float32, len(q)), make([]float32, c.T*c.Hq)
			if err := attention(o, lse, q, k, v, ap, &sel); err != nil {
				t.Fatal(err)
			}
			wo, wl := attnNaive(q, k, v, ap, &sel)
			if dO, dL := attnRelDiff(o, wo), attnRelDiff(lse, wl); dO > 1e-5 || dL > 1e-5 {
				t.Fatalf("attention with the selection: o rel diff %.3g, lse %.3g", dO, dL)
			}
			if nSparse == 0 {
				// Budget covering the context: QSA attention is dense attention, bitwise.
				od, ld := make([]float32, len(q)), make([]float32, len(lse))
				if err := attention(od, ld, q, k, v, ap, nil); err != nil {
					t.Fatal(err)
				}
				if i := attnFirstBitDiff(o, od); i >= 0 {
					t.Fatalf("all-dense selection differs from dense attention at o[%d]", i)
				}
				if i := attnFirstBitDiff(lse, ld); i >= 0 {
					t.Fatalf("all-dense selection differs from dense attention at lse[%d]", i)
				}
			} else {
				// The sparse rows must actually change the result.
				od := make([]float32, len(q))
				if err := attention(od, nil, q, k, v, ap, nil); err != nil {
					t.Fatal(err)
				}
				if attnFirstBitDiff(o, od) < 0 {
					t.Fatalf("%d sparse rows but the output equals dense attention", nSparse)
				}
			}
		})
	}
}

// With all index queries zero every score is 0: the tie rule keeps the lowest blocks.
func TestQSASelectTies(t *testing.T) {
	c := optest.QSACases()[5]
	_, rawKeys, kNorm, _, _, _ := c.Inputs()
	p := qsaParams(c)
	iq := make([]float32, c.T*c.NHeads*c.Dim)
	var sel op.Selection
	if err := qsaSelect(&sel, iq, rawKeys, kNorm, p); err != nil {
		t.Fatal(err)
	}
	keep := p.Budget / p.Ratio
	sparse := 0
	for r := 0; r < p.T; r++ {
		if sel.Dense[r] {
			continue
		}
		sparse++
		pos := p.Pos0 + r
		nb := (pos + 1) / p.Ratio
		var want []int32
		for tok := 0; tok < keep*p.Ratio; tok++ {
			want = append(want, int32(tok))
		}
		for tok := nb * p.Ratio; tok <= pos; tok++ {
			want = append(want, int32(tok))
		}
		if got := sel.Tokens[sel.Offsets[r]:sel.Offsets[r+1]]; !slices.Equal(got, want) {
			t.Fatalf("row %d: %v, want %v", r, got, want)
		}
	}
	if sparse == 0 {
		t.Fatal("case has no sparse rows")
	}
	if swaps := qsaCompare(t, &sel, qsaNaive(iq, rawKeys, kNorm, p), p); swaps != 0 {
		t.Fatalf("%d swaps on exact ties", swaps)
	}
}

func TestQSAKthLargest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(200)
		a := make([]float32, n)
		levels := 1 + rng.IntN(8)
		for i := range a {
			if trial%2 == 0 {
				a[i] = float32(rng.IntN(levels)) // many ties
			} else {
				a[i] = rng.Float32()
			}
		}
		if trial%7 == 0 {
			slices.Sort(a) // sorted input: the degenerate case of naive pivots
		}
		sorted := slices.Clone(a)
		slices.Sort(sorted)
		k := 1 + rng.IntN(n)
		if got, want := qsaKthLargest(slices.Clone(a), k), sorted[n-k]; got != want {
			t.Fatalf("n=%d k=%d: got %v, want %v (%v)", n, k, got, want, a)
		}
	}
}

func TestQSASelectDeterministic(t *testing.T) {
	c := optest.QSACases()[6]
	iq, rawKeys, kNorm, _, _, _ := c.Inputs()
	p := qsaParams(c)
	run := func(procs int) op.Selection {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		var s op.Selection
		if err := qsaSelect(&s, iq, rawKeys, kNorm, p); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, c1 := run(2), run(1), run(2)
	for _, s := range []op.Selection{b, c1} {
		if !slices.Equal(a.Dense, s.Dense) || !slices.Equal(a.Offsets, s.Offsets) || !slices.Equal(a.Tokens, s.Tokens) {
			t.Fatal("selections differ across runs or GOMAXPROCS")
		}
	}
	// Reusing a selection that held a larger result gives the same lists as a fresh one.
	big := optest.QSACases()[7]
	biq, braw, bnorm, _, _, _ := big.Inputs()
	var reused op.Selection
	if err := qsaSelect(&reused, biq, braw, bnorm, qsaParams(big)); err != nil {
		t.Fatal(err)
	}
	if err := qsaSelect(&reused, iq, rawKeys, kNorm, p); err != nil {
		t.Fatal(err)
	}
	if reused.T != a.T || !slices.Equal(a.Dense, reused.Dense) || !slices.Equal(a.Offsets, reused.Offsets) || !slices.Equal(a.Tokens, reused.Tokens) {
		t.Fatal("reused selection differs from a fresh one")
	}
}

func TestQSASelectErrors(t *testing.T) {
	good := op.IndexerParams{T: 2, Pos0: 6, NHeads: 2, Dim: 8, Ratio: 2, Budget: 4, Rot: 4, Theta: 1e4, Eps: 1e-6}
	mk := func(n int) []float32 { return make([]float32, n) }
	nq, nk := 2*2*8, 8*8
	var sel op.Selection
	if err := qsaSelect(&sel, mk(nq), mk(nk), mk(8), good); err != nil {
		t.Fatalf("valid call failed: %v", err)
	}
	with := func(f func(*op.IndexerParams)) op.IndexerParams { p := good; f(&p); return p }
	cases := []struct {
		name          string
		sel           *op.Selection
		q, keys, norm []float32
		p             op.IndexerParams
		want          error
	}{
		{"nil selection", nil, mk(nq), mk(nk), mk(8), good, op.ErrInvalidArgument},
		{"T=0", &sel, mk(0), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.T = 0 }), op.ErrShape},
		{"ratio 0", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Ratio = 0 }), op.ErrShape},
		{"negative pos0", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Pos0 = -1 }), op.ErrInvalidArgument},
		{"budget below a block", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Budget = 1 }), op.ErrInvalidArgument},
		{"odd rot", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Rot = 3 }), op.ErrInvalidArgument},
		{"rot > dim", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Rot = 10 }), op.ErrInvalidArgument},
		{"theta 0", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Theta = 0 }), op.ErrInvalidArgument},
		{"negative eps", &sel, mk(nq), mk(nk), mk(8), with(func(p *op.IndexerParams) { p.Eps = -1 }), op.ErrInvalidArgument},
		{"short q", &sel, mk(nq - 1), mk(nk), mk(8), good, op.ErrShape},
		{"short keys", &sel, mk(nq), mk(nk - 8), mk(8), good, op.ErrShape},
		{"ragged keys", &sel, mk(nq), mk(nk + 3), mk(8), good, op.ErrShape},
		{"short norm", &sel, mk(nq), mk(nk), mk(7), good, op.ErrShape},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := qsaSelect(tc.sel, tc.q, tc.keys, tc.norm, tc.p); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// BenchmarkQSASelect: the indexer at the real model's shapes (4 index heads of 128, ratio 4,
// budget 2048) for a 2048-token chunk from position 0 and at pos0 30000 (continuing a long
// prompt), and an 8192-token one-shot chunk; GFLOP/s counts the score dot products of the
// sparse rows. Sub-benchmarks time the whole op, the scores alone and the selection alone.
func BenchmarkQSASelect(b *testing.B) {
	b.Logf("kernels: %s", AttentionKernel())
	for _, c := range []struct{ T, pos0 int }{{2048, 0}, {2048, 30000}, {8192, 0}} {
		p := op.IndexerParams{T: c.T, Pos0: c.pos0, NHeads: 4, Dim: 128, Ratio: 4, Budget: 2048, Rot: 64, Theta: 1e7, Eps: 1e-6}
		r := rand.New(rand.NewPCG(7, uint64(c.T+c.pos0)))
		q, raw, kn := make([]float32, c.T*p.NHeads*p.Dim), make([]float32, (c.pos0+c.T)*p.Dim), make([]float32, p.Dim)
		for _, x := range [][]float32{q, raw, kn} {
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
		}
		var sel op.Selection
		if err := qsaSelect(&sel, q, raw, kn, p); err != nil {
			b.Fatal(err)
		}
		var dots float64
		first := c.T
		for t := c.T - 1; t >= 0 && !sel.Dense[t]; t-- {
			dots += float64((c.pos0 + t + 1) / p.Ratio)
			first = t
		}
		flops := 2 * dots * float64(p.NHeads*p.Dim)
		name := fmt.Sprintf("T%d_pos0_%d", c.T, c.pos0)
		b.Run(name+"/all", func(b *testing.B) {
			for b.Loop() {
				if err := qsaSelect(&sel, q, raw, kn, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		nbAll := (c.pos0 + c.T) / p.Ratio
		keysT := qsaBlockKeys(raw, kn, p, nbAll)
		scale := float32(1 / math.Sqrt(float64(p.Dim)))
		var ws qsaWork
		b.Run(name+"/scores", func(b *testing.B) {
			for b.Loop() {
				for t0 := first; t0 < c.T; t0 += qsaTileRows {
					t1 := min(t0+qsaTileRows, c.T)
					ws.scores(q[t0*p.NHeads*p.Dim:], keysT, nbAll, t1-t0, (c.pos0+t1)/p.Ratio, p.NHeads, p.Dim, scale)
				}
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(name+"/select", func(b *testing.B) {
			t := c.T - 1
			nb := (c.pos0 + t + 1) / p.Ratio
			sc := ws.scores(q[t*p.NHeads*p.Dim:], keysT, nbAll, 1, nb, p.NHeads, p.Dim, scale)
			sc = append([]float32(nil), sc...)
			out := make([]int32, c.pos0+t+1)
			for b.Loop() {
				for range c.T - first { // one selection per sparse row, each over the last row's blocks
					qsaEmit(out, sc, ws.buf(nb), p.Budget/p.Ratio, p.Ratio, c.pos0+t)
				}
			}
		})
	}
}
