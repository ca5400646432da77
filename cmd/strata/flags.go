package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stratakernels/strata/strata"
)

// modelFlags pick the checkpoint, the device and how the weights are held.
type modelFlags struct {
	dir, preset, backend, compute string
	widen                         int64
	verbose, inspect              bool
}

func (f *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "model", "", "Hugging Face or MLX checkpoint directory, or a llama.cpp GGUF file (X.gguf; a split set by any of its parts) (default: a generated reduced-size Qwen3.8-Flash-Next model)")
	fs.StringVar(&f.preset, "preset", "qwen4exp-small", "generated model to use when --model is not given: "+strings.Join(strata.GeneratedModels(), ", "))
	fs.StringVar(&f.backend, "backend", "auto", "backend: auto, cpu, metal or emu (the Metal kernels on the MSL emulator)")
	fs.StringVar(&f.compute, "compute", "f32", "compute mode of the linear layers' products: f32, bf16 or int8 (CPU only; see README)")
	fs.Int64Var(&f.widen, "widen-budget", 0, "bytes of float32 weight copies of 16-bit weights to make at load (0: none, -1: all; see BENCHMARKS.md)")
	fs.BoolVar(&f.verbose, "v", false, "log library messages to stderr")
	fs.BoolVar(&f.inspect, "inspect", false, "check the checkpoint as loading would (config.json, shard index, every tensor header) without loading it, print its summary and exit")
}

// idFlags give the prompt as token ids (textFlags give it as text).
type idFlags struct {
	list, file string
	random     int
	seed       uint64
	fileText   []byte // --tokens-file's contents (readFile)
}

func (f *idFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.list, "tokens", "", "comma-separated token ids")
	fs.StringVar(&f.file, "tokens-file", "", "file of token ids separated by commas or white space")
	fs.IntVar(&f.random, "random-tokens", 0, "prefill N random token ids (seeded by --seed)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed for --random-tokens and the default prompt")
}

// prefillFlags shape the prefill calls and what they return.
type prefillFlags struct {
	chunk, step, maxCtx int
	allLogits           bool
	saveLogits          string
}

func (f *prefillFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.chunk, "chunk", 0, "prefill in separate calls of N tokens each (0: one call)")
	fs.IntVar(&f.step, "step", strata.DefaultStep, "most tokens a prefill call runs at once; longer prompts run in steps within the call (0: one shot)")
	fs.IntVar(&f.maxCtx, "max-context", 0, "session capacity in tokens (default: prompt length, at least 4096)")
	fs.BoolVar(&f.allLogits, "all-logits", false, "compute logits for every token, not only the last")
	fs.StringVar(&f.saveLogits, "save-logits", "", "write logits as float32 .npy ([T, vocab] with --all-logits, the rows of the tokens this run prefilled: with --prompt-cache those after the reused prefix; else [vocab])")
}

// stateFlags save and resume the session: a state file, or the prompt cache.
type stateFlags struct {
	save, load, cacheDir string
	cacheBytes           int64
	cacheEvery           int
}

func (f *stateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.save, "save-state", "", "after the prefill, write the session's state to FILE (a session state file, written atomically)")
	fs.StringVar(&f.load, "load-state", "", "before the prefill, load the session's state from FILE; the tokens given are its continuation")
	fs.StringVar(&f.cacheDir, "prompt-cache", "", "prompt cache directory: resume from the deepest checkpoint whose tokens are a prefix of the prompt, keep new ones there")
	fs.Int64Var(&f.cacheBytes, "prompt-cache-bytes", strata.DefaultPromptCacheBytes, "prompt cache budget in bytes, in memory and in the --prompt-cache directory")
	fs.IntVar(&f.cacheEvery, "prompt-cache-every", strata.DefaultCheckpointEvery, "prompt cache checkpoint spacing in tokens")
}

// exportFlags write the session as an mlx-lm prompt cache.
type exportFlags struct {
	path string
	opts strata.MLXLMOptions
}

func (f *exportFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "save-mlx-lm-cache", "", "after the prefill, write the session as an mlx-lm prompt-cache FILE (.safetensors, written atomically) that mlx_lm.generate --prompt-cache-file continues (qwen3_next, qwen3_5, qwen3_5_moe)")
	fs.StringVar(&f.opts.Format, "mlx-lm-format", strata.MLXLMFormatNew, "--save-mlx-lm-cache format: new (mlx-lm after PR #1632; needs mlx >= 0.32.1) or legacy")
	fs.StringVar(&f.opts.DType, "mlx-lm-dtype", "", "--save-mlx-lm-cache dtype of keys, values and conv states: bfloat16, float16 or float32 (default: the model's, as mlx-lm runs it; float32 keeps the states exact)")
	fs.StringVar(&f.opts.Model, "mlx-lm-model", "", "--save-mlx-lm-cache metadata \"model\": the model mlx_lm.generate loads (default: the checkpoint directory)")
}

