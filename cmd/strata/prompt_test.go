package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"codeberg.org/sbinet/npyio/npy"
)

const tinyQ4 = "../../testdata/qwen4exp-tiny"

// checkpointWithTokenizer copies the tiny qwen4exp checkpoint (vocab 512) into a temporary
// directory with the tokenizer package's tiny byte-level tokenizer.json, which fits it (ids
// 0..511: the 256 bytes, "hello" 262, "Ġw" 263, <|im_start|> 511, ...).
func checkpointWithTokenizer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(tinyQ4)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		copyFile(t, filepath.Join(tinyQ4, e.Name()), filepath.Join(dir, e.Name()))
	}
	copyFile(t, "../../tokenizer/testdata/tiny/tokenizer.json", filepath.Join(dir, "tokenizer.json"))
	return dir
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runMain runs the command with args and returns its standard output.
func runMain(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var err error
	out := captureStdout(t, func() { err = run(args) })
	return out, err
}

// captureStdout returns what fn writes to the standard output.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	oldOut := os.Stdout
	defer func() { os.Stdout = oldOut }()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	fn()
	w.Close()
	return <-out
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
	if want := "511,262,263,111,114,108,100,44,32,262\n"; ids != want {
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
		{[]string{"--model", dir, "--tokenizer", filepath.Join(dir, "config.json"), "--prompt", "hi"}, "malformed vocabulary"},
	} {
		_, err := runMain(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.msg)
		}
	}
}

// TestArgsCheckedBeforeLoading: conflicting model flags and token ids outside the vocabulary
// are refused before any weight is loaded. The checkpoint's second shard is cut short, which
// loading refuses and reading headers does not: each error must be the argument's.
func TestArgsCheckedBeforeLoading(t *testing.T) {
	dir := checkpointWithTokenizer(t)
	shard := filepath.Join(dir, "model-00002-of-00002.safetensors")
	st, err := os.Stat(shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shard, st.Size()-64); err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "s.safetensors")
	in, link := filepath.Join(outDir, "in.state"), filepath.Join(outDir, "link.state")
	if err := os.WriteFile(in, []byte("7"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--model", dir, "--preset", "qwen4exp-small", "--tokens", "1"}, "not both"},
		{[]string{"--preset", "no-such-preset"}, `unknown preset "no-such-preset"`},
		{[]string{"--model", dir, "--tokens", "1,2,512"}, "token id 512 (prompt index 2) is outside the model's vocabulary [0, 512)"},
		{[]string{"--model", dir, "--tokens", "-1"}, "token id -1 (prompt index 0)"},
		{[]string{"--model", dir, "--tokens", "7"}, "model-00002-of-00002.safetensors"}, // valid ids: loading refuses the shard
		{[]string{"--model", "", "--tokens", "1"}, "--model is empty"},
		{[]string{"--model", dir, "--tokens", "1", "--bench-tokens", "5"}, "--bench-tokens applies to --bench runs only"},
		{[]string{"--model", dir, "--tokens", "1", "--seed", "5"}, "--seed picks random token ids"},
		{[]string{"--model", dir, "--tokens", "1,,2"}, "empty entry in the token list"},
		{[]string{"--model", dir, "--tokens", "1,2,"}, "empty entry in the token list"},
		{[]string{"--model", dir, "--tokens", "1", "--compute", "fp16"}, `--compute "fp16": want one of f32, bf16, int8`},
		{[]string{"--bench", "--bench-compute"}, "give one of them"},
		{[]string{"--bench", "--bench-cache"}, "a benchmark of its own"},
		{[]string{"--bench-compute", "--bench-cache"}, "a benchmark of its own"},
		{[]string{"--bench", "--model", filepath.Join(outDir, "missing.gguf")}, "--model: stat " + filepath.Join(outDir, "missing.gguf") + ": no such file or directory (checked before the benchmarks start)"},
		{[]string{"--model", dir, "--random-tokens", "0"}, "--random-tokens 0: give N >= 1"},
		{[]string{"--bench", "--bench-op-tokens", "100000000"}, "--bench-op-tokens 100000000: at most 16384"},
		{[]string{"--bench-compute", "--compute", "int8"}, "--bench-compute runs every compute mode"},
		{[]string{"--bench-compute", "--model", dir}, "--bench-compute runs the generated qwen3next slice on random tokens: --model does nothing there"},
		{[]string{"--bench-compute", "--save-logits", out}, "--save-logits does nothing there"},
		{[]string{"--model", dir, "--inspect", "--compute", "int4"}, `--compute "int4"`},
		{[]string{"--model", dir, "--tokens", "7", "--save-state", out, "--save-mlx-lm-cache", out}, "name the same file"},
		{[]string{"--model", dir, "--tokens", "7", "--save-state", outDir}, "is a directory"},
		{[]string{"--model", dir, "--tokens", "7", "--save-state", filepath.Join(shard, "s.safetensors")}, "is not a directory"},
		{[]string{"--model", dir, "--tokens", "7", "--save-mlx-lm-cache", filepath.Join(outDir, "missing", "c.safetensors")}, "its directory does not exist"},
		{[]string{"--model", dir, "--tokens", "1,99999999999", "--backend", "cpu"}, `token "99999999999": outside the int32 range`},
		{[]string{"--model", dir, "--tokens", "1", "--backend", "emu", "--compute", "int8"}, "--backend emu runs f32 only (give --backend cpu"},
		{[]string{"--model", dir, "--tokens", "1,2,3", "--max-context", "2"}, "--max-context 2: the prompt has 3 tokens; give at least 3"},
		{[]string{"--model", dir, "--tokens", "7", "--save-logits", filepath.Join(outDir, "missing", "l.npy")}, "its directory does not exist"},
		{[]string{"--model", dir, "--tokens", "7", "--save-state", out, "--save-logits", out}, "--save-logits and --save-state name the same file"},
		{[]string{"--model", dir, "--tokens", "7", "--save-logits", out, "--save-mlx-lm-cache", filepath.Join(outDir, ".", "s.safetensors")}, "--save-logits and --save-mlx-lm-cache name the same file"},
		{[]string{"--model", dir, "--tokens", "7", "--load-state", in, "--save-logits", in}, "--save-logits " + in + " is the file --load-state reads"},
		{[]string{"--model", dir, "--tokens", "7", "--load-state", in, "--save-state", link}, "--save-state " + link + " is the file --load-state reads"},
		{[]string{"--model", dir, "--tokens-file", in, "--save-state", in}, "is the file --tokens-file reads"},
		{[]string{"--model", dir, "--prompt-file", in, "--save-logits", in}, "is the file --prompt-file reads"},
		{[]string{"--model", dir, "--prompt", "hi", "--tokenize", "--save-state", out}, "--tokenize prints the prompt's ids and exits before any prefill: --save-state would write nothing"},
		{[]string{"--model", dir, "--tokens", "7", "--load-state", outDir}, "is a directory, not a state file"},
		{[]string{"--model", in, "--tokens", "7", "--save-logits", in}, "--save-logits " + in + " is the file --model reads"},
		{[]string{"--model", link, "--tokens", "7", "--save-state", in}, "is the file --model reads"},
		{[]string{"--model", dir, "--tokens", "7", "--save-state", filepath.Join(dir, "config.json")}, "is inside the folder --model " + dir + " reads"},
		{[]string{"--model", dir, "--tokens", "7", "--save-logits", filepath.Join(dir, ".", "new.npy")}, "is inside the folder --model"},
		{[]string{"--model", dir, "--tokens", "7", "--prompt-cache", dir}, "--prompt-cache " + dir + " is in the folder --model " + dir + " reads"},
		{[]string{"--model", dir, "--tokens", "7", "--prompt-cache", filepath.Join(dir, "cache", "new")}, "is in the folder --model"},
	} {
		_, err := runMain(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.msg)
		}
	}
}

