package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op/optest"
)

// attnNaive is the float64 reference: for each row, the full softmax over the visible keys
// (0..pos0+t, or the row's listed tokens), then the weighted sum of values.
func attnNaive(q, k, v []float32, p op.AttnParams, sel *op.Selection) (o, lse []float64) {
	hpg := p.Hq / p.Hkv
	d := p.D
	o = make([]float64, p.T*p.Hq*d)
	lse = make([]float64, p.T*p.Hq)
	for t := 0; t < p.T; t++ {
		var keys []int
		if sel == nil || sel.Dense[t] {
			for s := 0; s <= p.Pos0+t; s++ {
				keys = append(keys, s)
			}
		} else {
			for _, s := range sel.Tokens[sel.Offsets[t]:sel.Offsets[t+1]] {
				keys = append(keys, int(s))
			}
		}
		for h := 0; h < p.Hq; h++ {
			g := h / hpg
			qr := q[(t*p.Hq+h)*d : (t*p.Hq+h+1)*d]
			sc := make([]float64, len(keys))
			mx := math.Inf(-1)
			for i, s := range keys {
				kr := k[(s*p.Hkv+g)*d : (s*p.Hkv+g+1)*d]
				var acc float64
				for j := range qr {
					acc += float64(qr[j]) * float64(kr[j])
				}
				sc[i] = acc * float64(p.Scale)
				mx = math.Max(mx, sc[i])
			}
			var sum float64
			for i := range sc {
				sc[i] = math.Exp(sc[i] - mx)
				sum += sc[i]
			}
			out := o[(t*p.Hq+h)*d : (t*p.Hq+h+1)*d]
			for i, s := range keys {
				vr := v[(s*p.Hkv+g)*d : (s*p.Hkv+g+1)*d]
				w := sc[i] / sum
				for j := range out {
					out[j] += w * float64(vr[j])
				}
			}
			lse[t*p.Hq+h] = mx + math.Log(sum)
		}
	}
	return o, lse
}

// attnRelDiff returns max |got - want| / max |want|.
func attnRelDiff(got []float32, want []float64) float64 {
	var md, mw float64
	for i := range want {
		md = math.Max(md, math.Abs(float64(got[i])-want[i]))
		mw = math.Max(mw, math.Abs(want[i]))
	}
	if mw == 0 {
		return md
	}
	return md / mw
}

// attnF64 widens x to float64 (the form attnRelDiff compares against).
func attnF64(x []float32) []float64 {
	w := make([]float64, len(x))
	for i, v := range x {
		w[i] = float64(v)
	}
	return w
}

func attnParams(c optest.AttentionCase) op.AttnParams {
	return op.AttnParams{T: c.T, Hq: c.Hq, Hkv: c.Hkv, D: c.D, Pos0: c.Pos0, Scale: float32(1 / math.Sqrt(float64(c.D)))}
}

func TestAttentionGolden(t *testing.T) { forEachKernel(t, testAttentionGolden) }

