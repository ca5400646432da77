package strata

import (
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal"
)

// metalBackend runs on a metal.Backend (a Metal GPU, or the MSL emulator through an injected
// device). It is a residentBackend: sessions keep their cache in device buffers and a prefill
// chunk runs as one command buffer (backend_metal_forward.go). The host-slice ops below (one
// command buffer per op) serve callers that hold host tensors.
type metalBackend struct{ b *metal.Backend }

func (m metalBackend) matMul(y, x []float32, T int, w *kernels.Matrix) error {
	return m.b.MatMul(y, x, T, w)
}

func (m metalBackend) rmsNorm(y, x []float32, rows, D int, w []float32, eps float32) error {
	return m.b.RMSNorm1p(y, x, rows, D, w, eps)
}

func (m metalBackend) grRead(x, beta, H []float32, T int, g *kernels.GRWeights, eps float32) error {
	return m.b.GRRead(x, beta, H, T, g, eps)
}

func (m metalBackend) grReadNormed(x, beta, Hn []float32, T int, g *kernels.GRWeights) error {
	return m.b.GRReadNormed(x, beta, Hn, T, g)
}

func (m metalBackend) grWrite(H, beta, u []float32, T, S, D int) error {
	return m.b.GRWrite(H, beta, u, T, S, D)
}

func (m metalBackend) grWriteNormH(H, Hn, beta, u []float32, T, S, D int, norm []float32, eps float32) error {
	return m.b.GRWriteNormH(H, Hn, beta, u, T, S, D, norm, eps)
}

func (m metalBackend) add(H, u, v []float32) error { return m.b.Add(H, u, v) }

func (m metalBackend) gdnPre(q, k, v, g, beta, qkv, a, b, convState, convW, aLog, dtBias []float32, p kernels.GDNParams) error {
	return m.b.GDNPre(q, k, v, g, beta, qkv, a, b, convState, convW, aLog, dtBias, p)
}

func (m metalBackend) gdnScan(o, state, q, k, v, g, beta []float32, p kernels.GDNParams) error {
	return m.b.GDNScan(o, state, q, k, v, g, beta, p)
}

func (m metalBackend) gdnPost(y, o, z []float32, T, Hv, dv int, w []float32, eps float32, act kernels.GateAct) error {
	return m.b.GDNPost(y, o, z, T, Hv, dv, w, eps, act)
}

func (m metalBackend) attnPrep(q, gate, kc, vc, qg, k, v, qNorm, kNorm []float32, T, Hq, Hkv, D, rot, pos0 int, theta float64, eps float32) error {
	return m.b.QSAPrep(q, gate, kc, vc, qg, k, v, qNorm, kNorm, T, Hq, Hkv, D, rot, pos0, theta, eps)
}

func (m metalBackend) qsaIndex(sel *kernels.Selection, iq, keys, iqk, qNorm, kNorm []float32, p kernels.IndexerParams) error {
	return m.b.QSAIndex(sel, iq, keys, iqk, qNorm, kNorm, p)
}

func (m metalBackend) attention(o, q, kc, vc []float32, p kernels.AttnParams, sel *kernels.Selection) error {
	return m.b.Attention(o, nil, q, kc, vc, p, sel)
}

func (m metalBackend) sigmoidMul(o, g []float32) error { return m.b.SigmoidMul(o, g) }

func (m metalBackend) swiglu(h, gu []float32, T, I int) error { return m.b.SwiGLU(h, gu, T, I) }

func (m metalBackend) rowSigmoidScale(x, s []float32, T, D int) error {
	return m.b.RowSigmoidScale(x, s, T, D)
}

func (m metalBackend) topKRoute(w []float32, idx []int32, logits []float32, T, E, K int, norm bool) error {
	return m.b.TopKRoute(w, idx, logits, T, E, K, norm)
}

func (m metalBackend) moeExperts(ye []float32, rk []int32, x []float32, T int, idx []int32, K int, ex *kernels.Experts) error {
	return m.b.MoEExperts(ye, rk, x, T, idx, K, ex)
}

func (m metalBackend) moeCombine(out, ye []float32, rows int, rk []int32, w []float32, T, K, D int) error {
	return m.b.MoECombine(out, ye, rows, rk, w, T, K, D)
}

func (m metalBackend) grApplyMoEC(H, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int) error {
	return m.b.GRApplyMoEC(H, beta, ye, rows, rk, w, shared, T, S, K, D)
}

func (m metalBackend) grNormHMoEC(H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int, norm []float32, eps float32) error {
	return m.b.GRNormHMoEC(H, Hn, beta, ye, rows, rk, w, shared, T, S, K, D, norm, eps)
}

func (m metalBackend) pleApply(H []float32, T int, ids []int32, w *kernels.PLEWeights, convState []float32, eps float32) error {
	return m.b.PLEApply(H, T, ids, w, convState, eps)
}
