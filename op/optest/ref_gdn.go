package optest

import (
	"math"
	"slices"

	"github.com/stratakernels/strata/op"
)

// float64 references of the Gated DeltaNet ops, from the equations of the op docs and docs/MODELS.md
// (transformers' Qwen3NextGatedDeltaNet: torch_causal_conv1d_update, l2norm,
// torch_recurrent_gated_delta_rule, Qwen3NextRMSNormGated).

// RefL2Norm l2-normalises each row of d values of x, x / sqrt(sum x^2 + 1e-6), times scale
// (GDN's q and k: scale Dk^-0.5 for q, 1 for k).
func RefL2Norm(x []float64, d int, scale float64) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < len(x)/d; r++ {
		var s float64
		for _, e := range x[r*d : (r+1)*d] {
			s += e * e
		}
		for i := r * d; i < (r+1)*d; i++ {
			y[i] = x[i] / math.Sqrt(s+1e-6) * scale
		}
	}
	return y
}

// GDNPreRef is the float64 result of gdn_pre.
type GDNPreRef struct {
	Q, K, V, G, Beta []float64
	// ConvState is the new conv state [ConvK-1, C]: the last ConvK-1 inputs of the history.
	ConvState []float64
}

// RefGDNPre is gdn_pre (op.GDNPre) in float64: the depthwise causal conv of the history (conv
// state rows, then qkv [T, C]) with convW [C, ConvK], silu, the split into q | k | v, the l2
// norms (q scaled by Dk^-0.5), beta = sigmoid(b) and g = -exp(ALog) * softplus(a + dtBias)
// (softplus(x) = x for x > 20).
func RefGDNPre(p op.GDNParams, qkv, a, b, convState, convW, aLog, dtBias []float32) GDNPreRef {
	C, K, T := p.Channels(), p.ConvK, p.T
	hist := append(To64(convState), To64(qkv)...) // [K-1+T, C]
	act := make([]float64, T*C)
	for t := 0; t < T; t++ {
		for ch := 0; ch < C; ch++ {
			var s float64
			for j := 0; j < K; j++ {
				s += float64(convW[ch*K+j]) * hist[(t+j)*C+ch]
			}
			act[t*C+ch] = s * sigmoid64(s)
		}
	}
	qk := p.Hk * p.Dk
	var out GDNPreRef
	var qs, ks []float64
	for t := 0; t < T; t++ {
		qs = append(qs, act[t*C:t*C+qk]...)
		ks = append(ks, act[t*C+qk:t*C+2*qk]...)
		out.V = append(out.V, act[t*C+2*qk:(t+1)*C]...)
	}
	out.Q = RefL2Norm(qs, p.Dk, 1/math.Sqrt(float64(p.Dk)))
	out.K = RefL2Norm(ks, p.Dk, 1)
	for i := 0; i < T*p.Hv; i++ {
		h := i % p.Hv
		out.Beta = append(out.Beta, sigmoid64(float64(b[i])))
		x := float64(a[i]) + float64(dtBias[h])
		sp := math.Log(1 + math.Exp(x))
		if x > 20 {
			sp = x
		}
		out.G = append(out.G, -math.Exp(float64(aLog[h]))*sp)
	}
	out.ConvState = hist[T*C:]
	return out
}

// RefGDNScan runs the gated delta rule token by token in float64 (op.GDNScan) for every value
// head h reading qk head p's map of h: S = exp(g) S; delta = beta (v - S^T k); S += k delta^T;
// o = S^T q. q, k [T, Hk, Dk] already normalised; v [T, Hv, Dv]; g, beta [T, Hv]; state
// [Hv, Dk, Dv] (not modified). It returns o [T, Hv, Dv] and the final state.
func RefGDNScan(p op.GDNParams, q, k, v, g, beta, state []float64) (o, st []float64) {
	Dk, Dv, r := p.Dk, p.Dv, p.Hv/p.Hk
	st = slices.Clone(state)
	o = make([]float64, p.T*p.Hv*Dv)
	kv := make([]float64, Dv)
	for h := 0; h < p.Hv; h++ {
		j := h / r
		if p.Map == op.Tiled {
			j = h % p.Hk
		}
		S := st[h*Dk*Dv : (h+1)*Dk*Dv]
		for t := 0; t < p.T; t++ {
			decay := math.Exp(g[t*p.Hv+h])
			for i := range S {
				S[i] *= decay
			}
			kt := k[(t*p.Hk+j)*Dk:]
			qt := q[(t*p.Hk+j)*Dk:]
			for d := 0; d < Dv; d++ {
				kv[d] = 0
				for i := 0; i < Dk; i++ {
					kv[d] += S[i*Dv+d] * kt[i]
				}
			}
			for d := 0; d < Dv; d++ {
				delta := beta[t*p.Hv+h] * (v[(t*p.Hv+h)*Dv+d] - kv[d])
				for i := 0; i < Dk; i++ {
					S[i*Dv+d] += kt[i] * delta
				}
			}
			for d := 0; d < Dv; d++ {
				var s float64
				for i := 0; i < Dk; i++ {
					s += S[i*Dv+d] * qt[i]
				}
				o[(t*p.Hv+h)*Dv+d] = s
			}
		}
	}
	return o, st
}

// RefGDNPost is the gated RMSNorm of gdn_post in float64: y = w * (o / sqrt(mean(o^2) + eps)) *
// act(z) per row of Dv, act = silu or sigmoid.
func RefGDNPost(o, z []float32, Dv int, w []float32, eps float64, act op.GateAct) []float64 {
	y := make([]float64, len(o))
	for r := 0; r < len(o)/Dv; r++ {
		var s float64
		for d := 0; d < Dv; d++ {
			s += float64(o[r*Dv+d]) * float64(o[r*Dv+d])
		}
		inv := 1 / math.Sqrt(s/float64(Dv)+eps)
		for d := 0; d < Dv; d++ {
			zd := float64(z[r*Dv+d])
			a := sigmoid64(zd)
			if act == op.ActSilu {
				a *= zd
			}
			y[r*Dv+d] = float64(w[d]) * float64(o[r*Dv+d]) * inv * a
		}
	}
	return y
}
