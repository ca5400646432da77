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

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
	"github.com/stratakernels/strata/strata"
)

// computeForms are the qwen3next slice's forms the compute lines run: the bf16 source and its
// MLX 4-bit and 8-bit conversions (qwen3nextFormats), with the names the lines give them.
// dt and q are the format of their linear layers' weights, on which each mode's GEMM peak is
// measured (optest.BenchPeakCompute).
var computeForms = []struct {
	name, label string // label: qwen3nextFormats' label ("" for the bf16 source)
	dt          op.DType
	q           optest.Quant
}{
	{"qwen3next-slice-bf16", "", op.BF16, optest.Quant{}},
	{"qwen3next-slice-mlx4", "mlx 4-bit", op.QAffine, optest.Quant{Bits: 4, Group: 64, ScaleDType: op.BF16}},
	{"qwen3next-slice-mlx8", "mlx 8-bit", op.QAffine, optest.Quant{Bits: 8, Group: 64, ScaleDType: op.BF16}},
}

// runComputeBench is --bench-compute: the compute lines alone (benchCompute) on the CPU, reps
// interleaved runs of each.
func runComputeBench(ctx context.Context, dev *strata.Device, tokensList string, widen int64, step, reps int) error {
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
	q3, err := generated(ctx, "qwen3next-slice")
	if err != nil {
		return err
	}
	fmt.Printf("machine   %s, %d logical CPUs, GOMAXPROCS %d\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("kernels   %s\n", dev.Kernels())
	return benchCompute(ctx, os.Stdout, dev, q3, Ts, widen, step, reps, optest.BenchOptions{})
}

// benchCompute prints, for the qwen3next slice in dir in bf16, MLX 4-bit and MLX 8-bit (the
// conversions made once beside it, as benchFormats makes them), each compute mode at each T of
// Ts, one line each:
//
//	compute <model> T=<T> <mode> <tokens/s> tokens/s <r>x f32 <g>% of the mode's GEMM-bound limit (P <p> GFLOP/s)
//
// r being the mode's tokens/s over f32's for the same model and T, p the mode's GEMM peak on the
// form's weight format (optest.BenchPeakCompute with peak, median of 5, measured before the
// form's lines) and g the share of the prefill's time that its GEMM FLOPs (Model.PrefillFLOPs)
// would take at p: a prefill that did nothing but its products at the peak rate is 100%. A form
// is loaded once per mode
// (LoadOptions.Compute; the three share the mapped file; widen is every load's WidenBudget),
// each prefilled with 64 untimed tokens first (pages the weights in), then for each T the modes
// run one after another reps times, the order rotated each repetition, each a new session from
// position 0 (random tokens, seeded by T), and the median is reported: the modes of one T run in
// the same minutes, so that the ratios hold on a shared machine. Before a form's lines, a line
// per mode says what it ran (Model.Compute).
func benchCompute(ctx context.Context, w io.Writer, dev *strata.Device, dir string, Ts []int, widen int64, step, reps int, peak optest.BenchOptions) error {
	fmt.Fprintf(w, "\ncompute modes on the qwen3next slice (tokens/s of a prefill from position 0, median of %d interleaved runs; the ratio to f32 of the same model and T)\n", reps)
	for _, cf := range computeForms {
		mdir, err := computeFormDir(ctx, dir, cf.label)
		if err != nil {
			return err
		}
		runtime.GC()
		debug.FreeOSMemory()
		models, err := loadModes(ctx, w, dev, mdir, cf.name, widen, step)
		var peaks []float64
		if err == nil {
			peaks, err = computePeaks(w, dev, peak, cf.name, cf.dt, cf.q)
		}
		if err == nil {
			err = computeLines(ctx, w, models, peaks, cf.name, Ts, step, reps)
		}
		for _, m := range models {
			m.Close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// computeFormDir is the folder of the qwen3next slice's form of qwen3nextFormats label (made
// once beside dir), or dir for "" (the bf16 source).
func computeFormDir(ctx context.Context, dir, label string) (string, error) {
	for _, f := range qwen3nextFormats {
		if label != "" && f.label == label {
			return formatDir(ctx, dir, filepath.Dir(dir), f)
		}
	}
	return dir, nil
}

// loadModes loads the checkpoint in mdir once per compute mode (strata.ComputeModes' order),
// says what each runs, and prefills each with 64 untimed tokens (pages the weights in). The
// models loaded are returned even with an error, for the caller to close.
func loadModes(ctx context.Context, w io.Writer, dev *strata.Device, mdir, name string, widen int64, step int) ([]*strata.Model, error) {
	var models []*strata.Model
	for _, mode := range strata.ComputeModes {
		m, err := strata.LoadModel(dev, mdir, strata.LoadOptions{WidenBudget: widen, Compute: mode})
		if err != nil {
			return models, fmt.Errorf("%s in %s: %w", name, mode, err)
		}
		models = append(models, m)
		fmt.Fprintf(w, "  %s %s: %s\n", name, mode, m.Compute())
		if _, err := computeRun(ctx, m, 64, 0, step); err != nil {
			return models, err
		}
	}
	return models, nil
}

// computePeaks measures each mode's GEMM peak in GFLOP/s on weights of format dt (q), in
// strata.ComputeModes' order, and prints a line for each.
func computePeaks(w io.Writer, dev *strata.Device, o optest.BenchOptions, name string, dt op.DType, q optest.Quant) ([]float64, error) {
	peaks := make([]float64, len(strata.ComputeModes))
	for i, mode := range strata.ComputeModes {
		cm, err := op.ParseComputeMode(mode)
		if err != nil {
			return nil, err
		}
		r, err := optest.Time(dev.Ops(), optest.BenchPeakCompute(o, cm, dt, q), 5)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		peaks[i] = r.GFLOPS()
		fmt.Fprintf(w, "  %s %s: GEMM peak %.1f GFLOP/s (%s)\n", name, mode, peaks[i], r.Name)
	}
	return peaks, nil
}

// computeLines prints the compute line of each mode at each T: the modes of one T run one after
// another reps times, the order rotated each repetition, and the medians are compared; peaks are
// the modes' GEMM peaks in GFLOP/s (computePeaks).
func computeLines(ctx context.Context, w io.Writer, models []*strata.Model, peaks []float64, name string, Ts []int, step, reps int) error {
	modes := strata.ComputeModes
	for _, T := range Ts {
		got := make([][]float64, len(modes))
		for rep := 0; rep < reps; rep++ {
			for j := range modes {
				i := (j + rep) % len(modes)
				tps, err := computeRun(ctx, models[i], T, uint64(T), step)
				if err != nil {
					return fmt.Errorf("%s in %s, T=%d: %w", name, modes[i], T, err)
				}
				got[i] = append(got[i], tps)
			}
		}
		f32 := median(got[0])
		gemm, _ := models[0].PrefillFLOPs(0, T, 1)
		for i, mode := range modes {
			tps := median(got[i])
			bound := gemm / (peaks[i] * 1e9) // seconds
			fmt.Fprintf(w, "compute %s T=%d %s %.1f tokens/s %.2fx f32 %.1f%% of the mode's GEMM-bound limit (P %.1f GFLOP/s)\n",
				name, T, mode, tps, tps/f32, 100*bound*tps/float64(T), peaks[i])
		}
	}
	return nil
}

// computeRun prefills T random tokens (seeded by seed) on a new session of m from position 0 and
// returns the tokens/s.
func computeRun(ctx context.Context, m *strata.Model, T int, seed uint64, step int) (float64, error) {
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
