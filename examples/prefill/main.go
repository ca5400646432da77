// Command prefill is strata's main job in a few lines of its public API: it prefills a prompt
// through a Qwen3.8-Flash-Next, Qwen3-Next or Qwen3.5 checkpoint and reports the backend, the
// kernels, per-stage times, tokens/s and the top-5 next tokens. With no flags it prefills 300
// random ids on a generated reduced-size Qwen3.8-Flash-Next (random weights, written once into
// the user cache directory: strata.GeneratedModel).
//
//	go run ./examples/prefill
//	go run ./examples/prefill --model DIR --prompt "The capital of France is"   (text through DIR/tokenizer.json)
//	go run ./examples/prefill --model X.gguf --prompt "Hello" --chunk 2 --backend cpu   (a llama.cpp GGUF file and its tokenizer)
//
// The full tool (token files, state files, the prompt cache, the mlx-lm export, --inspect, the
// benchmarks) is cmd/strata: go run ./cmd/strata -help.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratakernels/strata/strata"
	"github.com/stratakernels/strata/tokenizer"
)

func main() {
	model := flag.String("model", "", "Hugging Face or MLX checkpoint directory, or a llama.cpp GGUF file (default: the generated qwen4exp-small)")
	prompt := flag.String("prompt", "", "prompt text, turned into ids by the checkpoint's tokenizer.json or the GGUF file's tokenizer")
	tokens := flag.String("tokens", "", "comma-separated token ids")
	backend := flag.String("backend", "auto", "backend: auto, cpu, metal or emu (the Metal kernels on the MSL emulator)")
	chunk := flag.Int("chunk", 0, "prefill in separate calls of N tokens each (0: one call)")
	flag.Parse()
	if err := run(*model, *prompt, *tokens, *backend, *chunk); err != nil {
		fmt.Fprintln(os.Stderr, "prefill:", err)
		os.Exit(1)
	}
}

// run is the main job: the checkpoint dir (the generated model when empty), the prompt as text
// or ids, prefilled in calls of chunk tokens on the backend.
func run(dir, prompt, ids, backend string, chunk int) error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q (flags only; see -h)", flag.Args())
	case prompt != "" && ids != "":
		return fmt.Errorf("give --prompt or --tokens, not both")
	case dir != "" && prompt == "" && ids == "":
		return fmt.Errorf("--model needs a prompt: --prompt or --tokens")
	case chunk < 0:
		return fmt.Errorf("--chunk %d: must be >= 0", chunk)
	}
	tok, tokPath, err := loadTokenizer(dir, prompt != "")
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = strata.GeneratedModel("qwen4exp-small", func(dir string) {
			fmt.Fprintf(os.Stderr, "generating qwen4exp-small (random weights) into %s\n", homeRel(dir))
		}); err != nil {
			return err
		}
	}
	dev, err := strata.Open(strata.Options{Backend: backend})
	if err != nil {
		return err
	}
	t0 := time.Now()
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	loadTime := time.Since(t0)
	ts, err := promptTokens(tok, prompt, ids, m.Vocab())
	if err != nil {
		return err
	}
	sess, err := m.NewSession(strata.SessionOptions{MaxContext: max(len(ts), 4096)})
	if err != nil {
		return err
	}
	defer sess.Close()
	fmt.Printf("backend   %s\nkernels   %s; compute %s\n", dev.Backend(), dev.Kernels(), m.Compute())
	fmt.Printf("model     %s\n          %s (loaded in %v)\n", m.Describe(), homeRel(dir), loadTime.Round(time.Millisecond))
	fmt.Printf("prompt    %s", plural(len(ts), "token"))
	if prompt != "" {
		fmt.Printf(" of text, through %s", homeRel(tokPath))
	}
	if chunk > 0 {
		fmt.Printf(" in calls of %d", chunk)
	}
	if strata.DefaultStep < len(ts) {
		fmt.Printf(", steps of %d", strata.DefaultStep)
	}
	fmt.Println()
	total, lg, err := prefill(sess, ts, chunk)
	if err != nil {
		return err
	}
	printStats(total)
	if dev.Backend() != "cpu" {
		fmt.Printf("ran       %s\n", dev.Kernels())
	}
	row := lg.Row(lg.Rows - 1)
	fmt.Printf("top-5     next token after position %d:", sess.Position()-1)
	for _, id := range topK(row, 5) {
		fmt.Printf("  %d%s (%.4f)", id, tokenText(tok, id), row[id])
	}
	fmt.Println()
	return nil
}

