// Command mlx-convert writes MLX conversions of a Hugging Face checkpoint of any family as
// mlx_lm.convert / mlx_vlm.convert write them (modelgen.ConvertMLX), FP8 copies laid out as a
// published FP8 release (-fp8 RELEASE, modelgen.ConvertFP8), and the float32 Hugging Face
// checkpoint of a converted checkpoint's exact weights (modelgen.Dequantize), from which transformers computes
// the goldens of the MLX conversions (goldens.py beside this file; strata's TestMLXGoldens reads
// its output as testdata/goldens/mlx_goldens.safetensors):
//
//	go run ./internal/modelgen/cmd/mlx-convert -q -bits 4 -group 64 SRC /tmp/tiny-4bit
//	go run ./internal/modelgen/cmd/mlx-convert -q -recipe mixed_3_6 SRC /tmp/tiny-mixed
//	go run ./internal/modelgen/cmd/mlx-convert -q -mode mxfp4 -vlm -gains-as-w SRC /tmp/mxfp4
//	go run ./internal/modelgen/cmd/mlx-convert -fp8 RELEASE SRC /tmp/fp8
//	go run ./internal/modelgen/cmd/mlx-convert -dequantize [-experts fused] /tmp/tiny-4bit /tmp/tiny-4bit-f32
//	go run ./internal/modelgen/cmd/mlx-convert -golden-set TINY /tmp/mlx-goldens
//
// where SRC is a Hugging Face checkpoint (a testdata model or a generated one), RELEASE one of
// the FP8 releases the families register (the usage message lists them) and TINY the tiny
// per-expert reference checkpoint of testdata whose goldens are model_goldens.safetensors
// (testdata/README.md). -golden-set writes DIR/NAME/mlx and DIR/NAME/hf for every
// modelgen.MLXGoldenVariants entry; then, where transformers 5.17 and torch are installed:
//
//	python3 internal/modelgen/cmd/mlx-convert/goldens.py /tmp/mlx-goldens testdata/goldens/model_goldens.safetensors OUTDIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

func main() {
	var o modelgen.MLXOptions
	flag.BoolVar(&o.Quantize, "q", false, "quantize (mode affine)")
	flag.IntVar(&o.Bits, "bits", 0, "bits per weight (0: 4)")
	flag.IntVar(&o.Group, "group", 0, "group size (0: 64; with -recipe, null group sizes in the per-module entries)")
	flag.StringVar(&o.Recipe, "recipe", "", "mixed recipe: mixed_2_6, mixed_3_4, mixed_3_6 or mixed_4_6")
	flag.StringVar(&o.Mode, "mode", "", "quantization mode: affine (the default), mxfp4, nvfp4 or mxfp8")
	flag.BoolVar(&o.VLM, "vlm", false, "quantize as mlx-vlm does (its predicate of models with n-gram tables: a table in groups of 32 where the group does not divide it)")
	flag.BoolVar(&o.GainsAsW, "gains-as-w", false, "store the zero-centred gains as w (mlx-vlm since PR #2032 for models with n-gram tables) instead of 1 + w")
	fp8 := flag.String("fp8", "", "write an FP8 copy laid out as this release: "+strings.Join(fp8Names(), ", "))
	scales := flag.String("fp8-scales", "BF16", "the FP8 copy's scale dtype: BF16 (as published) or F32")
	deq := flag.Bool("dequantize", false, "write SRC's (an MLX conversion) weights as a float32 Hugging Face checkpoint")
	set := flag.Bool("golden-set", false, "write every golden variant of SRC into DST/NAME/{mlx,hf}")
	experts := flag.String("experts", "per-expert", "how -dequantize and -golden-set store the experts: per-expert or fused")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mlx-convert [-q [-bits N] [-group N] [-recipe R] [-mode M] [-vlm] [-gains-as-w] | -fp8 RELEASE | -dequantize | -golden-set] SRC DST")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	src, dst := flag.Arg(0), flag.Arg(1)
	ex := map[string]family.ExpertStorage{"per-expert": family.PerExpert, "fused": family.Fused}
	storage, ok := ex[*experts]
	if !ok {
		fmt.Fprintf(os.Stderr, "mlx-convert: -experts %q: want per-expert or fused\n", *experts)
		os.Exit(2)
	}
	var err error
	switch {
	case *set:
		for _, v := range modelgen.MLXGoldenVariants {
			mlx := filepath.Join(dst, v.Name, "mlx")
			if err = modelgen.ConvertMLX(src, mlx, v.MLXOptions); err == nil {
				err = modelgen.Dequantize(mlx, filepath.Join(dst, v.Name, "hf"), storage)
			}
			if err != nil {
				break
			}
		}
	case *deq:
		err = modelgen.Dequantize(src, dst, storage)
	case *fp8 != "":
		f, ok := modelgen.FP8Releases[*fp8]
		if !ok {
			fmt.Fprintf(os.Stderr, "mlx-convert: -fp8 %q: want one of %s\n", *fp8, strings.Join(fp8Names(), ", "))
			os.Exit(2)
		}
		f.ScaleDType = safetensors.DType(*scales)
		err = modelgen.ConvertFP8(src, dst, f)
	default:
		err = modelgen.ConvertMLX(src, dst, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mlx-convert:", err)
		os.Exit(1)
	}
}

func fp8Names() []string {
	var out []string
	for n := range modelgen.FP8Releases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
