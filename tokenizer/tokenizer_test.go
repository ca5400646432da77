package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyFile is testdata/tiny/tokenizer.json, a tokenizer.json of Qwen's structure with a
// vocabulary of the 256 bytes (in byte order, ids 0..255), the merges "a a", "b c", "aa a",
// "h e", "l l", "he ll", "hell o", "Ġ w" (ids 256..263 for what they make), and the added
// tokens <|im_start|> (511, special) and <|im (264). mutate edits the decoded JSON first.
func tinyFile(t *testing.T, mutate func(f map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/tiny/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if mutate == nil {
		return b
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	mutate(f)
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	return b
}

func tiny(t *testing.T) *Tokenizer {
	t.Helper()
	tok, err := Parse(tinyFile(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func model(f map[string]any) map[string]any { return f["model"].(map[string]any) }

// TestMergeOrder: merges apply lowest rank first and, among equal ranks, leftmost first
// (derived by hand from the merge rule): "aaaa" merges a+a at 0, then at 2 ("aa","aa": no
// merge aa+aa), "aaa" merges a+a at 0, then aa+a; "abc" keeps a and merges b+c.
func TestMergeOrder(t *testing.T) {
	tok := tiny(t)
	for text, want := range map[string][]int32{
		"aaaa": {256, 256}, "aaa": {258}, "abc": {'a', 257}, "aaaaa": {256, 258}, "": nil,
		"<|im_start|>aa<|im": {511, 256, 264}, "<|im_star": {264, '_', 's', 't', 'a', 'r'},
		"hello world": {262, 263, 'o', 'r', 'l', 'd'},
	} {
		got, err := tok.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: ids %v, want %v", text, got, want)
		}
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	tok := tiny(t)
	for _, s := range []string{"a\xffb", "\xc3", "ok\xed\xa0\x80"} {
		_, err := tok.Encode(s)
		if !errors.Is(err, ErrInvalidText) {
			t.Errorf("%q: error %v, want ErrInvalidText", s, err)
		}
	}
	_, err := tok.Encode("ab\xffc")
	if err == nil || !strings.Contains(err.Error(), "offset 2") {
		t.Errorf("error %v should name offset 2", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := tiny(t)
	if tok.VocabSize() != 512 {
		t.Fatalf("VocabSize %d, want 512", tok.VocabSize())
	}
	for _, ids := range [][]int32{{-1}, {1, 512}, {1 << 30}, {300}} { // 300: in no token
		if _, err := tok.Decode(ids); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Decode(%v): error %v, want ErrInvalidID", ids, err)
		}
	}
	if s, err := tok.Decode([]int32{511, 256, 'b', 264}); err != nil || s != "<|im_start|>aab<|im" {
		t.Errorf("Decode = %q, %v", s, err)
	}
	if !tok.IsSpecial(511) || tok.IsSpecial(264) || tok.IsSpecial(256) {
		t.Error("IsSpecial: only <|im_start|> is special")
	}
	if b, err := tok.TokenBytes(0xC3); err != nil || string(b) != "\xc3" {
		t.Errorf("TokenBytes(0xC3) = %q, %v", b, err)
	}
}

// TestParseErrors: each malformed or unsupported file is refused with the right sentinel and a
// message naming the problem.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f map[string]any)
		want   error
		msg    string
	}{
		{"wordpiece", func(f map[string]any) { model(f)["type"] = "WordPiece" }, ErrUnsupported, "model type WordPiece"},
		{"unigram", func(f map[string]any) { model(f)["type"] = "Unigram" }, ErrUnsupported, "model type Unigram"},
		{"bert", func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "BertNormalizer"}
			f["pre_tokenizer"] = map[string]any{"type": "BertPreTokenizer"}
			f["truncation"] = map[string]any{"max_length": 512}
			model(f)["type"] = "WordPiece"
			delete(model(f), "merges")
		}, ErrUnsupported, "model type WordPiece"},
		{"no model type", func(f map[string]any) { delete(model(f), "type") }, ErrFormat, "model has no type"},
		{"no model", func(f map[string]any) { delete(f, "model") }, ErrFormat, "no model"},
		{"no merges", func(f map[string]any) { delete(model(f), "merges") }, ErrFormat, "model.merges missing"},
		{"null merges", func(f map[string]any) { model(f)["merges"] = nil }, ErrFormat, "model.merges missing"},
		{"no vocab", func(f map[string]any) { delete(model(f), "vocab") }, ErrFormat, "model.vocab missing"},
		{"merge out of vocab", func(f map[string]any) { model(f)["merges"] = []any{"a x"} }, ErrFormat, `token "ax" not in the vocabulary`},
		{"merge of three", func(f map[string]any) { model(f)["merges"] = []any{"a b c"} }, ErrFormat, "model.merges[0]"},
		{"merge pair of one", func(f map[string]any) { model(f)["merges"] = []any{[]any{"a"}} }, ErrFormat, "1 strings, want 2"},
		{"merge number", func(f map[string]any) { model(f)["merges"] = []any{7} }, ErrFormat, "neither a string"},
		{"byte missing", func(f map[string]any) { delete(model(f)["vocab"].(map[string]any), "a") }, ErrUnsupported, "no token for byte 0x61"},
		{"duplicate id", func(f map[string]any) { model(f)["vocab"].(map[string]any)["zz"] = 3 }, ErrFormat, "share id 3"},
		{"dropout", func(f map[string]any) { model(f)["dropout"] = 0.1 }, ErrUnsupported, "dropout"},
		{"ignore merges", func(f map[string]any) { model(f)["ignore_merges"] = true }, ErrUnsupported, "ignore_merges"},
		{"nfkc", func(f map[string]any) { f["normalizer"] = map[string]any{"type": "NFKC"} }, ErrUnsupported, `normalizer type "NFKC"`},
		{"no normalizer", func(f map[string]any) { f["normalizer"] = nil }, ErrUnsupported, "normalizer is null"},
		{"gpt2 pattern", func(f map[string]any) {
			p := f["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
			p["pattern"] = map[string]any{"Regex": `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`}
		}, ErrUnsupported, "Split pattern"},
		{"metaspace", func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, ErrUnsupported, `pre_tokenizer type "Metaspace"`},
		{"byte level regex", func(f map[string]any) {
			f["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[1].(map[string]any)["use_regex"] = true
		}, ErrUnsupported, "use_regex"},
		{"template", func(f map[string]any) { f["post_processor"] = map[string]any{"type": "TemplateProcessing"} }, ErrUnsupported, "post_processor type"},
		{"no decoder", func(f map[string]any) { f["decoder"] = nil }, ErrUnsupported, "decoder is null"},
		{"truncation", func(f map[string]any) { f["truncation"] = map[string]any{"max_length": 8} }, ErrUnsupported, "truncation"},
		{"lstrip", func(f map[string]any) { f["added_tokens"].([]any)[0].(map[string]any)["lstrip"] = true }, ErrUnsupported, "lstrip true"},
		{"normalized", func(f map[string]any) { f["added_tokens"].([]any)[1].(map[string]any)["normalized"] = true }, ErrUnsupported, "normalized true"},
		{"added id clash", func(f map[string]any) { f["added_tokens"].([]any)[1].(map[string]any)["id"] = 511 }, ErrFormat, "shares id 511"},
		{"added renumbered", func(f map[string]any) { f["added_tokens"].([]any)[1].(map[string]any)["content"] = "aa" }, ErrFormat, "vocabulary has it as 256"},
		{"added over vocab id", func(f map[string]any) { f["added_tokens"].([]any)[1].(map[string]any)["id"] = 5 }, ErrFormat, "which the vocabulary gives"},
	}
	for _, c := range cases {
		_, err := Parse(tinyFile(t, c.mutate))
		if !errors.Is(err, c.want) || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %v containing %q", c.name, err, c.want, c.msg)
		}
	}
	if _, err := Parse([]byte("{not json")); !errors.Is(err, ErrFormat) {
		t.Errorf("bad JSON: error %v, want ErrFormat", err)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadDir(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing tokenizer.json: error %v, want fs.ErrNotExist", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), tinyFile(t, func(f map[string]any) { model(f)["type"] = "WordLevel" }), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadDir(dir)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
		t.Errorf("error %v should wrap ErrUnsupported and name the file", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), tinyFile(t, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err := LoadDir(dir); err != nil || tok.VocabSize() != 512 {
		t.Errorf("LoadDir: %v", err)
	}
}
