package modelgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/internal/safetensors"
)

// FormatFixture is one checkpoint of the format fixture set: a generated preset (Source) as it
// is, or converted by ConvertMLX (MLX) or ConvertFP8 (FP8).
type FormatFixture struct {
	Name   string
	Source string // a preset of Presets
	MLX    *MLXOptions
	FP8    *FP8Options
}

func fp8Release(name string, scales safetensors.DType) *FP8Options {
	o := FP8Releases[name]
	o.ScaleDType = scales
	return &o
}

// FormatFixtures are the published forms of the two models strata runs, made from the format
// presets (qwen4exp-fmt, qwen3next-fmt): mlx-vlm's Qwen3.8-Flash-Next conversions at 3, 4 and 8
// bits (groups of 32, 64 and 128) storing the zero-centred gains as w (mlx-vlm since its PR
// #2032) and as 1 + w (before), its mxfp4, nvfp4 and mxfp8 conversions, both models' FP8
// releases' layouts (BF16 scales, as published; F32 for Qwen3-Next's too), and mlx-lm's mxfp4
// conversion of Qwen3-Next. cmd/format-fixtures writes them for the transformers goldens.
var FormatFixtures = []FormatFixture{
	{Name: "qwen4exp-fmt", Source: "qwen4exp-fmt"},
	{Name: "qwen4exp-fmt-mlx3", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Bits: 3, Group: 32, VLM: true, GainsAsW: true}},
	{Name: "qwen4exp-fmt-mlx4", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Bits: 4, Group: 64, VLM: true, GainsAsW: true}},
	{Name: "qwen4exp-fmt-mlx4-shifted", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Bits: 4, Group: 64, VLM: true}},
	{Name: "qwen4exp-fmt-mlx8-shifted", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Bits: 8, Group: 128, VLM: true}},
	{Name: "qwen4exp-fmt-mxfp4", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Mode: "mxfp4", VLM: true, GainsAsW: true}},
	{Name: "qwen4exp-fmt-nvfp4", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Mode: "nvfp4", VLM: true, GainsAsW: true}},
	{Name: "qwen4exp-fmt-mxfp8", Source: "qwen4exp-fmt", MLX: &MLXOptions{Quantize: true, Mode: "mxfp8", VLM: true, GainsAsW: true}},
	{Name: "qwen4exp-fmt-fp8", Source: "qwen4exp-fmt", FP8: fp8Release("qwen3.8-flash-next-fp8", safetensors.BF16)},
	{Name: "qwen3next-fmt", Source: "qwen3next-fmt"},
	{Name: "qwen3next-fmt-fp8", Source: "qwen3next-fmt", FP8: fp8Release("qwen3-next-80b-a3b-instruct-fp8", safetensors.BF16)},
	{Name: "qwen3next-fmt-fp8-f32", Source: "qwen3next-fmt", FP8: fp8Release("qwen3-next-80b-a3b-instruct-fp8", safetensors.F32)},
	{Name: "qwen3next-fmt-mxfp4", Source: "qwen3next-fmt", MLX: &MLXOptions{Quantize: true, Mode: "mxfp4"}},
}

// FormatFixtureNamed returns the fixture called name.
func FormatFixtureNamed(name string) (FormatFixture, bool) {
	for _, f := range FormatFixtures {
		if f.Name == name {
			return f, true
		}
	}
	return FormatFixture{}, false
}

// Write writes the fixture into root/Name, generating its source into root/Source first when
// that folder does not hold it yet, and returns the folder and the sha256 of its
// model.safetensors (hex), the bytes goldens made from it apply to. The same fixture always gives
// the same bytes.
func (f FormatFixture) Write(root string) (dir, sum string, err error) {
	spec, ok := Presets[f.Source]
	if !ok {
		return "", "", fmt.Errorf("modelgen: fixture %s: no preset %q", f.Name, f.Source)
	}
	src := filepath.Join(root, f.Source)
	if _, err := os.Stat(filepath.Join(src, safetensors.SingleFile)); err != nil {
		if err := Generate(src, spec); err != nil {
			return "", "", err
		}
	}
	dir = filepath.Join(root, f.Name)
	switch {
	case f.MLX != nil:
		err = ConvertMLX(src, dir, *f.MLX)
	case f.FP8 != nil:
		err = ConvertFP8(src, dir, *f.FP8)
	case f.Name != f.Source:
		err = fmt.Errorf("modelgen: fixture %s: neither a conversion nor its source %s", f.Name, f.Source)
	}
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, safetensors.SingleFile))
	if err != nil {
		return "", "", err
	}
	h := sha256.Sum256(b)
	return dir, hex.EncodeToString(h[:]), nil
}
