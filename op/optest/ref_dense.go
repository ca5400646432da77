package optest

import (
	"math"
	"sort"

	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// float64 references of the dense ops, written from the op docs and docs/MODELS.md (transformers'
// Qwen3Next / Qwen4Exp modules). They share no code with any backend: every sum, exp and norm
// runs in float64 from the float32 inputs (BF16/F16 weights widened exactly).

// To64 widens x to float64.
func To64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// Widen returns the float32 values of a weight [N, K] (BF16: the bits as the upper half of a
// float32; F16: IEEE half widened exactly; F32: the data itself, not copied; the quantized
// formats dequantized: Dequant, DequantFP8, DequantQFloat, DequantGGML).
func Widen(m *op.Matrix) []float32 {
	switch m.DType {
	case op.GGML:
		return DequantGGML(m)
	case op.QAffine:
		return Dequant(m)
	case op.FP8Block:
		return DequantFP8(m)
	case op.QFloat:
		return DequantQFloat(m)
	case op.BF16:
		w := make([]float32, len(m.U16))
		for i, b := range m.U16 {
			w[i] = math.Float32frombits(uint32(b) << 16)
		}
		return w
	case op.F16:
		w := make([]float32, len(m.U16))
		for i, b := range m.U16 {
			w[i] = float16.Frombits(b).Float32()
		}
		return w
	}
	return m.F32
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// linear64 is y [T, N] = x [T, K] w^T for w [N, K] in float64.
func linear64(x []float64, T int, w []float32, N, K int) []float64 {
	y := make([]float64, T*N)
	for t := 0; t < T; t++ {
		xt := x[t*K : (t+1)*K]
		for n := 0; n < N; n++ {
			wn := w[n*K : (n+1)*K]
			var s float64
			for k, xv := range xt {
				s += xv * float64(wn[k])
			}
			y[t*N+n] = s
		}
	}
	return y
}

// RefMatMul is y [T, N] = x [T, K] W^T (op.MatMul) in float64.
func RefMatMul(x []float32, T int, w *op.Matrix) []float64 {
	return linear64(To64(x), T, Widen(w), w.N, w.K)
}

// RefRMSNorm1p is the zero-centred RMSNorm of every group of D values of x:
// y = x / sqrt(mean(x^2) + eps) * (1 + w), with w [S*D] cycling over the S groups of a row (S = 1:
// op.RMSNorm; S > 1: the grouped norm of GRRead, GRWrite's Hn and PLEApply).
func RefRMSNorm1p(x []float64, S, D int, w []float32, eps float64) []float64 {
	y := make([]float64, len(x))
	for g := 0; g*D < len(x); g++ {
		var ss float64
		for _, v := range x[g*D : (g+1)*D] {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(D)+eps)
		s := g % S
		for d := 0; d < D; d++ {
			y[g*D+d] = x[g*D+d] * inv * (1 + float64(w[s*D+d]))
		}
	}
	return y
}

// RefRoPE returns x [T, H, D] rotated at positions pos [T] over its first rot dims, written as
// transformers' x*cos + rotate_half(x)*sin with rotate_half(v) = (-v2, v1) and cos/sin of
// pos * theta^(-2i/rot) duplicated over the two halves.
func RefRoPE(x []float64, T, H, D, rot int, pos []float64, theta float64) []float64 {
	y := append([]float64(nil), x...)
	half := rot / 2
	cosv, sinv := make([]float64, rot), make([]float64, rot)
	rh := make([]float64, rot)
	for t := 0; t < T; t++ {
		for i := 0; i < rot; i++ {
			f := pos[t] / math.Pow(theta, float64(2*(i%half))/float64(rot))
			cosv[i], sinv[i] = math.Cos(f), math.Sin(f)
		}
		for h := 0; h < H; h++ {
			v := y[(t*H+h)*D : (t*H+h)*D+rot]
			for i := 0; i < half; i++ {
				rh[i], rh[i+half] = -v[i+half], v[i]
			}
			for i := 0; i < rot; i++ {
				v[i] = v[i]*cosv[i] + rh[i]*sinv[i]
			}
		}
	}
	return y
}

// RefSwiGLU is h [rows, I] = silu(gu[:, :I]) * gu[:, I:] for gu [rows, 2I].
func RefSwiGLU(gu []float32, rows, I int) []float64 {
	h := make([]float64, rows*I)
	for r := 0; r < rows; r++ {
		for i := 0; i < I; i++ {
			g, u := float64(gu[r*2*I+i]), float64(gu[r*2*I+I+i])
			h[r*I+i] = g * sigmoid64(g) * u
		}
	}
	return h
}

// RefTopKRoute is the router: p = softmax(logits[t]) over E in float64, the K largest p by a
// stable sort (exact ties to the lower expert index), w = p (renormalised over the K when norm).
// It returns w, idx [T, K] and the full p [T, E].
func RefTopKRoute(logits []float32, T, E, K int, norm bool) (w []float64, idx []int32, p []float64) {
	w, idx, p = make([]float64, T*K), make([]int32, T*K), make([]float64, T*E)
	for t := 0; t < T; t++ {
		row, pt := logits[t*E:(t+1)*E], p[t*E:(t+1)*E]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		var s float64
		for e, v := range row {
			pt[e] = math.Exp(float64(v) - m)
			s += pt[e]
		}
		order := make([]int, E)
		for e := range order {
			pt[e] /= s
			order[e] = e
		}
		sort.SliceStable(order, func(a, b int) bool { return pt[order[a]] > pt[order[b]] })
		var sel float64
		for j := 0; j < K; j++ {
			sel += pt[order[j]]
		}
		for j := 0; j < K; j++ {
			idx[t*K+j] = int32(order[j])
			w[t*K+j] = pt[order[j]]
			if norm {
				w[t*K+j] /= sel
			}
		}
	}
	return w, idx, p
}

// refExpert is down(silu(gate x) * up x) in float64 for one token row x [D], with gu [2I, D]
// (gate rows first) and down [D, I].
func refExpert(x []float64, gu, down []float32, D, I int) []float64 {
	a := linear64(x, 1, gu, 2*I, D)
	h := make([]float64, I)
	for i := range h {
		h[i] = a[i] * sigmoid64(a[i]) * a[I+i]
	}
	return linear64(h, 1, down, D, I)
}

// RefMoEExperts runs the routed experts of op.MoEExperts (gate and up rows of a split
// op.Experts joined as the fused layout): rk [T, K] is the row layout the op
// specifies (slots grouped by expert in expert order, then slot order; -1 for an empty slot) and
// ye [T*K, D] holds each used row's down_e(silu(gate_e x_t) * up_e x_t), zeros past the used rows.
func RefMoEExperts(x []float32, T, K int, idx []int32, ex *op.Experts) (ye []float64, rk []int32) {
	D, I := ex.D, ex.I
	ye, rk = make([]float64, T*K*D), make([]int32, T*K)
	row := 0
	for e := 0; e < ex.E; e++ {
		var gu, dn []float32
		for i, ei := range idx {
			if int(ei) != e {
				continue
			}
			if gu == nil {
				gu, dn = Widen(ex.GateUp[e]), Widen(ex.Down[e])
				if ex.Split() {
					gu = append(append([]float32(nil), gu...), Widen(ex.Up[e])...)
				}
			}
			t := i / K
			copy(ye[row*D:(row+1)*D], refExpert(To64(x[t*D:(t+1)*D]), gu, dn, D, I))
			rk[i] = int32(row)
			row++
		}
	}
	for i, ei := range idx {
		if ei < 0 {
			rk[i] = -1
		}
	}
	return ye, rk
}

// RefMoECombine is out [T, D] = sum over slots j of w[t, j] * ye[rk[t, j]] (empty slots skipped).
func RefMoECombine(ye []float32, rk []int32, w []float32, T, K, D int) []float64 {
	out := make([]float64, T*D)
	for t := 0; t < T; t++ {
		for j := 0; j < K; j++ {
			r := rk[t*K+j]
			if r < 0 {
				continue
			}
			for d := 0; d < D; d++ {
				out[t*D+d] += float64(w[t*K+j]) * float64(ye[int(r)*D+d])
			}
		}
	}
	return out
}

// RefGRRead is the GatedResidual read of op.GRRead: Hn = grouped RMSNorm1p(H) (H itself when
// normed), x [T, D] = mean_s(sigmoid(Up silu((Down Hn) / S))_s * Hn_s) and, with g.Inj, beta
// [T, S] = 2 sigmoid((Inj Hn) / S) (nil without).
func RefGRRead(H []float32, normed bool, T int, g *op.GRWeights, eps float64) (x, beta []float64) {
	S, D, R := g.S, g.D, g.R
	hn := To64(H)
	if !normed {
		hn = RefRMSNorm1p(hn, S, D, g.Norm, eps)
	}
	z := linear64(hn, T, Widen(g.Down), R, S*D)
	for j, v := range z {
		v /= float64(S)
		z[j] = v * sigmoid64(v)
	}
	a := linear64(z, T, Widen(g.Up), S*D, R)
	x = make([]float64, T*D)
	for t := 0; t < T; t++ {
		for d := 0; d < D; d++ {
			for s := 0; s < S; s++ {
				k := t*S*D + s*D + d
				x[t*D+d] += sigmoid64(a[k]) * hn[k] / float64(S)
			}
		}
	}
	if g.Inj == nil {
		return x, nil
	}
	beta = linear64(hn, T, Widen(g.Inj), S, S*D)
	for j := range beta {
		beta[j] = 2 * sigmoid64(beta[j]/float64(S))
	}
	return x, beta
}

// RefGRWrite is H [T, S*D] + beta[t, s] * u[t] in float64 (the GatedResidual write).
func RefGRWrite(H, beta []float32, u []float64, T, S, D int) []float64 {
	out := To64(H)
	for t := 0; t < T; t++ {
		for s := 0; s < S; s++ {
			for d := 0; d < D; d++ {
				out[t*S*D+s*D+d] += float64(beta[t*S+s]) * u[t*D+d]
			}
		}
	}
	return out
}

// RefPLEApply is the PLE layer of op.PLEApply over T tokens in float64, from the conv state
// state [(ConvK-1)*Dilation, S*D] (the gvn of the previous steps, oldest first): it returns
// H + gv + silu(conv(gvn)) and the new state (the last (ConvK-1)*Dilation steps of state ++ gvn).
func RefPLEApply(H []float32, T int, ids []int32, w *op.PLEWeights, state []float32, eps float64) (out, newState []float64) {
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	C, heads, K := S*D, E/Hd, w.ConvK()
	L := (K - 1) * w.Dilation
	table := Widen(w.Table)
	emb := make([]float64, T*E)
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			for j := 0; j < Hd; j++ {
				emb[t*E+h*Hd+j] = float64(table[int(ids[t*heads+h])*Hd+j])
			}
		}
	}
	key := RefRMSNorm1p(linear64(emb, T, Widen(w.Key), C, E), S, D, w.NormKey, eps)
	val := linear64(emb, T, Widen(w.Value), D, E)
	q := RefRMSNorm1p(To64(H), S, D, w.NormQuery, eps)
	gv := make([]float64, T*C)
	for t := 0; t < T; t++ {
		for s := 0; s < S; s++ {
			var g float64
			for d := 0; d < D; d++ {
				g += key[t*C+s*D+d] * q[t*C+s*D+d]
			}
			g /= math.Sqrt(float64(D))
			if g > 0 {
				g = math.Sqrt(math.Max(g, 1e-6))
			} else if g < 0 {
				g = -math.Sqrt(math.Max(-g, 1e-6))
			}
			for d := 0; d < D; d++ {
				gv[t*C+s*D+d] = sigmoid64(g) * val[t*D+d]
			}
		}
	}
	hist := append(To64(state), RefRMSNorm1p(gv, S, D, w.NormConv, eps)...) // [L+T, C]
	out = To64(H)
	for t := 0; t < T; t++ {
		for c := 0; c < C; c++ {
			var acc float64
			for j := 0; j < K; j++ {
				acc += float64(w.ConvW[c*K+j]) * hist[(L+t-(K-1-j)*w.Dilation)*C+c]
			}
			out[t*C+c] += gv[t*C+c] + acc*sigmoid64(acc)
		}
	}
	return out, hist[T*C:]
}

// QuantCode returns code i of row n of a QAffine weight: bits (i*Bits .. i*Bits+Bits-1) of the
// row's little-endian bit stream, least significant bit first (docs/FORMATS.md section 2), read bit by
// bit so that it does not share the kernels' word arithmetic.
func QuantCode(q *op.Quant, K, n, i int) uint32 {
	words := K * q.Bits / 32
	return streamCode(q.Codes[n*words:(n+1)*words], i, q.Bits)
}

// Dequant returns the float32 values [N, K] of a QAffine weight, each element
// scale * q + bias of its group evaluated in float64 and rounded once.
func Dequant(m *op.Matrix) []float32 {
	q := m.Q
	w := make([]float32, m.N*m.K)
	half := func(b uint16) float64 {
		if q.ScaleDType == op.BF16 {
			return float64(math.Float32frombits(uint32(b) << 16))
		}
		return float64(float16.Frombits(b).Float32())
	}
	gpr := m.K / q.Group
	for n := 0; n < m.N; n++ {
		for i := 0; i < m.K; i++ {
			g := n*gpr + i/q.Group
			w[n*m.K+i] = float32(half(q.Scales[g])*float64(QuantCode(q, m.K, n, i)) + half(q.Biases[g]))
		}
	}
	return w
}
