// Command ab runs two variants of a Metal kernel on the same inputs and compares them: the
// baseline (the embedded kernel files, the host's default variant) against a candidate (a
// replacement .metal file for the op's kernel file, and/or another variant of the op chosen with
// Prefer). Outputs must agree bitwise, or within -tol (max |A - B| / max |A|) for variants that
// sum in another order (qmv_affine, the tensor-op qmm_affine_tensor on a GPU, gdn_scan_chunk,
// the attention variants). On Apple hardware it also times the two in paired, alternating order
// (A B B A ...) and reports the median and minimum over -n samples; on the MSL emulator it only
// compares (emulator time says nothing about GPU speed).
//
// Shapes are the real model's (Qwen3.8-Flash-Next) at -T new tokens after -pos0 cached ones;
// each sample runs the op -layers times on different inputs (one per layer). Timings include
// the host-slice wrappers' uploads into shared buffers and read-backs, as a prefill pays them
// for its activations only once; compare variants, not absolute numbers.
//
//	go run ./metal/cmd/ab -op moe_comb -prefer moe_comb -T 512
//	go run ./metal/cmd/ab -op gdn_scan -candidate gdn_prompt_new.metal -T 512 -layers 4 -n 21
//	go run ./metal/cmd/ab -op qgemm -bits 4 -group 64 -prefer qmm_affine_tensor -T 512 -tol 1e-5
//	go run ./metal/cmd/ab -op qgemm -candidate quant_tensor_new.metal -file quant_tensor.metal -prefer qmm_affine_tensor -tol 1e-5
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/emu"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// ops maps an op name to its kernel file.
var ops = map[string]string{
	"moe_comb":       "prompt.metal",
	"gr_norm_h4":     "prompt.metal",
	"gr_norm_h_moec": "prompt.metal",
	"gdn_scan":       "gdn_prompt.metal",
	"attention":      "qsa_prompt.metal",
	"gemm":           "gemm.metal",
	"qgemm":          "quant.metal",
}

// preferOp is the Prefer op of each op whose name differs from it.
var preferOp = map[string]string{"qgemm": "qmm"}

func main() {
	opName := flag.String("op", "moe_comb", "op to compare: moe_comb, gr_norm_h4, gr_norm_h_moec, gdn_scan, attention, gemm, qgemm (an MLX affine-quantized weight)")
	candidate := flag.String("candidate", "", "candidate .metal file replacing the op's kernel file in variant B")
	file := flag.String("file", "", "kernel file the candidate replaces (default: the op's, e.g. quant.metal for qgemm)")
	prefer := flag.String("prefer", "", "kernel variant B runs the op with (metal.Backend.Prefer; qgemm: qmm_affine, qmv_affine, qmm_affine_tensor)")
	tol := flag.Float64("tol", 0, "largest max|A-B|/max|A| accepted (0: bitwise)")
	bits := flag.Int("bits", 4, "qgemm: bits per code (2, 3, 4, 5, 6, 8)")
	group := flag.Int("group", 64, "qgemm: group size (32, 64, 128)")
	T := flag.Int("T", 128, "new tokens")
	pos0 := flag.Int("pos0", 0, "cached tokens before them (attention)")
	layers := flag.Int("layers", 1, "op calls per sample, each on its own inputs")
	n := flag.Int("n", 11, "timed samples per variant (Apple hardware only)")
	device := flag.String("device", "auto", "auto (Metal on darwin, else the emulator), metal or emu")
	flag.Parse()
	q := quantOpts{bits: *bits, group: *group}
	if err := run(*opName, *candidate, *file, *prefer, *tol, q, *T, *pos0, *layers, *n, *device); err != nil {
		fmt.Fprintln(os.Stderr, "ab:", err)
		os.Exit(1)
	}
}

