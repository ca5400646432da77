package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of gdn.metal (Gated DeltaNet; math in op.GDNPre / GDNScan / GDNPost).

// GDNPre implements op.Pass with gdn_pre + gdn_conv_update: the short conv over qkv with the conv
// state (read, then replaced by the last ConvK-1 inputs), silu, l2norm of q and k per head (q
// times Dk^-0.5), and the gates. float32 (the CPU op rounds float64 activations once): agreement
// about 1e-6 relative. ConvK must be 1..9.
func (j *Pass) GDNPre(a op.GDNPre) error {
	const opName = "gdn_pre"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	p := a.P
	if p.ConvK > 9 {
		return j.unsupported(opName, "ConvK=%d (gdn_pre takes 1..9)", p.ConvK)
	}
	if err := guard32(opName, p.T*p.Channels(), p.Hv*p.Dk*p.Dv); err != nil {
		return j.fail(err)
	}
	q, k, v, g, beta := j.dev("q", a.Q), j.dev("k", a.K), j.dev("v", a.V), j.dev("g", a.G), j.dev("beta", a.Beta)
	qkv, aa, bb, cs := j.dev("qkv", a.QKV), j.dev("a", a.A), j.dev("b", a.B), j.dev("convState", a.ConvState)
	if j.err != nil {
		return j.err
	}
	return j.gdnPre(q, k, v, g, beta, qkv, aa, bb, cs, j.vec(a.ConvW), j.vec(a.ALog), j.vec(a.DtBias), p)
}

