package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The parts of tokenizer.json this package reads. Every field that changes the ids is either
// implemented or refused; fields that only affect offsets (trim_offsets) are ignored.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
}

type addedJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    *string           `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int64  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

type componentJSON struct {
	Type          string            `json:"type"`
	Pattern       *patternJSON      `json:"pattern"`
	Behavior      string            `json:"behavior"`
	Invert        bool              `json:"invert"`
	AddPrefixSpc  *bool             `json:"add_prefix_space"`
	UseRegex      *bool             `json:"use_regex"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// Parse builds a Tokenizer from the contents of a tokenizer.json file. Errors wrap ErrFormat
// (malformed) or ErrUnsupported (a model type or component this package does not implement,
// named in the message).
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if f.Model == nil {
		return nil, fmt.Errorf("%w: no model", ErrFormat)
	}
	// The model first: a file of another model type (WordPiece, Unigram, ...) is refused naming
	// it, not one of its other components.
	b, err := parseModel(f.Model)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		v    json.RawMessage
	}{{"truncation", f.Truncation}, {"padding", f.Padding}} {
		if !isNull(c.v) {
			return nil, fmt.Errorf("%w: %s is set (it would change the ids of Encode)", ErrUnsupported, c.name)
		}
	}
	if err := checkNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	split, err := checkPreTokenizer(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if err := checkByteLevel("post_processor", f.PostProcessor, true); err != nil {
		return nil, err
	}
	if err := checkByteLevel("decoder", f.Decoder, false); err != nil {
		return nil, err
	}
	t := &Tokenizer{bpe: b, split: split}
	if t.added, err = newAddedVocab(f.AddedTokens); err != nil {
		return nil, err
	}
	if err := t.added.checkAgainst(b); err != nil {
		return nil, err
	}
	t.buildPieces(0)
	return t, nil
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

func component(where string, v json.RawMessage) (componentJSON, error) {
	var c componentJSON
	if err := json.Unmarshal(v, &c); err != nil {
		return c, fmt.Errorf("%w: %s: %v", ErrFormat, where, err)
	}
	return c, nil
}

// checkNormalizer accepts the NFC normalizer (Qwen's). Another normalizer, or none, is not a
// configuration this package has been checked against: refused.
func checkNormalizer(v json.RawMessage) error {
	if isNull(v) {
		return fmt.Errorf("%w: normalizer is null (only NFC is implemented)", ErrUnsupported)
	}
	c, err := component("normalizer", v)
	if err != nil {
		return err
	}
	if c.Type != "NFC" {
		return fmt.Errorf("%w: normalizer type %q (only NFC is implemented)", ErrUnsupported, c.Type)
	}
	return nil
}

// checkPreTokenizer accepts Sequence[Split(pattern, Isolated), ByteLevel(no prefix space, no
// regex)] with qwenPattern (Qwen2, Qwen3, Qwen3-Next) or qwen35Pattern (Qwen3.5, Qwen3.6) and
// returns the pattern's splitter.
func checkPreTokenizer(v json.RawMessage) (splitter, error) {
	if isNull(v) {
		return splitter{}, fmt.Errorf("%w: pre_tokenizer is null (only the Qwen Split + ByteLevel sequence is implemented)", ErrUnsupported)
	}
	c, err := component("pre_tokenizer", v)
	if err != nil {
		return splitter{}, err
	}
	if c.Type != "Sequence" || len(c.PreTokenizers) != 2 {
		return splitter{}, fmt.Errorf("%w: pre_tokenizer type %q with %d parts (only Sequence[Split, ByteLevel] is implemented)",
			ErrUnsupported, c.Type, len(c.PreTokenizers))
	}
	split, err := component("pre_tokenizer.pretokenizers[0]", c.PreTokenizers[0])
	if err != nil {
		return splitter{}, err
	}
	if split.Type != "Split" {
		return splitter{}, fmt.Errorf("%w: pre_tokenizer.pretokenizers[0] type %q (want Split)", ErrUnsupported, split.Type)
	}
	if split.Pattern == nil || split.Pattern.Regex == nil {
		return splitter{}, fmt.Errorf("%w: Split pre-tokenizer without a Regex pattern", ErrUnsupported)
	}
	sp, known := splitters[*split.Pattern.Regex]
	if !known {
		return splitter{}, fmt.Errorf("%w: Split pattern %q (only the Qwen patterns %q and %q are implemented)",
			ErrUnsupported, *split.Pattern.Regex, qwenPattern, qwen35Pattern)
	}
	if split.Behavior != "Isolated" || split.Invert {
		return splitter{}, fmt.Errorf("%w: Split behavior %q invert %v (only Isolated, not inverted, is implemented)", ErrUnsupported, split.Behavior, split.Invert)
	}
	return sp, checkByteLevelPart("pre_tokenizer.pretokenizers[1]", c.PreTokenizers[1])
}

func checkByteLevelPart(where string, v json.RawMessage) error {
	c, err := component(where, v)
	if err != nil {
		return err
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("%w: %s type %q (want ByteLevel)", ErrUnsupported, where, c.Type)
	}
	if c.AddPrefixSpc != nil && *c.AddPrefixSpc {
		return fmt.Errorf("%w: %s has add_prefix_space true (not implemented)", ErrUnsupported, where)
	}
	if c.UseRegex != nil && *c.UseRegex {
		return fmt.Errorf("%w: %s has use_regex true (the GPT-2 split, not implemented)", ErrUnsupported, where)
	}
	return nil
}

// checkByteLevel accepts a ByteLevel post-processor (it adds no tokens; with nullable, none at
// all) or decoder.
func checkByteLevel(where string, v json.RawMessage, nullable bool) error {
	if isNull(v) {
		if nullable {
			return nil
		}
		return fmt.Errorf("%w: %s is null (only ByteLevel is implemented)", ErrUnsupported, where)
	}
	c, err := component(where, v)
	if err != nil {
		return err
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("%w: %s type %q (only ByteLevel is implemented)", ErrUnsupported, where, c.Type)
	}
	return nil
}

func parseModel(v json.RawMessage) (*bpe, error) {
	var m modelJSON
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("%w: model: %v", ErrFormat, err)
	}
	switch {
	case m.Type == nil:
		return nil, fmt.Errorf("%w: model has no type", ErrFormat)
	case *m.Type != "BPE":
		return nil, fmt.Errorf("%w: model type %s (only byte-level BPE is implemented)", ErrUnsupported, *m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("%w: BPE dropout %g (random merges)", ErrUnsupported, *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("%w: BPE continuing_subword_prefix %q", ErrUnsupported, *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("%w: BPE end_of_word_suffix %q", ErrUnsupported, *m.EndOfWordSuffix)
	case m.IgnoreMerges:
		return nil, fmt.Errorf("%w: BPE ignore_merges true", ErrUnsupported)
	case m.Vocab == nil:
		return nil, fmt.Errorf("%w: model.vocab missing", ErrFormat)
	case m.Merges == nil:
		return nil, fmt.Errorf("%w: model.merges missing", ErrFormat)
	}
	merges := make([][2]string, len(m.Merges))
	for i, raw := range m.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: model.merges[%d]: %v", ErrFormat, i, err)
		}
		merges[i] = [2]string{a, b}
	}
	return newBPE(m.Vocab, merges, "model.merges")
}

// parseMerge reads one merge in either form tokenizer.json uses: ["a", "b"], or the older
// "a b" (exactly one space).
func parseMerge(raw json.RawMessage) (string, string, error) {
	var pair []string
	if err := json.Unmarshal(raw, &pair); err == nil {
		if len(pair) != 2 {
			return "", "", fmt.Errorf("%d strings, want 2", len(pair))
		}
		return pair[0], pair[1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "", fmt.Errorf("%s is neither a string nor a pair of strings", raw)
	}
	return splitMerge(s)
}

// splitMerge reads a merge written "a b": two tokens joined by exactly one space.
func splitMerge(s string) (string, string, error) {
	parts := strings.Split(s, " ")
	if len(parts) != 2 {
		return "", "", fmt.Errorf("%q does not have the form \"a b\"", s)
	}
	return parts[0], parts[1], nil
}

// buildPieces fills the id -> bytes table, of at least n ids: BPE tokens through the byte-level
// alphabet, added tokens as their content (through the alphabet when every character is in it,
// as the ByteLevel decoder does).
func (t *Tokenizer) buildPieces(n int) {
	n = max(n, t.bpe.size())
	for _, a := range t.added.tokens {
		n = max(n, int(a.id)+1)
	}
	t.pieces = make([][]byte, n)
	t.known = make([]bool, n)
	for tok, id := range t.bpe.vocab {
		t.pieces[id] = byteLevelDecode(tok)
		t.known[id] = true
	}
	for _, a := range t.added.tokens {
		t.pieces[a.id] = byteLevelDecode(a.content)
		t.known[a.id] = true
	}
}
