// Command prefill is strata's main job: it prefills a prompt through a Qwen3.8-Flash-Next or
// Qwen3-Next checkpoint and reports the backend, the kernels, per-stage times, tokens/s and the
// top-5 next tokens.
//
// With no arguments it generates (once, into the user cache directory) a reduced-size
// Qwen3.8-Flash-Next-architecture model with random weights and prefills a 300-token prompt.
//
//	go run ./examples/prefill
//	go run ./examples/prefill --model DIR --tokens 1,2,3
//	go run ./examples/prefill --model DIR --tokens-file ids.txt --step 512 --all-logits --save-logits out.npy
//	go run ./examples/prefill --model DIR --prompt "Hello" (text in through DIR/tokenizer.json; --tokenize prints the ids)
//	go run ./examples/prefill --bench
//	go run ./examples/prefill --model DIR --inspect
//	go run ./examples/prefill --model X.gguf --tokens 1,2,3   (a llama.cpp GGUF file alone: qwen3next, qwen35, qwen35moe)
//	go run ./examples/prefill --model X.gguf --inspect        (headers only: types by class, tokenizer, what strata refuses)
//	go run ./examples/prefill --model DIR --tokens-file ids.txt --save-state s.state   (then --load-state s.state --tokens ...: the continuation)
//	go run ./examples/prefill --model DIR --tokens-file ids.txt --prompt-cache DIR     (a later prompt sharing a prefix resumes from a checkpoint)
//	go run ./examples/prefill --model DIR --prompt "..." --save-mlx-lm-cache c.safetensors --mlx-lm-model ID   (then mlx_lm.generate --model ID --prompt-cache-file c.safetensors continues)
//
// --bench measures the device's GEMM peak P (a 2048^3 float32 MatMul), then each op at the real
// model's shapes (op/optest's benchmark cases, timed by optest.Time on the device's backend:
// the same cases on cpu, metal and emu; including the QSA indexer and the sparse attention of a
// 2048-token chunk at pos0 30000) and a 4-layer real-width slice of Qwen3.8-Flash-Next
// (generated once, 3.2 GB) at the --bench-tokens lengths (default 512 and 2048; e.g.
// 2048,8192,32768,30000+2048 for the long context), with per-stage times, every figure also as
// a fraction of P, and each run's peak RSS (see bench.go).
//
// --inspect checks a checkpoint as loading would, without loading it (reading headers only:
// seconds for a 360 GB release), prints its summary and exits 0, or prints the error and exits
// 1 (see inspect.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"codeberg.org/sbinet/npyio/npy"
	"github.com/schollz/progressbar/v3"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/strata"
)

// maxPromptTokens is the largest context a session takes (strata.SessionOptions.MaxContext).
const maxPromptTokens = 1 << 24