// loadTokenizer loads the checkpoint's tokenizer (its tokenizer.json, or the one a GGUF file
// carries), which turns a text prompt into ids and shows the top-5 as text: required for a text
// prompt, else used when there is one.
func loadTokenizer(dir string, required bool) (tok *tokenizer.Tokenizer, path string, err error) {
	path = filepath.Join(dir, tokenizer.FileName)
	if strings.HasSuffix(strings.ToLower(dir), ".gguf") {
		path = dir
		tok, err = tokenizer.LoadGGUF(dir)
	} else if dir != "" {
		tok, err = tokenizer.Load(path)
	}
	if err != nil && required {
		return nil, "", err
	}
	if required && tok == nil {
		return nil, "", fmt.Errorf("a text prompt needs the checkpoint's %s (or give --tokens)", tokenizer.FileName)
	}
	return tok, path, nil
}

// prefill runs the prompt in calls of chunk tokens (all at once for 0), each continuing the
// session where the last ended, and returns their summed figures and the last call's logits.
func prefill(sess *strata.Session, ts []int32, chunk int) (total strata.Stats, lg *strata.Logits, err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if chunk == 0 {
		chunk = len(ts)
	}
	for at := 0; at < len(ts); at += chunk {
		end := min(at+chunk, len(ts))
		if lg, err = sess.Prefill(ctx, ts[at:end], strata.PrefillOptions{}); err != nil {
			return total, nil, fmt.Errorf("prefill of tokens %d..%d: %w", at, end-1, err)
		}
		total.Add(lg.Stats)
	}
	return total, lg, nil
}

// promptTokens are the ids of the text prompt or of the --tokens list, else (the generated
// model) 300 random ids below vocab, seed 1.
func promptTokens(tok *tokenizer.Tokenizer, prompt, ids string, vocab int) ([]int32, error) {
	if prompt != "" {
		out, err := tok.Encode(prompt)
		if err == nil && len(out) == 0 {
			err = fmt.Errorf("the prompt encodes to no tokens")
		}
		return out, err
	}
	if ids == "" {
		r := rand.New(rand.NewPCG(1, 0x70c))
		out := make([]int32, 300)
		for i := range out {
			out[i] = int32(r.IntN(vocab))
		}
		return out, nil
	}
	var out []int32
	for _, f := range strings.Split(ids, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 0 || int(v) >= vocab {
			return nil, fmt.Errorf("--tokens: %q is not a token id of the model's vocabulary [0, %d)", f, vocab)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

// tokenText is " TEXT" for a top-5 entry: the token's bytes quoted as Go quotes them ("" without
// a tokenizer; " [no token]" for a padding row of the model's vocabulary).
func tokenText(tok *tokenizer.Tokenizer, id int) string {
	if tok == nil {
		return ""
	} else if b, err := tok.TokenBytes(int32(id)); err == nil {
		return " " + strconv.Quote(string(b))
	}
	return " [no token]"
}

// printStats prints the prefill line and the time of each stage.
func printStats(total strata.Stats) {
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / total.Total.Seconds() }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("prefill   %s in %v: %.1f tokens/s\n", plural(total.Tokens, "token"), total.Total.Round(time.Millisecond),
		float64(total.Tokens)/total.Total.Seconds())
	other := total.Total
	for st, d := range total.Stage {
		other -= d
		fmt.Printf("  %-14s %9.1f ms  %5.1f%%\n", strata.Stage(st), ms(d), pct(d))
	}
	fmt.Printf("  %-14s %9.1f ms  %5.1f%%\n", "other", ms(other), pct(other))
	if !total.PerStage { // the device timed only whole command buffers
		fmt.Printf("  %-14s %9.1f ms  %5.1f%%  (GPU time of the command buffers; no per-stage timing on this device)\n", "device", ms(total.Device), pct(total.Device))
	}
}

// topK are the indices of the k largest logits of row, largest first (NaN last).
func topK(row []float32, k int) []int {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { x, y := row[idx[a]], row[idx[b]]; return x == x && (y != y || x > y) })
	return idx[:min(k, len(idx))]
}

// plural is "1 what" or "n whats".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// homeRel shortens a path under the home directory to ~/... for display.
func homeRel(p string) string {
	home, _ := os.UserHomeDir()
	if rel, err := filepath.Rel(home, p); home != "" && err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return p
}
