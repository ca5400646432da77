// Package tokenizer turns text into token ids and back for the checkpoints strata runs, from
// their Hugging Face tokenizer.json (Parse, Load, LoadDir) or from the tokenizer.ggml.*
// metadata of a GGUF file (LoadGGUF, FromGGUF): the byte-level BPE of Qwen3, Qwen3-Next, Qwen3.5 and
// Qwen3.6 (and of any checkpoint whose tokenizer.json has the same structure, or whose GGUF
// vocabulary llama.cpp's converter names "gpt2" with the pre-tokenizer "qwen2" or "qwen35").
//
// The pipeline is the one Hugging Face tokenizers runs for such a file:
//
//  1. added tokens (<|im_start|>, <think>, ...) are found in the raw text first, leftmost and
//     longest first, and become their ids without further processing;
//  2. every stretch of text between them is normalized: NFC with the Unicode 9.0.0 data of
//     tokenizers' normalization crate (split.go's nfc explains how);
//  3. the Split pre-tokenizer cuts it into pieces with the Qwen2/Qwen3 pattern
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//     or the Qwen3.5 one, where combining marks run with letters:
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//     (split.go implements exactly these patterns, including the lookahead, with the Unicode
//     16.0.0 letter, number and mark classes of tokenizers' regex engine);
//  4. each piece's UTF-8 bytes are mapped to the byte-level alphabet (GPT-2's bytes_to_unicode)
//     and merged by BPE, lowest merge rank first (leftmost first among equal ranks).
//
// Decoding maps ids back to bytes through the same alphabet and replaces invalid UTF-8 the way
// Rust's String::from_utf8_lossy does, as the ByteLevel decoder of tokenizers does.
//
// The package checks itself against ids made by Hugging Face tokenizers 0.23.2 from the
// published Qwen3 tokenizer.json (see testdata/README.md), through tokenizer.json and through
// the GGUF vocabulary llama.cpp's converter makes of it. Components it does not implement
// (another model type, another pre-tokenizer pattern or tokenizer.ggml.pre name, added tokens
// with lstrip/rstrip/single_word/normalized, ...) are refused at load with ErrUnsupported
// naming them, never approximated.
//
// A Tokenizer is immutable after loading and safe for concurrent use.
package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Errors wrapped by this package's functions; test with errors.Is.
var (
	// ErrFormat: the tokenizer.json or GGUF vocabulary is malformed (bad JSON, missing vocab
	// or merges, a merge naming a token outside the vocabulary, duplicate ids, ...; the
	// message names the key).
	ErrFormat = errors.New("tokenizer: malformed vocabulary")
	// ErrUnsupported: the tokenizer.json or GGUF vocabulary is well-formed but uses a model
	// or component this package does not implement (named in the message).
	ErrUnsupported = errors.New("tokenizer: unsupported vocabulary")
	// ErrInvalidText: the text to encode is not valid UTF-8.
	ErrInvalidText = errors.New("tokenizer: text is not valid UTF-8")
	// ErrInvalidID: a token id to decode is not in the vocabulary.
	ErrInvalidID = errors.New("tokenizer: token id not in the vocabulary")
	// ErrNoTokenizer: a GGUF file carries no tokenizer (no tokenizer.ggml.model; LoadGGUF).
	ErrNoTokenizer = errors.New("tokenizer: the file carries no tokenizer")
)

// FileName is the name of the tokenizer file in a Hugging Face checkpoint directory.
const FileName = "tokenizer.json"

// Tokenizer is a loaded byte-level BPE tokenizer.
type Tokenizer struct {
	bpe   *bpe
	added *addedVocab
	split splitter // the Split pre-tokenizer's pattern
	// pieces[id] holds the bytes id decodes to (nil for ids in no token: gaps in the id space).
	pieces [][]byte
	known  []bool // known[id]: id names a token
}

// LoadDir loads dir/tokenizer.json. When the file does not exist the error wraps
// fs.ErrNotExist (test with errors.Is(err, fs.ErrNotExist)).
func LoadDir(dir string) (*Tokenizer, error) {
	return Load(filepath.Join(dir, FileName))
}

// Load reads and parses a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// VocabSize is one more than the largest token id: the size of the id space, added tokens
// included; for a GGUF vocabulary, the number of its tokens (unused ones included). A model's
// embedding may be larger (padded); ids past VocabSize decode to nothing and Decode refuses
// them.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// Encode returns the token ids of text. text must be valid UTF-8 (ErrInvalidText otherwise,
// naming the byte offset); the empty string gives no ids. No special tokens are added (the
// Qwen tokenizers add none): chat-template markers in the text are matched as added tokens.
func (t *Tokenizer) Encode(text string) ([]int32, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("%w: invalid byte at offset %d", ErrInvalidText, invalidOffset(text))
	}
	ids := make([]int32, 0, len(text)/3+1)
	var scratch bpeScratch
	t.added.split(text, func(segment string, id int32) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		t.split.split(nfc(segment), func(piece string) { ids = t.bpe.encode(ids, piece, &scratch) })
	})
	return ids, nil
}

// Decode returns the text of ids: their bytes concatenated, with invalid UTF-8 replaced by
// U+FFFD per maximal invalid subsequence (as Rust's String::from_utf8_lossy, which tokenizers
// uses). Added tokens decode to their text. An id outside [0, VocabSize()) or in a gap of the
// id space gives ErrInvalidID naming its index.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	var b []byte
	for i, id := range ids {
		p, err := t.tokenBytes(id)
		if err != nil {
			return "", fmt.Errorf("ids[%d]: %w", i, err)
		}
		b = append(b, p...)
	}
	return lossyUTF8(b), nil
}

// TokenBytes returns the bytes that token id stands for, before any UTF-8 repair: a token can
// hold part of a multi-byte character (Decode of that id alone gives U+FFFD). The slice is a
// copy. ErrInvalidID as for Decode.
func (t *Tokenizer) TokenBytes(id int32) ([]byte, error) {
	p, err := t.tokenBytes(id)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p...), nil
}

// IsSpecial reports whether id is an added token marked "special" in tokenizer.json
// (<|im_start|>, <|endoftext|>, ...), or a control token of a GGUF vocabulary (see FromGGUF).
func (t *Tokenizer) IsSpecial(id int32) bool { return t.added.isSpecial(id) }

func (t *Tokenizer) tokenBytes(id int32) ([]byte, error) {
	if id < 0 || int(id) >= len(t.pieces) || !t.known[id] {
		return nil, fmt.Errorf("%w: %d (vocabulary of %d ids)", ErrInvalidID, id, len(t.pieces))
	}
	return t.pieces[id], nil
}

func invalidOffset(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(s)
}