func testAttentionGolden(t *testing.T) {
	f, err := safetensors.Open("../testdata/goldens/op_attn_moe.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	get := func(name string) []float32 {
		tn, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		x, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	q, k, v := get("attn.q"), get("attn.k"), get("attn.v")
	wantO, wantLSE := get("attn.o"), get("attn.lse")
	p := op.AttnParams{T: 96, Hq: 24, Hkv: 2, D: 256, Pos0: 200, Scale: 1.0 / 16}
	o := make([]float32, len(wantO))
	lse := make([]float32, len(wantLSE))
	if err := attention(o, lse, q, k, v, p, nil); err != nil {
		t.Fatal(err)
	}
	toF64 := func(x []float32) []float64 {
		y := make([]float64, len(x))
		for i := range x {
			y[i] = float64(x[i])
		}
		return y
	}
	dO, dL := attnRelDiff(o, toF64(wantO)), attnRelDiff(lse, toF64(wantLSE))
	t.Logf("op_attn_moe golden: o max|diff|/max|o| = %.3g, lse max|diff|/max|lse| = %.3g", dO, dL)
	if dO > 1e-4 || dL > 1e-4 {
		t.Fatalf("golden mismatch: o %.3g, lse %.3g (limit 1e-4)", dO, dL)
	}
}

// attnRandomSelection lists, for each row, a random ascending subset of 0..pos0+t (always
// non-empty; every fifth row dense).
func attnRandomSelection(rng *rand.Rand, T, pos0 int) *op.Selection {
	s := &op.Selection{T: T, Dense: make([]bool, T), Offsets: make([]int32, T+1)}
	for t := 0; t < T; t++ {
		s.Offsets[t] = int32(len(s.Tokens))
		if t%5 == 4 {
			s.Dense[t] = true
			continue
		}
		n0 := len(s.Tokens)
		for pos := 0; pos <= pos0+t; pos++ {
			if rng.IntN(3) == 0 {
				s.Tokens = append(s.Tokens, int32(pos))
			}
		}
		if len(s.Tokens) == n0 {
			s.Tokens = append(s.Tokens, int32(rng.IntN(pos0+t+1)))
		}
	}
	s.Offsets[T] = int32(len(s.Tokens))
	return s
}

func TestAttentionSelectionLists(t *testing.T) { forEachKernel(t, testAttentionSelectionLists) }

func testAttentionSelectionLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, c := range optest.AttentionCases() {
		if (c.D != 13 && c.T != 65) || c.T > 300 { // T = 2050 runs in op/optest (Attention/.../listed)
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			q, k, v := c.Inputs()
			p := attnParams(c)
			sel := attnRandomSelection(rng, c.T, c.Pos0)
			o := make([]float32, len(q))
			lse := make([]float32, c.T*c.Hq)
			if err := attention(o, lse, q, k, v, p, sel); err != nil {
				t.Fatal(err)
			}
			wo, wl := attnNaive(q, k, v, p, sel)
			if dO, dL := attnRelDiff(o, wo), attnRelDiff(lse, wl); dO > 1e-5 || dL > 1e-5 {
				t.Fatalf("listed selection: o rel diff %.3g, lse rel diff %.3g", dO, dL)
			}
			// Listing every position explicitly is the dense attention, computed the sparse way.
			full := &op.Selection{T: c.T, Dense: make([]bool, c.T), Offsets: make([]int32, c.T+1)}
			for tt := 0; tt < c.T; tt++ {
				full.Offsets[tt] = int32(len(full.Tokens))
				for pos := 0; pos <= c.Pos0+tt; pos++ {
					full.Tokens = append(full.Tokens, int32(pos))
				}
			}
			full.Offsets[c.T] = int32(len(full.Tokens))
			o2, lse2 := make([]float32, len(q)), make([]float32, len(lse))
			if err := attention(o2, lse2, q, k, v, p, full); err != nil {
				t.Fatal(err)
			}
			o3, lse3 := make([]float32, len(q)), make([]float32, len(lse))
			if err := attention(o3, lse3, q, k, v, p, nil); err != nil {
				t.Fatal(err)
			}
			if dO, dL := attnRelDiff(o2, attnF64(o3)), attnRelDiff(lse2, attnF64(lse3)); dO > 1e-5 || dL > 1e-5 {
				t.Fatalf("full list vs dense: o rel diff %.3g, lse rel diff %.3g", dO, dL)
			}
		})
	}
}

func attnFirstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func TestAttentionDeterministic(t *testing.T) { forEachKernel(t, testAttentionDeterministic) }

// testAttentionDeterministic: the same bits at GOMAXPROCS 2 (twice), 1, 3 and 4, dense and
// sparse, the sparse rows in one key chunk and in chunks of one key block (the chunk loop
// with its barriers, and the units of every chunk spread over the workers).
func testAttentionDeterministic(t *testing.T) {
	c := optest.AttentionCase{T: 300, Pos0: 200, Hq: 24, Hkv: 2, D: 64, Seed: 99}
	q, k, v := c.Inputs()
	p := attnParams(c)
	sel := attnRandomSelection(rand.New(rand.NewPCG(3, 4)), c.T, c.Pos0)
	for _, chunkKeys := range []int{0, attnBlockKeys} {
		for _, s := range []*op.Selection{nil, sel} {
			run := func(procs int) ([]float32, []float32) {
				defer attnSetChunk(chunkKeys, c.D)()
				prev := runtime.GOMAXPROCS(procs)
				defer runtime.GOMAXPROCS(prev)
				o, lse := make([]float32, len(q)), make([]float32, c.T*c.Hq)
				if err := attention(o, lse, q, k, v, p, s); err != nil {
					t.Fatal(err)
				}
				return o, lse
			}
			o1, l1 := run(2)
			o2, l2 := run(2)
			o3, l3 := run(1)
			o4, l4 := run(4)
			o5, l5 := run(3)
			for i, pair := range [][2][]float32{{o1, o2}, {l1, l2}, {o1, o3}, {l1, l3}, {o1, o4}, {l1, l4}, {o1, o5}, {l1, l5}} {
				if j := attnFirstBitDiff(pair[0], pair[1]); j >= 0 {
					t.Fatalf("chunk %d keys, selection %v, comparison %d: element %d differs: %v vs %v", chunkKeys, s != nil, i, j, pair[0][j], pair[1][j])
				}
			}
		}
	}
}

