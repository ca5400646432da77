package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/strata"
)

// benchFormat is one form of a slice --bench runs beside its bf16 source: an MLX conversion
// (mlx) or an FP8 copy (fp8), made once into the cache.
type benchFormat struct {
	label, suffix string
	mlx           *modelgen.MLXOptions
	fp8           *modelgen.FP8Options
}

// The forms of each slice: the FP8 copy laid out as its model's FP8 release (Qwen3-Next: every
// Linear layer but the routers, the shared-expert gates and in_proj_ba; Qwen3.8-Flash-Next: the
// routed experts and the n-gram table), MLX affine 4-bit (groups of 64) and mxfp4 as mlx-lm
// (Qwen3-Next) and mlx-vlm (Qwen3.8-Flash-Next, gains stored as w) write them, and MLX 8-bit for
// Qwen3-Next.
var (
	qwen4expFormats = []benchFormat{
		{"fp8", "fp8", nil, fp8Of("qwen3.8-flash-next-fp8")},
		{"mlx 4-bit", "mlx-4bit", &modelgen.MLXOptions{Quantize: true, Bits: 4, Group: 64, VLM: true, GainsAsW: true}, nil},
		{"mxfp4", "mxfp4", &modelgen.MLXOptions{Quantize: true, Mode: "mxfp4", VLM: true, GainsAsW: true}, nil},
	}
	qwen3nextFormats = []benchFormat{
		{"fp8", "fp8", nil, fp8Of("qwen3-next-80b-a3b-instruct-fp8")},
		{"mlx 4-bit", "mlx-4bit", &modelgen.MLXOptions{Quantize: true, Bits: 4, Group: 64}, nil},
		{"mlx 8-bit", "mlx-8bit", &modelgen.MLXOptions{Quantize: true, Bits: 8, Group: 64}, nil},
		{"mxfp4", "mxfp4", &modelgen.MLXOptions{Quantize: true, Mode: "mxfp4"}, nil},
	}
)

func fp8Of(release string) *modelgen.FP8Options {
	o := modelgen.FP8Releases[release]
	return &o
}

// benchFormats runs the bf16 checkpoint in dir and its forms (made once with modelgen.ConvertMLX
// or ConvertFP8 into cache/NAME-SUFFIX) at each prompt length of Ts, one model at a time:
// tokens/s, GFLOP/s (strata.Model.PrefillFLOPs), the checkpoint's and the model's resident weight
// bytes and the process's peak RSS while it is loaded and run (the high-water mark is reset
// before each model where Linux allows it, /proc/self/clear_refs, after the conversions' memory
// is returned). widen is the bf16 model's LoadOptions.WidenBudget; quantized and FP8 weights stay
// packed whatever it is; compute is LoadOptions.Compute; step is PrefillOptions.Step.
func benchFormats(ctx context.Context, w io.Writer, dev *strata.Device, dir, cache string, formats []benchFormat, Ts []int, widen int64, compute string, step int) error {
	type model struct{ label, dir string }
	models := []model{{"bf16", dir}}
	for _, f := range formats {
		out, err := formatDir(ctx, dir, cache, f)
		if err != nil {
			return err
		}
		models = append(models, model{f.label, out})
	}
	for _, md := range models {
		runtime.GC()
		debug.FreeOSMemory()
		resetHWM()
		m, err := strata.LoadModel(dev, md.dir, strata.LoadOptions{WidenBudget: widen, Compute: compute})
		if err != nil {
			return fmt.Errorf("%s: %w", md.label, err)
		}
		info := m.Info()
		fmt.Fprintf(w, "%-10s %s: checkpoint %s, resident weights %s; compute %s\n", md.label, homeRel(md.dir), size(info.TensorBytes), size(info.ResidentBytes), m.Compute())
		for _, T := range Ts {
			r := rand.New(rand.NewPCG(1, uint64(T)))
			tokens := make([]int32, T)
			for i := range tokens {
				tokens[i] = int32(r.IntN(m.Vocab()))
			}
			s, err := m.NewSession(strata.SessionOptions{MaxContext: T})
			if err != nil {
				m.Close()
				return err
			}
			lg, err := s.Prefill(ctx, tokens, strata.PrefillOptions{Step: step})
			s.Close()
			if err != nil {
				m.Close()
				return fmt.Errorf("%s T=%d: %w", md.label, T, err)
			}
			sec := lg.Stats.Total.Seconds()
			_, total := m.PrefillFLOPs(0, T, 1)
			fmt.Fprintf(w, "  %-10s T=%-5d %8.1f tokens/s  %7.1f GFLOP/s  peak RSS %d MiB\n", md.label, T, float64(T)/sec, total/sec/1e9, vmHWM()>>20)
		}
		if err := m.Close(); err != nil {
			return err
		}
	}
	return nil
}

// formatDir is the folder of form f of the checkpoint in dir, converted into cache once.
func formatDir(ctx context.Context, dir, cache string, f benchFormat) (string, error) {
	out := filepath.Join(cache, filepath.Base(dir)+"-"+f.suffix)
	if _, err := os.Stat(filepath.Join(out, "config.json")); err == nil {
		return out, nil
	}
	fmt.Fprintf(os.Stderr, "converting %s to %s into %s\n", homeRel(dir), f.label, homeRel(out))
	var err error
	if f.mlx != nil {
		err = modelgen.ConvertMLXContext(ctx, dir, out, *f.mlx)
	} else {
		err = modelgen.ConvertFP8Context(ctx, dir, out, *f.fp8)
	}
	if err != nil {
		return "", fmt.Errorf("%s conversion: %w", f.label, err)
	}
	return out, nil
}