// benchFlags run the benchmarks instead of a prefill.
type benchFlags struct {
	bench, compute, cache bool
	tokens                string
	opTokens, reps        int
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.bench, "bench", false, "benchmark: GEMM peak, each op at real shapes (see --bench-op-tokens), the --model or the qwen4exp-slice model, the qwen3next-slice model and its FP8, MLX 4- and 8-bit and mxfp4 conversions, each compute mode (see --bench-tokens)")
	fs.StringVar(&f.tokens, "bench-tokens", "512,2048", "--bench slice runs: comma-separated T (T tokens from position 0) or P+T (T tokens timed after P untimed ones, e.g. 30000+2048); on the emulator the slices run only when it is given")
	fs.IntVar(&f.opTokens, "bench-op-tokens", 0, "--bench op cases: tokens of the per-op cases, 4x that for the GEMM peak and the long-context ones (0: 512, or 8 on the emulator)")
	fs.IntVar(&f.reps, "bench-reps", 0, "--bench op cases: timed runs of each case after a warm-up, the median reported (0: 3, or 1 on the emulator); --bench-compute: interleaved runs of each mode, the median reported (0: 1)")
	fs.BoolVar(&f.compute, "bench-compute", false, "benchmark only the compute modes: the qwen3next slice in bf16, MLX 4-bit and MLX 8-bit, each mode at the --bench-tokens lengths (default 512, 2048), one compute line each")
	fs.BoolVar(&f.cache, "bench-cache", false, "benchmark the prompt cache on the generated model (--preset; see BENCHMARKS.md): a prompt sharing 90% of a longer one, a chat of turns, checkpoint costs")
}

// options are the command line, parsed: each group's values, and the flag set to tell a flag
// given on the command line from its default.
type options struct {
	fs      *flag.FlagSet
	groups  []flagGroup
	model   modelFlags
	ids     idFlags
	text    textFlags
	prefill prefillFlags
	state   stateFlags
	export  exportFlags
	bench   benchFlags
}

// flagGroup is one heading of -help and its flags.
type flagGroup struct {
	title string
	fs    *flag.FlagSet
}

// newOptions registers every flag, group by group, on one flag set named name.
func newOptions(name string) *options {
	o := &options{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	for _, g := range []struct {
		title    string
		register func(*flag.FlagSet)
	}{
		{"Model and device", o.model.register},
		{"Prompt as token ids", o.ids.register},
		{"Prompt as text", o.text.register},
		{"Prefill and logits", o.prefill.register},
		{"Session state and prompt cache", o.state.register},
		{"mlx-lm export", o.export.register},
		{"Benchmarks", o.bench.register},
	} {
		gfs := flag.NewFlagSet(g.title, flag.ContinueOnError)
		g.register(gfs)
		gfs.VisitAll(func(f *flag.Flag) { o.fs.Var(f.Value, f.Name, f.Usage) })
		o.groups = append(o.groups, flagGroup{g.title, gfs})
	}
	o.fs.Usage = func() { o.usage(o.fs.Output()) }
	return o
}

// usage writes -help: what the command does, then the flags under their groups' headings.
func (o *options) usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %s [flags]

Prefills a prompt through a Qwen3.8-Flash-Next, Qwen3-Next or Qwen3.5 checkpoint and reports the
backend, the kernels, per-stage times, tokens/s and the top-5 next tokens; or inspects a
checkpoint (--inspect), runs the benchmarks (--bench, --bench-compute, --bench-cache), keeps the
session's state (--save-state, --load-state, --prompt-cache) or exports it to mlx-lm
(--save-mlx-lm-cache). With no flags: a 300-token prompt on a generated reduced-size
Qwen3.8-Flash-Next.
`, o.fs.Name())
	for _, g := range o.groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		g.fs.SetOutput(w)
		g.fs.PrintDefaults()
	}
}

// parse reads args; flags only. An error of the flag package (printed, with the usage) is a
// usageError; -help is flag.ErrHelp.
func (o *options) parse(args []string) error {
	if err := o.fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return usageError{err}
	}
	if o.fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only; see -h)", o.fs.Args())
	}
	return nil
}

// set reports whether the flag was given on the command line (not only its default).
func (o *options) set(name string) bool {
	set := false
	o.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// value is the flag's value as text.
func (o *options) value(name string) string { return o.fs.Lookup(name).Value.String() }
