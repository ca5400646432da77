// Command strata is strata's command-line tool: it prefills a prompt through a Qwen3.8-Flash-Next,
// Qwen3-Next or Qwen3.5 checkpoint and reports the backend, the kernels, per-stage times,
// tokens/s and the top-5 next tokens; it also inspects checkpoints, runs the benchmarks, keeps
// session state and prompt caches, and exports sessions to mlx-lm. (examples/prefill is the
// same main job in a few lines of the public API.)
//
// With no arguments it generates (once, into the user cache directory) a reduced-size
// Qwen3.8-Flash-Next-architecture model with random weights and prefills a 300-token prompt.
//
//	go run ./cmd/strata
//	go run ./cmd/strata --model DIR --tokens 1,2,3
//	go run ./cmd/strata --model DIR --tokens-file ids.txt --step 512 --all-logits --save-logits out.npy
//	go run ./cmd/strata --model DIR --prompt "Hello" (text in through DIR/tokenizer.json; --tokenize prints the ids)
//	go run ./cmd/strata --bench
//	go run ./cmd/strata --model DIR --inspect
//	go run ./cmd/strata --model X.gguf --tokens 1,2,3   (a llama.cpp GGUF file alone: qwen3next, qwen35, qwen35moe)
//	go run ./cmd/strata --model X.gguf --inspect        (headers only: types by class, tokenizer, what strata refuses)
//	go run ./cmd/strata --model DIR --tokens-file ids.txt --save-state s.state   (then --load-state s.state --tokens ...: the continuation)
//	go run ./cmd/strata --model DIR --tokens-file ids.txt --prompt-cache DIR     (a later prompt sharing a prefix resumes from a checkpoint)
//	go run ./cmd/strata --model DIR --prompt "..." --save-mlx-lm-cache c.safetensors --mlx-lm-model ID   (then mlx_lm.generate --model ID --prompt-cache-file c.safetensors continues)
//
// -help lists the flags by group: model and device, the prompt as ids or as text, the prefill,
// session state and prompt cache, the mlx-lm export, the benchmarks.
//
// --bench measures the device's GEMM peak P (a float32 MatMul of 4 x --bench-op-tokens rows by
// 2048 x 2048: 2048^3 at the default), then each op at the real model's shapes (op/optest's
// benchmark cases, timed by optest.Time on the device's backend: the same cases on cpu, metal
// and emu; including the QSA indexer and the sparse attention of a 2048-token chunk at pos0
// 30000), then the model (--model, else a 4-layer real-width slice of Qwen3.8-Flash-Next,
// generated once, 3.2 GB) at the --bench-tokens lengths (default 512 and 2048; e.g.
// 2048,8192,32768,30000+2048 for the long context) with per-stage times (on the CPU, here and
// after a prefill, also the process's CPU time in each stage, the share of the GOMAXPROCS cores
// it kept busy and its system part: where a stage stops scaling with the cores), GFLOP/s as a fraction
// of P (on the CPU the model lines' own P: the product's peak in the model's compute mode at a
// step's rows, at most 2048) and each run's peak RSS; then the generated slices beside their
// FP8, MLX and mxfp4 forms, and on the CPU each compute mode's line (see bench.go).
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
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stratakernels/strata/strata"
)

// maxPromptTokens is the largest context a session takes (strata.SessionOptions.MaxContext).
const maxPromptTokens = 1 << 24

// maxBenchOpTokens bounds --bench-op-tokens: its GEMM peak and long-context cases run 4x the
// tokens, about 2 GiB of float32 operands at this bound.
const maxBenchOpTokens = 1 << 14

func main() {
	err := run(os.Args[1:])
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage): // the flag package has printed it, and the usage
		os.Exit(2)
	case err != nil:
		// The library's errors already begin with its name ("strata: checkpoint error: ...").
		msg := err.Error()
		if !strings.HasPrefix(msg, "strata: ") {
			msg = "strata: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

// usageError is a command line the flag package could not parse.
type usageError struct{ error }

// run is the command with the arguments args: the flags are parsed and checked (before anything
// is read or loaded), then one job runs: --inspect, a benchmark, or the prefill.
func run(args []string) error {
	o := newOptions("strata")
	if err := o.parse(args); err != nil {
		return err
	}
	if err := o.checkModes(); err != nil {
		return err
	}
	if o.model.inspect {
		ctx, stop := notifyContext()
		defer stop()
		return o.runInspect(ctx)
	}
	if err := o.checkOutputs(); err != nil {
		return err
	}
	if err := o.checkCounts(); err != nil {
		return err
	}
	textIDs, done, err := o.text.prepare(o.model.dir, o.ids.list != "" || o.ids.file != "" || o.ids.random > 0)
	if err != nil || done {
		return err
	}
	if err := o.ids.readFile(); err != nil {
		return err
	}
	// Check the output first: a bad path should fail before a long prefill, not after it. The
	// file itself is written only at the end (saveNPY), so a failed run leaves it as it was.
	if o.prefill.saveLogits != "" {
		if err := checkOutputFile("save-logits", o.prefill.saveLogits); err != nil {
			return err
		}
	}
	ctx, stop := notifyContext()
	defer stop()
	dev, err := o.openDevice()
	if err != nil {
		return err
	}
	switch {
	case o.bench.bench:
		return o.runBench(ctx, dev)
	case o.bench.compute:
		return runComputeBench(ctx, dev, o.bench.tokens, o.model.widen, o.step(), max(o.bench.reps, 1))
	case o.bench.cache:
		return o.runCacheBench(ctx, dev)
	}
	return o.runPrefill(ctx, dev, textIDs)
}

// notifyContext is the job's context: an interrupt or SIGTERM cancels it, and the job stops at
// its next check (between ops of a prefill; between tensors of a generated model's first write
// or of a conversion, or after the write of a weights file, which runs to its end: within
// seconds) and removes what it had begun. Later signals are caught too, so that nothing is
// left half-written.
func notifyContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// openDevice opens the backend of --backend, logging to stderr with -v, and refuses a compute
// mode the backend does not run.
func (o *options) openDevice() (*strata.Device, error) {
	opts := strata.Options{Backend: o.model.backend}
	if o.model.verbose {
		opts.Log = func(l strata.LogLevel, msg string) { fmt.Fprintf(os.Stderr, "[%s] %s\n", l, msg) }
	}
	refuse := func(backend string) error {
		return fmt.Errorf("--compute %s: the compute modes are the CPU backend's; --backend %s runs f32 only (give --backend cpu, or leave --compute out)", o.model.compute, backend)
	}
	mode := o.model.compute != "" && o.model.compute != "f32"
	if b := o.model.backend; mode && b != "" && b != "auto" && b != "cpu" {
		return nil, refuse(b) // before opening it: the emulator's clang need not be there to say so
	}
	dev, err := strata.Open(opts)
	if err != nil {
		return nil, err
	}
	if mode && dev.Backend() != "cpu" {
		return nil, refuse(dev.Backend())
	}
	return dev, nil
}

// modelDir is --model, or the folder of the generated --preset model (written on first use).
func (o *options) modelDir(ctx context.Context) (string, error) {
	if o.model.dir != "" {
		return o.model.dir, nil
	}
	return generated(ctx, o.model.preset)
}

// generated is the folder of the generated model name, written on first use (saying so on
// stderr).
func generated(ctx context.Context, name string) (string, error) {
	return strata.GeneratedModelContext(ctx, name, func(dir string) {
		fmt.Fprintf(os.Stderr, "generating %s (random weights) into %s\n", name, homeRel(dir))
	})
}
