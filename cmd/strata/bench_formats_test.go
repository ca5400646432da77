package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/op/optest"
	"github.com/stratakernels/strata/strata"
)

// TestBenchFormatsSmoke runs the formats part of --bench at small sizes (the format presets,
// T = 8; no timing is checked): each bf16 model and its FP8, MLX and mxfp4 forms load, report
// their resident weights and prefill.
func TestBenchFormatsSmoke(t *testing.T) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		preset  string
		formats []benchFormat
	}{{"qwen4exp-fmt", qwen4expFormats}, {"qwen3next-fmt", qwen3nextFormats}} {
		dir := filepath.Join(t.TempDir(), c.preset)
		if err := modelgen.Generate(dir, modelgen.Presets[c.preset]); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := benchFormats(context.Background(), &out, dev, dir, t.TempDir(), c.formats, []int{8}, 0, "", 0); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + out.String())
		labels := []string{"bf16"}
		for _, f := range c.formats {
			labels = append(labels, f.label)
		}
		for _, label := range labels {
			head := regexp.MustCompile(`(?m)^` + label + ` +\S+: checkpoint [0-9.]+ [kM]B, resident weights [0-9.]+ [kM]B; compute f32$`)
			run := regexp.MustCompile(`(?m)^  ` + label + ` +T=8 +[0-9.]+ tokens/s +[0-9.]+ GFLOP/s +peak RSS [0-9]+ MiB$`)
			if !head.MatchString(out.String()) || !run.MatchString(out.String()) {
				t.Errorf("%s: output lacks the %s lines", c.preset, label)
			}
		}
	}
}

// TestBenchComputeSmoke runs the compute lines of --bench at small sizes (the qwen3next format
// preset in place of the slice, T = 8, GEMM peaks at T 8; no timing is checked): every form and
// mode prints its line and its peak's in the documented form, and says what it ran.
func TestBenchComputeSmoke(t *testing.T) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "qwen3next-fmt")
	if err := modelgen.Generate(dir, modelgen.Presets["qwen3next-fmt"]); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := benchCompute(context.Background(), &out, dev, dir, []int{8}, 0, 0, 2, optest.BenchOptions{LongT: 8}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, m := range []string{"bf16", "mlx4", "mlx8"} {
		for _, mode := range []string{"f32", "bf16", "int8"} {
			line := regexp.MustCompile(`(?m)^compute qwen3next-slice-` + m + ` T=8 ` + mode + ` [0-9]+\.[0-9] tokens/s [0-9]+\.[0-9]{2}x f32 [0-9]+\.[0-9]% of the mode's GEMM-bound limit \(P [0-9]+\.[0-9] GFLOP/s\)$`)
			said := regexp.MustCompile(`(?m)^  qwen3next-slice-` + m + ` ` + mode + `: ` + mode)
			peak := regexp.MustCompile(`(?m)^  qwen3next-slice-` + m + ` ` + mode + `: GEMM peak [0-9]+\.[0-9] GFLOP/s \(MatMul/T8_N2048_K2048_[A-Za-z0-9_]+/` + mode + `\)$`)
			if !line.MatchString(out.String()) || !said.MatchString(out.String()) || !peak.MatchString(out.String()) {
				t.Errorf("no compute line (or no report) for %s in %s", m, mode)
			}
		}
	}
}

// TestSliceRunsSmoke runs the slice lines of --bench on the tiny model (no timing is checked):
// a run from position 0 and one after untimed tokens each print their line and their stages.
func TestSliceRunsSmoke(t *testing.T) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	b := sliceBench{dev: dev, step: strata.OneShot, P: 1}
	var runErr error
	out := captureStdout(t, func() { runErr = b.runs(context.Background(), tinyQ4, []benchRun{{T: 8}, {pos0: 4, T: 8}}) })
	if runErr != nil {
		t.Fatal(runErr)
	}
	for _, pos0 := range []string{"0", "4"} {
		line := regexp.MustCompile(`(?m)^slice pos0=` + pos0 + ` +T=8 +[0-9.]+ tokens/s +[0-9.]+x the first run's time per token .* peak RSS [0-9]+ MiB$`)
		if !line.MatchString(out) {
			t.Errorf("no slice line of pos0 %s in:\n%s", pos0, out)
		}
	}
	if n := strings.Count(out, "\n  GEMM "); n != 2 {
		t.Errorf("%d GEMM stage lines, want one per run:\n%s", n, out)
	}
}

// TestModelPeak: the model lines' P is measured in the model's compute mode, on the mode's own
// weight format, at a step's rows (capped at 2048), and a bad mode is an error.
func TestModelPeak(t *testing.T) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for mode, format := range map[string]string{"": "F32/f32", "f32": "F32/f32", "bf16": "BF16/bf16", "int8": "q4_g64_BF16/int8"} {
		var P float64
		var perr error
		out := captureStdout(t, func() { P, perr = modelPeak(dev, mode, 8, 1) })
		if perr != nil || !(P > 0) {
			t.Fatalf("mode %q: P %g, %v", mode, P, perr)
		}
		if want := "(MatMul/T8_N2048_K2048_" + format + " on cpu, median of 1: "; !strings.Contains(out, want) {
			t.Errorf("mode %q: %q lacks %q", mode, out, want)
		}
	}
	if _, err := modelPeak(dev, "int4", 8, 1); err == nil {
		t.Error("mode int4 accepted")
	}
}

// TestBenchOpsCancelled: a cancelled --bench stops before its next op case (an interrupt during
// the op cases no longer waits for all of them).
func TestBenchOpsCancelled(t *testing.T) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var berr error
	out := captureStdout(t, func() { _, berr = benchPeakAndOps(ctx, dev, benchOps{T: 4, reps: 1}) })
	if !errors.Is(berr, context.Canceled) || !strings.Contains(berr.Error(), "before op case") {
		t.Fatalf("cancelled op cases: %v", berr)
	}
	if strings.Contains(out, "MatMul/T4_") {
		t.Errorf("an op case ran after the cancel:\n%s", out)
	}
}
