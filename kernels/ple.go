package kernels

import (
	"fmt"
	"math"
	"math/big"
)

// splitmix64 constants (Steele, Lea and Flood's SplitMix64; the PLE multiplier generator).
const (
	pleGamma = 0x9E3779B97F4A7C15
	pleMix1  = 0xBF58476D1CE4E5B9
	pleMix2  = 0x94D049BB133111EB
	plePrime = 10007 // per-PLE-layer seed stride
)

func pleSplitmix64(v uint64) uint64 {
	v += pleGamma
	v = (v ^ (v >> 30)) * pleMix1
	v = (v ^ (v >> 27)) * pleMix2
	return v ^ (v >> 31)
}

// PLEHash is the hashed n-gram id generator of one qwen4_exp PLE layer
// (Qwen4ExpTextNGramEmbedding): multiplicative-XOR hashes of the last 1..ngramSize-1 tokens
// into Heads = (ngramSize-1)*headsPerNGram prime-sized vocabularies packed into one table.
type PLEHash struct {
	Vocab, NGramSize, HeadsPerNGram int
	Eos                             int32
	// Mult [NGramSize]: mult_i = 2*(splitmix64((seed + 10007*pleIndex + gamma*(i+1)) mod 2^64) mod half) + 1,
	// half = max(1, ((2^63-1) / vocab) / 2).
	Mult []int64
	// HeadVocab [Heads]: head h's size, the (g+1)-th prime >= vocabBase for g = pleIndex*Heads + h.
	HeadVocab []int64
	// Offset [Heads]: running sums of HeadVocab (head h's first table row).
	Offset []int64
	// Rows is the table size: sum(HeadVocab) rounded up to a multiple of divisor.
	Rows int
}

// NewPLEHash builds the hash of the PLE layer at position pleIndex of ple_layer_ids, from the
// config's vocab_size, ngram_size, heads_per_ngram, ngram_vocab_size_base,
// make_ngram_vocab_size_divisible_by, seed and eos_token_id. NGramSize must be 2 or 3 (the
// carried context holds 2 tokens). Errors wrap ErrArg.
func NewPLEHash(vocab, ngramSize, headsPerNGram, vocabBase, divisor, pleIndex int, seed int64, eos int32) (*PLEHash, error) {
	if vocab <= 0 || vocab > math.MaxInt32 || ngramSize < 2 || ngramSize > 3 || headsPerNGram <= 0 ||
		vocabBase < 2 || divisor <= 0 || pleIndex < 0 || eos < 0 || int(eos) >= vocab {
		return nil, fmt.Errorf("NewPLEHash: %w: vocab=%d ngram=%d heads/ngram=%d base=%d divisor=%d index=%d eos=%d",
			ErrArg, vocab, ngramSize, headsPerNGram, vocabBase, divisor, pleIndex, eos)
	}
	heads := (ngramSize - 1) * headsPerNGram
	h := &PLEHash{Vocab: vocab, NGramSize: ngramSize, HeadsPerNGram: headsPerNGram, Eos: eos}
	half := max(1, uint64(math.MaxInt64)/uint64(vocab)/2)
	base := uint64(seed) + plePrime*uint64(pleIndex)
	for i := 0; i < ngramSize; i++ {
		h.Mult = append(h.Mult, int64(2*(pleSplitmix64(base+pleGamma*uint64(i+1))%half)+1))
	}
	// Head g's vocabulary is the (g+1)-th prime >= vocabBase: walk the primes once.
	first := pleIndex * heads
	p := big.NewInt(int64(vocabBase) - 1)
	one := big.NewInt(1)
	var total int64
	for g := 0; g < first+heads; g++ {
		for p.Add(p, one); !p.ProbablyPrime(20); p.Add(p, one) {
		}
		if g >= first {
			h.HeadVocab = append(h.HeadVocab, p.Int64())
			h.Offset = append(h.Offset, total)
			total += p.Int64()
		}
	}
	rows := (total + int64(divisor) - 1) / int64(divisor) * int64(divisor)
	if rows > math.MaxInt32 {
		return nil, fmt.Errorf("NewPLEHash: %w: table of %d rows beyond int32 ids", ErrArg, rows)
	}
	h.Rows = int(rows)
	return h, nil
}