// maxBenchOpTokens bounds --bench-op-tokens: its GEMM peak and long-context cases run 4x the
// tokens, about 2 GiB of float32 operands at this bound.
const maxBenchOpTokens = 1 << 14

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "prefill:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		modelDir   = flag.String("model", "", "Hugging Face or MLX checkpoint directory, or a llama.cpp GGUF file (X.gguf; a split set by any of its parts) (default: a generated reduced-size Qwen3.8-Flash-Next model)")
		preset     = flag.String("preset", "qwen4exp-small", "generated model to use when --model is not given: "+strings.Join(presetNames(), ", "))
		tokensArg  = flag.String("tokens", "", "comma-separated token ids")
		tokensFile = flag.String("tokens-file", "", "file of token ids separated by commas or white space")
		randomN    = flag.Int("random-tokens", 0, "prefill N random token ids (seeded by --seed)")
		seed       = flag.Uint64("seed", 1, "seed for --random-tokens and the default prompt")
		chunk      = flag.Int("chunk", 0, "prefill in separate calls of N tokens each (0: one call)")
		step       = flag.Int("step", strata.DefaultStep, "most tokens a prefill call runs at once; longer prompts run in steps within the call (0: one shot)")
		backend    = flag.String("backend", "auto", "backend: auto, cpu, metal or emu (the Metal kernels on the MSL emulator)")
		allLogits  = flag.Bool("all-logits", false, "compute logits for every token, not only the last")
		saveLogits = flag.String("save-logits", "", "write logits as float32 .npy ([T, vocab] with --all-logits, the rows of the tokens this run prefilled: with --prompt-cache those after the reused prefix; else [vocab])")
		maxCtx     = flag.Int("max-context", 0, "session capacity in tokens (default: prompt length, at least 4096)")
		verbose    = flag.Bool("v", false, "log library messages to stderr")
		bench      = flag.Bool("bench", false, "benchmark: GEMM peak, each op at real shapes (see --bench-op-tokens), the qwen4exp-slice model, the qwen3next-slice model and its MLX 4- and 8-bit conversions (see --bench-tokens)")
		benchT     = flag.String("bench-tokens", "512,2048", "--bench slice runs: comma-separated T (T tokens from position 0) or P+T (T tokens timed after P untimed ones, e.g. 30000+2048); on the emulator the slices run only when it is given")
		benchOpT   = flag.Int("bench-op-tokens", 0, "--bench op cases: tokens of the per-op cases, 4x that for the GEMM peak and the long-context ones (0: 512, or 8 on the emulator)")
		benchReps  = flag.Int("bench-reps", 0, "--bench op cases: timed runs of each case after a warm-up, the median reported (0: 3, or 1 on the emulator); --bench-compute: interleaved runs of each mode, the median reported (0: 1)")
		compute    = flag.String("compute", "f32", "compute mode of the linear layers' products: f32, bf16 or int8 (CPU only; see README)")
		benchComp  = flag.Bool("bench-compute", false, "benchmark only the compute modes: the qwen3next slice in bf16, MLX 4-bit and MLX 8-bit, each mode at the --bench-tokens lengths (default 512, 2048), one compute line each")
		widen      = flag.Int64("widen-budget", 0, "bytes of float32 weight copies of 16-bit weights to make at load (0: none, -1: all; see BENCHMARKS.md)")
		inspect    = flag.Bool("inspect", false, "check the checkpoint as loading would (config.json, shard index, every tensor header) without loading it, print its summary and exit")
		saveState  = flag.String("save-state", "", "after the prefill, write the session's state to FILE (a session state file, written atomically)")
		loadState  = flag.String("load-state", "", "before the prefill, load the session's state from FILE; the tokens given are its continuation")
		cacheDir   = flag.String("prompt-cache", "", "prompt cache directory: resume from the deepest checkpoint whose tokens are a prefix of the prompt, keep new ones there")
		cacheBytes = flag.Int64("prompt-cache-bytes", strata.DefaultPromptCacheBytes, "prompt cache budget in bytes, in memory and in the --prompt-cache directory")
		cacheEvery = flag.Int("prompt-cache-every", strata.DefaultCheckpointEvery, "prompt cache checkpoint spacing in tokens")
		saveMLXLM  = flag.String("save-mlx-lm-cache", "", "after the prefill, write the session as an mlx-lm prompt-cache FILE (.safetensors, written atomically) that mlx_lm.generate --prompt-cache-file continues (qwen3_next, qwen3_5, qwen3_5_moe)")
		mlxFormat  = flag.String("mlx-lm-format", strata.MLXLMFormatNew, "--save-mlx-lm-cache format: new (mlx-lm after PR #1632; needs mlx >= 0.32.1) or legacy")
		mlxDType   = flag.String("mlx-lm-dtype", "", "--save-mlx-lm-cache dtype of keys, values and conv states: bfloat16, float16 or float32 (default: the model's, as mlx-lm runs it; float32 keeps the states exact)")
		mlxModel   = flag.String("mlx-lm-model", "", "--save-mlx-lm-cache metadata \"model\": the model mlx_lm.generate loads (default: the checkpoint directory)")
		benchCache = flag.Bool("bench-cache", false, "benchmark the prompt cache on the generated model (--preset; see BENCHMARKS.md): a prompt sharing 90% of a longer one, a chat of turns, checkpoint costs")
	)
	tf := registerTextFlags()
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only; see -h)", flag.Args())
	}
	if *modelDir == "" && flagSet("model") {
		return fmt.Errorf("--model is empty: give a checkpoint directory or a GGUF file, or leave --model out for the generated model")
	}
	for _, name := range []string{"bench-tokens", "bench-op-tokens", "bench-reps"} {
		if flagSet(name) && !*bench && (name == "bench-op-tokens" || !*benchComp) {
			return fmt.Errorf("--%s applies to --bench runs only", name)
		}
	}
	if !slices.Contains(strata.ComputeModes, *compute) {
		return fmt.Errorf("--compute %q: want one of %s", *compute, strings.Join(strata.ComputeModes, ", "))
	}
	if *benchComp && *bench {
		return fmt.Errorf("--bench-compute runs the compute lines of --bench alone: give one of them")
	}
	if *benchComp && flagSet("compute") {
		return fmt.Errorf("--bench-compute runs every compute mode: drop --compute")
	}
	if flagSet("seed") && (*tokensArg != "" || *tokensFile != "" || flagSet("prompt") || flagSet("prompt-file")) {
		return fmt.Errorf("--seed picks random token ids (--random-tokens, the generated model's default prompt): it does nothing with --tokens, --tokens-file, --prompt or --prompt-file")
	}
	for _, name := range []string{"prompt", "tokens", "tokens-file", "prompt-file", "tokenizer", "save-logits", "save-state", "load-state", "prompt-cache", "save-mlx-lm-cache"} {
		if flagSet(name) && flag.Lookup(name).Value.String() == "" {
			return fmt.Errorf("--%s is empty", name)
		}
	}
	if *modelDir != "" && flagSet("preset") {
		return fmt.Errorf("give --model DIR or --preset NAME, not both (--preset picks a generated model when --model is not given)")
	}
	if _, ok := modelgen.Presets[*preset]; !ok && *modelDir == "" {
		return fmt.Errorf("unknown preset %q (have %s)", *preset, strings.Join(presetNames(), ", "))
	}
	if *inspect {
		return runInspect(*modelDir, *preset, *compute)
	}
	if err := checkStateFlags(*saveState, *loadState, *cacheDir, *cacheBytes, *cacheEvery, *chunk, *benchCache); err != nil {
		return err
	}
	mlxOpts := strata.MLXLMOptions{Format: *mlxFormat, DType: *mlxDType, Model: *mlxModel}
	if err := checkMLXLMFlags(*saveMLXLM, mlxOpts, *benchCache); err != nil {
		return err
	}
	outputs := []pathFlag{{"save-logits", *saveLogits}, {"save-state", *saveState}, {"save-mlx-lm-cache", *saveMLXLM}}
	if err := checkSamePaths(outputs, []pathFlag{{"model", *modelDir}, {"load-state", *loadState}, {"tokens-file", *tokensFile}, {"prompt-file", *tf.promptFile}}); err != nil {
		return err
	}
	if *tf.tokenize {
		for _, o := range outputs {
			if o.path != "" {
				return fmt.Errorf("--tokenize prints the prompt's ids and exits before any prefill: --%s would write nothing", o.name)
			}
		}
		if *loadState != "" || *cacheDir != "" {
			return fmt.Errorf("--tokenize prints the prompt's ids and exits before any prefill: drop --load-state and --prompt-cache")
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"--chunk", *chunk}, {"--step", *step}, {"--random-tokens", *randomN}, {"--max-context", *maxCtx},
		{"--bench-op-tokens", *benchOpT}, {"--bench-reps", *benchReps}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d: must be >= 0", f.name, f.v)
		}
	}
	if *widen < -1 {
		return fmt.Errorf("--widen-budget %d: want bytes >= 0, or -1 for all", *widen)
	}
	if flagSet("random-tokens") && *randomN == 0 {
		return fmt.Errorf("--random-tokens 0: give N >= 1 (without the flag the default prompt runs)")
	}
	if *benchOpT > maxBenchOpTokens {
		return fmt.Errorf("--bench-op-tokens %d: at most %d (the GEMM peak and the long-context cases run 4x that)", *benchOpT, maxBenchOpTokens)
	}
	if *randomN > maxPromptTokens {
		return fmt.Errorf("--random-tokens %d: at most %d tokens (a session's largest context)", *randomN, maxPromptTokens)
	}
	textIDs, done, err := tf.prepare(*modelDir, *tokensArg != "" || *tokensFile != "" || *randomN > 0)
	if err != nil || done {
		return err
	}
	// Check the output first: a bad path should fail before a long prefill, not after it. The
	// file itself is written only at the end (saveNPY), so a failed run leaves it as it was.
	if *saveLogits != "" {
		if err := checkOutputFile("save-logits", *saveLogits); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := strata.Options{Backend: *backend}
	if *verbose {
		opts.Log = func(l strata.LogLevel, msg string) { fmt.Fprintf(os.Stderr, "[%s] %s\n", l, msg) }
	}
	dev, err := strata.Open(opts)
	if err != nil {
		return err
	}
	if *compute != "" && *compute != "f32" && dev.Backend() != "cpu" {
		return fmt.Errorf("--compute %s: the compute modes are the CPU backend's; --backend %s runs f32 only (give --backend cpu, or leave --compute out)", *compute, dev.Backend())
	}
	if *bench {
		bstep := *step
		if bstep == 0 {
			bstep = strata.OneShot
		}
		// The emulator runs the real widths thousands of times slower than a GPU: a few tokens
		// per op, one timed run, and the slices only when asked for.
		emu := dev.Backend() == "emu"
		ops := benchOps{T: *benchOpT, reps: *benchReps}
		switch {
		case ops.T == 0 && emu:
			ops.T = 8
		case ops.T == 0:
			ops.T = 512
		}
		switch {
		case ops.reps == 0 && emu:
			ops.reps = 1
		case ops.reps == 0:
			ops.reps = 3
		}
		return runBench(ctx, dev, *modelDir, *benchT, *widen, *compute, bstep, ops, !emu || flagSet("bench-tokens"))
	}
	if *benchComp {
		bstep := *step
		if bstep == 0 {
			bstep = strata.OneShot
		}
		reps := *benchReps
		if reps == 0 {
			reps = 1
		}
		return runComputeBench(ctx, dev, *benchT, *widen, bstep, reps)
	}
	if *benchCache {
		dir := *modelDir
		if dir == "" {
			if dir, err = defaultModel(*preset); err != nil {
				return err
			}
		}
		return runCacheBench(ctx, dev, dir, *cacheDir, *cacheBytes, *cacheEvery, flagSet("prompt-cache-every"))
	}
	dir := *modelDir
	if dir == "" {
		if dir, err = defaultModel(*preset); err != nil {
			return err
		}
	}
	// The prompt is checked against the checkpoint's vocabulary before any weight is loaded
	// (reading its headers costs little next to loading a release).
	info, err := strata.Inspect(dir)
	if err != nil {
		return err
	}
	if err := tf.checkVocab(info.Vocab); err != nil {
		return err
	}
	tokens := textIDs
	if tokens == nil {
		if tokens, err = promptTokens(*tokensArg, *tokensFile, *randomN, *seed, *modelDir == "", info.Vocab); err != nil {
			return err
		}
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= info.Vocab {
			return fmt.Errorf("token id %d (prompt index %d) is outside the model's vocabulary [0, %d)", id, i, info.Vocab)
		}
	}
	if *maxCtx > 0 && len(tokens) > *maxCtx {
		return fmt.Errorf("--max-context %d: the prompt has %d tokens; give at least %d, or leave the flag out", *maxCtx, len(tokens), len(tokens))
	}
	if len(tokens) > maxPromptTokens {
		return fmt.Errorf("prompt of %d tokens: at most %d (a session's largest context)", len(tokens), maxPromptTokens)
	}
	t0 := time.Now()
	var bar *progressbar.ProgressBar
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{WidenBudget: *widen, Compute: *compute, Progress: func(done, total int64, name string) {
		if total < 256<<20 { // small checkpoints load in a blink
			return
		}
		if bar == nil {
			bar = progressbar.DefaultBytes(total, "loading")
		}
		bar.Set64(done)
	}})
	if err != nil {
		return err
	}
	defer m.Close()
	if bar != nil {
		bar.Finish()
	}
	loadTime := time.Since(t0)
	if *saveMLXLM != "" {
		if _, err := m.MLXLMModel(); err != nil {
			return fmt.Errorf("--save-mlx-lm-cache: %w", err)
		}
	}
	held := 0 // tokens of a --load-state file
	if *loadState != "" {
		in, err := strata.ReadStateInfo(*loadState)
		if err != nil {
			return fmt.Errorf("--load-state: %w", err)
		}
		held = in.Position
	}
	capacity := *maxCtx
	if capacity == 0 {
		capacity = max(held+len(tokens), 4096)
	} else if held+len(tokens) > capacity {
		return fmt.Errorf("--max-context %d: --load-state holds %d tokens and the prompt has %d; give at least %d", capacity, held, len(tokens), held+len(tokens))
	}
	sess, err := m.NewSession(strata.SessionOptions{MaxContext: capacity})
	if err != nil {
		return err
	}
	defer sess.Close()

	fmt.Printf("backend   %s\n", dev.Backend())
	fmt.Printf("kernels   %s; compute %s\n", dev.Kernels(), m.Compute())
	fmt.Printf("model     %s\n", m.Describe())
	fmt.Printf("          %s (loaded in %v)\n", homeRel(dir), loadTime.Round(time.Millisecond))
	if *loadState != "" {
		t0 := time.Now()
		if err := sess.LoadStateFile(*loadState); err != nil {
			return err
		}
		fmt.Printf("state     loaded %s: %s in %v\n", *loadState, plural(sess.Position(), "token"), time.Since(t0).Round(time.Millisecond))
	}
	fmt.Printf("prompt    %s%s", plural(len(tokens), "token"), tf.describe())
	if held > 0 {
		fmt.Printf(" after the %d loaded", held)
	}
	if *chunk > 0 {
		fmt.Printf(" in calls of %d", *chunk)
	}
	if *step > 0 && *step < len(tokens) {
		fmt.Printf(", steps of %d", *step)
	}
	fmt.Println()

	call := len(tokens)
	if *chunk > 0 {
		call = *chunk
	}
	pstep := *step
	if pstep == 0 {
		pstep = strata.OneShot
	}
	var pbar *progressbar.ProgressBar
	if len(tokens) >= 1024 {
		pbar = progressbar.NewOptions(1000, progressbar.OptionSetDescription("prefill"),
			progressbar.OptionSetWriter(os.Stderr), progressbar.OptionClearOnFinish())
	}
	var total strata.Stats
	var all []float32
	var last *strata.Logits
	var pc *strata.PromptCache
	var cacheRes *strata.PromptCacheResult
	if *cacheDir != "" {
		if pc, err = strata.NewPromptCache(m, strata.PromptCacheOptions{Dir: *cacheDir, Bytes: *cacheBytes, Every: *cacheEvery}); err != nil {
			return err
		}
	}
	for at := 0; at < len(tokens); at += call {
		end := min(at+call, len(tokens))
		opts := strata.PrefillOptions{AllLogits: *allLogits, Step: pstep}
		if pbar != nil {
			opts.Progress = func(done, n int) {
				pbar.Set(int(1000 * (float64(at) + float64(end-at)*float64(done)/float64(n)) / float64(len(tokens))))
			}
		}
		var lg *strata.Logits
		if pc != nil {
			if lg, cacheRes, err = pc.Prefill(ctx, sess, tokens, opts); err != nil {
				return fmt.Errorf("prefill through the prompt cache: %w", err)
			}
		} else if lg, err = sess.Prefill(ctx, tokens[at:end], opts); err != nil {
			return fmt.Errorf("prefill of tokens %d..%d: %w", at, end-1, err)
		}
		total.Tokens += lg.Stats.Tokens
		total.Total += lg.Stats.Total
		total.Device += lg.Stats.Device
		total.PerStage = lg.Stats.PerStage
		for i := range total.Stage {
			total.Stage[i] += lg.Stats.Stage[i]
		}
		if *allLogits {
			all = append(all, lg.Data...)
		}
		last = lg
	}
	if pbar != nil {
		pbar.Finish()
	}
	if cacheRes != nil {
		fmt.Println(cacheLine(cacheRes, *cacheBytes, *cacheDir))
	}
	if total.Tokens == 0 {
		fmt.Println("prefill   none: the whole prompt came from the prompt cache")
	} else {
		printStats(total)
	}
	if dev.Backend() != "cpu" {
		fmt.Printf("ran       %s\n", dev.Kernels())
	}
	row := last.Row(last.Rows - 1)
	fmt.Printf("top-5     next token after position %d:", sess.Position()-1)
	for _, id := range topK(row, 5) {
		fmt.Printf("  %d%s (%.4f)", id, tf.tokenText(id), row[id])
	}
	fmt.Println()
	if *saveState != "" {
		t0 := time.Now()
		if err := sess.SaveStateFile(*saveState); err != nil {
			return err
		}
		fi, _ := os.Stat(*saveState)
		fmt.Printf("state     saved %s: %s, %.1f MiB in %v\n", *saveState, plural(sess.Position(), "token"), float64(fi.Size())/(1<<20), time.Since(t0).Round(time.Millisecond))
	}
	if *saveMLXLM != "" {
		t0 := time.Now()
		if err := sess.SaveMLXLMCache(*saveMLXLM, mlxOpts); err != nil {
			return err
		}
		fi, _ := os.Stat(*saveMLXLM)
		fmt.Printf("mlx-lm    saved %s: %s (%s format), %.1f MiB in %v\n", *saveMLXLM, plural(sess.Position(), "token"), *mlxFormat, float64(fi.Size())/(1<<20), time.Since(t0).Round(time.Millisecond))
	}
	if *saveLogits != "" {
		rows := len(all) / m.Vocab() // every chunk's rows, not only the last chunk's
		if err := saveNPY(*saveLogits, all, row, rows, m.Vocab(), *allLogits); err != nil {
			return fmt.Errorf("--save-logits %s: %w", *saveLogits, err)
		}
		if *allLogits {
			// A prompt-cache hit prefills only the tokens after the reused prefix.
			fmt.Printf("saved     %s: logits [%d, %d] of positions %d..%d\n", *saveLogits, rows, m.Vocab(), sess.Position()-rows, sess.Position()-1)
		} else {
			fmt.Printf("saved     %s: logits [%d] of position %d\n", *saveLogits, m.Vocab(), sess.Position()-1)
		}
	}
	return nil
}

