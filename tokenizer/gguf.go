package tokenizer

import (
	"fmt"
	"math"
)

// GGUFVocab is the tokenizer a GGUF file carries in its tokenizer.ggml.* metadata, as llama.cpp's
// converter (convert_hf_to_gguf.py with gguf-py's SpecialVocab) writes it from a Hugging Face
// checkpoint.
type GGUFVocab struct {
	// Model is tokenizer.ggml.model ("gpt2": byte-level BPE) and Pre is tokenizer.ggml.pre, the
	// name of the pre-tokenizer ("qwen2" for Qwen2, Qwen3 and Qwen3-Next).
	Model, Pre string
	// Tokens is tokenizer.ggml.tokens: the text of each id, in the byte-level alphabet for
	// normal tokens, as written for added tokens.
	Tokens []string
	// TokenTypes is tokenizer.ggml.token_type, one per token: llama.cpp's token types 1 normal,
	// 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
	TokenTypes []int32
	// Merges is tokenizer.ggml.merges: each merge "a b" (the two tokens joined by one space),
	// the first applied first.
	Merges []string
	// BOS, EOS, PAD and UNK are tokenizer.ggml.{bos,eos,padding,unknown}_token_id; -1 when
	// absent.
	BOS, EOS, PAD, UNK int32
	// AddBOS and AddEOS are tokenizer.ggml.add_bos_token and add_eos_token (false when absent).
	AddBOS, AddEOS bool
}

// llama.cpp's token types (gguf-py's TokenType, llama_token_type).
const (
	ggufNormal      = 1
	ggufUnknown     = 2
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
	ggufByte        = 6
)

// ggufPreSplit maps the tokenizer.ggml.pre names llama.cpp's converter writes for Qwen
// checkpoints (it names a tokenizer by the hash of the ids of a probe text:
// get_vocab_base_pre in convert_hf_to_gguf.py) to the Split pattern of their tokenizer.json.
var ggufPreSplit = map[string]string{
	// Qwen1.5, Qwen2, Qwen2.5, Qwen3 and Qwen3-Next.
	"qwen2": qwenPattern,
	// Qwen3.5 and Qwen3.6: letters and marks (\p{M}) run together.
	"qwen35": qwen35Pattern,
}