// Heads is the number of hashed ids per token ((NGramSize-1) * HeadsPerNGram, 16 in the models).
func (h *PLEHash) Heads() int { return (h.NGramSize - 1) * h.HeadsPerNGram }

// TableRows is the number of rows the embedding table must have (ngram_embedding.weight [rows, headDim]).
func (h *PLEHash) TableRows() int { return h.Rows }

// InitialContext is the carried context at the start of a sequence: two eos ids.
func (h *PLEHash) InitialContext() [2]int32 { return [2]int32{h.Eos, h.Eos} }

// IDs hashes the new tokens [T] into table rows ids [T, Heads]. The token history is the
// carried context ctx (the previous two ids; InitialContext at the start) followed by tokens.
// For shift s < NGramSize the token s positions back is used only if it lies in the same
// segment (a segment restarts after every eos in the history) and exists; else eos is used
// (transformers' _shift_right_ignore_eos). For n = 2..NGramSize,
// mixed = XOR_{j<n} token_shift_j * Mult[j] (int64), and head k of that n-gram size gets
// mixed mod HeadVocab + Offset; heads of n = 2 come first. On success ctx becomes the last two
// ids of the history, so hashing a stream in chunks gives the same ids as in one call.
// Errors wrap ErrShape, or ErrArg for a token or context id outside [0, Vocab).
func (h *PLEHash) IDs(ids []int32, tokens []int32, ctx *[2]int32) error {
	if h == nil || ctx == nil {
		return fmt.Errorf("PLEHash.IDs: %w: nil hash or context", ErrArg)
	}
	heads := h.Heads()
	T := len(tokens)
	if len(ids) != T*heads {
		return fmt.Errorf("PLEHash.IDs: %w: len(ids)=%d, want %d tokens x %d heads", ErrShape, len(ids), T, heads)
	}
	hist := make([]int32, 0, T+2)
	hist = append(hist, ctx[0], ctx[1])
	hist = append(hist, tokens...)
	for i, v := range hist {
		if v < 0 || int(v) >= h.Vocab {
			return fmt.Errorf("PLEHash.IDs: %w: id %d at history position %d outside [0, %d)", ErrArg, v, i, h.Vocab)
		}
	}
	lastEos := -1 // last eos position strictly before p
	var shifted [3]int64
	for p := 0; p < len(hist); p++ {
		if p >= 2 {
			t := p - 2
			for s := 0; s < h.NGramSize; s++ {
				if p-s > lastEos && p-s >= 0 {
					shifted[s] = int64(hist[p-s])
				} else {
					shifted[s] = int64(h.Eos)
				}
			}
			var mixed int64
			for n := 2; n <= h.NGramSize; n++ {
				if n == 2 {
					mixed = shifted[0]*h.Mult[0] ^ shifted[1]*h.Mult[1]
				} else {
					mixed ^= shifted[n-1] * h.Mult[n-1]
				}
				for k := 0; k < h.HeadsPerNGram; k++ {
					hd := (n-2)*h.HeadsPerNGram + k
					ids[t*heads+hd] = int32(mixed%h.HeadVocab[hd] + h.Offset[hd])
				}
			}
		}
		if hist[p] == h.Eos {
			lastEos = p
		}
	}
	ctx[0], ctx[1] = hist[len(hist)-2], hist[len(hist)-1]
	return nil
}

// PLEWeights is one qwen4_exp PLE layer (Qwen4ExpTextPLELayer) for S streams of D:
// Table [rows, HeadDim] (ple_embedding.ngram_embedding.weight; EmbedDim = Heads*HeadDim),
// Key [S*D, EmbedDim] (key_proj), Value [D, EmbedDim] (value_proj), NormKey, NormQuery,
// NormConv [S*D] (grouped RMSNorm1p weights), ConvW [S*D, ConvK] (conv1d.weight [S*D, 1, ConvK],
// depthwise, no bias; ConvK = len(ConvW)/(S*D), 4 in the models) and Dilation (= ngram_size, 3).
type PLEWeights struct {
	S, D, EmbedDim, HeadDim int
	Table                   *Matrix
	Key                     *Matrix
	Value                   *Matrix
	NormKey                 []float32
	NormQuery               []float32
	NormConv                []float32
	ConvW                   []float32
	Dilation                int
}

