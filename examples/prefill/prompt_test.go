package main

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const tinyQ4 = "../../testdata/qwen4exp-tiny"

// byteLevel is GPT-2's bytes_to_unicode: the character each byte is written as in a
// byte-level BPE vocabulary.
func byteLevel(b int) rune {
	if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
		return rune(b)
	}
	n := 0
	for c := 0; c < b; c++ {
		if !(('!' <= c && c <= '~') || (0xA1 <= c && c <= 0xAC) || (0xAE <= c && c <= 0xFF)) {
			n++
		}
	}
	return rune(256 + n)
}

// checkpointWithTokenizer copies the tiny qwen4exp checkpoint (vocab 512) into a temporary
// directory and adds a byte-level tokenizer.json of Qwen's structure that fits it: the 256
// bytes, a few merges, and <|im_start|> as id 511.
func checkpointWithTokenizer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(tinyQ4)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(tinyQ4, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteLevel(b))] = b
	}
	space := string(byteLevel(' '))
	vocab["he"], vocab["ll"], vocab["hell"], vocab["hello"], vocab[space+"w"] = 256, 257, 258, 259, 260
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	f := map[string]any{
		"added_tokens": []any{map[string]any{"id": 511, "content": "<|im_start|>", "special": true}},
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "behavior": "Isolated", "pattern": map[string]any{
				"Regex": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
			bl}},
		"post_processor": bl, "decoder": bl,
		"model": map[string]any{"type": "BPE", "vocab": vocab,
			"merges": []any{[]any{"h", "e"}, []any{"l", "l"}, []any{"he", "ll"}, []any{"hell", "o"}, []any{space, "w"}}},
	}
	b, _ := json.Marshal(f)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runMain runs the command with args and returns its standard output.
func runMain(t *testing.T, args ...string) (string, error) {
	t.Helper()
	oldArgs, oldFlags, oldOut := os.Args, flag.CommandLine, os.Stdout
	defer func() { os.Args, flag.CommandLine, os.Stdout = oldArgs, oldFlags, oldOut }()
	os.Args = append([]string{"prefill"}, args...)
	flag.CommandLine = flag.NewFlagSet("prefill", flag.ContinueOnError)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	err = run()
	w.Close()
	return <-out, err
}

func top5(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^top-5 .*$`).FindString(out)
	if m == "" {
		t.Fatalf("no top-5 line in:\n%s", out)
	}
	return m
}

// TestPromptEndToEnd: --prompt gives the ids --tokenize prints, and prefilling them gives the
// same top-5 as --tokens with those ids; the top-5 carry their text.
func TestPromptEndToEnd(t *testing.T) {
	dir := checkpointWithTokenizer(t)
	const prompt = "<|im_start|>hello world, hello"
	ids, err := runMain(t, "--model", dir, "--tokenize", "--prompt", prompt)
	if err != nil {
		t.Fatal(err)
	}
	// <|im_start|>, "hello", " w", "o", "r", "l", "d", ",", " " "hello" (the pattern keeps the
	// space with the letters: " hello" is one piece, BPE'd to " " + "hello").
	if want := "511,259,260,111,114,108,100,44,32,259\n"; ids != want {
		t.Fatalf("--tokenize printed %q, want %q", ids, want)
	}
	text, err := runMain(t, "--model", dir, "--backend", "cpu", "--prompt", prompt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "prompt    10 tokens of text") {
		t.Errorf("prompt line missing:\n%s", text)
	}
	byIDs, err := runMain(t, "--model", dir, "--backend", "cpu", "--tokens", strings.TrimSpace(ids))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := top5(t, text), top5(t, byIDs); a != b {
		t.Errorf("--prompt and --tokens of its ids differ:\n%s\n%s", a, b)
	}
	if !regexp.MustCompile(`  \d+ "[^"]*" \(`).MatchString(top5(t, text)) {
		t.Errorf("top-5 without token text: %s", top5(t, text))
	}
}

func TestPromptErrors(t *testing.T) {
	dir := checkpointWithTokenizer(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--model", tinyQ4, "--prompt", "hi"}, "has no tokenizer.json"},
		{[]string{"--model", tinyQ4, "--tokenize", "--prompt-file", "prompt_test.go"}, "has no tokenizer.json"},
		{[]string{"--prompt", "hi"}, "the generated model has no tokenizer.json"},
		{[]string{"--model", dir, "--prompt", "hi", "--tokens", "1"}, "not both"},
		{[]string{"--model", dir, "--prompt", "hi", "--prompt-file", "x"}, "only one of --prompt, --prompt-file"},
		{[]string{"--model", dir, "--tokenize"}, "--tokenize needs a text prompt"},
		{[]string{"--model", dir, "--tokenizer", filepath.Join(dir, "config.json"), "--prompt", "hi"}, "malformed tokenizer.json"},
	} {
		_, err := runMain(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.msg)
		}
	}
}
