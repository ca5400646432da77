package qwen3next_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modeltest"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/strata"
)

// TestFormatsMatchFloatCopy: strata's logits computed from the FP8 copies of the generated
// Qwen3-Next laid out as Qwen3-Next-80B-A3B-Instruct-FP8 (every Linear layer but lm_head, the
// router, the shared-expert gate and in_proj_ba as F8_E4M3 with BF16, or F32, block scales; the
// grouped in_proj_qkvz and the shared expert's gate and up rows regrouped in whole blocks) and
// from its mlx-lm mxfp4 conversion (the router and shared-expert gate at 8-bit affine) equal its
// logits on the float32 Hugging Face checkpoint of the same weights within 1e-4 on the CPU, prompts
// a and b one-shot and prompt a in calls of 37 + 1 + rest: the decoding alone, strata against
// itself (TestFormatGoldens runs the same cases on both backends against transformers). Inspect
// describes each, and the model loaded on either backend holds the weights Inspect predicts.
func TestFormatsMatchFloatCopy(t *testing.T) {
	root := t.TempDir()
	a, b := modeltest.PromptIDs(t, "a"), modeltest.PromptIDs(t, "b")
	want := map[string]string{
		"qwen3next-fmt-fp8":     "FP8 E4M3 in 128 x 128 blocks, BF16 scales",
		"qwen3next-fmt-fp8-f32": "FP8 E4M3 in 128 x 128 blocks, F32 scales",
		"qwen3next-fmt-mxfp4":   "mxfp4 (4 bits in groups of 32)",
	}
	for _, name := range []string{"qwen3next-fmt-fp8", "qwen3next-fmt-fp8-f32", "qwen3next-fmt-mxfp4"} {
		t.Run(name, func(t *testing.T) {
			f, _ := modelgen.FormatFixtureNamed(name)
			dir, _, err := f.Write(root)
			if err != nil {
				t.Fatal(err)
			}
			in, err := strata.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Quantized) == 0 || in.Quantized[0].Format != want[name] {
				t.Fatalf("Inspect: %q %+v", in.Quantization, in.Quantized)
			}
			f32 := filepath.Join(root, "_float32", name)
			if err := modelgen.Dequantize(dir, f32, family.PerExpert); err != nil {
				t.Fatal(err)
			}
			ref := modeltest.Load(t, "cpu", f32)
			wa, wb := modeltest.Prefill(t, ref, a), modeltest.Prefill(t, ref, b)
			for _, backend := range []string{"cpu", "emu"} {
				if backend == "emu" && testing.Short() {
					continue
				}
				if got := modeltest.Load(t, backend, dir).Info().ResidentBytes; got != in.ResidentBytes {
					t.Errorf("%s: loaded model holds %d bytes of weights, Inspect predicted %d", backend, got, in.ResidentBytes)
				}
			}
			m := modeltest.Load(t, "cpu", dir)
			for _, r := range []struct {
				what   string
				ids    []int32
				want   []float32
				splits []int
			}{{"a", a, wa, nil}, {"a in calls of 37 + 1 + rest", a, wa, []int{37, 1}}, {"b", b, wb, nil}} {
				d := modeltest.MaxAbsDiff(modeltest.Prefill(t, m, r.ids, r.splits...), r.want)
				t.Logf("prompt %s: max|diff| %.3g against the float32 copy", r.what, d)
				if d > 1e-4 {
					t.Errorf("prompt %s: max|diff| %.3g > 1e-4", r.what, d)
				}
			}
		})
	}
}

// TestFP8RegroupAcrossBlocks: an FP8 copy of qwen3next-tiny, whose shared expert is 32 wide, would
// have the plan regroup FP8 rows across a 128-row scale block (gate rows 0..31 then up rows 0..31
// in one matrix): refused by name, as unsupported, by the conversion's read-back and by Inspect.
func TestFP8RegroupAcrossBlocks(t *testing.T) {
	dst := t.TempDir()
	err := modelgen.ConvertFP8(filepath.Join(modeltest.Root(), "testdata", "qwen3next-tiny"), dst, modelgen.FP8Releases["qwen3-next-80b-a3b-instruct-fp8"])
	const want = "the plan reads rows [0, 32) of the FP8 weight model.layers.0.mlp.shared_expert.up_proj.weight into rows [32, 64) of one matrix (shared_expert)"
	if !errors.Is(err, op.ErrUnsupported) || !strings.Contains(err.Error(), want) {
		t.Fatalf("ConvertFP8: %v", err)
	}
	if _, err := strata.Inspect(dst); !errors.Is(err, strata.ErrUnsupported) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Inspect: %v", err)
	}
}
