package qwen3next_test

import (
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modeltest"
)

// TestFormatGoldens: every form of the generated Qwen3-Next (the bf16 source; the FP8 release's
// layout with BF16 and with F32 block scales; mlx-lm's mxfp4 conversion, its zero-centred gains
// stored as bf16(1 + w)), rebuilt with exactly the bytes its goldens were made from, gives logits
// within 1e-4 of transformers' in float64 on the values the file holds, on the CPU and the
// emulator, prompt a one-shot and in calls of 37 + 1 + rest, prompt b one-shot.
func TestFormatGoldens(t *testing.T) {
	g := modeltest.OpenFormatGoldens(t)
	root := t.TempDir()
	for _, f := range modelgen.FormatFixtures {
		if f.Source != "qwen3next-fmt" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			dir, sum, err := f.Write(root)
			if err != nil {
				t.Fatal(err)
			}
			g.CheckSum(t, f.Name, sum)
			g.Compare(t, f.Name, dir)
		})
	}
}
