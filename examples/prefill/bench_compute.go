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

	"github.com/stratakernels/strata/strata"
)

// computeForms are the qwen3next slice's forms the compute lines run: the bf16 source and its
// MLX 4-bit and 8-bit conversions (qwen3nextFormats), with the names the lines give them.
var computeForms = []struct {
	name, label string // label: qwen3nextFormats' label ("" for the bf16 source)
}{{"qwen3next-slice-bf16", ""}, {"qwen3next-slice-mlx4", "mlx 4-bit"}, {"qwen3next-slice-mlx8", "mlx 8-bit"}}

// runComputeBench is --bench-compute: the compute lines alone (benchCompute) on the CPU.
func runComputeBench(ctx context.Context, dev *strata.Device, tokensList string, widen int64, step int) error {
	if dev.Backend() != "cpu" {
		return fmt.Errorf("--bench-compute: the compute modes are a CPU option (backend %s)", dev.Backend())
	}
	runs, err := parseBenchTokens(tokensList)
	if err != nil {
		return err
	}
	var Ts []int
	for _, r := range runs {
		if r.pos0 > 0 {
			return fmt.Errorf("--bench-compute: --bench-tokens entry %d+%d: the compute lines run from position 0 (give T)", r.pos0, r.T)
		}
		Ts = append(Ts, r.T)
	}
	q3, err := defaultModel("qwen3next-slice")
	if err != nil {
		return err
	}
	fmt.Printf("machine   %s, %d logical CPUs, GOMAXPROCS %d\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("kernels   %s\n", dev.Kernels())
	return benchCompute(ctx, os.Stdout, dev, q3, Ts, widen, step)
}

// benchCompute prints, for the qwen3next slice in dir in bf16, MLX 4-bit and MLX 8-bit (the
// conversions made once beside it, as benchFormats makes them), each compute mode at each T of
// Ts, one line each:
//
//	compute <model> T=<T> <mode> <tokens/s> tokens/s <r>x f32
//
// r being the mode's tokens/s over f32's for the same model and T. Each model is loaded once per
// mode (LoadOptions.Compute; widen is the WidenBudget of every load) and prefilled with 64
// untimed tokens first (page the weights in), then each T from position 0 in a new session
// (random tokens, seeded by T). Before a model's lines, a line per mode says what it ran
// (Model.Compute).
func benchCompute(ctx context.Context, w io.Writer, dev *strata.Device, dir string, Ts []int, widen int64, step int) error {
	fmt.Fprintln(w, "\ncompute modes on the qwen3next slice (tokens/s of one prefill from position 0; the ratio to f32 of the same model and T)")
	for _, cf := range computeForms {
		mdir := dir
		if cf.label != "" {
			for _, f := range qwen3nextFormats {
				if f.label == cf.label {
					var err error
					if mdir, err = formatDir(dir, filepath.Dir(dir), f); err != nil {
						return err
					}
				}
			}
		}
		rate := map[string]map[int]float64{}
		var lines []string
		for _, mode := range strata.ComputeModes {
			runtime.GC()
			debug.FreeOSMemory()
			m, err := strata.LoadModel(dev, mdir, strata.LoadOptions{WidenBudget: widen, Compute: mode})
			if err != nil {
				return fmt.Errorf("%s in %s: %w", cf.name, mode, err)
			}
			fmt.Fprintf(w, "  %s %s: %s\n", cf.name, mode, m.Compute())
			rate[mode] = map[int]float64{}
			run := func(T int, seed uint64) (float64, error) {
				r := rand.New(rand.NewPCG(1, seed))
				tokens := make([]int32, T)
				for i := range tokens {
					tokens[i] = int32(r.IntN(m.Vocab()))
				}
				s, err := m.NewSession(strata.SessionOptions{MaxContext: T})
				if err != nil {
					return 0, err
				}
				defer s.Close()
				lg, err := s.Prefill(ctx, tokens, strata.PrefillOptions{Step: step})
				if err != nil {
					return 0, err
				}
				return float64(T) / lg.Stats.Total.Seconds(), nil
			}
			if _, err := run(64, 0); err != nil {
				m.Close()
				return err
			}
			for _, T := range Ts {
				tps, err := run(T, uint64(T))
				if err != nil {
					m.Close()
					return fmt.Errorf("%s in %s, T=%d: %w", cf.name, mode, T, err)
				}
				rate[mode][T] = tps
				lines = append(lines, fmt.Sprintf("compute %s T=%d %s %.1f tokens/s %.2fx f32", cf.name, T, mode, tps, tps/rate["f32"][T]))
			}
			if err := m.Close(); err != nil {
				return err
			}
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	return nil
}
