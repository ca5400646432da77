package optest

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// BenchOptions size BenchPeak and BenchCases: T is the token count of the per-op cases (0:
// 512), LongT that of the GEMM peak and the long-context cases (0: 2048), Pos0 the cached
// tokens before the last long-context cases (0: 30000). The emulator, thousands of times slower
// than a GPU, takes a few tokens (e.g. T 8, LongT 16) at the same widths.
type BenchOptions struct{ T, LongT, Pos0 int }

func (o BenchOptions) withDefaults() BenchOptions {
	if o.T <= 0 {
		o.T = 512
	}
	if o.LongT <= 0 {
		o.LongT = 2048
	}
	if o.Pos0 <= 0 {
		o.Pos0 = 30000
	}
	return o
}

// BenchPeak is the GEMM the benchmarks give other rates against: MatMul of x [LongT, 2048] and
// a float32 W [2048, 2048] ("MatMul/T2048_N2048_K2048_F32": sgemm 2048^3 at the defaults).
func BenchPeak(o BenchOptions) Case {
	o = o.withDefaults()
	c := GEMMCase{T: o.LongT, N: 2048, K: 2048, DType: op.F32}
	return gemmEntry(c.Name(), false, c.T, c.N, c.K, Quant{}, c.DType, 40001, 40002).timed("MatMul")
}

// BenchPeakCompute is BenchPeak's product in compute mode mode on a weight of format dt (with
// q for op.QAffine; dt op.F32, op.BF16 or op.QAffine), handed to a weight store of that mode
// (op.WeightOptions.Compute, Weights.Prepare) so that it runs what the mode runs for the format:
// its kernel, or f32 where the mode does not take the format. It is the rate against which a
// model's products in that mode are given as a fraction of their GEMM-bound limit
// ("MatMul/T2048_N2048_K2048_q4_g64_BF16/int8" at the defaults; 2 T N K flops).
func BenchPeakCompute(o BenchOptions, mode op.ComputeMode, dt op.DType, q Quant) Case {
	o = o.withDefaults()
	T, N, K := o.LongT, 2048, 2048
	format := dt.String()
	if dt == op.QAffine {
		format = q.Name()
	}
	c := gemmEntry(fmt.Sprintf("T%d_N%d_K%d_%s/%s", T, N, K, format, mode), false, T, N, K, q, dt, 40003, 40004).timed("MatMul")
	c.weights = op.WeightOptions{Compute: mode}
	return c
}

// BenchCases are op cases at Qwen3.8-Flash-Next's real widths, built as the test tables' (the
// same case types, names and builders) with seeds of their own:
//   - MatMul of x [T, 2560] by a projection [2560, 2560] in BF16 (widened per call), F32, and
//     MLX affine 4 and 8 bits in groups of 64 with BF16 scales;
//   - MoEExperts at T, 64 experts (the slice models' share of the 512), top-10, D 2560, I 640:
//     F32 weights, and MLX 4-bit gate, up and down kept apart (switch_mlp);
//   - GRRead (S 4 streams of 2560, rank 320, with the inject weight, F32) and GRApplyMoEC with
//     the shared expert and the next read's norm (top-10);
//   - SwiGLU over one layer's routed rows [T*10, 640], SigmoidMul over the attention output
//     [T, 24*256], QSAPrep of 24 / 2 heads of 256 (rotary 64);
//   - GDNScan (ScanAuto) of Hk 16 / Hv 48 heads of 128 at T;
//   - QSAIndex (4 index heads of 128, blocks of 4, budget 2048) and the attention over its
//     selection (24 / 2 heads of 256; Attention/qsa_2pass: the attention alone timed) at T and
//     LongT tokens from position 0 and LongT tokens after Pos0.
func BenchCases(o BenchOptions) []Case {
	o = o.withDefaults()
	T, D := o.T, 2560
	q4, q8 := Quant{Bits: 4, Group: 64, ScaleDType: op.BF16}, Quant{Bits: 8, Group: 64, ScaleDType: op.BF16}
	var cs []Case
	add := func(opName string, en entry) { cs = append(cs, en.timed(opName)) }
	for i, dt := range []op.DType{op.BF16, op.F32} {
		c := GEMMCase{T: T, N: D, K: D, DType: dt}
		add("MatMul", gemmEntry(c.Name(), false, T, D, D, Quant{}, dt, uint64(40010+2*i), uint64(40011+2*i)))
	}
	for i, q := range []Quant{q4, q8} {
		c := QGEMMCase{T: T, N: D, K: D, Q: q}
		add("MatMul", gemmEntry(c.Name(), false, T, D, D, q, op.QAffine, uint64(40020+2*i), uint64(40021+2*i)))
	}
	moe := MoECase{T: T, E: 64, K: 10, D: D, I: 640, Norm: true, DType: op.F32}
	add("MoEExperts", moeExpertsEntry(moe.Name(), false, false, moe, func(t tb) *op.Experts { return moeExperts(t, moe, 41) }, 40030, 40031))
	qmoe := QMoECase{T: T, E: 64, K: 10, D: D, I: 640, Split: true, Q: q4, UpQ: q4, DownQ: q4}
	add("MoEExperts", moeExpertsEntry(qmoe.Name(), false, true, qmoe.moe(), func(t tb) *op.Experts { return qmoe.experts(t, 42000) }, 40040, 40041))
	gr := GRCase{T: T, S: 4, D: D, R: 320, Inject: true, DType: op.F32}
	add("GRRead", grReadEntry(gr.Name()+"/normedfalse", false, gr, Quant{}, 40050, 40059, false))
	add("GRApplyMoEC", grApplyEntry(CombineCase{T: T, S: 4, K: 10, D: D, Seed: 40060}, true, true))
	add("SwiGLU", swigluEntry(EltCase{T: 10 * T, D: 640}, 40070))
	add("SigmoidMul", sigmoidMulEntry(EltCase{T: T, D: 24 * 256}, 40080))
	add("QSAPrep", qsaPrepEntry(QSAPrepCase{T: T, Hq: 24, Hkv: 2, D: 256, Rot: 64, Theta: 1e7, Seed: 40090}))
	gdn := GDNCase{Name: "real_hk16_hv48", T: T, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4, Seed: 40100}
	add("GDNScan", gdnScanEntry(gdn, gdnScanVariants(gdn)[0], nil))
	for i, tp := range [][2]int{{T, 0}, {o.LongT, 0}, {o.LongT, o.Pos0}} {
		c := QSACase{Name: fmt.Sprintf("T%d_pos%d_h4_dim128_r4_b2048", tp[0], tp[1]), T: tp[0], Pos0: tp[1], NHeads: 4, Dim: 128,
			Ratio: 4, Budget: 2048, Rot: 64, Theta: 1e7, Eps: eps, Hq: 24, Hkv: 2, D: 256, Seed: uint64(40110 + i)}
		add("QSAIndex", qsaIndexEntry(c.Name, false, c, false))
		add("Attention", qsaAttentionEntry(c, true))
	}
	return cs
}
