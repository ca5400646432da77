package op

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
// carried context holds 2 tokens). Errors wrap ErrInvalidArgument.
func NewPLEHash(vocab, ngramSize, headsPerNGram, vocabBase, divisor, pleIndex int, seed int64, eos int32) (*PLEHash, error) {
	if vocab <= 0 || vocab > math.MaxInt32 || ngramSize < 2 || ngramSize > 3 || headsPerNGram <= 0 ||
		vocabBase < 2 || divisor <= 0 || pleIndex < 0 || eos < 0 || int(eos) >= vocab {
		return nil, fmt.Errorf("NewPLEHash: %w: vocab=%d ngram=%d heads/ngram=%d base=%d divisor=%d index=%d eos=%d",
			ErrInvalidArgument, vocab, ngramSize, headsPerNGram, vocabBase, divisor, pleIndex, eos)
	}
	heads := (ngramSize - 1) * headsPerNGram
	h := &PLEHash{Vocab: vocab, NGramSize: ngramSize, HeadsPerNGram: headsPerNGram, Eos: eos}
	half := max(1, uint64(math.MaxInt64)/uint64(vocab)/2)
	base := uint64(seed) + plePrime*uint64(pleIndex)
	for i := 0; i < ngramSize; i++ {
		h.Mult = append(h.Mult, int64(2*(pleSplitmix64(base+pleGamma*uint64(i+1))%half)+1))
	}
	var total int64
	for _, v := range PLEHeadVocabs(vocabBase, heads, pleIndex) {
		h.HeadVocab = append(h.HeadVocab, v)
		h.Offset = append(h.Offset, total)
		total += v
	}
	rows := (total + int64(divisor) - 1) / int64(divisor) * int64(divisor)
	if rows > math.MaxInt32 {
		return nil, fmt.Errorf("NewPLEHash: %w: table of %d rows beyond int32 ids", ErrInvalidArgument, rows)
	}
	h.Rows = int(rows)
	return h, nil
}

// PLEHeadVocabs returns the vocabulary size of each of the heads n-gram heads of the PLE layer at
// position pleIndex of ple_layer_ids: head h gets the (g+1)-th prime >= vocabBase for the global
// head g = pleIndex*heads + h, so all heads of all PLE layers differ (transformers'
// Qwen4ExpTextNGramEmbedding). A head's table rows start at the running sum of the sizes before
// it. The one derivation of these sizes: the loader, the config checks and the checkpoint
// generator call it.
func PLEHeadVocabs(vocabBase, heads, pleIndex int) []int64 {
	if heads <= 0 || pleIndex < 0 || vocabBase < 2 {
		return nil
	}
	first := pleIndex * heads
	p := big.NewInt(int64(vocabBase) - 1)
	one := big.NewInt(1)
	out := make([]int64, 0, heads)
	for g := 0; g < first+heads; g++ {
		for p.Add(p, one); !p.ProbablyPrime(20); p.Add(p, one) {
		}
		if g >= first {
			out = append(out, p.Int64())
		}
	}
	return out
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
// Errors wrap ErrShape, or ErrInvalidArgument for a token or context id outside [0, Vocab).
func (h *PLEHash) IDs(ids []int32, tokens []int32, ctx *[2]int32) error {
	if h == nil || ctx == nil {
		return fmt.Errorf("PLEHash.IDs: %w: nil hash or context", ErrInvalidArgument)
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
			return fmt.Errorf("PLEHash.IDs: %w: id %d at history position %d outside [0, %d)", ErrInvalidArgument, v, i, h.Vocab)
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