func openDevice(kind string) (mtl.Device, bool, error) {
	if kind == "auto" {
		kind = "emu"
		if runtime.GOOS == "darwin" {
			kind = "metal"
		}
	}
	switch kind {
	case "metal":
		d, err := metal.SystemDevice()
		return d, true, err
	case "emu":
		d, err := emu.Open(emu.Options{})
		return d, false, err
	}
	return nil, false, fmt.Errorf("unknown device %q", kind)
}

func run(opName, candidate, file, prefer string, tol float64, q quantOpts, T, pos0, layers, n int, device string) error {
	if _, ok := ops[opName]; !ok {
		return fmt.Errorf("unknown op %q", opName)
	}
	if file == "" {
		file = ops[opName]
	}
	if candidate == "" && prefer == "" {
		return errors.New("give -candidate and/or -prefer: variant B must differ from the baseline")
	}
	if T <= 0 || pos0 < 0 || layers <= 0 || n <= 0 {
		return fmt.Errorf("bad sizes T=%d pos0=%d layers=%d n=%d", T, pos0, layers, n)
	}
	dev, timed, err := openDevice(device)
	if err != nil {
		return err
	}
	defer dev.Close()
	a, err := metal.New(dev)
	if err != nil {
		return err
	}
	b, err := metal.New(dev)
	if err != nil {
		return err
	}
	if candidate != "" {
		src, err := os.ReadFile(candidate)
		if err != nil {
			return err
		}
		if err := b.SetSource(file, string(src)); err != nil {
			return err
		}
	}
	if prefer != "" {
		po := opName
		if p, ok := preferOp[opName]; ok {
			po = p
		}
		if err := b.Prefer(po, prefer); err != nil {
			return err
		}
	}
	calls := make([]func(*metal.Backend) ([]float32, error), layers)
	for l := range calls {
		if calls[l], err = makeCall(opName, q, T, pos0, uint64(l+1)); err != nil {
			return err
		}
	}
	sample := func(be *metal.Backend) ([][]float32, time.Duration, error) {
		outs := make([][]float32, layers)
		start := time.Now()
		for l, c := range calls {
			o, err := c(be)
			if err != nil {
				return nil, 0, err
			}
			outs[l] = o
		}
		return outs, time.Since(start), nil
	}
	outA, _, err := sample(a)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	outB, _, err := sample(b)
	if err != nil {
		return fmt.Errorf("candidate: %w", err)
	}
	fmt.Printf("device: %s\nop %s, T=%d pos0=%d layers=%d\nA: %v\nB: %v\n", dev.Name(), opName, T, pos0, layers, a.Variants(), b.Variants())
	same := true
	for l := range outA {
		if i, d, rel := firstDiff(outA[l], outB[l]); i >= 0 {
			fmt.Printf("layer %d: outputs differ first at element %d (max |A-B| = %g, %.3g of max |A|)\n", l, i, d, rel)
			if !(rel <= tol) {
				same = false
			}
		}
	}
	if same {
		if tol > 0 {
			fmt.Printf("outputs agree within %g\n", tol)
		} else {
			fmt.Println("outputs bitwise equal")
		}
	}
	if !timed {
		fmt.Println("emulator: no timing")
		if !same {
			return errors.New("variants disagree")
		}
		return nil
	}
	var ta, tb []time.Duration
	for i := 0; i < n; i++ {
		order := []*metal.Backend{a, b}
		if i%2 == 1 {
			order = []*metal.Backend{b, a}
		}
		for _, be := range order {
			_, dt, err := sample(be)
			if err != nil {
				return err
			}
			if be == a {
				ta = append(ta, dt)
			} else {
				tb = append(tb, dt)
			}
		}
	}
	ma, mb := median(ta), median(tb)
	fmt.Printf("A: median %v min %v\nB: median %v min %v\nB/A median %.3f\n", ma, slices.Min(ta), mb, slices.Min(tb), float64(mb)/float64(ma))
	if !same {
		return errors.New("variants disagree")
	}
	return nil
}

