package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
	"github.com/stratakernels/strata/strata"
)

// benchRun is one slice run of --bench-tokens: T tokens timed at position pos0 (after pos0
// untimed tokens: "P+T").
type benchRun struct{ pos0, T int }

func parseBenchTokens(list string) ([]benchRun, error) {
	var runs []benchRun
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		var r benchRun
		p, t, cont := strings.Cut(f, "+")
		var err error
		if cont {
			if r.pos0, err = strconv.Atoi(p); err == nil && r.pos0 < 0 {
				err = fmt.Errorf("negative")
			}
		} else {
			t = p
		}
		if err == nil {
			r.T, err = strconv.Atoi(t)
		}
		if err != nil || r.T <= 0 {
			return nil, fmt.Errorf("--bench-tokens: bad entry %q (want T or P+T, T > 0)", f)
		}
		if r.pos0 > maxPromptTokens-r.T || r.T > maxPromptTokens {
			return nil, fmt.Errorf("--bench-tokens: entry %q: P+T at most %d tokens (a session's largest context)", f, maxPromptTokens)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// benchOps sizes the op part of --bench: the token count T of optest.BenchCases' per-op cases
// (4T for the GEMM peak and the long-context cases) and the timed repetitions.
type benchOps struct{ T, reps int }

// runBench is --bench on dev: the op cases sized by --bench-op-tokens and --bench-reps (fewer
// on the emulator, which runs the real widths thousands of times slower than a GPU: a few
// tokens per op, one timed run, and the slices only when --bench-tokens is given), then on
// the CPU the model lines' own P (modelPeak), then the slices (sliceBench). A --model that
// does not exist is refused before anything runs.
func (o *options) runBench(ctx context.Context, dev *strata.Device) error {
	emu := dev.Backend() == "emu"
	ops := benchOps{T: o.bench.opTokens, reps: o.bench.reps}
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
	runs, err := parseBenchTokens(o.bench.tokens)
	if err != nil {
		return err
	}
	if d := o.model.dir; d != "" {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("--model: %w (checked before the benchmarks start)", err)
		}
	}
	fmt.Printf("machine   %s, %d logical CPUs, GOMAXPROCS %d\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("kernels   %s\n", dev.Kernels())
	P, err := benchPeakAndOps(ctx, dev, ops)
	if err != nil || (emu && !o.set("bench-tokens")) {
		return err
	}
	b := sliceBench{dev: dev, widen: o.model.widen, compute: o.model.compute, step: o.step(), P: P}
	if dev.Backend() == "cpu" {
		if b.P, err = modelPeak(dev, o.model.compute, o.step(), ops.reps); err != nil {
			return err
		}
	}
	return b.run(ctx, o.model.dir, runs)
}

// modelPeak measures and prints, on the CPU, the P that the model lines are given against: the
// product [rows, 2048] x [2048, 2048] at the rows of one prefill step (step, at most 2048; 2048
// for one shot) in the model's compute mode on that mode's own weight format (f32: F32, bf16:
// BF16, int8: MLX 4-bit in groups of 64; optest.BenchPeakCompute), the median of reps runs, in
// GFLOP/s. The op cases' P (a float32 product at 4 --bench-op-tokens rows) would put a model in
// bf16 or int8, or one timed beside few op tokens, above 100%. It is the mode's rate, not the
// model's: a model whose products the mode leaves in f32 (a BF16 checkpoint in int8) reads
// low against it.
func modelPeak(dev *strata.Device, compute string, step, reps int) (float64, error) {
	mode, err := op.ParseComputeMode(compute)
	if err != nil {
		return 0, err
	}
	rows := step
	if rows <= 0 || rows > 2048 {
		rows = 2048
	}
	dt, q := op.F32, optest.Quant{}
	switch mode {
	case op.ComputeBF16:
		dt = op.BF16
	case op.ComputeInt8:
		dt, q = op.QAffine, optest.Quant{Bits: 4, Group: 64, ScaleDType: op.BF16}
	}
	r, err := optest.Time(dev.Ops(), optest.BenchPeakCompute(optest.BenchOptions{LongT: rows}, mode, dt, q), reps)
	if err != nil {
		return 0, err
	}
	fmt.Printf("\nmodel P   %.4g GFLOP/s  (%s on %s, median of %d: the P of the model lines below)\n", r.GFLOPS(), r.Name, dev.Backend(), reps)
	return r.GFLOPS(), nil
}

// benchPeakAndOps prints the GEMM peak P and each op case's figures, and returns P in GFLOP/s.
func benchPeakAndOps(ctx context.Context, dev *strata.Device, ops benchOps) (float64, error) {
	o := optest.BenchOptions{T: ops.T, LongT: 4 * ops.T}
	peak, err := optest.Time(dev.Ops(), optest.BenchPeak(o), ops.reps)
	if err != nil {
		return 0, err
	}
	P := peak.GFLOPS()
	fmt.Printf("peak P    %.4g GFLOP/s  (%s on %s, median of %d)\n", P, peak.Name, dev.Backend(), ops.reps)

	fmt.Printf("\nops on %s (median of %d runs after a warm-up; optest.BenchCases)\n", dev.Backend(), ops.reps)
	for _, c := range optest.BenchCases(o) {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("before op case %s: %w", c.Name, err)
		}
		r, err := optest.Time(dev.Ops(), c, ops.reps)
		if err != nil {
			return 0, err
		}
		fmt.Println(opLine(r, P, dev.Backend() != "cpu"))
	}
	if dev.Backend() != "cpu" {
		fmt.Printf("kernels   %s\n", dev.Kernels()) // the variants the cases dispatched
	}
	return P, nil
}

// sliceBench runs the slice models of --bench on dev, loaded with widen (LoadOptions.WidenBudget)
// in compute mode compute, prefilled in steps of step; P is the GEMM peak in GFLOP/s the model
// lines are given against (modelPeak's on the CPU, the op cases' elsewhere).
type sliceBench struct {
	dev     *strata.Device
	widen   int64
	compute string
	step    int
	P       float64
}

// run prints the slice-model figures (of modelDir, else the qwen4exp slice) at each run, then
// those of each slice beside its FP8, MLX and mxfp4 forms (benchFormats; the qwen4exp slice's
// only when modelDir does not replace it) at the runs' lengths from position 0, then on the CPU
// the compute lines (benchCompute: every mode on the qwen3next slice's bf16, MLX 4-bit and 8-bit
// forms).
func (b *sliceBench) run(ctx context.Context, modelDir string, runs []benchRun) error {
	dir := modelDir
	if dir == "" {
		var err error
		if dir, err = generated(ctx, "qwen4exp-slice"); err != nil {
			return err
		}
	}
	if err := b.runs(ctx, dir, runs); err != nil {
		return err
	}
	var Ts []int
	for _, r := range runs {
		if r.pos0 == 0 {
			Ts = append(Ts, r.T)
		}
	}
	if len(Ts) == 0 {
		return nil
	}
	if modelDir == "" {
		fmt.Println("\nqwen4exp-slice and its FP8, MLX 4-bit and mxfp4 forms")
		if err := benchFormats(ctx, os.Stdout, b.dev, dir, filepath.Dir(dir), qwen4expFormats, Ts, b.widen, b.compute, b.step); err != nil {
			return err
		}
	}
	q3, err := generated(ctx, "qwen3next-slice")
	if err != nil {
		return err
	}
	fmt.Println("\nqwen3next-slice (4 layers of Qwen3-Next-80B-A3B at real width, 64 experts) and its FP8, MLX and mxfp4 forms")
	if err := benchFormats(ctx, os.Stdout, b.dev, q3, filepath.Dir(q3), qwen3nextFormats, Ts, b.widen, b.compute, b.step); err != nil {
		return err
	}
	if b.dev.Backend() != "cpu" {
		return nil // the compute modes are a CPU option
	}
	return benchCompute(ctx, os.Stdout, b.dev, q3, Ts, b.widen, b.step, 1, optest.BenchOptions{})
}

// runs loads the model in dir and prints each run's figures: tokens/s, the time per token
// beside the first run's, GFLOP/s and the fractions of b.P (modelPeak's on the CPU) and of the
// GEMM-bound limit at b.P, the peak RSS, and the time of each stage.
func (b *sliceBench) runs(ctx context.Context, dir string, runs []benchRun) error {
	t0 := time.Now()
	m, err := strata.LoadModel(b.dev, dir, strata.LoadOptions{WidenBudget: b.widen, Compute: b.compute})
	if err != nil {
		return err
	}
	defer m.Close()
	step := strconv.Itoa(b.step)
	if b.step == strata.OneShot {
		step = "one shot"
	}
	fmt.Printf("\nmodel     %s\n          loaded in %v, widen budget %d MiB, step %s\ncompute   %s\n", m.Describe(), time.Since(t0).Round(time.Millisecond), b.widen>>20, step, m.Compute())
	var firstCost float64 // seconds per token of the first run
	for i, run := range runs {
		st, err := b.timeRun(ctx, m, run)
		if err != nil {
			return err
		}
		sec := st.Total.Seconds()
		gemm, total := m.PrefillFLOPs(run.pos0, run.T, 1)
		cost := sec / float64(run.T)
		if i == 0 {
			firstCost = cost
		}
		P := b.P
		fmt.Printf("slice pos0=%-5d T=%-5d %8.1f tokens/s  %5.2fx the first run's time per token  %7.1f GFLOP/s  %5.1f%% of P  %5.1f%% of the GEMM-bound limit (%.1f GFLOP of GEMM, %.1f total)  peak RSS %d MiB\n",
			run.pos0, run.T, float64(run.T)/sec, cost/firstCost, total/sec/1e9, 100*total/sec/1e9/P, 100*gemm/(P*1e9)/sec, gemm/1e9, total/1e9, vmHWM()>>20)
		printStages(st)
	}
	return m.Close()
}

// timeRun prefills run.T random tokens (seeded by the run) after run.pos0 untimed ones on a new
// session of m and returns the timed prefill's figures. The peak RSS is the process's during this
// run: the high-water mark is reset (Linux) before it, so it counts what the process holds then
// (the weights touched so far, the buffers the model keeps from earlier runs) and what the run
// adds. Freed memory is not handed back to the system before the run: a process that prefills
// again does not do that, and the run would pay to fault it in again.
func (b *sliceBench) timeRun(ctx context.Context, m *strata.Model, run benchRun) (strata.Stats, error) {
	r := rand.New(rand.NewPCG(1, uint64(run.pos0+run.T)))
	tokens := make([]int32, run.pos0+run.T)
	for i := range tokens {
		tokens[i] = int32(r.IntN(m.Vocab()))
	}
	s, err := m.NewSession(strata.SessionOptions{MaxContext: run.pos0 + run.T})
	if err != nil {
		return strata.Stats{}, err
	}
	defer s.Close()
	if run.pos0 > 0 {
		if _, err := s.Prefill(ctx, tokens[:run.pos0], strata.PrefillOptions{Step: b.step}); err != nil {
			return strata.Stats{}, err
		}
	}
	resetHWM()
	lg, err := s.Prefill(ctx, tokens[run.pos0:], strata.PrefillOptions{Step: b.step})
	if err != nil {
		return strata.Stats{}, err
	}
	return lg.Stats, nil
}

// opLine is one op's figures: the median time, and GFLOP/s with the fraction of P for a case
// that counts its flops, or GB/s for one that counts only bytes; with device also the device
// time the Passes reported (a GPU's own clock).
func opLine(r optest.Result, P float64, device bool) string {
	line := fmt.Sprintf("  %-60s %9.2f ms", r.Name, float64(r.Median.Microseconds())/1000)
	if device {
		line += fmt.Sprintf("  (device %.2f ms)", float64(r.Device.Microseconds())/1000)
	}
	switch {
	case r.Flops > 0:
		line += fmt.Sprintf("  %8.4g GFLOP/s  %5.1f%% of P", r.GFLOPS(), 100*r.GFLOPS()/P)
	case r.Bytes > 0:
		line += fmt.Sprintf("  %8.4g GB/s", r.GBPS())
	}
	return line
}

// cpuModel is lscpu's "Model name" (from /proc/cpuinfo), or GOARCH.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// resetHWM resets the process's peak resident set to its current size (Linux: "5" written to
// /proc/self/clear_refs); elsewhere it does nothing.
func resetHWM() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// vmHWM is the process's peak resident set in bytes (Linux /proc/self/status), 0 elsewhere.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
