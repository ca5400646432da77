package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
	"github.com/stratakernels/strata/strata"
)

// benchRun is one slice run of --bench-tokens: T tokens timed at position pos0 (after pos0
// untimed tokens: "P+T").
type benchRun struct{ pos0, T int }

func parseBenchTokens(list string) ([]benchRun, error) {
	var runs []benchRun
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		var r benchRun
		p, t, cont := strings.Cut(f, "+")
		var err error
		if cont {
			if r.pos0, err = strconv.Atoi(p); err == nil && r.pos0 < 0 {
				err = fmt.Errorf("negative")
			}
		} else {
			t = p
		}
		if err == nil {
			r.T, err = strconv.Atoi(t)
		}
		if err != nil || r.T <= 0 {
			return nil, fmt.Errorf("--bench-tokens: bad entry %q (want T or P+T, T > 0)", f)
		}
		if r.pos0 > maxPromptTokens-r.T || r.T > maxPromptTokens {
			return nil, fmt.Errorf("--bench-tokens: entry %q: P+T at most %d tokens (a session's largest context)", f, maxPromptTokens)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// runBench prints the sgemm peak P, the per-op figures, the slice-model figures, and those of
// the Qwen3-Next slice beside its MLX 4- and 8-bit conversions (benchMLX).
func runBench(ctx context.Context, dev *strata.Device, modelDir, tokensList string, widen int64, step int) error {
	runs, err := parseBenchTokens(tokensList)
	if err != nil {
		return err
	}
	fmt.Printf("machine   %s, %d logical CPUs, GOMAXPROCS %d\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("kernels   %s\n", dev.Kernels())
	fmt.Printf("          GDN %s, attention %s, activations %s\n", kernels.GDNKernel(), kernels.AttentionKernel(), kernels.ActKernel())
	P, how, err := blas.Peak(2048, 3)
	if err != nil {
		return err
	}
	fmt.Printf("peak P    %.1f GFLOP/s  (sgemm 2048^3, best of 3; %s)\n", P, how)

	fmt.Println("\nops (best of 3 runs)")
	if err := benchOps(P); err != nil {
		return err
	}

	dir := modelDir
	if dir == "" {
		if dir, err = defaultModel("qwen4exp-slice"); err != nil {
			return err
		}
	}
	t0 := time.Now()
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{WidenBudget: widen})
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Printf("\nmodel     %s\n          loaded in %v, widen budget %d MiB, step %d\n", m.Describe(), time.Since(t0).Round(time.Millisecond), widen>>20, step)
	var firstCost float64 // seconds per token of the first run
	for i, run := range runs {
		r := rand.New(rand.NewPCG(1, uint64(run.pos0+run.T)))
		tokens := make([]int32, run.pos0+run.T)
		for i := range tokens {
			tokens[i] = int32(r.IntN(m.Vocab()))
		}
		s, err := m.NewSession(strata.SessionOptions{MaxContext: run.pos0 + run.T})
		if err != nil {
			return err
		}
		if run.pos0 > 0 {
			if _, err := s.Prefill(ctx, tokens[:run.pos0], strata.PrefillOptions{Step: step}); err != nil {
				s.Close()
				return err
			}
		}
		// The peak RSS of this run: the high-water mark is reset (Linux) after returning the
		// previous runs' freed memory to the system.
		debug.FreeOSMemory()
		resetHWM()
		lg, err := s.Prefill(ctx, tokens[run.pos0:], strata.PrefillOptions{Step: step})
		s.Close()
		if err != nil {
			return err
		}
		st := lg.Stats
		sec := st.Total.Seconds()
		gemm, total := m.PrefillFLOPs(run.pos0, run.T, 1)
		cost := sec / float64(run.T)
		if i == 0 {
			firstCost = cost
		}
		fmt.Printf("slice pos0=%-5d T=%-5d %8.1f tokens/s  %5.2fx the first run's time per token  %7.1f GFLOP/s  %5.1f%% of P  %5.1f%% of the GEMM-bound limit (%.1f GFLOP of GEMM, %.1f total)  peak RSS %d MiB\n",
			run.pos0, run.T, float64(run.T)/sec, cost/firstCost, total/sec/1e9, 100*total/sec/1e9/P, 100*gemm/(P*1e9)/sec, gemm/1e9, total/1e9, vmHWM()>>20)
		for i, d := range st.Stage {
			fmt.Printf("  %-14s %9.1f ms  %5.1f%%\n", strata.Stage(i), float64(d.Microseconds())/1000, 100*d.Seconds()/sec)
		}
	}
	m.Close()
	// MLX conversions are read for qwen3_next only: the quantized runs use a Qwen3-Next slice,
	// at the lengths of the runs from position 0.
	var Ts []int
	for _, r := range runs {
		if r.pos0 == 0 {
			Ts = append(Ts, r.T)
		}
	}
	if len(Ts) == 0 {
		return nil
	}
	q3, err := defaultModel("qwen3next-slice")
	if err != nil {
		return err
	}
	fmt.Println("\nqwen3next-slice (4 layers of Qwen3-Next-80B-A3B at real width, 64 experts) and its MLX conversions")
	return benchMLX(ctx, os.Stdout, dev, q3, filepath.Dir(q3), Ts, widen, step)
}

// benchOps times the CPU ops at Qwen3.8-Flash-Next shapes on random data.
func benchOps(P float64) error {
	r := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int, scale float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * scale
		}
		return x
	}
	bf16 := func(n, k int) *op.Matrix {
		u := make([]uint16, n*k)
		for i := range u {
			u[i] = uint16(r.Uint32()&0x3fff) | 0x3c00 // magnitudes around 0.01..0.1, either sign
			if r.IntN(2) == 0 {
				u[i] |= 0x8000
			}
		}
		m, _ := op.NewMatrixU16(n, k, op.BF16, u)
		return m
	}
	f32 := func(m *op.Matrix) *op.Matrix { return &op.Matrix{N: m.N, K: m.K, DType: op.F32, F32: optest.Widen(m)} }
	report := func(name string, flops float64, fn func() error) error {
		best := time.Duration(1 << 62)
		for i := 0; i < 3; i++ {
			t0 := time.Now()
			if err := fn(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			best = min(best, time.Since(t0))
		}
		if flops == 0 { // memory-bound element-wise ops: time only
			fmt.Printf("  %-44s %9.2f ms\n", name, float64(best.Microseconds())/1000)
			return nil
		}
		g := flops / best.Seconds() / 1e9
		fmt.Printf("  %-44s %9.2f ms  %7.1f GFLOP/s  %5.1f%% of P\n", name, float64(best.Microseconds())/1000, g, 100*g/P)
		return nil
	}
	const D, T = 2560, 512
	x := rnd(T*D, 1)
	proj := bf16(D, D)
	y := make([]float32, T*D)
	for _, c := range []struct {
		name string
		w    *op.Matrix
	}{{"MatMul T512 N2560 K2560 bf16 (widen per call)", proj}, {"MatMul T512 N2560 K2560 f32", f32(proj)}} {
		if err := report(c.name, 2*T*D*D, func() error {
			return cpu(func(p op.Pass) error { return p.MatMul(op.MatMul{Y: host(y), X: host(x), T: T, W: c.w}) })
		}); err != nil {
			return err
		}
	}
	// MoE at T = 512: 64 experts (the slice), top-10, I = 640, f32 weights (widened at load).
	const E, K, I = 64, 10, 640
	ex := &op.Experts{E: E, D: D, I: I}
	for e := 0; e < E; e++ {
		ex.GateUp = append(ex.GateUp, f32(bf16(2*I, D)))
		ex.Down = append(ex.Down, f32(bf16(D, I)))
	}
	logits := rnd(T*E, 1)
	w, idx := make([]float32, T*K), make([]int32, T*K)
	if err := cpu(func(p op.Pass) error {
		return p.TopKRoute(op.TopKRoute{W: host(w), Idx: op.HostI32(idx), Logits: host(logits), T: T, E: E, K: K, Norm: true})
	}); err != nil {
		return err
	}
	ye, rk := make([]float32, T*K*D), make([]int32, T*K)
	if err := report("MoEExperts T512 E64 top-10 I640 f32", 2*T*K*3*D*I, func() error {
		return cpu(func(p op.Pass) error {
			return p.MoEExperts(op.MoEExperts{YE: host(ye), RK: op.HostI32(rk), X: host(x), Idx: op.HostI32(idx), T: T, K: K, Ex: ex})
		})
	}); err != nil {
		return err
	}
	// GatedResidual read and the fused MoE-combine write + norm at S = 4, R = 320.
	const S, R = 4, 320
	g := &op.GRWeights{S: S, D: D, R: R, Norm: rnd(S*D, 0.1), Down: f32(bf16(R, S*D)), Up: f32(bf16(S*D, R)), Inj: f32(bf16(S, S*D))}
	H := rnd(T*S*D, 1)
	beta := make([]float32, T*S)
	if err := report("GRRead T512 S4 D2560 R320 f32", 2*T*(2*R*S*D+S*S*D), func() error {
		return cpu(func(p op.Pass) error {
			return p.GRRead(op.GRRead{X: host(y[:T*D]), Beta: host(beta), H: host(H), T: T, G: g, Eps: 1e-6})
		})
	}); err != nil {
		return err
	}
	Hn := make([]float32, T*S*D)
	if err := report("GRApplyMoEC T512 S4 D2560 top-10, Hn", 2*T*K*D, func() error {
		return cpu(func(p op.Pass) error {
			return p.GRApplyMoEC(op.GRApplyMoEC{H: host(H), Hn: host(Hn), Beta: host(beta), YE: host(ye), RK: op.HostI32(rk), W: host(w),
				Shared: host(y[:T*D]), T: T, S: S, K: K, D: D, Norm: g.Norm, Eps: 1e-6})
		})
	}); err != nil {
		return err
	}
	// The element-wise gates: SwiGLU over one layer's routed rows [T*K, I] and the attention
	// output gate over [T, 24*256].
	hh := make([]float32, T*K*I)
	gu := rnd(T*K*2*I, 2)
	if err := report("SwiGLU T512 x top-10, I640", 0, func() error {
		return cpu(func(p op.Pass) error { return p.SwiGLU(op.SwiGLU{H: host(hh), GU: host(gu), Rows: T * K, I: I}) })
	}); err != nil {
		return err
	}
	ao, ag := rnd(T*24*256, 1), rnd(T*24*256, 2)
	if err := report("SigmoidMul T512 24 heads x 256", 0, func() error {
		return cpu(func(p op.Pass) error { return p.SigmoidMul(op.SigmoidMul{O: host(ao), G: host(ag)}) })
	}); err != nil {
		return err
	}
	q, gate, qg := make([]float32, T*24*256), make([]float32, T*24*256), rnd(T*24*2*256, 1)
	kc, vc, kr := make([]float32, T*2*256), make([]float32, T*2*256), rnd(T*2*256, 1)
	qn := rnd(256, 0.1)
	if err := report("QSAPrep T512 24 heads x 256 (norm, RoPE)", 0, func() error {
		return cpu(func(p op.Pass) error {
			return p.QSAPrep(op.QSAPrep{Q: host(q), Gate: host(gate), KC: host(kc), VC: host(vc), QG: host(qg), K: host(kr), V: host(kr),
				QNorm: qn, KNorm: qn, T: T, Hq: 24, Hkv: 2, D: 256, Rot: 64, Theta: 1e7, Eps: 1e-6})
		})
	}); err != nil {
		return err
	}
	// Long context: a 2048-token chunk at pos0 30000. The QSA indexer (4 index heads of 128,
	// ratio 4, budget 2048: block scores, then each row's top-512 blocks), and the sparse
	// attention over the 2048 + 3 selected tokens of each row (24 heads, 2 KV heads of 256).
	const Tq, pos0 = 2048, 30000
	ip := op.IndexerParams{T: Tq, Pos0: pos0, NHeads: 4, Dim: 128, Ratio: 4, Budget: 2048, Rot: 64, Theta: 1e7, Eps: 1e-6}
	iqk, ik := rnd(Tq*5*128, 1), rnd((pos0+Tq)*128, 1)
	plan := op.QSAPlan(ip)
	tok, iq := make([]int32, plan.Offsets[Tq]), make([]float32, Tq*4*128)
	var dots float64
	for t := 0; t < Tq; t++ {
		dots += float64((pos0 + t + 1) / 4)
	}
	if err := report("QSA indexer T2048 pos0 30000 (scores, top-k)", 2*dots*4*128, func() error {
		return cpu(func(p op.Pass) error {
			return p.QSAIndex(op.QSAIndex{Plan: plan, Tok: op.HostI32(tok), IQ: host(iq), Keys: host(ik), IQK: host(iqk),
				QNorm: qn[:128], KNorm: qn[:128], P: ip})
		})
	}); err != nil {
		return err
	}
	aq, ak, av := rnd(Tq*24*256, 1), rnd((pos0+Tq)*2*256, 1), rnd((pos0+Tq)*2*256, 1)
	o, lse := make([]float32, Tq*24*256), make([]float32, Tq*24)
	ap := op.AttnParams{T: Tq, Hq: 24, Hkv: 2, D: 256, Pos0: pos0, Scale: 1.0 / 16}
	if err := report("sparse attention T2048 pos0 30000 (2051 keys/row)", 4*24*256*float64(len(tok)), func() error {
		return cpu(func(p op.Pass) error {
			return p.Attention(op.Attention{O: host(o), LSE: host(lse), Q: host(aq), K: host(ak), V: host(av), P: ap, Sel: plan, Tok: op.HostI32(tok)})
		})
	}); err != nil {
		return err
	}
	return nil
}

// cpu runs ops over host memory on the CPU backend in one Pass.
func cpu(run func(op.Pass) error) error {
	_, err := op.Exec(kernels.Backend{}, run)
	return err
}

// host wraps x as an F32 tensor.
func host(x []float32) op.Tensor { return op.HostF32(x) }

// cpuModel is lscpu's "Model name" (from /proc/cpuinfo), or GOARCH.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// resetHWM resets the process's peak resident set to its current size (Linux: "5" written to
// /proc/self/clear_refs); elsewhere it does nothing.
func resetHWM() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// vmHWM is the process's peak resident set in bytes (Linux /proc/self/status), 0 elsewhere.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