func (j *Pass) gdnPre(bq, bk, bv, bg, bbeta, bqkv, ba, bb, bcs, bw, balog, bdt *Tensor, p op.GDNParams) error {
	pre, err := j.b.pipeline("gdn.metal", "gdn_pre", nil)
	if err != nil {
		return j.fail(err)
	}
	upd, err := j.b.pipeline("gdn.metal", "gdn_conv_update", nil)
	if err != nil {
		return j.fail(err)
	}
	T, K := p.T, p.ConvK
	C := 2*p.Hk*p.Dk + p.Hv*p.Dv
	nt := fitWidth(pre, min(256, (max(p.Dk, p.Dv, 32)+31)/32*32))
	j.dispatch(pre, fmt.Sprintf("gdn_pre_f32_conv%d_tg%d", K, nt), [3]int{2*p.Hk + p.Hv + 1, T, 1}, [3]int{nt, 1, 1}, 0,
		bq, bk, bv, bg, bbeta, bqkv, ba, bb, bcs, bw, balog, bdt, paramBytes(gdnPreParams{T: T, Hk: p.Hk, Hv: p.Hv, Dk: p.Dk, Dv: p.Dv, K: K}))
	if K > 1 {
		j.dispatch(upd, fmt.Sprintf("gdn_conv_update_f32_conv%d", K), [3]int{(C + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
			bcs, bqkv, paramBytes(gdnConvParams{T: T, C: C, K: K}))
	}
	return j.err
}

// GDNScan implements op.Pass with gdn_scan (ScanAuto and Recurrent: the gated delta rule token
// by token, kernel variant gdn_scan_f32_dv32_nsg4, threadgroups of 32 state columns x all Dk
// rows) or gdn_scan_chunk (Chunked; under ScanAuto when Prefer("gdn_scan", "gdn_scan_chunk")).
// With NormQK, gdn_norm_qk first writes the normalised q and k into the Pass's scratch (float32
// sums: about 1e-7 relative to the CPU's float64 ones) and the scan reads those. Decay factors
// below 1e-30 flush to zero as on the CPU. Dk <= 128.
func (j *Pass) GDNScan(a op.GDNScan) error {
	const opName = "gdn_scan"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	p := a.P
	if p.Dk > 128 {
		return j.unsupported(opName, "Dk=%d (32 state rows per simdgroup, Dk <= 128)", p.Dk)
	}
	if err := guard32(opName, p.T*p.Hv*p.Dv, p.Hv*p.Dk*p.Dv); err != nil {
		return j.fail(err)
	}
	o, st := j.dev("o", a.O), j.dev("state", a.State)
	q, k, v, g, beta := j.dev("q", a.Q), j.dev("k", a.K), j.dev("v", a.V), j.dev("g", a.G), j.dev("beta", a.Beta)
	if j.err != nil {
		return j.err
	}
	if a.NormQK {
		if q, k = j.gdnNormQK(q, k, p); j.err != nil {
			return j.err
		}
	}
	return j.gdnScan(o, st, q, k, v, g, beta, p, a.Mode)
}

// gdnNormQK dispatches gdn_norm_qk over q and k [T, Hk, Dk] into scratch tensors it returns.
func (j *Pass) gdnNormQK(bq, bk *Tensor, p op.GDNParams) (qn, kn *Tensor) {
	pipe, err := j.b.pipeline("gdn.metal", "gdn_norm_qk", nil)
	if err != nil {
		j.fail(err)
		return nil, nil
	}
	n := p.T * p.Hk * p.Dk
	qn, kn = j.tmp("gdn_norm_qk q", n), j.tmp("gdn_norm_qk k", n)
	if j.err != nil {
		return nil, nil
	}
	nt := fitWidth(pipe, min(256, (max(p.Dk, 32)+31)/32*32))
	j.dispatch(pipe, fmt.Sprintf("gdn_norm_qk_f32_tg%d", nt), [3]int{2 * p.Hk, p.T, 1}, [3]int{nt, 1, 1}, 0,
		qn, kn, bq, bk, paramBytes(gdnScanParams{T: p.T, Hk: p.Hk, Hv: p.Hv, Dk: p.Dk, Dv: p.Dv, Tiled: p.Map == op.Tiled}))
	return qn, kn
}

func (j *Pass) gdnScan(bo, bs, bq, bk, bv, bg, bbeta *Tensor, p op.GDNParams, mode op.ScanMode) error {
	chunked := mode == op.Chunked
	if mode == op.ScanAuto {
		chunked = j.b.preferred("gdn_scan", "gdn_scan") == gdnScanChunkKernel
	}
	if chunked {
		return j.gdnScanChunk(bo, bs, bq, bk, bv, bg, bbeta, p)
	}
	pipe, err := j.b.pipeline("gdn.metal", "gdn_scan", nil)
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, "gdn_scan_f32_dv32_nsg4", [3]int{(p.Dv + 31) / 32, p.Hv, 1}, [3]int{128, 1, 1}, 0,
		bo, bs, bq, bk, bv, bg, bbeta, paramBytes(gdnScanParams{T: p.T, Hk: p.Hk, Hv: p.Hv, Dk: p.Dk, Dv: p.Dv, Tiled: p.Map == op.Tiled}))
	return j.err
}

// GDNPost implements op.Pass with gdn_post: y = w * (o * rsqrt(mean(o^2) + eps)) * act(z) per
// value head over Dv, act = sigmoid or silu selected by function constant 0.
func (j *Pass) GDNPost(a op.GDNPost) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	if err := guard32("gdn_post", a.T*a.Hv*a.Dv); err != nil {
		return j.fail(err)
	}
	y, o, z := j.dev("y", a.Y), j.dev("o", a.O), j.dev("z", a.Z)
	if j.err != nil {
		return j.err
	}
	return j.gdnPost(y, o, z, a.T, a.Hv, a.Dv, j.vec(a.W), a.Eps, a.Act)
}

func (j *Pass) gdnPost(by, bo, bz *Tensor, T, Hv, Dv int, bw *Tensor, eps float32, act op.GateAct) error {
	silu := act == op.ActSilu
	pipe, err := j.b.pipeline("gdn.metal", "gdn_post", []mtlConst{boolConst(0, silu)})
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(Dv))
	name := "gdn_post_f32_sigmoid"
	if silu {
		name = "gdn_post_f32_silu"
	}
	j.dispatch(pipe, fmt.Sprintf("%s_tg%d", name, nt), [3]int{T * Hv, 1, 1}, [3]int{nt, 1, 1}, 0,
		by, bo, bz, bw, paramBytes(gdnPostParams{Dv: Dv, Eps: eps}))
	return j.err
}
