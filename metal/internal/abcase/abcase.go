// Package abcase holds the paired A/B measurement of the Metal backend's kernel variants: one
// op call per op at the real model's shapes (Qwen3.8-Flash-Next), run on two backends in
// alternating order (A B B A ...), with the median and minimum of each side. The A/B harness
// (metal/cmd/ab) and the self-test (metal/cmd/selftest) share it.
package abcase

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/op"
)

// Files maps each op with a call to its kernel file (the file a candidate source replaces).
var Files = map[string]string{
	"moe_comb":       "moe.metal",
	"gr_norm_h4":     "norm.metal",
	"gr_norm_h_moec": "moe.metal",
	"gr_stream_mean": "gatedresidual.metal",
	"gdn_scan":       "gdn.metal",
	"attention":      "attention.metal",
	"gemm":           "gemm.metal",
	"qgemm":          "quant.metal",
	"fpgemm":         "fpquant.metal",
	"ggmlgemm":       "ggml.metal",
}

// PreferOps names the Prefer op of each op whose name differs from it (qgemm: an MLX
// affine-quantized weight, Prefer op "qmm"; fpgemm: an FP8 block-scaled one, Prefer op "qmm_fp";
// ggmlgemm: a GGUF Q4_K one, Prefer op "qmm_gg").
var PreferOps = map[string]string{"qgemm": "qmm", "fpgemm": "qmm_fp", "ggmlgemm": "qmm_gg"}

// PreferOp returns the op name Backend.Prefer takes for opName.
func PreferOp(opName string) string {
	if p, ok := PreferOps[opName]; ok {
		return p
	}
	return opName
}

// Quant is the weight format of op qgemm: bits per code and group size (scales and biases in
// BF16).
type Quant struct{ Bits, Group int }

// DefaultQuant is the format NewCall gives qgemm: 4 bits in groups of 64 (mlx-community's -4bit).
var DefaultQuant = Quant{Bits: 4, Group: 64}

