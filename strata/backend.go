package strata

import (
	"github.com/stratakernels/strata/kernels"
)

// backend is the set of ops the model runner (forward.go) calls; it never sees a model.
// cpuBackend runs package kernels, metalBackend runs package metal (Metal GPUs, or the MSL
// emulator through an injected device). Shapes and errors are those of the kernels ops of the
// same names; a failed op leaves its outputs unspecified, and the runner restores the session's
// fixed-size state (Prefill's contract). The metal backend also implements residentBackend
// (backend_metal_session.go): its sessions keep the cache on the device and a prefill chunk is
// one command buffer; its host-slice ops here run one command buffer each.
type backend interface {
	// matMul: y [T, N] = x [T, K] W^T.
	matMul(y, x []float32, T int, w *kernels.Matrix) error
	// rmsNorm: y = RMSNorm1p(x) over rows of D (qwen3_next pre-norms, final norm).
	rmsNorm(y, x []float32, rows, D int, w []float32, eps float32) error
	// grRead / grReadNormed: the GatedResidual read from H or from already normalised Hn.
	grRead(x, beta, H []float32, T int, g *kernels.GRWeights, eps float32) error
	grReadNormed(x, beta, Hn []float32, T int, g *kernels.GRWeights) error
	// grWrite / grWriteNormH: H += beta (x) u, the latter also normalising H for the next read.
	grWrite(H, beta, u []float32, T, S, D int) error
	grWriteNormH(H, Hn, beta, u []float32, T, S, D int, norm []float32, eps float32) error
	// add: H += u + v (v may be nil): the qwen3_next residual add.
	add(H, u, v []float32) error
	// gdnPre, gdnScan, gdnPost: the Gated DeltaNet core (conv and recurrent states in place).
	gdnPre(q, k, v, g, beta, qkv, a, b, convState, convW, aLog, dtBias []float32, p kernels.GDNParams) error
	gdnScan(o, state, q, k, v, g, beta []float32, p kernels.GDNParams) error
	gdnPost(y, o, z []float32, T, Hv, dv int, w []float32, eps float32, act kernels.GateAct) error
	// attnPrep: split qg [T, Hq, 2D] into q and gate, q/k RMSNorm1p + RoPE at pos0+t, and append
	// k (normed, rotated) and v into the cache rows pos0 .. pos0+T-1.
	attnPrep(q, gate, kc, vc, qg, k, v, qNorm, kNorm []float32, T, Hq, Hkv, D, rot, pos0 int, theta float64, eps float32) error
	// qsaIndex: the indexer from iqk [T, nh+1, dim]: prepared queries iq, raw keys appended at
	// rows pos0.., and the selection.
	qsaIndex(sel *kernels.Selection, iq, keys, iqk, qNorm, kNorm []float32, p kernels.IndexerParams) error
	// attention: causal (or QSA-sparse) GQA over the cache.
	attention(o, q, kc, vc []float32, p kernels.AttnParams, sel *kernels.Selection) error
	// sigmoidMul: o *= sigmoid(g) element-wise (attention output gate).
	sigmoidMul(o, g []float32) error
	// swiglu: h [T, I] = silu(gu[:, :I]) * gu[:, I:].
	swiglu(h, gu []float32, T, I int) error
	// rowSigmoidScale: x[t, :] *= sigmoid(s[t]) (shared-expert gate).
	rowSigmoidScale(x, s []float32, T, D int) error
	topKRoute(w []float32, idx []int32, logits []float32, T, E, K int, norm bool) error
	moeExperts(ye []float32, rk []int32, x []float32, T int, idx []int32, K int, ex *kernels.Experts) error
	moeCombine(out, ye []float32, rows int, rk []int32, w []float32, T, K, D int) error
	grApplyMoEC(H, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int) error
	grNormHMoEC(H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int, norm []float32, eps float32) error
	// pleApply: one PLE layer from hashed ids (hashing stays on the host: kernels.PLEHash).
	pleApply(H []float32, T int, ids []int32, w *kernels.PLEWeights, convState []float32, eps float32) error
}

// cpuBackend runs every op with package kernels (the runner's historical behaviour, bit for bit).
type cpuBackend struct{}

func (cpuBackend) matMul(y, x []float32, T int, w *kernels.Matrix) error {
	return kernels.MatMul(y, x, T, w)
}

func (cpuBackend) rmsNorm(y, x []float32, rows, D int, w []float32, eps float32) error {
	return kernels.RMSNorm1p(y, x, rows, D, w, eps)
}

func (cpuBackend) grRead(x, beta, H []float32, T int, g *kernels.GRWeights, eps float32) error {
	return kernels.GRRead(x, beta, H, T, g, eps)
}

func (cpuBackend) grReadNormed(x, beta, Hn []float32, T int, g *kernels.GRWeights) error {
	return kernels.GRReadNormed(x, beta, Hn, T, g)
}

func (cpuBackend) grWrite(H, beta, u []float32, T, S, D int) error {
	return kernels.GRWrite(H, beta, u, T, S, D)
}