// ConvK is the depthwise conv kernel size, 0 when ConvW does not hold whole rows.
func (w *PLEWeights) ConvK() int {
	if w.S <= 0 || w.D <= 0 || len(w.ConvW)%(w.S*w.D) != 0 {
		return 0
	}
	return len(w.ConvW) / (w.S * w.D)
}

// ConvStateLen is the number of float32 in the carried conv state: (ConvK-1)*Dilation steps of
// S*D channels (9 x S*D in the models).
func (w *PLEWeights) ConvStateLen() int { return (w.ConvK() - 1) * w.Dilation * w.S * w.D }

func (w *PLEWeights) validate(op string) error {
	if w == nil {
		return fmt.Errorf("%s: %w: nil PLE weights", op, ErrArg)
	}
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	if S <= 0 || D <= 0 || E <= 0 || Hd <= 0 || E%Hd != 0 || w.Dilation <= 0 || w.ConvK() < 1 ||
		len(w.NormKey) != S*D || len(w.NormQuery) != S*D || len(w.NormConv) != S*D {
		return fmt.Errorf("%s: %w: S=%d D=%d EmbedDim=%d HeadDim=%d dilation=%d len(ConvW)=%d norms %d/%d/%d",
			op, ErrShape, S, D, E, Hd, w.Dilation, len(w.ConvW), len(w.NormKey), len(w.NormQuery), len(w.NormConv))
	}
	for _, m := range []*Matrix{w.Table, w.Key, w.Value} {
		if err := m.validate(op); err != nil {
			return err
		}
	}
	if w.Table.K != Hd || w.Key.N != S*D || w.Key.K != E || w.Value.N != D || w.Value.K != E {
		return fmt.Errorf("%s: %w: table [%d, %d] (want [*, %d]), key [%d, %d] (want [%d, %d]), value [%d, %d] (want [%d, %d])",
			op, ErrShape, w.Table.N, w.Table.K, Hd, w.Key.N, w.Key.K, S*D, E, w.Value.N, w.Value.K, D, E)
	}
	return nil
}