// Ops lists the ops with a call, sorted.
func Ops() []string {
	out := make([]string, 0, len(Files))
	for k := range Files {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Call is one op call on a backend: its outputs (concatenated) and the Pass's timing.
type Call func(*metal.Backend) ([]float32, op.Timing, error)

// NewCall builds the inputs of one call of opName (T new tokens after pos0 cached ones, for
// attention; seed picks the inputs) and returns it; each call runs through op.Exec (inputs
// copied into device tensors, one Pass, outputs copied back). Errors: an op without a
// call.
func NewCall(opName string, T, pos0 int, seed uint64) (Call, error) {
	return NewCallQuant(opName, DefaultQuant, T, pos0, seed)
}

// NewCallQuant is NewCall with qgemm's weight format q. Errors: an op without a call, a format
// whose codes or groups do not tile the weight's K.
func NewCallQuant(opName string, q Quant, T, pos0 int, seed uint64) (Call, error) {
	r := &rng{s: seed}
	h := op.HostF32
	switch opName {
	case "moe_comb":
		const K, D = 10, 2560
		ye := r.fill(T*K*D, -1, 1)
		rk := make([]int32, T*K)
		for i := range rk {
			rk[i] = int32(i)
		}
		w := r.fill(T*K, 0, 1)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			out := make([]float32, T*D)
			a := op.MoECombine{Out: h(out), YE: h(ye), RK: op.HostI32(rk), W: h(w), T: T, K: K, D: D}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.MoECombine(a) }, &a)
			return out, tm, err
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
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			hh := slices.Clone(H)
			hn := make([]float32, len(H))
			a := op.GRApplyMoEC{H: h(hh), Hn: h(hn), Beta: h(beta), YE: h(ye), RK: op.HostI32(rk), W: h(w),
				T: T, S: S, K: K, D: D, Norm: norm, Eps: 1e-6}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.GRApplyMoEC(a) }, &a)
			return append(hh, hn...), tm, err
		}, nil
	case "gr_stream_mean":
		const S, D, R = 4, 2560, 16
		g := &op.GRWeights{S: S, D: D, R: R, Norm: r.fill(S*D, -0.5, 0.5),
			Down: r.bf16(R, S*D, 0.02), Up: r.bf16(S*D, R, 0.2), Inj: r.bf16(S, S*D, 0.02)}
		H := r.fill(T*S*D, -2, 2)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			x, beta := make([]float32, T*D), make([]float32, T*S)
			a := op.GRRead{X: h(x), Beta: h(beta), H: h(H), T: T, G: g, Eps: 1e-6}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.GRRead(a) }, &a)
			return append(x, beta...), tm, err
		}, nil
	case "gdn_scan":
		p := op.GDNParams{T: T, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}
		q, k := unitRows(r.fill(T*16*128, -1, 1), 128, 1/math.Sqrt(128)), unitRows(r.fill(T*16*128, -1, 1), 128, 1)
		v, g, beta := r.fill(T*48*128, -1, 1), r.fill(T*48, -2.5, -0.001), r.fill(T*48, 0.02, 0.98)
		state := r.fill(48*128*128, -0.5, 0.5)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			o, st := make([]float32, T*48*128), slices.Clone(state)
			a := op.GDNScan{O: h(o), State: h(st), Q: h(q), K: h(k), V: h(v), G: h(g), Beta: h(beta), P: p}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
			return append(o, st...), tm, err
		}, nil
	case "attention":
		p := op.AttnParams{T: T, Hq: 24, Hkv: 2, D: 256, Pos0: pos0, Scale: 1.0 / 16}
		q := r.fill(T*24*256, -2, 2)
		k, v := r.fill((pos0+T)*2*256, -2, 2), r.fill((pos0+T)*2*256, -1, 1)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			o, lse := make([]float32, len(q)), make([]float32, T*24)
			a := op.Attention{O: h(o), LSE: h(lse), Q: h(q), K: h(k), V: h(v), P: p}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.Attention(a) }, &a)
			return append(o, lse...), tm, err
		}, nil
	case "gemm":
		w := r.bf16(1024, 2560, 0.05)
		x := r.fill(T*2560, -1, 1)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			y := make([]float32, T*1024)
			a := op.MatMul{Y: h(y), X: h(x), T: T, W: w}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
			return y, tm, err
		}, nil
	case "qgemm":
		// The gemm op's weight [1024, 2560] quantized: random codes (every bit pattern is a valid
		// stream), scales of either sign up to 0.2 / 2^bits and biases -scale 2^bits / 2.
		w, err := r.quant(1024, 2560, q)
		if err != nil {
			return nil, err
		}
		x := r.fill(T*2560, -1, 1)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			y := make([]float32, T*1024)
			a := op.MatMul{Y: h(y), X: h(x), T: T, W: w}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
			return y, tm, err
		}, nil
	case "fpgemm":
		// The gemm op's weight [1024, 2560] as FP8Block: random E4M3 codes (0x7f and 0xff, the
		// NaNs, moved to +-448), one BF16 scale up to 0.2 / 448 per 128 x 128 block.
		w := r.fp8(1024, 2560)
		x := r.fill(T*2560, -1, 1)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			y := make([]float32, T*1024)
			a := op.MatMul{Y: h(y), X: h(x), T: T, W: w}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
			return y, tm, err
		}, nil
	case "ggmlgemm":
		// The gemm op's weight [1024, 2560] as GGUF Q4_K blocks (the main type of the Q4_K_M
		// files): random codes, sub-block scales and mins, d and dmin positive halves of order
		// 2^-10 and 2^-7.
		w, err := r.q4K(1024, 2560)
		if err != nil {
			return nil, err
		}
		x := r.fill(T*2560, -1, 1)
		return func(b *metal.Backend) ([]float32, op.Timing, error) {
			y := make([]float32, T*1024)
			a := op.MatMul{Y: h(y), X: h(x), T: T, W: w}
			tm, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
			return y, tm, err
		}, nil
	}
	return nil, fmt.Errorf("abcase: no call for op %q (have %v)", opName, Ops())
}

// q4K is a GGML Q4_K weight [n, k] (k a multiple of 256): per block of 256, d and dmin (IEEE
// halves: 2^-10 and 2^-7 times 1 + a random mantissa), 12 bytes of 6-bit sub-block scales and
// mins and 128 bytes of 4-bit codes, all random.
func (r *rng) q4K(n, k int) (*op.Matrix, error) {
	t := op.GGMLQ4_K
	rb, err := t.RowBytes(k)
	if err != nil {
		return nil, err
	}
	data := make([]byte, n*rb)
	for i := range data {
		data[i] = byte(r.next())
	}
	for off := 0; off < len(data); off += t.TypeSize() {
		d, dmin := uint16(5<<10|r.next()&1023), uint16(8<<10|r.next()&1023)
		data[off], data[off+1], data[off+2], data[off+3] = byte(d), byte(d>>8), byte(dmin), byte(dmin>>8)
	}
	return op.NewMatrixGGML(n, k, &op.GGMLBlocks{Type: t, Data: data})
}

