// Command mlx-convert writes MLX conversions of a Hugging Face checkpoint of any family as
// mlx_lm.convert / mlx_vlm.convert write them (modelgen.ConvertMLX), and the float32 Hugging Face checkpoint of
// an MLX conversion's exact weights (modelgen.DequantizeMLX), from which transformers computes
// the goldens of the MLX conversions (goldens.py beside this file; strata's TestMLXGoldens reads
// its output as testdata/goldens/mlx_goldens.safetensors):
//
//	go run ./internal/modelgen/cmd/mlx-convert -q -bits 4 -group 64 testdata/qwen3next-tiny /tmp/tiny-4bit
//	go run ./internal/modelgen/cmd/mlx-convert -q -recipe mixed_3_6 testdata/qwen3next-tiny /tmp/tiny-mixed
//	go run ./internal/modelgen/cmd/mlx-convert -dequantize [-experts fused] /tmp/tiny-4bit /tmp/tiny-4bit-f32
//	go run ./internal/modelgen/cmd/mlx-convert -golden-set testdata/qwen3next-tiny /tmp/mlx-goldens
//
// -golden-set writes DIR/NAME/mlx and DIR/NAME/hf for every modelgen.MLXGoldenVariants entry;
// then, where transformers 5.17 and torch are installed:
//
//	python3 internal/modelgen/cmd/mlx-convert/goldens.py /tmp/mlx-goldens testdata/goldens/model_goldens.safetensors OUTDIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/modelgen"
)

func main() {
	var o modelgen.MLXOptions
	flag.BoolVar(&o.Quantize, "q", false, "quantize (mode affine)")
	flag.IntVar(&o.Bits, "bits", 0, "bits per weight (0: 4)")
	flag.IntVar(&o.Group, "group", 0, "group size (0: 64; with -recipe, null group sizes in the per-module entries)")
	flag.StringVar(&o.Recipe, "recipe", "", "mixed recipe: mixed_2_6, mixed_3_4, mixed_3_6 or mixed_4_6")
	deq := flag.Bool("dequantize", false, "write SRC's (an MLX conversion) weights as a float32 Hugging Face checkpoint")
	set := flag.Bool("golden-set", false, "write every golden variant of SRC into DST/NAME/{mlx,hf}")
	experts := flag.String("experts", "per-expert", "how -dequantize and -golden-set store the experts: per-expert or fused")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mlx-convert [-q [-bits N] [-group N] [-recipe R] | -dequantize | -golden-set] SRC DST")
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
				err = modelgen.DequantizeMLX(mlx, filepath.Join(dst, v.Name, "hf"), storage)
			}
			if err != nil {
				break
			}
		}
	case *deq:
		err = modelgen.DequantizeMLX(src, dst, storage)
	default:
		err = modelgen.ConvertMLX(src, dst, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mlx-convert:", err)
		os.Exit(1)
	}
}