// attnSetChunk sets the sparse pass's key chunk to keys positions at head dim d (0: leave the
// default) and returns a function that restores it.
func attnSetChunk(keys, d int) (restore func()) {
	prev := attnChunkBytes
	if keys > 0 {
		attnChunkBytes = keys * 8 * d
	}
	return func() { attnChunkBytes = prev }
}

func TestAttentionSparseChunks(t *testing.T) { forEachKernel(t, testAttentionSparseChunks) }

// testAttentionSparseChunks runs the sparse rows in key chunks of 1, 2 and 3 key blocks, of 50
// positions (blocks cut by the chunk edges) and in the default chunk: each against the float64
// reference (the bound of the listed-selection test), and a list of every position against
// dense attention. Then the real head shape (24 / 2 heads of 256, the AVX2 score kernel's
// groups of four heads by three keys) after 5000 cached positions, where the default chunk
// (2048 positions) splits every row.
func testAttentionSparseChunks(t *testing.T) {
	c := optest.AttentionCase{T: 70, Pos0: 400, Hq: 6, Hkv: 2, D: 64, Seed: 17}
	q, k, v := c.Inputs()
	p := attnParams(c)
	sel := attnRandomSelection(rand.New(rand.NewPCG(5, 6)), c.T, c.Pos0)
	full := &op.Selection{T: c.T, Dense: make([]bool, c.T), Offsets: make([]int32, c.T+1)}
	for tt := 0; tt < c.T; tt++ {
		full.Offsets[tt] = int32(len(full.Tokens))
		for pos := 0; pos <= c.Pos0+tt; pos++ {
			full.Tokens = append(full.Tokens, int32(pos))
		}
	}
	full.Offsets[c.T] = int32(len(full.Tokens))
	wo, wl := attnNaive(q, k, v, p, sel)
	od, ld := make([]float32, len(q)), make([]float32, c.T*c.Hq)
	if err := attention(od, ld, q, k, v, p, nil); err != nil {
		t.Fatal(err)
	}
	for _, keys := range []int{attnBlockKeys, 2 * attnBlockKeys, 3 * attnBlockKeys, 50, 0} {
		func() {
			defer attnSetChunk(keys, c.D)()
			if n := attnChunkKeys(c.D); keys > 0 && n != keys {
				t.Fatalf("chunk of %d keys, want %d", n, keys)
			}
			o, lse := make([]float32, len(q)), make([]float32, c.T*c.Hq)
			if err := attention(o, lse, q, k, v, p, sel); err != nil {
				t.Fatal(err)
			}
			if dO, dL := attnRelDiff(o, wo), attnRelDiff(lse, wl); dO > 1e-5 || dL > 1e-5 {
				t.Fatalf("chunks of %d keys: o rel diff %.3g, lse rel diff %.3g", keys, dO, dL)
			}
			if err := attention(o, lse, q, k, v, p, full); err != nil {
				t.Fatal(err)
			}
			if dO, dL := attnRelDiff(o, attnF64(od)), attnRelDiff(lse, attnF64(ld)); dO > 1e-5 || dL > 1e-5 {
				t.Fatalf("chunks of %d keys, full list vs dense: o rel diff %.3g, lse rel diff %.3g", keys, dO, dL)
			}
		}()
	}

	big := optest.AttentionCase{T: 24, Pos0: 5000, Hq: 24, Hkv: 2, D: 256, Seed: 18}
	if n := attnChunkKeys(big.D); n >= big.Pos0/2 {
		t.Fatalf("default chunk of %d keys at D=%d: the case would not split its rows", n, big.D)
	}
	q, k, v = big.Inputs()
	p = attnParams(big)
	sel = attnRandomSelection(rand.New(rand.NewPCG(7, 8)), big.T, big.Pos0)
	o, lse := make([]float32, len(q)), make([]float32, big.T*big.Hq)
	if err := attention(o, lse, q, k, v, p, sel); err != nil {
		t.Fatal(err)
	}
	wo, wl = attnNaive(q, k, v, p, sel)
	if dO, dL := attnRelDiff(o, wo), attnRelDiff(lse, wl); dO > 1e-5 || dL > 1e-5 {
		t.Fatalf("T=%d pos0=%d D=%d: o rel diff %.3g, lse rel diff %.3g", big.T, big.Pos0, big.D, dO, dL)
	}
}