// printStats prints the prefill line and the time of each stage.
func printStats(total strata.Stats) {
	fmt.Printf("prefill   %s in %v: %.1f tokens/s\n", plural(total.Tokens, "token"), total.Total.Round(time.Millisecond),
		float64(total.Tokens)/total.Total.Seconds())
	var staged time.Duration
	for st := strata.Stage(0); st < strata.Stage(len(total.Stage)); st++ {
		d := total.Stage[st]
		staged += d
		fmt.Printf("  %-14s %9.1f ms  %5.1f%%\n", st, float64(d.Microseconds())/1000, 100*d.Seconds()/total.Total.Seconds())
	}
	other := total.Total - staged
	fmt.Printf("  %-14s %9.1f ms  %5.1f%%\n", "other", float64(other.Microseconds())/1000, 100*other.Seconds()/total.Total.Seconds())
	if !total.PerStage {
		// The device timed only whole command buffers: the stages above hold host work only.
		fmt.Printf("  %-14s %9.1f ms  %5.1f%%  (GPU time of the command buffers; no per-stage timing on this device)\n", "device",
			float64(total.Device.Microseconds())/1000, 100*total.Device.Seconds()/total.Total.Seconds())
	}
}

// parseIDs reads token ids separated by commas, white space or both (a file's newlines, CRLF
// and tabs included; a UTF-8 byte order mark at the start is skipped). An empty entry between two
// commas or at an end (a lost id) is an error.
func parseIDs(list string) ([]int32, error) {
	list = strings.TrimPrefix(list, "\ufeff")
	if strings.Contains(list, ",") {
		for _, e := range strings.Split(list, ",") {
			if strings.TrimSpace(e) == "" {
				return nil, fmt.Errorf("empty entry in the token list (two commas in a row, or one at an end)")
			}
		}
	}
	var out []int32
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		v, err := strconv.ParseInt(f, 10, 32)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("token %q: outside the int32 range of token ids", f)
		} else if err != nil {
			return nil, fmt.Errorf("token %q: not an integer token id", f)
		}
		out = append(out, int32(v))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no token ids given")
	}
	return out, nil
}

