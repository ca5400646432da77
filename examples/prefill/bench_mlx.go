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

// mlxBenchBits are the MLX conversions --bench runs beside their bf16 source (mode affine,
// groups of 64, mlx_lm's 8-bit router and shared-expert gate).
var mlxBenchBits = []int{4, 8}

// benchMLX runs the bf16 checkpoint in dir and its MLX 4- and 8-bit conversions (made once with
// modelgen.ConvertMLX into cache/NAME-mlx-Nbit) at each prompt length of Ts, one model at a time:
// tokens/s, GFLOP/s (strata.Model.PrefillFLOPs), the model's resident weight bytes and the
// process's peak RSS while it is loaded and run (the high-water mark is reset before each model
// where Linux allows it, /proc/self/clear_refs). widen is the bf16 model's LoadOptions.WidenBudget;
// quantized weights stay packed whatever it is; step is PrefillOptions.Step.
func benchMLX(ctx context.Context, w io.Writer, dev *strata.Device, dir, cache string, Ts []int, widen int64, step int) error {
	type model struct{ label, dir string }
	models := []model{{"bf16", dir}}
	for _, bits := range mlxBenchBits {
		out := filepath.Join(cache, fmt.Sprintf("%s-mlx-%dbit", filepath.Base(dir), bits))
		if _, err := os.Stat(filepath.Join(out, "config.json")); err != nil {
			fmt.Fprintf(os.Stderr, "converting %s to MLX %d-bit into %s\n", homeRel(dir), bits, homeRel(out))
			if err := modelgen.ConvertMLX(dir, out, modelgen.MLXOptions{Quantize: true, Bits: bits, Group: 64}); err != nil {
				return fmt.Errorf("MLX %d-bit conversion: %w", bits, err)
			}
		}
		models = append(models, model{fmt.Sprintf("mlx %d-bit", bits), out})
	}
	for _, md := range models {
		runtime.GC()
		debug.FreeOSMemory()
		resetHWM()
		m, err := strata.LoadModel(dev, md.dir, strata.LoadOptions{WidenBudget: widen})
		if err != nil {
			return fmt.Errorf("%s: %w", md.label, err)
		}
		info := m.Info()
		fmt.Fprintf(w, "%-10s %s: checkpoint %s, resident weights %s\n", md.label, homeRel(md.dir), size(info.TensorBytes), size(info.ResidentBytes))
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
