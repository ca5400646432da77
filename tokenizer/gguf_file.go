package tokenizer

import (
	"fmt"

	"github.com/stratakernels/strata/internal/gguf"
)

// LoadGGUF builds the tokenizer a GGUF file carries in its tokenizer.ggml.* metadata (read from
// the header alone, the tensor data untouched; FromGGUF). Errors name the file and the key: a
// file without tokenizer.ggml.model wraps ErrNoTokenizer, a damaged header the GGUF reader's
// error, a vocabulary FromGGUF refuses ErrFormat or ErrUnsupported.
func LoadGGUF(path string) (*Tokenizer, error) {
	f, err := gguf.OpenHeader(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v := GGUFVocab{BOS: -1, EOS: -1, PAD: -1, UNK: -1}
	if v.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return nil, fmt.Errorf("%w: %s has no tokenizer.ggml.model (%v)", ErrNoTokenizer, path, err)
	}
	if _, ok := f.Lookup("tokenizer.ggml.pre"); ok {
		if v.Pre, err = f.String("tokenizer.ggml.pre"); err != nil {
			return nil, err
		}
	}
	if v.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, err
	}
	types, err := f.Ints("tokenizer.ggml.token_type")
	if err != nil {
		return nil, err
	}
	for _, t := range types {
		v.TokenTypes = append(v.TokenTypes, int32(t))
	}
	if _, ok := f.Lookup("tokenizer.ggml.merges"); ok {
		if v.Merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, err
		}
	}
	for key, dst := range map[string]*int32{"bos_token_id": &v.BOS, "eos_token_id": &v.EOS, "padding_token_id": &v.PAD, "unknown_token_id": &v.UNK} {
		if _, ok := f.Lookup("tokenizer.ggml." + key); !ok {
			continue
		}
		id, err := f.Int("tokenizer.ggml." + key)
		if err != nil {
			return nil, err
		}
		*dst = int32(id)
	}
	for key, dst := range map[string]*bool{"add_bos_token": &v.AddBOS, "add_eos_token": &v.AddEOS} {
		if _, ok := f.Lookup("tokenizer.ggml." + key); !ok {
			continue
		}
		if *dst, err = f.Bool("tokenizer.ggml." + key); err != nil {
			return nil, err
		}
	}
	tok, err := FromGGUF(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}
