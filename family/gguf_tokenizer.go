package family

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratakernels/strata/internal/gguf"
)

// GGUFTokenizer returns the tokenizer.ggml.* metadata llama.cpp's converter writes for the
// byte-level BPE tokenizer.json at path (convert_hf_to_gguf.py's vocabulary of a gpt2-model
// tokenizer with gguf-py's SpecialVocab, read, not copied), for a model of vocab embedding rows
// and the pre-tokenizer name pre ("qwen2" for Qwen3 / Qwen3-Next, "qwen35" for Qwen3.5 / 3.6):
//   - tokenizer.ggml.tokens: for each id below vocab, its token (model.vocab and added_tokens
//     together): vocabulary tokens as written (the byte-level alphabet), added tokens as their
//     content; an id with no token is "[PAD<id>]";
//   - tokenizer.ggml.token_type (int32): 1 for vocabulary tokens, 5 (unused) for the [PAD]
//     fillers, 3 (control) for added tokens marked special or looking like <|...|>, else 4
//     (user-defined) with U+2581 written as a space;
//   - tokenizer.ggml.merges: each merge "a b", a space inside a side written U+0120;
//   - tokenizer.ggml.{bos,eos,padding,unknown}_token_id (uint32): the tokenizer_config.json
//     beside path names them by content (a string or {"content": ...}); bos and eos fall back
//     to bosID and eosID (config.json's bos_token_id, eos_token_id) when those are >= 0;
//     add_bos_token / add_eos_token (bool) as tokenizer_config.json gives them. Without a
//     tokenizer_config.json only the fallbacks are written.
//
// Errors name the file: unreadable or malformed JSON, a model that is not BPE, a token id at
// or past vocab, a special token that is not an added token.
func GGUFTokenizer(path string, vocab int, pre string, bosID, eosID int) ([]gguf.KV, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer for GGUF: %w", err)
	}
	var tj struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Type   string            `json:"type"`
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer for GGUF: %s: %w", path, err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer for GGUF: %s: model type %q, want BPE", path, tj.Model.Type)
	}
	byID := map[int]string{}
	for tok, id := range tj.Model.Vocab {
		byID[id] = tok
	}
	added, special, byContent := map[int]bool{}, map[int]bool{}, map[string]int{}
	for _, a := range tj.Added {
		byID[a.ID] = a.Content
		added[a.ID], special[a.ID] = true, a.Special
		byContent[a.Content] = a.ID
	}
	for id := range byID {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("tokenizer for GGUF: %s: token id %d outside the model's %d embedding rows", path, id, vocab)
		}
	}
	tokens, types := make([]string, vocab), make([]int32, vocab)
	for i := range tokens {
		tok, ok := byID[i]
		switch {
		case !ok:
			tok, types[i] = fmt.Sprintf("[PAD%d]", i), 5
		case !added[i]:
			types[i] = 1
		case special[i] || strings.HasPrefix(tok, "<|") && strings.HasSuffix(tok, "|>") || strings.HasPrefix(tok, "<｜") && strings.HasSuffix(tok, "｜>"):
			types[i] = 3
		default:
			tok, types[i] = strings.ReplaceAll(tok, "\u2581", " "), 4
		}
		tokens[i] = tok
	}
	merges := make([]string, 0, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		var pair [2]string
		var s string
		if err := json.Unmarshal(m, &pair); err != nil {
			if err := json.Unmarshal(m, &s); err != nil {
				return nil, fmt.Errorf("tokenizer for GGUF: %s: merge %d is neither a pair nor a string", path, i)
			}
			merges = append(merges, s)
			continue
		}
		merges = append(merges, strings.ReplaceAll(pair[0], " ", "\u0120")+" "+strings.ReplaceAll(pair[1], " ", "\u0120"))
	}
	kvs := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.ValueOf("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.ValueOf(pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ValueOf(tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ValueOf(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.ValueOf(merges)},
	}
	cp := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	craw, err := os.ReadFile(cp)
	fallback := map[string]int{"bos": bosID, "eos": eosID, "pad": -1, "unk": -1}
	if errors.Is(err, fs.ErrNotExist) {
		for _, k := range []string{"bos", "eos"} {
			if fallback[k] >= 0 {
				kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml." + k + "_token_id", Value: gguf.ValueOf(uint32(fallback[k]))})
			}
		}
		return kvs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer for GGUF: %w", err)
	}
	var tc map[string]json.RawMessage
	if err := json.Unmarshal(craw, &tc); err != nil {
		return nil, fmt.Errorf("tokenizer for GGUF: %s: %w", cp, err)
	}
	for _, k := range []string{"bos", "eos", "pad", "unk"} {
		key := "tokenizer.ggml." + map[string]string{"bos": "bos", "eos": "eos", "pad": "padding", "unk": "unknown"}[k] + "_token_id"
		var content string
		var obj struct {
			Content string `json:"content"`
		}
		if v, ok := tc[k+"_token"]; ok && json.Unmarshal(v, &content) != nil && json.Unmarshal(v, &obj) == nil {
			content = obj.Content
		}
		if content == "" {
			if fallback[k] >= 0 {
				kvs = append(kvs, gguf.KV{Key: key, Value: gguf.ValueOf(uint32(fallback[k]))})
			}
			continue
		}
		id, ok := byContent[content]
		if !ok {
			return nil, fmt.Errorf("tokenizer for GGUF: %s: %s_token %q is not an added token of %s", cp, k, content, path)
		}
		kvs = append(kvs, gguf.KV{Key: key, Value: gguf.ValueOf(uint32(id))})
	}
	for _, k := range []string{"add_bos_token", "add_eos_token"} {
		var b bool
		if v, ok := tc[k]; ok && json.Unmarshal(v, &b) == nil {
			kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml." + k, Value: gguf.ValueOf(b)})
		}
	}
	return kvs, nil
}
