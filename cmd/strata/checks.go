package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratakernels/strata/strata"
)

// checkModes refuses flags that do not go together: flags of a mode that is not running, a
// compute mode or preset that does not exist, --seed beside a prompt it does not pick, empty
// file and text flags, --model beside --preset, model, prompt and output flags beside
// --bench-compute.
func (o *options) checkModes() error {
	if o.model.dir == "" && o.set("model") {
		return fmt.Errorf("--model is empty: give a checkpoint directory or a GGUF file, or leave --model out for the generated model")
	}
	for _, name := range []string{"bench-tokens", "bench-op-tokens", "bench-reps"} {
		if o.set(name) && !o.bench.bench && (name == "bench-op-tokens" || !o.bench.compute) {
			return fmt.Errorf("--%s applies to --bench runs only", name)
		}
	}
	switch {
	case !slices.Contains(strata.ComputeModes, o.model.compute):
		return fmt.Errorf("--compute %q: want one of %s", o.model.compute, strings.Join(strata.ComputeModes, ", "))
	case o.bench.compute && o.bench.bench:
		return fmt.Errorf("--bench-compute runs the compute lines of --bench alone: give one of them")
	case o.bench.cache && (o.bench.bench || o.bench.compute):
		return fmt.Errorf("--bench-cache is a benchmark of its own: give it without --bench and --bench-compute")
	case o.bench.compute && o.set("compute"):
		return fmt.Errorf("--bench-compute runs every compute mode: drop --compute")
	case o.set("seed") && (o.ids.list != "" || o.ids.file != "" || o.set("prompt") || o.set("prompt-file")):
		return fmt.Errorf("--seed picks random token ids (--random-tokens, the generated model's default prompt): it does nothing with --tokens, --tokens-file, --prompt or --prompt-file")
	}
	if o.bench.compute {
		// The compute lines run the generated qwen3next slice and its conversions, on their own
		// random tokens: a flag that names a model, a prompt or an output would do nothing.
		for _, name := range []string{"model", "preset", "prompt", "prompt-file", "tokens", "tokens-file", "random-tokens", "tokenizer", "chunk",
			"all-logits", "save-logits", "save-state", "load-state", "prompt-cache", "save-mlx-lm-cache", "max-context", "seed"} {
			if o.set(name) {
				return fmt.Errorf("--bench-compute runs the generated qwen3next slice on random tokens: --%s does nothing there", name)
			}
		}
	}
	for _, name := range []string{"prompt", "tokens", "tokens-file", "prompt-file", "tokenizer", "save-logits", "save-state", "load-state", "prompt-cache", "save-mlx-lm-cache"} {
		if o.set(name) && o.value(name) == "" {
			return fmt.Errorf("--%s is empty", name)
		}
	}
	if o.model.dir != "" && o.set("preset") {
		return fmt.Errorf("give --model DIR or --preset NAME, not both (--preset picks a generated model when --model is not given)")
	}
	if !slices.Contains(strata.GeneratedModels(), o.model.preset) && o.model.dir == "" {
		return fmt.Errorf("unknown preset %q (have %s)", o.model.preset, strings.Join(strata.GeneratedModels(), ", "))
	}
	return nil
}

// checkOutputs refuses, before anything is loaded, state, prompt-cache and export flags that mean
// nothing together, an output that could not be written or would replace an input, a prompt
// cache in the checkpoint's folder, and outputs beside --tokenize (which writes none).
func (o *options) checkOutputs() error {
	st := o.state
	if err := o.checkStateFlags(); err != nil {
		return err
	}
	if err := o.checkMLXLMFlags(); err != nil {
		return err
	}
	outputs := []pathFlag{{"save-logits", o.prefill.saveLogits}, {"save-state", st.save}, {"save-mlx-lm-cache", o.export.path}}
	inputs := []pathFlag{{"model", o.model.dir}, {"load-state", st.load}, {"tokens-file", o.ids.file}, {"prompt-file", o.text.promptFile}}
	if err := checkSamePaths(outputs, inputs); err != nil {
		return err
	}
	if st.cacheDir != "" && o.model.dir != "" && withinDir(st.cacheDir, o.model.dir) {
		return fmt.Errorf("--prompt-cache %s is in the folder --model %s reads: the cache would write its files among the checkpoint's", st.cacheDir, o.model.dir)
	}
	if !o.text.tokenize {
		return nil
	}
	for _, out := range outputs {
		if out.path != "" {
			return fmt.Errorf("--tokenize prints the prompt's ids and exits before any prefill: --%s would write nothing", out.name)
		}
	}
	if st.load != "" || st.cacheDir != "" {
		return fmt.Errorf("--tokenize prints the prompt's ids and exits before any prefill: drop --load-state and --prompt-cache")
	}
	return nil
}

// checkCounts refuses counts and sizes out of range.
func (o *options) checkCounts() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"--chunk", o.prefill.chunk}, {"--step", o.prefill.step}, {"--random-tokens", o.ids.random}, {"--max-context", o.prefill.maxCtx},
		{"--bench-op-tokens", o.bench.opTokens}, {"--bench-reps", o.bench.reps}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d: must be >= 0", f.name, f.v)
		}
	}
	switch {
	case o.model.widen < -1:
		return fmt.Errorf("--widen-budget %d: want bytes >= 0, or -1 for all", o.model.widen)
	case o.set("random-tokens") && o.ids.random == 0:
		return fmt.Errorf("--random-tokens 0: give N >= 1 (without the flag the default prompt runs)")
	case o.bench.opTokens > maxBenchOpTokens:
		return fmt.Errorf("--bench-op-tokens %d: at most %d (the GEMM peak and the long-context cases run 4x that)", o.bench.opTokens, maxBenchOpTokens)
	case o.ids.random > maxPromptTokens:
		return fmt.Errorf("--random-tokens %d: at most %d tokens (a session's largest context)", o.ids.random, maxPromptTokens)
	}
	return nil
}
