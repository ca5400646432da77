package tokenizer

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// qwen35Reference is testdata/gguf_qwen35.json: for each text, the ids llama.cpp's
// llama-tokenize gives with the GGUF vocabulary of Qwen3's tokenizer.json whose
// tokenizer.ggml.pre is "qwen35" (see testdata/README.md). The texts are in NFC, so that
// llama.cpp, which does not normalize, and this package see the same characters.
type qwen35Reference struct {
	Tool  string `json:"tool"`
	Cases []struct {
		Name string  `json:"name"`
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	} `json:"cases"`
}

// TestGGUFQwen35MatchesLlamaCpp: FromGGUF with "qwen35" gives llama-tokenize's ids on every
// reference text (the test corpus and texts rich in combining marks), and so does Parse of the
// same tokenizer.json with Qwen3.5's split pattern put in place of Qwen3's. The pattern must
// matter: the "qwen2" vocabulary gives other ids on enough of these texts.
func TestGGUFQwen35MatchesLlamaCpp(t *testing.T) {
	_, _, raw := loadQwen3(t)
	tok2, v := loadQwen3GGUF(t)
	v.Pre = "qwen35"
	tok35, err := FromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	oldPat, _ := json.Marshal(qwenPattern)
	newPat, _ := json.Marshal(qwen35Pattern)
	if n := bytes.Count(raw, oldPat); n != 1 {
		t.Fatalf("Qwen3's tokenizer.json holds the Qwen pattern %d times, want once", n)
	}
	tokJSON, err := Parse(bytes.Replace(raw, oldPat, newPat, 1))
	if err != nil {
		t.Fatalf("tokenizer.json with Qwen3.5's pattern: %v", err)
	}
	var ref qwen35Reference
	readJSON(t, "testdata/gguf_qwen35.json", &ref)
	if len(ref.Cases) < 100 {
		t.Fatalf("testdata/gguf_qwen35.json has %d cases", len(ref.Cases))
	}
	differ := 0
	for _, c := range ref.Cases {
		if nfc(c.Text) != c.Text {
			t.Errorf("%s: the reference text is not in NFC", c.Name)
			continue
		}
		for name, tk := range map[string]*Tokenizer{"gguf qwen35": tok35, "tokenizer.json": tokJSON} {
			got, err := tk.Encode(c.Text)
			if err != nil || !slices.Equal(got, c.IDs) {
				t.Errorf("%s: %s ids %v, %v; llama-tokenize %v", c.Name, name, got, err, c.IDs)
			}
		}
		if dec, err := tok35.Decode(c.IDs); err != nil || dec != c.Text {
			t.Errorf("%s: llama-tokenize's ids decode to %q, %v", c.Name, dec, err)
		}
		if ids2, _ := tok2.Encode(c.Text); !slices.Equal(ids2, c.IDs) {
			differ++
		}
	}
	if differ < 8 {
		t.Errorf("only %d of %d texts have other ids with the qwen2 pattern", differ, len(ref.Cases))
	}
}