// PLEApply adds one PLE layer's output to the raw streams H [T, S*D] in place, for the hashed
// ids [T, Heads] of the same tokens (PLEHash.IDs; Heads = EmbedDim/HeadDim):
//
//	emb    = concat over heads of Table[ids[t, h]]                      [T, EmbedDim]
//	key    = grouped RMSNorm1p(Key emb; NormKey)                        [T, S, D]
//	value  = Value emb                                                  [T, D]
//	query  = grouped RMSNorm1p(H; NormQuery)                            [T, S, D]
//	gate_s = key_s . query_s / sqrt(D); gate_s = sign(gate_s) * sqrt(max(|gate_s|, 1e-6))
//	gv_s   = sigmoid(gate_s) * value;  gvn = grouped RMSNorm1p(gv; NormConv)
//	conv   = depthwise causal conv of gvn over time, kernel ConvK, dilation Dilation:
//	         conv[t, c] = sum_j ConvW[c, j] * gvn[t - (ConvK-1-j)*Dilation, c]
//	H     += gv + silu(conv)
//
// convState [(ConvK-1)*Dilation, S*D] holds the gvn of the steps before this call (zeros at
// the start of a sequence) and is replaced by the last steps of the history, so calls over
// consecutive chunks equal one call over the whole stream. Dots and the conv sum run in
// float64. Source: Qwen4ExpTextPLELayer. Parallel over tokens and channels.
// Errors wrap ErrShape, ErrArg (an id outside the table) or ErrDType.
func PLEApply(H []float32, T int, ids []int32, w *PLEWeights, convState []float32, eps float32) error {
	if w != nil {
		if err := checkElems("PLEApply", "H", T, w.S, w.D); err != nil {
			return err
		}
	}
	if err := w.validate("PLEApply"); err != nil {
		return err
	}
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	heads, C := E/Hd, S*D
	if T < 0 || len(H) != T*C || len(ids) != T*heads || len(convState) != w.ConvStateLen() {
		return fmt.Errorf("PLEApply: %w: T=%d len(H)=%d (want %d) len(ids)=%d (want %d) len(convState)=%d (want %d)",
			ErrShape, T, len(H), T*C, len(ids), T*heads, len(convState), w.ConvStateLen())
	}
	if !(eps >= 0) {
		return fmt.Errorf("PLEApply: %w: eps=%g", ErrArg, eps)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= w.Table.N {
			return fmt.Errorf("PLEApply: %w: ids[%d] = %d outside the table's %d rows", ErrArg, i, id, w.Table.N)
		}
	}
	if T == 0 {
		return nil
	}
	emb := make([]float32, T*E)
	parallelFor(T, 16, func(lo, hi int) {
		for i := lo * heads; i < hi*heads; i++ {
			r := int(ids[i])
			if w.Table.DType == F32 {
				copy(emb[i*Hd:(i+1)*Hd], w.Table.F32[r*Hd:(r+1)*Hd])
			} else {
				widenU16(emb[i*Hd:(i+1)*Hd], w.Table.U16[r*Hd:(r+1)*Hd], w.Table.DType)
			}
		}
	})
	key := make([]float32, T*C)
	value := make([]float32, T*D)
	if err := MatMul(key, emb, T, w.Key); err != nil {
		return err
	}
	if err := MatMul(value, emb, T, w.Value); err != nil {
		return err
	}
	gv := make([]float32, T*C)
	gvn := make([]float32, T*C)
	invSqrtD := 1 / math.Sqrt(float64(D))
	parallelFor(T, 4, func(lo, hi int) {
		q := make([]float32, C)
		for t := lo; t < hi; t++ {
			kt := key[t*C : (t+1)*C]
			grNormRow(kt, kt, w.NormKey, D, eps)
			grNormRow(q, H[t*C:(t+1)*C], w.NormQuery, D, eps)
			vt := value[t*D : (t+1)*D]
			for s := 0; s < S; s++ {
				var dot float64
				for d := 0; d < D; d++ {
					dot += float64(kt[s*D+d]) * float64(q[s*D+d])
				}
				g := float32(dot * invSqrtD)
				if g != 0 { // torch.sign(0) = 0 keeps a zero gate at zero
					g = float32(math.Copysign(math.Sqrt(math.Max(math.Abs(float64(g)), 1e-6)), float64(g)))
				}
				sg := sigmoid32(g)
				row := gv[t*C+s*D : t*C+(s+1)*D]
				for d, v := range vt {
					row[d] = sg * v
				}
			}
			grNormRow(gvn[t*C:(t+1)*C], gv[t*C:(t+1)*C], w.NormConv, D, eps)
		}
	})
	K, dil := w.ConvK(), w.Dilation
	L := (K - 1) * dil
	// at(t, c) is gvn of step t, reading the carried state for t < 0.
	at := func(t, c int) float64 {
		if t < 0 {
			return float64(convState[(L+t)*C+c])
		}
		return float64(gvn[t*C+c])
	}
	parallelFor(T, 4, func(lo, hi int) {
		conv := make([]float32, C)
		for t := lo; t < hi; t++ {
			for c := 0; c < C; c++ {
				var acc float64
				for j := 0; j < K; j++ {
					acc += float64(w.ConvW[c*K+j]) * at(t-(K-1-j)*dil, c)
				}
				conv[c] = float32(acc)
			}
			siluRow(conv, conv, 1)
			for c, v := range conv {
				H[t*C+c] += gv[t*C+c] + v
			}
		}
	})
	// New state: the last L steps of (old state ++ gvn).
	if T >= L {
		copy(convState, gvn[(T-L)*C:])
	} else {
		copy(convState, convState[T*C:])
		copy(convState[(L-T)*C:], gvn)
	}
	return nil
}