// fp8 is an FP8Block weight [n, k] with BF16 block scales.
func (r *rng) fp8(n, k int) *op.Matrix {
	f := &op.BlockFP8{Codes: make([]uint8, n*k), ScaleDType: op.BF16, Grid: op.FP8Grid(n, k)}
	for i := range f.Codes {
		c := uint8(r.next())
		if c&0x7f == 0x7f {
			c--
		}
		f.Codes[i] = c
	}
	for _, v := range r.fill(f.Grid[0]*f.Grid[1], 0.01, 0.2) {
		f.Scales = append(f.Scales, uint16(math.Float32bits(v/448)>>16))
	}
	return &op.Matrix{N: n, K: k, DType: op.FP8Block, FP8: f}
}

// quant is a QAffine weight [n, k] of format q with BF16 scales and biases.
func (r *rng) quant(n, k int, q Quant) (*op.Matrix, error) {
	if q.Bits <= 0 || q.Group <= 0 || k%q.Group != 0 || k*q.Bits%32 != 0 {
		return nil, fmt.Errorf("abcase: qgemm: %d-bit codes in groups of %d do not fit K=%d", q.Bits, q.Group, k)
	}
	m := &op.Matrix{N: n, K: k, DType: op.QAffine, Q: &op.Quant{Bits: q.Bits, Group: q.Group, ScaleDType: op.BF16}}
	m.Q.Codes = make([]uint32, n*k*q.Bits/32)
	for i := range m.Q.Codes {
		m.Q.Codes[i] = uint32(r.next())
	}
	ng := n * k / q.Group
	bf16 := func(v float32) uint16 { return uint16(math.Float32bits(v) >> 16) }
	m.Q.Scales, m.Q.Biases = make([]uint16, ng), make([]uint16, ng)
	levels := float32(int(1) << q.Bits)
	for g, v := range r.fill(ng, -0.1, 0.1) {
		s := v / levels * 2
		m.Q.Scales[g], m.Q.Biases[g] = bf16(s), bf16(-s*levels/2)
	}
	return m, m.Validate("qgemm")
}

// Sample is one side's measurement: per sample the wall time of its calls (uploads and
// read-backs included) and the device time the Passes reported (op.Timing.Total: the command
// buffers' GPU time on Metal).
type Sample struct {
	Wall, Device []time.Duration
}

// Stats returns the median and minimum of x.
func Stats(x []time.Duration) (median, min time.Duration) {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2], s[0]
}

// Paired runs calls on a and b n times each in alternating pairs (A B, then B A, ...), every
// sample running all calls (one per layer) once, and returns both sides' times.
func Paired(a, b *metal.Backend, calls []Call, n int) (sa, sb Sample, err error) {
	sample := func(be *metal.Backend, s *Sample) error {
		start := time.Now()
		var dev time.Duration
		for _, c := range calls {
			_, tm, err := c(be)
			if err != nil {
				return err
			}
			dev += tm.Total
		}
		s.Wall = append(s.Wall, time.Since(start))
		s.Device = append(s.Device, dev)
		return nil
	}
	for i := 0; i < n; i++ {
		first, second, fs, ss := a, b, &sa, &sb
		if i%2 == 1 {
			first, second, fs, ss = b, a, &sb, &sa
		}
		if err := sample(first, fs); err != nil {
			return sa, sb, err
		}
		if err := sample(second, ss); err != nil {
			return sa, sb, err
		}
	}
	return sa, sb, nil
}

// FirstDiff is the first element where a and b differ in bits (-1 if none) and max |a - b|
// (NaN differences count as infinite).
func FirstDiff(a, b []float32) (int, float64) {
	first, d, _ := Diff(a, b)
	return first, d
}

// Diff is FirstDiff with max |a - b| relative to max |a| as well (rel = d when a is all zeros).
func Diff(a, b []float32) (first int, d, rel float64) {
	first, m := -1, 0.0
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

// next is the next value of the splitmix64 sequence.
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

// bf16 is a random BF16 matrix [n, k] with values in [-scale, scale) (truncated to bfloat16).
func (r *rng) bf16(n, k int, scale float64) *op.Matrix {
	bits := make([]uint16, n*k)
	for i, f := range r.fill(n*k, -scale, scale) {
		bits[i] = uint16(math.Float32bits(f) >> 16)
	}
	return &op.Matrix{N: n, K: k, DType: op.BF16, U16: bits}
}