func (cpuBackend) grWriteNormH(H, Hn, beta, u []float32, T, S, D int, norm []float32, eps float32) error {
	return kernels.GRWriteNormH(H, Hn, beta, u, T, S, D, norm, eps)
}

func (cpuBackend) add(H, u, v []float32) error {
	kernels.ParallelFor(len(u), 1<<14, func(lo, hi int) {
		if v == nil {
			for i := lo; i < hi; i++ {
				H[i] += u[i]
			}
			return
		}
		for i := lo; i < hi; i++ {
			H[i] += u[i] + v[i]
		}
	})
	return nil
}

func (cpuBackend) gdnPre(q, k, v, g, beta, qkv, a, b, convState, convW, aLog, dtBias []float32, p kernels.GDNParams) error {
	return kernels.GDNPre(q, k, v, g, beta, qkv, a, b, convState, convW, aLog, dtBias, p)
}

func (cpuBackend) gdnScan(o, state, q, k, v, g, beta []float32, p kernels.GDNParams) error {
	return kernels.GDNScan(o, state, q, k, v, g, beta, p, kernels.Chunked)
}

func (cpuBackend) gdnPost(y, o, z []float32, T, Hv, dv int, w []float32, eps float32, act kernels.GateAct) error {
	return kernels.GDNPost(y, o, z, T, Hv, dv, w, eps, act)
}

func (cpuBackend) attnPrep(q, gate, kc, vc, qg, k, v, qNorm, kNorm []float32, T, Hq, Hkv, D, rot, pos0 int, theta float64, eps float32) error {
	kNew := kc[pos0*Hkv*D : (pos0+T)*Hkv*D]
	copy(kNew, k)
	copy(vc[pos0*Hkv*D:(pos0+T)*Hkv*D], v)
	kernels.ParallelFor(T, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := 0; h < Hq; h++ {
				src := qg[(t*Hq+h)*2*D:]
				copy(q[(t*Hq+h)*D:(t*Hq+h+1)*D], src[:D])
				copy(gate[(t*Hq+h)*D:(t*Hq+h+1)*D], src[D:2*D])
			}
		}
	})
	if err := kernels.RMSNorm1pRoPE(q, T, Hq, D, qNorm, eps, rot, pos0, theta); err != nil {
		return err
	}
	return kernels.RMSNorm1pRoPE(kNew, T, Hkv, D, kNorm, eps, rot, pos0, theta)
}

func (cpuBackend) qsaIndex(sel *kernels.Selection, iq, keys, iqk, qNorm, kNorm []float32, p kernels.IndexerParams) error {
	nh, dh := p.NHeads, p.Dim
	for t := 0; t < p.T; t++ {
		copy(iq[t*nh*dh:(t+1)*nh*dh], iqk[t*(nh+1)*dh:])
		copy(keys[(p.Pos0+t)*dh:(p.Pos0+t+1)*dh], iqk[(t*(nh+1)+nh)*dh:])
	}
	if err := kernels.RMSNorm1pRoPE(iq, p.T, nh, dh, qNorm, p.Eps, p.Rot, p.Pos0, p.Theta); err != nil {
		return err
	}
	return kernels.QSASelect(sel, iq, keys, kNorm, p)
}

func (cpuBackend) attention(o, q, kc, vc []float32, p kernels.AttnParams, sel *kernels.Selection) error {
	return kernels.Attention(o, nil, q, kc, vc, p, sel)
}

func (cpuBackend) sigmoidMul(o, g []float32) error { return kernels.SigmoidMul(o, g) }

func (cpuBackend) swiglu(h, gu []float32, T, I int) error { return kernels.SwiGLU(h, gu, T, I) }

func (cpuBackend) rowSigmoidScale(x, s []float32, T, D int) error {
	kernels.ParallelFor(T, max(1, 4096/D), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			gv := float32(sigmoid64(float64(s[t])))
			for j := 0; j < D; j++ {
				x[t*D+j] *= gv
			}
		}
	})
	return nil
}

func (cpuBackend) topKRoute(w []float32, idx []int32, logits []float32, T, E, K int, norm bool) error {
	return kernels.TopKRoute(w, idx, logits, T, E, K, norm)
}

func (cpuBackend) moeExperts(ye []float32, rk []int32, x []float32, T int, idx []int32, K int, ex *kernels.Experts) error {
	return kernels.MoEExperts(ye, rk, x, T, idx, K, ex)
}

func (cpuBackend) moeCombine(out, ye []float32, rows int, rk []int32, w []float32, T, K, D int) error {
	return kernels.MoECombine(out, ye, rows, rk, w, T, K, D)
}

func (cpuBackend) grApplyMoEC(H, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int) error {
	return kernels.GRApplyMoEC(H, beta, ye, rows, rk, w, shared, T, S, K, D)
}

func (cpuBackend) grNormHMoEC(H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int, norm []float32, eps float32) error {
	return kernels.GRNormHMoEC(H, Hn, beta, ye, rows, rk, w, shared, T, S, K, D, norm, eps)
}

func (cpuBackend) pleApply(H []float32, T int, ids []int32, w *kernels.PLEWeights, convState []float32, eps float32) error {
	return kernels.PLEApply(H, T, ids, w, convState, eps)
}
