package kernels

import (
	"github.com/stratakernels/strata/op"

	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op/optest"
)

// denseIsPrimeTrial is primality by trial division.
func denseIsPrimeTrial(n int64) bool {
	if n < 2 {
		return false
	}
	for d := int64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// denseSplitmixBig is splitmix64 evaluated on big integers reduced mod 2^64 after each step.
func denseSplitmixBig(v *big.Int) *big.Int {
	mod := new(big.Int).Lsh(big.NewInt(1), 64)
	m := func(x *big.Int) *big.Int { return x.Mod(x, mod) }
	hex := func(s string) *big.Int { b, _ := new(big.Int).SetString(s, 16); return b }
	x := m(new(big.Int).Add(v, hex("9E3779B97F4A7C15")))
	x = m(new(big.Int).Mul(new(big.Int).Xor(x, new(big.Int).Rsh(x, 30)), hex("BF58476D1CE4E5B9")))
	x = m(new(big.Int).Mul(new(big.Int).Xor(x, new(big.Int).Rsh(x, 27)), hex("94D049BB133111EB")))
	return new(big.Int).Xor(x, new(big.Int).Rsh(x, 31))
}

func TestPLEHashIndependent(t *testing.T) {
	cases := []struct {
		vocab, ngram, hpn, base, div, index int
		seed                                int64
	}{
		{512, 3, 8, 1000, 128, 0, 1234},
		{248320, 3, 8, 100000, 128, 1, 1234},
		{151936, 2, 4, 5000, 64, 3, -77},
	}
	for _, c := range cases {
		h, err := op.NewPLEHash(c.vocab, c.ngram, c.hpn, c.base, c.div, c.index, c.seed, 0)
		if err != nil {
			t.Fatal(err)
		}
		mod := new(big.Int).Lsh(big.NewInt(1), 64)
		half := (int64(math.MaxInt64) / int64(c.vocab)) / 2
		for i := 0; i < c.ngram; i++ {
			v := big.NewInt(c.seed + 10007*int64(c.index))
			gamma, _ := new(big.Int).SetString("9E3779B97F4A7C15", 16)
			v.Add(v, new(big.Int).Mul(gamma, big.NewInt(int64(i+1))))
			v.Mod(v, mod) // Go's Mod is Euclidean: a negative seed wraps like Python's & mask
			r := new(big.Int).Mod(denseSplitmixBig(v), big.NewInt(half))
			want := 2*r.Int64() + 1
			if h.Mult[i] != want {
				t.Errorf("%+v: mult[%d] = %d, want %d", c, i, h.Mult[i], want)
			}
		}
		heads := (c.ngram - 1) * c.hpn
		// the primes >= base, counted from the first one, by trial division
		var primes []int64
		for n := int64(c.base); len(primes) < (c.index+1)*heads; n++ {
			if denseIsPrimeTrial(n) {
				primes = append(primes, n)
			}
		}
		var off int64
		for k := 0; k < heads; k++ {
			want := primes[c.index*heads+k]
			if h.HeadVocab[k] != want || h.Offset[k] != off {
				t.Fatalf("%+v: head %d vocab %d offset %d, want %d, %d", c, k, h.HeadVocab[k], h.Offset[k], want, off)
			}
			off += want
		}
		if h.TableRows()%c.div != 0 || h.TableRows() < int(off) || h.TableRows()-int(off) >= c.div {
			t.Errorf("%+v: %d table rows for %d ids", c, h.TableRows(), off)
		}
	}
}

// denseTinyPLE reads the tiny qwen4exp checkpoint's config and its PLE layer's table shape.
func denseTinyPLE(t *testing.T) (map[string]any, []int64) {
	const dir = "../testdata/qwen4exp-tiny"
	raw, err := os.ReadFile(dir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	tt, err := ck.Tensor("model.layers.1.ple.ple_embedding.ngram_embedding.weight")
	if err != nil {
		t.Fatal(err)
	}
	return cfg, tt.Shape
}

func TestPLEHashTinyTable(t *testing.T) {
	cfg, shape := denseTinyPLE(t)
	n := func(k string) int { return int(cfg[k].(float64)) }
	// layer index 1 is PLE because 1+1 is in ple_layer_ids; its position in that list is 0
	h, err := op.NewPLEHash(n("vocab_size"), n("ngram_size"), n("heads_per_ngram"), n("ngram_vocab_size_base"),
		n("make_ngram_vocab_size_divisible_by"), 0, int64(n("seed")), int32(n("eos_token_id")))
	if err != nil {
		t.Fatal(err)
	}
	headDim := n("ple_embed_dim") / h.Heads()
	if int64(h.TableRows()) != shape[0] || int64(headDim) != shape[1] || h.TableRows() != 16896 {
		t.Fatalf("table [%d, %d], checkpoint has %v (want 16896 rows)", h.TableRows(), headDim, shape)
	}
}

// densePLEIDsRef hashes by definition: for each new token, walk back up to s positions in the
// history and stop at an eos that precedes the current token.
func densePLEIDsRef(h *op.PLEHash, ctx [2]int32, tokens []int32) []int32 {
	hist := append([]int32{ctx[0], ctx[1]}, tokens...)
	heads := h.Heads()
	ids := make([]int32, len(tokens)*heads)
	for t := range tokens {
		p := t + 2
		tok := make([]uint64, h.NGramSize)
		for s := range tok {
			tok[s] = uint64(h.Eos)
			ok := p-s >= 0
			for q := p - s; ok && q < p; q++ {
				if hist[q] == h.Eos {
					ok = false
				}
			}
			if ok {
				tok[s] = uint64(hist[p-s])
			}
		}
		for n := 2; n <= h.NGramSize; n++ {
			var mixed uint64
			for j := 0; j < n; j++ {
				mixed ^= tok[j] * uint64(h.Mult[j])
			}
			for k := 0; k < h.HeadsPerNGram; k++ {
				hd := (n-2)*h.HeadsPerNGram + k
				ids[t*heads+hd] = int32(int64(mixed%uint64(h.HeadVocab[hd])) + h.Offset[hd])
			}
		}
	}
	return ids
}

func TestPLEIDs(t *testing.T) {
	h, err := op.NewPLEHash(512, 3, 8, 1000, 128, 0, 1234, 511)
	if err != nil {
		t.Fatal(err)
	}
	for _, T := range optest.DenseT {
		tokens := optest.Tokens(uint64(T), T, 512, 511, 6)
		if T > 3 {
			tokens[0], tokens[2], tokens[3] = 511, 511, 511 // eos at the start and back to back
		}
		ctx := h.InitialContext()
		ids := make([]int32, T*h.Heads())
		if err := h.IDs(ids, tokens, &ctx); err != nil {
			t.Fatal(err)
		}
		want := densePLEIDsRef(h, h.InitialContext(), tokens)
		for i := range want {
			if ids[i] != want[i] {
				t.Fatalf("T%d: id %d = %d, want %d", T, i, ids[i], want[i])
			}
		}
		if T >= 2 && (ctx[0] != tokens[T-2] || ctx[1] != tokens[T-1]) {
			t.Fatalf("T%d: context %v after the stream", T, ctx)
		}
		// chunked: split into pieces of 1, 2 and the rest
		ctx2 := h.InitialContext()
		var got []int32
		for lo := 0; lo < T; {
			hi := min(T, lo+1+len(got)%3)
			part := make([]int32, (hi-lo)*h.Heads())
			if err := h.IDs(part, tokens[lo:hi], &ctx2); err != nil {
				t.Fatal(err)
			}
			got = append(got, part...)
			lo = hi
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("T%d chunked: id %d = %d, want %d", T, i, got[i], want[i])
			}
		}
		for _, id := range ids {
			if id < 0 || int(id) >= h.TableRows() {
				t.Fatalf("id %d outside the table", id)
			}
		}
	}
}

type densePLE struct {
	w                 *op.PLEWeights
	table, key, value []float32
}

func densePLEWeights(t *testing.T, c optest.PLECase, seed uint64) densePLE {
	S, D, E := c.S, c.D, c.Heads*c.HeadDim
	var r densePLE
	w := &op.PLEWeights{S: S, D: D, EmbedDim: E, HeadDim: c.HeadDim, Dilation: c.Dilation}
	w.Table, r.table = denseMatrix(t, seed, c.Rows, c.HeadDim, c.DType, 1)
	w.Key, r.key = denseMatrix(t, seed+1, S*D, E, c.DType, 0.2)
	w.Value, r.value = denseMatrix(t, seed+2, D, E, c.DType, 0.2)
	w.NormKey = optest.Floats(seed+3, S*D, 0.3)
	w.NormQuery = optest.Floats(seed+4, S*D, 0.3)
	w.NormConv = optest.Floats(seed+5, S*D, 0.3)
	w.ConvW = optest.Floats(seed+6, S*D*c.ConvK, 0.5)
	r.w = w
	return r
}

// densePLERef64 is the PLE layer over a whole stream from a zero conv state, in float64:
// returns H + gv + silu(conv(norm(gv))).
func densePLERef64(p densePLE, H []float32, T int, ids []int32, eps float64) []float64 {
	w := p.w
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	C, heads, K := S*D, E/Hd, w.ConvK()
	norm := func(x []float64, wt []float32) []float64 {
		y := make([]float64, len(x))
		for g := 0; g*D < len(x); g++ {
			var ss float64
			for _, v := range x[g*D : (g+1)*D] {
				ss += v * v
			}
			inv := 1 / math.Sqrt(ss/float64(D)+eps)
			for d := 0; d < D; d++ {
				y[g*D+d] = x[g*D+d] * inv * (1 + float64(wt[(g%S)*D+d]))
			}
		}
		return y
	}
	emb := make([]float64, T*E)
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			for j := 0; j < Hd; j++ {
				emb[t*E+h*Hd+j] = float64(p.table[int(ids[t*heads+h])*Hd+j])
			}
		}
	}
	key := norm(denseLinear64(emb, T, p.key, C, E), w.NormKey)
	val := denseLinear64(emb, T, p.value, D, E)
	q := norm(denseTo64(H), w.NormQuery)
	gv := make([]float64, T*C)
	for t := 0; t < T; t++ {
		for s := 0; s < S; s++ {
			var g float64
			for d := 0; d < D; d++ {
				g += key[t*C+s*D+d] * q[t*C+s*D+d]
			}
			g /= math.Sqrt(float64(D))
			if g > 0 {
				g = math.Sqrt(math.Max(g, 1e-6))
			} else if g < 0 {
				g = -math.Sqrt(math.Max(-g, 1e-6))
			}
			for d := 0; d < D; d++ {
				gv[t*C+s*D+d] = denseSigmoid64(g) * val[t*D+d]
			}
		}
	}
	gvn := norm(gv, w.NormConv)
	out := denseTo64(H)
	for t := 0; t < T; t++ {
		for c := 0; c < C; c++ {
			var acc float64
			for j := 0; j < K; j++ {
				if src := t - (K-1-j)*w.Dilation; src >= 0 {
					acc += float64(w.ConvW[c*K+j]) * gvn[src*C+c]
				}
			}
			out[t*C+c] += gv[t*C+c] + acc*denseSigmoid64(acc)
		}
	}
	return out
}

