package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/stratakernels/strata/strata"
)

// TestBenchMLXSmoke runs the MLX part of --bench at tiny sizes (qwen3next-tiny, T = 8; no timing
// is checked): the bf16 model and its 4- and 8-bit conversions each load, report their resident
// weights and prefill.
func TestBenchMLXSmoke(t *testing.T) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := benchMLX(context.Background(), &out, dev, "../../testdata/qwen3next-tiny", t.TempDir(), []int{8}, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, label := range []string{"bf16", "mlx 4-bit", "mlx 8-bit"} {
		head := regexp.MustCompile(`(?m)^` + label + ` +\S+: checkpoint [0-9.]+ MB, resident weights [0-9.]+ MB$`)
		run := regexp.MustCompile(`(?m)^  ` + label + ` +T=8 +[0-9.]+ tokens/s +[0-9.]+ GFLOP/s +peak RSS [0-9]+ MiB$`)
		if !head.MatchString(out.String()) || !run.MatchString(out.String()) {
			t.Errorf("output lacks the %s lines", label)
		}
	}
}