// firstDiff returns the first element where a and b differ in bits (-1 if none), max |a - b|
// and that relative to max |a| (NaN differences count as infinite).
func firstDiff(a, b []float32) (int, float64, float64) {
	first, d, m := -1, 0.0, 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])))
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			if first < 0 {
				first = i
			}
			e := math.Abs(float64(a[i]) - float64(b[i]))
			if math.IsNaN(e) {
				e = math.Inf(1)
			}
			d = max(d, e)
		}
	}
	if m == 0 {
		return first, d, d
	}
	return first, d, d / m
}

func median(x []time.Duration) time.Duration {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// quantOpts is the weight format of op qgemm (scales and biases in BF16).
type quantOpts struct{ bits, group int }

// makeCall builds one layer's inputs at the real model's shapes and returns the op call (run
// with op.Exec: inputs copied into device tensors, one command buffer, outputs copied back).
func makeCall(name string, qf quantOpts, T, pos0 int, seed uint64) (func(*metal.Backend) ([]float32, error), error) {
	r := &rng{s: seed}
	h := op.HostF32
	switch name {
	case "moe_comb":
		const K, D = 10, 2560
		ye := r.fill(T*K*D, -1, 1)
		rk := make([]int32, T*K)
		for i := range rk {
			rk[i] = int32(i)
		}
		w := r.fill(T*K, 0, 1)
		return func(b *metal.Backend) ([]float32, error) {
			out := make([]float32, T*D)
			a := op.MoECombine{Out: h(out), YE: h(ye), RK: op.HostI32(rk), W: h(w), T: T, K: K, D: D}
			_, err := op.Exec(b, func(p op.Pass) error { return p.MoECombine(a) }, &a)
			return out, err
		}, nil
	case "gr_norm_h4", "gr_norm_h_moec":
		const S, K, D = 4, 10, 2560
		H, beta, ye := r.fill(T*S*D, -3, 3), r.fill(T*S, 0, 2), r.fill(T*K*D, -1, 1)
		rk := make([]int32, T*K)
		for i := range rk {
			rk[i] = int32(i)
		}
		w, norm := r.fill(T*K, 0, 1), r.fill(S*D, -0.5, 0.5)
		// gr_norm_h4 is timed inside the fused write (the norm of the streams after the write).
		return func(b *metal.Backend) ([]float32, error) {
			hh := slices.Clone(H)
			hn := make([]float32, len(H))
			a := op.GRApplyMoEC{H: h(hh), Hn: h(hn), Beta: h(beta), YE: h(ye), RK: op.HostI32(rk), W: h(w),
				T: T, S: S, K: K, D: D, Norm: norm, Eps: 1e-6}
			_, err := op.Exec(b, func(p op.Pass) error { return p.GRApplyMoEC(a) }, &a)
			return append(hh, hn...), err
		}, nil
	case "gdn_scan":
		p := op.GDNParams{T: T, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}
		q, k := unitRows(r.fill(T*16*128, -1, 1), 128, 1/math.Sqrt(128)), unitRows(r.fill(T*16*128, -1, 1), 128, 1)
		v, g, beta := r.fill(T*48*128, -1, 1), r.fill(T*48, -2.5, -0.001), r.fill(T*48, 0.02, 0.98)
		state := r.fill(48*128*128, -0.5, 0.5)
		return func(b *metal.Backend) ([]float32, error) {
			o, st := make([]float32, T*48*128), slices.Clone(state)
			a := op.GDNScan{O: h(o), State: h(st), Q: h(q), K: h(k), V: h(v), G: h(g), Beta: h(beta), P: p}
			_, err := op.Exec(b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
			return append(o, st...), err
		}, nil
	case "attention":
		p := op.AttnParams{T: T, Hq: 24, Hkv: 2, D: 256, Pos0: pos0, Scale: 1.0 / 16}
		q := r.fill(T*24*256, -2, 2)
		k, v := r.fill((pos0+T)*2*256, -2, 2), r.fill((pos0+T)*2*256, -1, 1)
		return func(b *metal.Backend) ([]float32, error) {
			o, lse := make([]float32, len(q)), make([]float32, T*24)
			a := op.Attention{O: h(o), LSE: h(lse), Q: h(q), K: h(k), V: h(v), P: p}
			_, err := op.Exec(b, func(p op.Pass) error { return p.Attention(a) }, &a)
			return append(o, lse...), err
		}, nil
	case "gemm":
		const N, K = 1024, 2560
		bits := make([]uint16, N*K)
		for i := range bits {
			bits[i] = uint16(math.Float32bits(r.fill(1, -0.05, 0.05)[0]) >> 16)
		}
		w := &op.Matrix{N: N, K: K, DType: op.BF16, U16: bits}
		x := r.fill(T*K, -1, 1)
		return func(b *metal.Backend) ([]float32, error) {
			y := make([]float32, T*N)
			a := op.MatMul{Y: h(y), X: h(x), T: T, W: w}
			_, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
			return y, err
		}, nil
	case "qgemm":
		// The gemm op's weight [1024, 2560] quantized: random codes (every bit pattern is a valid
		// stream), scales of either sign up to 0.2 / 2^bits and biases -scale 2^bits / 2.
		const N, K = 1024, 2560
		w, err := randQuant(r, N, K, qf)
		if err != nil {
			return nil, err
		}
		x := r.fill(T*K, -1, 1)
		return func(b *metal.Backend) ([]float32, error) {
			y := make([]float32, T*N)
			a := op.MatMul{Y: h(y), X: h(x), T: T, W: w}
			_, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
			return y, err
		}, nil
	}
	return nil, fmt.Errorf("unknown op %q", name)
}

// randQuant is a QAffine weight [n, k] of format q with BF16 scales and biases.
func randQuant(r *rng, n, k int, q quantOpts) (*op.Matrix, error) {
	m := &op.Matrix{N: n, K: k, DType: op.QAffine, Q: &op.Quant{Bits: q.bits, Group: q.group, ScaleDType: op.BF16}}
	if q.bits <= 0 || q.group <= 0 || k%q.group != 0 || k*q.bits%32 != 0 {
		return nil, fmt.Errorf("qgemm: %d-bit codes in groups of %d do not fit K=%d", q.bits, q.group, k)
	}
	m.Q.Codes = make([]uint32, n*k*q.bits/32)
	for i := range m.Q.Codes {
		m.Q.Codes[i] = uint32(r.next())
	}
	ng := n * k / q.group
	bf16 := func(v float32) uint16 { return uint16(math.Float32bits(v) >> 16) }
	m.Q.Scales, m.Q.Biases = make([]uint16, ng), make([]uint16, ng)
	levels := float32(int(1) << q.bits)
	for g, v := range r.fill(ng, -0.1, 0.1) {
		s := v / levels * 2
		m.Q.Scales[g], m.Q.Biases[g] = bf16(s), bf16(-s*levels/2)
	}
	return m, m.Validate("qgemm")
}

// unitRows scales every row of n values to norm scale (the l2-normalised q and k gdn_scan reads).
func unitRows(x []float32, n int, scale float64) []float32 {
	for i := 0; i+n <= len(x); i += n {
		var s float64
		for _, v := range x[i : i+n] {
			s += float64(v) * float64(v)
		}
		f := scale / math.Sqrt(s+1e-6)
		for j := i; j < i+n; j++ {
			x[j] = float32(float64(x[j]) * f)
		}
	}
	return x
}

// rng is splitmix64 mapped to uniform floats (deterministic inputs for both variants).
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) fill(n int, lo, hi float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(lo + (hi-lo)*float64(r.next()>>11)/(1<<53))
	}
	return x
}