// TestSaveLogitsKeepsFileOnFailure: a run that fails after its flags were checked (loading a
// cut shard) leaves an existing --save-logits file as it was, and a run that succeeds replaces
// it whole, leaving no temporary file beside it.
func TestSaveLogitsKeepsFileOnFailure(t *testing.T) {
	dir := checkpointWithTokenizer(t)
	shard := filepath.Join(dir, "model-00002-of-00002.safetensors")
	st, err := os.Stat(shard)
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "l.npy")
	if err := os.WriteFile(out, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shard, st.Size()-64); err != nil {
		t.Fatal(err)
	}
	if _, err := runMain(t, "--model", dir, "--tokens", "7", "--save-logits", out); err == nil {
		t.Fatal("a cut shard loaded")
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "keep" {
		t.Fatalf("after a failed run the file holds %q (%v), want it untouched", b, err)
	}
	if _, err := runMain(t, "--model", tinyQ4, "--backend", "cpu", "--tokens", "7", "--save-logits", out); err != nil {
		t.Fatal(err)
	}
	readNPY(t, out, 512)
	if ents, _ := os.ReadDir(outDir); len(ents) != 1 {
		t.Errorf("%d entries in the output directory, want the one file: %v", len(ents), ents)
	}
}

// readNPY reads a float32 .npy file the CLI wrote, failing the test unless its shape is shape.
func readNPY(t *testing.T, path string, shape ...int) []float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := npy.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if sh := r.Header.Descr.Shape; !slices.Equal(sh, shape) {
		t.Fatalf("%s: shape %v, want %v", path, sh, shape)
	}
	var v []float32
	if err := r.Read(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSaveAllLogitsChunked: --all-logits --save-logits with --chunk writes every chunk's rows,
// [T, vocab], each row within chunked prefill's bound of the one-shot file's.
func TestSaveAllLogitsChunked(t *testing.T) {
	dir := t.TempDir()
	load := func(name string, args ...string) []float32 {
		path := filepath.Join(dir, name)
		out, err := runMain(t, append([]string{"--model", tinyQ4, "--backend", "cpu", "--random-tokens", "40", "--all-logits", "--save-logits", path}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "logits [40, 512] of positions 0..39") {
			t.Errorf("no saved line with the rows' positions in:\n%s", out)
		}
		return readNPY(t, path, 40, 512)
	}
	one, chunked := load("one.npy"), load("chunked.npy", "--chunk", "16")
	for i := range one {
		if d := math.Abs(float64(one[i] - chunked[i])); d > 1e-4 {
			t.Fatalf("row %d, logit %d: one-shot %v, chunked %v", i/512, i%512, one[i], chunked[i])
		}
	}
}

// TestOneTokenWords: the lines of a one-token run say "1 token", not "1 tokens".
func TestOneTokenWords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "one.state")
	out, err := runMain(t, "--model", tinyQ4, "--backend", "cpu", "--tokens", "7", "--save-state", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"prompt    1 token\n", "prefill   1 token in ", "state     saved " + path + ": 1 token, "} {
		if !strings.Contains(out, w) {
			t.Errorf("%q not in:\n%s", w, out)
		}
	}
	// A rate such as "89.1 tokens/s" is not a count.
	if m := regexp.MustCompile(`(^|[^0-9.])1 tokens`).FindString(out); m != "" {
		t.Errorf("%q in:\n%s", m, out)
	}
}
