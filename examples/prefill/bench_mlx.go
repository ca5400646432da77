package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
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

// quantMatrix is a random MLX affine weight [n, k] of bits-bit codes in groups of 64 with bf16
// scales of either sign and biases around -scale * 2^bits / 2 (values of order 0.05).
func quantMatrix(r *rand.Rand, n, k, bits int) (*op.Matrix, error) {
	q := &op.Quant{Bits: bits, Group: 64, ScaleDType: op.BF16, Codes: make([]uint32, n*k*bits/32)}
	for i := range q.Codes {
		q.Codes[i] = r.Uint32()
	}
	for g := 0; g < n*k/64; g++ {
		s := float32(0.1/float64(int(1)<<bits)) * float32(0.5+r.Float64())
		if r.IntN(8) == 0 {
			s = -s
		}
		q.Scales = append(q.Scales, bf16Bits(s))
		q.Biases = append(q.Biases, bf16Bits(-s*float32(int(1)<<bits)/2))
	}
	m := &op.Matrix{N: n, K: k, DType: op.QAffine, Q: q}
	return m, m.Validate("quantMatrix")
}

func bf16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// benchQuantOps times the GEMMs on MLX affine weights at the shapes of benchOps: a projection
// [2560, 2560] at 4 and 8 bits and the routed experts at 4 bits (dequantized block by block
// inside the GEMM on every call, kernels.QuantKernel).
func benchQuantOps(report func(string, float64, func() error) error, r *rand.Rand, x, y []float32, T, D, E, K, I int) error {
	fmt.Printf("  (quantized weights dequantized by %s kernels)\n", kernels.QuantKernel())
	for _, bits := range mlxBenchBits {
		w, err := quantMatrix(r, D, D, bits)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("MatMul T%d N%d K%d mlx %d-bit g64", T, D, D, bits)
		if err := report(name, 2*float64(T)*float64(D)*float64(D), func() error {
			return cpu(func(p op.Pass) error { return p.MatMul(op.MatMul{Y: host(y), X: host(x), T: T, W: w}) })
		}); err != nil {
			return err
		}
	}
	ex := &op.Experts{E: E, D: D, I: I}
	for e := 0; e < E; e++ {
		g, err := quantMatrix(r, I, D, 4)
		if err != nil {
			return err
		}
		u, _ := quantMatrix(r, I, D, 4)
		d, _ := quantMatrix(r, D, I, 4)
		ex.GateUp, ex.Up, ex.Down = append(ex.GateUp, g), append(ex.Up, u), append(ex.Down, d)
	}
	logits := make([]float32, T*E)
	for i := range logits {
		logits[i] = float32(r.NormFloat64())
	}
	wt, idx := make([]float32, T*K), make([]int32, T*K)
	if err := cpu(func(p op.Pass) error {
		return p.TopKRoute(op.TopKRoute{W: host(wt), Idx: op.HostI32(idx), Logits: host(logits), T: T, E: E, K: K, Norm: true})
	}); err != nil {
		return err
	}
	ye, rk := make([]float32, T*K*D), make([]int32, T*K)
	name := fmt.Sprintf("MoEExperts T%d E%d top-%d I%d mlx 4-bit g64", T, E, K, I)
	return report(name, 2*float64(T)*float64(K)*3*float64(D)*float64(I), func() error {
		return cpu(func(p op.Pass) error {
			return p.MoEExperts(op.MoEExperts{YE: host(ye), RK: op.HostI32(rk), X: host(x), Idx: op.HostI32(idx), T: T, K: K, Ex: ex})
		})
	})
}
