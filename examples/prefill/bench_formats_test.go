package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
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
		if err := benchFormats(context.Background(), &out, dev, dir, t.TempDir(), c.formats, []int{8}, 0, 0); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + out.String())
		labels := []string{"bf16"}
		for _, f := range c.formats {
			labels = append(labels, f.label)
		}
		for _, label := range labels {
			head := regexp.MustCompile(`(?m)^` + label + ` +\S+: checkpoint [0-9.]+ [kM]B, resident weights [0-9.]+ [kM]B$`)
			run := regexp.MustCompile(`(?m)^  ` + label + ` +T=8 +[0-9.]+ tokens/s +[0-9.]+ GFLOP/s +peak RSS [0-9]+ MiB$`)
			if !head.MatchString(out.String()) || !run.MatchString(out.String()) {
				t.Errorf("%s: output lacks the %s lines", c.preset, label)
			}
		}
	}
}