// FromGGUF builds a Tokenizer from the tokenizer of a GGUF file. It gives the ids that Parse
// gives for the tokenizer.json the file was converted from (checked on the Qwen3 corpus of
// testdata, converted as llama.cpp's converter does; with "qwen35", against the ids llama.cpp's
// llama-tokenize gives on that corpus and on texts rich in combining marks, in NFC):
//
//   - Model must be "gpt2" and Pre "qwen2" (the Qwen pattern of the package doc's step 3) or
//     "qwen35" (Qwen3.5's pattern, which runs combining marks together with letters). Other
//     names are refused with ErrUnsupported naming them.
//   - Normal tokens (type 1) form the BPE vocabulary, their index their id; they must include
//     the 256 byte tokens. Merges are split at their one space; each side and their
//     concatenation must be normal tokens. A literal space in a merge side (the converter
//     writes it as U+0120) cannot occur in a byte-level vocabulary and is not undone.
//   - Control (3) and user-defined (4) tokens are the added tokens: found in the raw text
//     before anything else, as step 1 of the package doc. Control tokens are special
//     (IsSpecial). The converter makes an added token control when tokenizer.json marks it
//     special or when it looks like <|...|>, so <|fim_prefix|> and its kin, not special in
//     Qwen3's tokenizer.json, are special here; their ids are the same.
//   - Unused tokens (5: the converter's [PADi] placeholders for ids that tokenizer.json does
//     not use, up to the config's vocab_size) are gaps: Decode and TokenBytes refuse them.
//     VocabSize is len(Tokens).
//   - The text is normalized with NFC as in step 2: GGUF does not record the normalizer, and
//     the tokenizer.json files of the checkpoints named above all have NFC. (llama.cpp itself does not
//     normalize, so its ids differ from these and from Hugging Face's on text that is not in
//     NFC.)
//
// Errors wrap ErrFormat for malformed input, naming the key and index: no tokens, an empty
// token, the same text for two tokens, TokenTypes not one per token, a type outside 1..6, no
// merges, a merge not of the form "a b" or naming a token outside the normal ones, a special
// token id outside [-1, len(Tokens)). They wrap ErrUnsupported for what is not implemented:
// another model or pre-tokenizer, unknown (2) or byte (6) tokens (which a gpt2 vocabulary of
// the converter does not have), a missing byte token, AddBOS or AddEOS (Encode adds no
// tokens). v is not modified or retained.
func FromGGUF(v GGUFVocab) (*Tokenizer, error) {
	switch {
	case v.Model == "":
		return nil, fmt.Errorf("%w: tokenizer.ggml.model is empty", ErrFormat)
	case v.Model != "gpt2":
		return nil, fmt.Errorf("%w: tokenizer.ggml.model %q (only \"gpt2\", byte-level BPE, is implemented)", ErrUnsupported, v.Model)
	}
	pattern, known := ggufPreSplit[v.Pre]
	if !known {
		return nil, fmt.Errorf("%w: tokenizer.ggml.pre %q (only \"qwen2\", the pre-tokenizer of Qwen2, Qwen3 and Qwen3-Next, and \"qwen35\", that of Qwen3.5 and Qwen3.6, are implemented)", ErrUnsupported, v.Pre)
	}
	n := len(v.Tokens)
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens is empty", ErrFormat)
	case n > math.MaxInt32:
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens has %d tokens (ids are int32)", ErrFormat, n)
	case len(v.TokenTypes) != n:
		return nil, fmt.Errorf("%w: tokenizer.ggml.token_type has %d entries for %d tokens", ErrFormat, len(v.TokenTypes), n)
	case len(v.Merges) == 0:
		return nil, fmt.Errorf("%w: tokenizer.ggml.merges is missing or empty", ErrFormat)
	}
	for _, s := range []struct {
		key string
		id  int32
	}{{"bos_token_id", v.BOS}, {"eos_token_id", v.EOS}, {"padding_token_id", v.PAD}, {"unknown_token_id", v.UNK}} {
		if s.id < -1 || int64(s.id) >= int64(n) {
			return nil, fmt.Errorf("%w: tokenizer.ggml.%s %d outside [0, %d) (or -1 for none)", ErrFormat, s.key, s.id, n)
		}
	}
	if v.AddBOS || v.AddEOS {
		return nil, fmt.Errorf("%w: tokenizer.ggml.add_bos_token %v, add_eos_token %v (Encode adds no tokens)", ErrUnsupported, v.AddBOS, v.AddEOS)
	}

	vocab := make(map[string]int64, n)
	var added []addedToken
	index := make(map[string]int, n) // text -> first index, over the tokens that are not unused
	for i, tok := range v.Tokens {
		where := fmt.Sprintf("tokenizer.ggml.tokens[%d] (%q)", i, tok)
		typ := v.TokenTypes[i]
		switch {
		case tok == "":
			return nil, fmt.Errorf("%w: tokenizer.ggml.tokens[%d] is empty", ErrFormat, i)
		case typ < ggufNormal || typ > ggufByte:
			return nil, fmt.Errorf("%w: %s has type %d (llama.cpp's token types are 1 to 6)", ErrFormat, where, typ)
		case typ == ggufUnknown || typ == ggufByte:
			return nil, fmt.Errorf("%w: %s has type %d (unknown and byte tokens are not part of a byte-level BPE vocabulary)", ErrUnsupported, where, typ)
		case typ == ggufUnused:
			continue
		}
		if j, dup := index[tok]; dup {
			return nil, fmt.Errorf("%w: %s has the text of tokenizer.ggml.tokens[%d]", ErrFormat, where, j)
		}
		index[tok] = i
		if typ == ggufNormal {
			vocab[tok] = int64(i)
		} else {
			added = append(added, addedToken{id: int32(i), content: tok, special: typ == ggufControl})
		}
	}
	merges := make([][2]string, len(v.Merges))
	for i, m := range v.Merges {
		a, b, err := splitMerge(m)
		if err != nil {
			return nil, fmt.Errorf("%w: tokenizer.ggml.merges[%d]: %v", ErrFormat, i, err)
		}
		merges[i] = [2]string{a, b}
	}
	b, err := newBPE(vocab, merges, "tokenizer.ggml.merges")
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{bpe: b, added: indexAdded(added), split: splitters[pattern]}
	t.buildPieces(n)
	return t, nil
}