func TestPLEApplyCases(t *testing.T) { forEachKernel(t, testPLEApplyCases) }

func testPLEApplyCases(t *testing.T) {
	const eps = 1e-6
	for i, c := range optest.PLECases() {
		name := fmt.Sprintf("T%d_S%d_D%d_heads%d_split%d_%s", c.T, c.S, c.D, c.Heads, c.Split, c.DType)
		p := densePLEWeights(t, c, uint64(2000+10*i))
		C := c.S * c.D
		H0 := optest.Floats(uint64(2100+i), c.T*C, 2)
		ids := make([]int32, c.T*c.Heads)
		for j, v := range optest.Tokens(uint64(2200+i), len(ids), c.Rows, 0, 0) {
			ids[j] = v
		}
		run := func(split int) []float32 {
			H := append([]float32(nil), H0...)
			state := make([]float32, p.w.ConvStateLen())
			for _, r := range [][2]int{{0, split}, {split, c.T}} {
				if r[1] == r[0] {
					continue
				}
				if err := pleApply(H[r[0]*C:r[1]*C], r[1]-r[0], ids[r[0]*c.Heads:r[1]*c.Heads], p.w, state, eps); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			return H
		}
		one := run(0)
		denseCheck(t, name, one, densePLERef64(p, H0, c.T, ids, eps), 1e-5)
		if c.Split > 0 {
			// Not bitwise: the projections' GEMM blocking depends on the row count.
			denseCheck(t, name+" chunked", run(c.Split), denseTo64(one), 1e-6)
		}
		if c.T == 65 {
			denseSameAcrossProcs(t, name, func() []float32 { return run(c.Split) })
		}
	}
}

func TestPLEErrors(t *testing.T) {
	c := optest.PLECase{T: 2, S: 2, D: 8, Heads: 2, HeadDim: 3, Rows: 10, ConvK: 4, Dilation: 3, DType: op.F32}
	p := densePLEWeights(t, c, 1)
	H := make([]float32, 2*16)
	state := make([]float32, p.w.ConvStateLen())
	h, err := op.NewPLEHash(512, 3, 8, 1000, 128, 0, 1234, 511)
	if err != nil {
		t.Fatal(err)
	}
	ctx := h.InitialContext()
	badCtx := [2]int32{0, 600}
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"id past table", op.ErrInvalidArgument, func() error { return pleApply(H, 2, []int32{0, 1, 2, 10}, p.w, state, 1e-6) }},
		{"negative id", op.ErrInvalidArgument, func() error { return pleApply(H, 2, []int32{0, -1, 2, 3}, p.w, state, 1e-6) }},
		{"ids length", op.ErrShape, func() error { return pleApply(H, 2, []int32{0, 1, 2}, p.w, state, 1e-6) }},
		{"state length", op.ErrShape, func() error { return pleApply(H, 2, []int32{0, 1, 2, 3}, p.w, state[1:], 1e-6) }},
		{"H length", op.ErrShape, func() error { return pleApply(H[1:], 2, []int32{0, 1, 2, 3}, p.w, state, 1e-6) }},
		{"nil weights", op.ErrInvalidArgument, func() error { return pleApply(H, 2, []int32{0, 1, 2, 3}, nil, state, 1e-6) }},
		{"token range", op.ErrInvalidArgument, func() error { return h.IDs(make([]int32, 16), []int32{512}, &ctx) }},
		{"context range", op.ErrInvalidArgument, func() error { return h.IDs(make([]int32, 16), []int32{5}, &badCtx) }},
		{"ids size", op.ErrShape, func() error { return h.IDs(make([]int32, 15), []int32{5}, &ctx) }},
		{"nil ctx", op.ErrInvalidArgument, func() error { return h.IDs(make([]int32, 16), []int32{5}, nil) }},
		{"ngram 4", op.ErrInvalidArgument, func() error { _, err := op.NewPLEHash(512, 4, 8, 1000, 128, 0, 1, 5); return err }},
		{"eos range", op.ErrInvalidArgument, func() error { _, err := op.NewPLEHash(512, 3, 8, 1000, 128, 0, 1, 512); return err }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}
