package kernels

import (
	"github.com/stratakernels/strata/op"
)

// Row forms of the element-wise activations that run over whole activation tensors: the
// GatedResidual gates ([T, S*D] per read) and the experts' SwiGLU ([rows, I] per expert).
//
// Two kernel sets, picked at run time like the GEMM panels (useAsm):
//   - AVX2+FMA assembly (act_amd64.s) on amd64 CPUs that have it: float32 throughout, e^x by
//     Cephes' expf reduction and polynomial (about 1 ulp), sigmoid as 1/(1+e) or e/(1+e) with
//     e = e^-|x| and one division, so sigmoid lands within 2.2 float32 ulp of its float64
//     definition and silu within 3.1 (measured over a dense grid and random bit patterns),
//     except that e^x flushes to 0 below x = -87.7, where sigmoid's exact value is under
//     2^-126 and silu's under |x| 2^-126: both come out as 0.
//     The stream mean adds the S products with fused multiply-adds in stream order in float32.
//   - Portable Go (other CPUs and architectures, the purego tag): the float64 polynomial forms
//     of moe_act.go rounded once to float32, and the stream mean summed in float64.
//
// NaN inputs give NaN in both sets; sigmoid(+Inf) = 1, sigmoid(-Inf) = 0, silu(+Inf) = +Inf
// and silu(-Inf) = NaN (-Inf * 0, as torch computes it). Every element is computed by the same
// code whatever its position (a row's last n%8 elements go through the vector kernel in a
// padded copy), so a result's bits depend only on its inputs, the build and the CPU's kernel
// set: never on how rows are split across cores.

// useAsmAct reports whether the assembly activation kernels run.
func useAsmAct() bool { return useAsm && hasAsmAct }

// ActKernel names the activation kernels this build runs on this CPU: "avx2-fma asm" or
// "generic Go".
func ActKernel() string {
	if useAsmAct() {
		return cpuAsmName
	}
	return "generic Go"
}

// sigmoidRow sets dst[i] = sigmoid(src[i] / div); dst and src have the same length and may be
// the same slice.
func sigmoidRow(dst, src []float32, div float32) {
	n := len(dst)
	src = src[:n]
	if !useAsmAct() {
		for i, v := range src {
			dst[i] = sigmoidFast32(v / div)
		}
		return
	}
	n8 := n &^ 7
	if n8 > 0 {
		actSigmoid8(&dst[0], &src[0], n8, div)
	}
	if n8 < n {
		var buf [8]float32
		copy(buf[:], src[n8:])
		actSigmoid8(&buf[0], &buf[0], 8, div)
		copy(dst[n8:], buf[:])
	}
}

// siluRow sets dst[i] = v * sigmoid(v), v = src[i] / div; dst may be src.
func siluRow(dst, src []float32, div float32) {
	n := len(dst)
	src = src[:n]
	if !useAsmAct() {
		for i, v := range src {
			dst[i] = siluFast32(v / div)
		}
		return
	}
	n8 := n &^ 7
	if n8 > 0 {
		actSiLU8(&dst[0], &src[0], n8, div)
	}
	if n8 < n {
		var buf [8]float32
		copy(buf[:], src[n8:])
		actSiLU8(&buf[0], &buf[0], 8, div)
		copy(dst[n8:], buf[:])
	}
}

// sigmoidMulRow sets o[i] = o[i] * sigmoid(gate[i]).
func sigmoidMulRow(o, gate []float32) {
	n := len(o)
	gate = gate[:n]
	if !useAsmAct() {
		for i, v := range gate {
			o[i] *= sigmoidFast32(v)
		}
		return
	}
	n8 := n &^ 7
	if n8 > 0 {
		actSigmoidMul8(&o[0], &gate[0], n8)
	}
	if n8 < n {
		var bo, bg [8]float32
		copy(bo[:], o[n8:])
		copy(bg[:], gate[n8:])
		actSigmoidMul8(&bo[0], &bg[0], 8)
		copy(o[n8:], bo[:])
	}
}

// sigmoidMul multiplies o element-wise by sigmoid(gate): o[i] = o[i] * (1 / (1 + e^-gate[i]))
// (the output gate of gated attention, attn .* sigmoid(gate) in Qwen3NextAttention /
// Qwen4ExpTextAttention, and any other sigmoid gate of the same shape). o and gate are float32
// of the same length (any shape, row-major); results as the package's other activations (see
// ActKernel: within about 2 float32 ulp for the sigmoid in the assembly set, the float64 form
// elsewhere) and the same bits for any GOMAXPROCS. Parallel over elements. Errors wrap op.ErrShape.
func sigmoidMul(o, gate []float32) error {
	return execSigmoidMul(op.SigmoidMul{O: op.HostF32(o), G: op.HostF32(gate)})
}

func execSigmoidMul(a op.SigmoidMul) error {
	if err := a.Check(); err != nil {
		return err
	}
	o, gate := a.O.F32(), a.G.F32()
	parallelFor(len(o), 1<<14, func(lo, hi int) { sigmoidMulRow(o[lo:hi], gate[lo:hi]) })
	return nil
}

// swigluRow sets h[i] = silu(g[i]) * u[i] (SwiGLU; h may be g or u).
func swigluRow(h, g, u []float32) {
	n := len(h)
	g, u = g[:n], u[:n]
	if !useAsmAct() {
		for i := range h {
			h[i] = siluFast32(g[i]) * u[i]
		}
		return
	}
	n8 := n &^ 7
	if n8 > 0 {
		actSwiGLU8(&h[0], &g[0], &u[0], n8)
	}
	if n8 < n {
		var bg, bu [8]float32
		copy(bg[:], g[n8:])
		copy(bu[:], u[n8:])
		actSwiGLU8(&bg[0], &bg[0], &bu[0], 8)
		copy(h[n8:], bg[:])
	}
}

// grMeanSigmoidRow sets x[d] = mean over the S streams of sigmoid(a[s*D+d]) * hn[s*D+d] for one
// token (the GatedResidual read's block input: A = sigmoid(a) is never stored), D = len(x),
// a and hn of S*D. scratch holds at least 2*S*8 floats when D is not a multiple of 8.
func grMeanSigmoidRow(x, a, hn []float32, S int, scratch []float32) {
	D := len(x)
	a, hn = a[:S*D], hn[:S*D]
	if !useAsmAct() {
		for d := range x {
			var s float64
			for k := 0; k < S; k++ {
				s += float64(sigmoidFast32(a[k*D+d])) * float64(hn[k*D+d])
			}
			x[d] = float32(s / float64(S))
		}
		return
	}
	fS := float32(S)
	n8 := D &^ 7
	if n8 > 0 {
		actGRMean8(&x[0], &a[0], &hn[0], D, S, n8, fS)
	}
	if n8 < D {
		ta, th := scratch[:S*8], scratch[S*8:2*S*8]
		clear(ta)
		clear(th)
		for k := 0; k < S; k++ {
			copy(ta[k*8:], a[k*D+n8:(k+1)*D])
			copy(th[k*8:], hn[k*D+n8:(k+1)*D])
		}
		var buf [8]float32
		actGRMean8(&buf[0], &ta[0], &th[0], 8, S, 8, fS)
		copy(x[n8:], buf[:])
	}
}