// flagSet reports whether the flag was given on the command line (not only its default).
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func presetNames() []string {
	var n []string
	for k := range modelgen.Presets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// defaultModel returns the directory of the generated preset, generating it on first use.
func defaultModel(preset string) (string, error) {
	spec, ok := modelgen.Presets[preset]
	if !ok {
		return "", fmt.Errorf("unknown preset %q (have %s)", preset, strings.Join(presetNames(), ", "))
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "strata", "models", preset+"-v2")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s (random weights, seed %d) into %s\n", preset, spec.Seed, homeRel(dir))
	if err := modelgen.Generate(dir, spec); err != nil {
		return "", fmt.Errorf("generating %s: %w", preset, err)
	}
	return dir, nil
}

func promptTokens(list, file string, randomN int, seed uint64, generated bool, vocab int) ([]int32, error) {
	n := 0
	for _, set := range []bool{list != "", file != "", randomN > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("give only one of --tokens, --tokens-file, --random-tokens")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("--tokens-file %s holds no token ids", file)
		}
		ids, err := parseIDs(string(b))
		if err != nil {
			return nil, fmt.Errorf("--tokens-file %s: %w", file, err)
		}
		return ids, nil
	}
	if list != "" {
		ids, err := parseIDs(list)
		if err != nil {
			return nil, fmt.Errorf("--tokens: %w", err)
		}
		return ids, nil
	}
	if randomN <= 0 {
		if !generated {
			return nil, fmt.Errorf("--model needs a prompt: --tokens, --tokens-file or --random-tokens")
		}
		randomN = 300
	}
	r := rand.New(rand.NewPCG(seed, 0x70c))
	out := make([]int32, randomN)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out, nil
}