// TestAttentionNonFinite checks the NaN/Inf rule of op.Attention (optest.AttentionNonFinite)
// with every kernel set.
func TestAttentionNonFinite(t *testing.T) {
	forEachKernel(t, func(t *testing.T) { optest.AttentionNonFinite(t, optest.AttentionNonFiniteCases(), 1e-5, attention) })
}

func TestAttentionErrors(t *testing.T) {
	good := op.AttnParams{T: 3, Hq: 4, Hkv: 2, D: 8, Pos0: 2, Scale: 0.25}
	nq, nkv := 3*4*8, 5*2*8
	mk := func(n int) []float32 { return make([]float32, n) }
	goodSel := func() *op.Selection {
		return &op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 2, 4}, Tokens: []int32{0, 3, 1, 4}}
	}
	if err := attention(mk(nq), mk(12), mk(nq), mk(nkv), mk(nkv), good, goodSel()); err != nil {
		t.Fatalf("valid call failed: %v", err)
	}
	cases := []struct {
		name    string
		o, lse  []float32
		q, k, v []float32
		p       op.AttnParams
		sel     *op.Selection
		want    error
	}{
		{"T=0", mk(0), nil, mk(0), mk(nkv), mk(nkv), op.AttnParams{T: 0, Hq: 4, Hkv: 2, D: 8, Pos0: 2, Scale: 1}, nil, op.ErrShape},
		{"D=0", mk(0), nil, mk(0), mk(0), mk(0), op.AttnParams{T: 3, Hq: 4, Hkv: 2, D: 0, Scale: 1}, nil, op.ErrShape},
		{"HPG not dividing", mk(3 * 3 * 8), nil, mk(3 * 3 * 8), mk(nkv), mk(nkv), op.AttnParams{T: 3, Hq: 3, Hkv: 2, D: 8, Pos0: 2, Scale: 1}, nil, op.ErrInvalidArgument},
		{"negative pos0", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), op.AttnParams{T: 3, Hq: 4, Hkv: 2, D: 8, Pos0: -1, Scale: 1}, nil, op.ErrInvalidArgument},
		{"zero scale", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), op.AttnParams{T: 3, Hq: 4, Hkv: 2, D: 8, Pos0: 2}, nil, op.ErrInvalidArgument},
		{"NaN scale", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), op.AttnParams{T: 3, Hq: 4, Hkv: 2, D: 8, Pos0: 2, Scale: float32(math.NaN())}, nil, op.ErrInvalidArgument},
		{"short q", mk(nq), nil, mk(nq - 1), mk(nkv), mk(nkv), good, nil, op.ErrShape},
		{"short o", mk(nq - 8), nil, mk(nq), mk(nkv), mk(nkv), good, nil, op.ErrShape},
		{"bad lse", mk(nq), mk(11), mk(nq), mk(nkv), mk(nkv), good, nil, op.ErrShape},
		{"short k", mk(nq), nil, mk(nq), mk(nkv - 16), mk(nkv), good, nil, op.ErrShape},
		{"ragged v", mk(nq), nil, mk(nq), mk(nkv), mk(nkv + 3), good, nil, op.ErrShape},
		{"selection T", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good, &op.Selection{T: 2, Dense: []bool{true, true}, Offsets: []int32{0, 0, 0}}, op.ErrInvalidArgument},
		{"token beyond causal limit", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 2, 4}, Tokens: []int32{0, 4, 1, 4}}, op.ErrInvalidArgument},
		{"token out of range", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 2, 4}, Tokens: []int32{-1, 3, 1, 4}}, op.ErrInvalidArgument},
		{"tokens not ascending", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 2, 4}, Tokens: []int32{3, 0, 1, 4}}, op.ErrInvalidArgument},
		{"duplicate token", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 2, 4}, Tokens: []int32{3, 3, 1, 4}}, op.ErrInvalidArgument},
		{"empty sparse row", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 0, 2}, Tokens: []int32{1, 4}}, op.ErrInvalidArgument},
		{"dense row with tokens", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, true, true}, Offsets: []int32{0, 1, 1, 1}, Tokens: []int32{0}}, op.ErrInvalidArgument},
		{"offsets past tokens", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true, false, false}, Offsets: []int32{0, 0, 2, 5}, Tokens: []int32{0, 3, 1, 4}}, op.ErrInvalidArgument},
		{"decreasing offsets", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{false, false, false}, Offsets: []int32{0, 3, 2, 4}, Tokens: []int32{0, 3, 1, 4}}, op.ErrInvalidArgument},
		{"short Dense", mk(nq), nil, mk(nq), mk(nkv), mk(nkv), good,
			&op.Selection{T: 3, Dense: []bool{true}, Offsets: []int32{0, 0, 0, 0}}, op.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := attention(tc.o, tc.lse, tc.q, tc.k, tc.v, tc.p, tc.sel)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// BenchmarkAttention runs the full model's attention shape (24 q / 2 kv heads x 256, causal,
// from an empty cache) at T = 512, 1024, 2048 and reports GFLOP/s with causal FLOPs
// 4 * D * Hq * sum over rows of visible keys.
func BenchmarkAttention(b *testing.B) {
	b.Logf("kernels: %s", AttentionKernel())
	for _, T := range []int{512, 1024, 2048} {
		c := optest.AttentionCase{T: T, Hq: 24, Hkv: 2, D: 256, Seed: 5}
		q, k, v := c.Inputs()
		p := attnParams(c)
		o, lse := make([]float32, len(q)), make([]float32, c.T*c.Hq)
		visible := float64(c.T) * float64(c.T+1) / 2
		flops := 4 * float64(c.D*c.Hq) * visible
		b.Run(fmt.Sprintf("T%d", T), func(b *testing.B) {
			for b.Loop() {
				if err := attention(o, lse, q, k, v, p, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkQSAAttention times the --bench op line of sparse attention at long context (op/optest's
// Attention/qsa_2pass case at T 2048 after 30000 cached tokens: 24 / 2 heads of 256, 2051 keys
// a row) beside the GEMM peak P of the same run (optest.BenchPeak), each by optest.Time (median
// of 3 after a warm-up), and reports the op's ms, GFLOP/s and percent of P. Run it with
// -benchtime 1x: every iteration times both cases afresh.
func BenchmarkQSAAttention(b *testing.B) {
	b.Logf("kernels: %s", AttentionKernel())
	o := optest.BenchOptions{LongT: 2048, Pos0: 30000}
	var sparse optest.Case
	for _, c := range optest.BenchCases(o) {
		if c.Name == "Attention/qsa_2pass/T2048_pos30000_h4_dim128_r4_b2048" {
			sparse = c
		}
	}
	if sparse.Name == "" {
		b.Fatal("no Attention/qsa_2pass/T2048_pos30000 case in optest.BenchCases")
	}
	for b.Loop() {
		peak, err := optest.Time(Backend{}, optest.BenchPeak(o), 3)
		if err != nil {
			b.Fatal(err)
		}
		r, err := optest.Time(Backend{}, sparse, 3)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("P %.1f GFLOP/s; %s %.0f ms (min %.0f), %.1f GFLOP/s, %.1f%% of P", peak.GFLOPS(), r.Name,
			float64(r.Median.Microseconds())/1000, float64(r.Min.Microseconds())/1000, r.GFLOPS(), 100*r.GFLOPS()/peak.GFLOPS())
		b.ReportMetric(float64(r.Median.Microseconds())/1000, "ms")
		b.ReportMetric(r.GFLOPS(), "GFLOP/s")
		b.ReportMetric(100*r.GFLOPS()/peak.GFLOPS(), "%P")
	}
}
