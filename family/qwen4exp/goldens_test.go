package qwen4exp_test

import (
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modeltest"
)

// TestFormatGoldens: every form of the generated Qwen3.8-Flash-Next (the bf16 source; mlx-vlm at
// 3, 4 and 8 bits storing the zero-centred gains as w and as bf16(1 + w); mxfp4, nvfp4, mxfp8; the
// FP8 release's layout), rebuilt with exactly the bytes its goldens were made from, gives logits
// within 1e-4 of transformers' in float64 on the values the file holds (a gain stored as
// bf16(1 + w) taken as stored - 1, not the source's w), on the CPU and the emulator, prompt a
// one-shot and in calls of 37 + 1 + rest, prompt b one-shot. The 4-bit conversions in the two
// conventions each match their own goldens, which differ from each other by more than that.
func TestFormatGoldens(t *testing.T) {
	g := modeltest.OpenFormatGoldens(t)
	cpuA := map[string][]float32{}
	for _, f := range modelgen.FormatFixtures {
		if f.Source != "qwen4exp-fmt" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			dir, sum := written(t, f.Name)
			g.CheckSum(t, f.Name, sum)
			cpuA[f.Name] = g.Compare(t, f.Name, dir)
		})
	}
	const w, s = "qwen4exp-fmt-mlx4", "qwen4exp-fmt-mlx4-shifted"
	if cpuA[w] == nil || cpuA[s] == nil {
		return // failed above
	}
	for _, p := range [][2]string{{w, s}, {s, w}} {
		own, other := modeltest.MaxAbsDiff(cpuA[p[0]], g.Logits(t, p[0], "a")), modeltest.MaxAbsDiff(cpuA[p[0]], g.Logits(t, p[1], "a"))
		t.Logf("%s, prompt a: max|diff| %.3g against its own goldens, %.3g against those of %s", p[0], own, other, p[1])
		if other <= modeltest.GoldenTol {
			t.Errorf("%s: within %g of the goldens of %s too (%.3g): the test cannot tell the conventions apart", p[0], modeltest.GoldenTol, p[1], other)
		}
	}
}