func topK(row []float32, k int) []int {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	// NaN ranks last (a NaN logit means a broken checkpoint; it must not reorder the others).
	greater := func(x, y float32) bool {
		if x != x {
			return false
		}
		return y != y || x > y
	}
	sort.SliceStable(idx, func(a, b int) bool { return greater(row[idx[a]], row[idx[b]]) })
	return idx[:min(k, len(idx))]
}

// saveNPY writes the logits to path as float32 .npy: [T, vocab] of all with allRows, else the
// [vocab] of last. A regular file (or a new one) is replaced whole or not at all, through
// strata.WriteFile (a temporary file beside it, renamed over it once complete), so a failed write
// leaves what path held. Anything else that exists there (a device, a pipe) is written in place,
// never removed or replaced.
func saveNPY(path string, all, last []float32, T, vocab int, allRows bool) error {
	var v any = last
	if allRows {
		rows := make([][]float32, T)
		for t := range rows {
			rows[t] = all[t*vocab : (t+1)*vocab]
		}
		v = rows
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if err := npy.Write(f, v); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return strata.WriteFile(path, func(w io.Writer) error { return npy.Write(w, v) })
}

// homeRel shortens paths under the home directory to ~/... for display.
func homeRel(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	if rel, err := filepath.Rel(home, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return p
}
