package metal

import (
	"fmt"

	"github.com/stratakernels/strata/kernels"
)

// Host side of gdn_prompt.metal (Gated DeltaNet; math in kernels.GDNPre / GDNScan / GDNPost).

func gdnCheck(op string, p kernels.GDNParams) error {
	if p.T <= 0 || p.Hk <= 0 || p.Hv <= 0 || p.Dk <= 0 || p.Dv <= 0 {
		return fmt.Errorf("%s: T=%d Hk=%d Hv=%d Dk=%d Dv=%d must be positive: %w", op, p.T, p.Hk, p.Hv, p.Dk, p.Dv, kernels.ErrShape)
	}
	if p.Hv%p.Hk != 0 {
		return fmt.Errorf("%s: Hv=%d is not a multiple of Hk=%d: %w", op, p.Hv, p.Hk, kernels.ErrArg)
	}
	if p.Map != kernels.Grouped && p.Map != kernels.Tiled {
		return fmt.Errorf("%s: unknown head map %d: %w", op, int(p.Map), kernels.ErrArg)
	}
	C := 2*p.Hk*p.Dk + p.Hv*p.Dv
	return guard32(op, p.T*C, p.Hv*p.Dk*p.Dv)
}

type lenCheck struct {
	name string
	x    []float32
	n    int
}

func checkLens(op string, cs ...lenCheck) error {
	for _, c := range cs {
		if len(c.x) != c.n {
			return fmt.Errorf("%s: len(%s)=%d, want %d: %w", op, c.name, len(c.x), c.n, kernels.ErrShape)
		}
	}
	return nil
}

// GDNPre is gdn_pre + gdn_conv_update (kernels.GDNPre on the device): short conv over
// qkv [T, 2*Hk*Dk + Hv*Dv] with convW [C, ConvK] and the conv state [ConvK-1, C] (read, then
// replaced by the last ConvK-1 inputs), silu, l2norm of q and k per head (q times Dk^-0.5), and
// the gates beta = sigmoid(b), g = -exp(ALog) * softplus(a + dtBias) from a, b [T, Hv].
// Outputs q, k [T, Hk, Dk], v [T, Hv, Dv], g, beta [T, Hv]. float32 (the CPU op rounds float64
// activations once): agreement about 1e-6 relative. ConvK must be 1..9.
// Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GDNPre(q, k, v, g, beta []float32, qkv, a, bb []float32, convState, convW, ALog, dtBias []float32, p kernels.GDNParams) error {
	const op = "gdn_pre"
	if err := gdnCheck(op, p); err != nil {
		return err
	}
	if p.ConvK < 1 || p.ConvK > 9 {
		return fmt.Errorf("%s: ConvK=%d must be 1..9: %w", op, p.ConvK, kernels.ErrShape)
	}
	T, K := p.T, p.ConvK
	C := 2*p.Hk*p.Dk + p.Hv*p.Dv
	if err := checkLens(op,
		lenCheck{"q", q, T * p.Hk * p.Dk}, lenCheck{"k", k, T * p.Hk * p.Dk}, lenCheck{"v", v, T * p.Hv * p.Dv},
		lenCheck{"g", g, T * p.Hv}, lenCheck{"beta", beta, T * p.Hv},
		lenCheck{"qkv", qkv, T * C}, lenCheck{"a", a, T * p.Hv}, lenCheck{"b", bb, T * p.Hv},
		lenCheck{"convState", convState, (K - 1) * C}, lenCheck{"convW", convW, C * K},
		lenCheck{"ALog", ALog, p.Hv}, lenCheck{"dtBias", dtBias, p.Hv}); err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bq, bk, bv := j.alloc(len(q)), j.alloc(len(k)), j.alloc(len(v))
	bg, bbeta := j.alloc(len(g)), j.alloc(len(beta))
	bcs := j.f32(convState)
	if err := j.gdnPre(bq, bk, bv, bg, bbeta, j.f32(qkv), j.f32(a), j.f32(bb), bcs, j.f32(convW), j.f32(ALog), j.f32(dtBias), p); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(q, f32view(bq, len(q)))
	copy(k, f32view(bk, len(k)))
	copy(v, f32view(bv, len(v)))
	copy(g, f32view(bg, len(g)))
	copy(beta, f32view(bbeta, len(beta)))
	copy(convState, f32view(bcs, len(convState)))
	return nil
}

// GDNPre encodes gdn_pre + gdn_conv_update (Backend.GDNPre on device tensors; convW, ALog and
// dtBias are model weights). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) GDNPre(q, k, v, g, beta, qkv, a, bb, convState *Tensor, convW, ALog, dtBias []float32, p kernels.GDNParams) error {
	const op = "gdn_pre"
	if err := gdnCheck(op, p); err != nil {
		return j.fail(err)
	}
	C := 2*p.Hk*p.Dk + p.Hv*p.Dv
	if p.ConvK < 1 || p.ConvK > 9 || len(convW) != C*p.ConvK || len(ALog) != p.Hv || len(dtBias) != p.Hv ||
		q.Len() < p.T*p.Hk*p.Dk || k.Len() < p.T*p.Hk*p.Dk || v.Len() < p.T*p.Hv*p.Dv || g.Len() < p.T*p.Hv ||
		beta.Len() < p.T*p.Hv || qkv.Len() < p.T*C || a.Len() < p.T*p.Hv || bb.Len() < p.T*p.Hv || convState.Len() < (p.ConvK-1)*C {
		return j.fail(fmt.Errorf("%s: %w: tensors or weights do not match T=%d ConvK=%d C=%d", op, kernels.ErrShape, p.T, p.ConvK, C))
	}
	return j.gdnPre(q, k, v, g, beta, qkv, a, bb, convState, j.vec(convW), j.vec(ALog), j.vec(dtBias), p)
}

func (j *Pass) gdnPre(bq, bk, bv, bg, bbeta, bqkv, ba, bb, bcs, bw, balog, bdt *Tensor, p kernels.GDNParams) error {
	pre, err := j.b.pipeline("gdn_prompt.metal", "gdn_pre", nil)
	if err != nil {
		return j.fail(err)
	}
	upd, err := j.b.pipeline("gdn_prompt.metal", "gdn_conv_update", nil)
	if err != nil {
		return j.fail(err)
	}
	T, K := p.T, p.ConvK
	C := 2*p.Hk*p.Dk + p.Hv*p.Dv
	nt := min(256, (max(p.Dk, p.Dv, 32)+31)/32*32)
	j.dispatch(pre, fmt.Sprintf("gdn_pre_f32_conv%d_tg%d", K, nt), [3]int{2*p.Hk + p.Hv + 1, T, 1}, [3]int{nt, 1, 1}, 0,
		bq, bk, bv, bg, bbeta, bqkv, ba, bb, bcs, bw, balog, bdt, params(T, p.Hk, p.Hv, p.Dk, p.Dv, K))
	if K > 1 {
		j.dispatch(upd, fmt.Sprintf("gdn_conv_update_f32_conv%d", K), [3]int{(C + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
			bcs, bqkv, params(T, C, K))
	}
	return j.err
}

// GDNScan is gdn_scan (kernels.GDNScan in Recurrent mode on the device): the gated delta rule
// S = exp(g_t) S; delta = beta_t (v_t - S^T k_t); S += k_t delta^T; o_t = S^T q_t per value head,
// token by token, state [Hv, Dk, Dv] float32 read and written back. q, k [T, Hk, Dk] normalised
// (GDNPre), v, o [T, Hv, Dv], g, beta [T, Hv]. Decay factors below 1e-30 flush to zero as on the
// CPU. Kernel variant gdn_scan_f32_dv32_nsg4: threadgroups of 32 state columns x all Dk rows
// (Dk <= 128). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GDNScan(o, state []float32, q, k, v, g, beta []float32, p kernels.GDNParams) error {
	const op = "gdn_scan"
	if err := gdnCheck(op, p); err != nil {
		return err
	}
	if p.Dk > 128 {
		return fmt.Errorf("%s: Dk=%d > 128 (32 state rows per simdgroup): %w", op, p.Dk, kernels.ErrArg)
	}
	T := p.T
	if err := checkLens(op,
		lenCheck{"o", o, T * p.Hv * p.Dv}, lenCheck{"state", state, p.Hv * p.Dk * p.Dv},
		lenCheck{"q", q, T * p.Hk * p.Dk}, lenCheck{"k", k, T * p.Hk * p.Dk}, lenCheck{"v", v, T * p.Hv * p.Dv},
		lenCheck{"g", g, T * p.Hv}, lenCheck{"beta", beta, T * p.Hv}); err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bo, bs := j.alloc(len(o)), j.f32(state)
	if err := j.gdnScan(bo, bs, j.f32(q), j.f32(k), j.f32(v), j.f32(g), j.f32(beta), p); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(o, f32view(bo, len(o)))
	copy(state, f32view(bs, len(state)))
	return nil
}

// GDNScan encodes gdn_scan (Backend.GDNScan on device tensors; state [Hv, Dk, Dv] updated in
// place). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) GDNScan(o, state, q, k, v, g, beta *Tensor, p kernels.GDNParams) error {
	const op = "gdn_scan"
	if err := gdnCheck(op, p); err != nil {
		return j.fail(err)
	}
	if p.Dk > 128 {
		return j.fail(fmt.Errorf("%s: Dk=%d > 128 (32 state rows per simdgroup): %w", op, p.Dk, kernels.ErrArg))
	}
	if o.Len() < p.T*p.Hv*p.Dv || state.Len() < p.Hv*p.Dk*p.Dv || q.Len() < p.T*p.Hk*p.Dk || k.Len() < p.T*p.Hk*p.Dk ||
		v.Len() < p.T*p.Hv*p.Dv || g.Len() < p.T*p.Hv || beta.Len() < p.T*p.Hv {
		return j.fail(fmt.Errorf("%s: %w: tensors too small for T=%d", op, kernels.ErrShape, p.T))
	}
	return j.gdnScan(o, state, q, k, v, g, beta, p)
}

func (j *Pass) gdnScan(bo, bs, bq, bk, bv, bg, bbeta *Tensor, p kernels.GDNParams) error {
	if j.b.preferred("gdn_scan", "gdn_scan") == gdnScanChunkKernel {
		return j.gdnScanChunk(bo, bs, bq, bk, bv, bg, bbeta, p)
	}
	pipe, err := j.b.pipeline("gdn_prompt.metal", "gdn_scan", nil)
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, "gdn_scan_f32_dv32_nsg4", [3]int{(p.Dv + 31) / 32, p.Hv, 1}, [3]int{128, 1, 1}, 0,
		bo, bs, bq, bk, bv, bg, bbeta, params(p.T, p.Hk, p.Hv, p.Dk, p.Dv, p.Map == kernels.Tiled))
	return j.err
}

// GDNPost is gdn_post (kernels.GDNPost on the device): y = w * (o * rsqrt(mean(o^2) + eps)) *
// act(z) per value head over Dv, act = sigmoid (kernels.ActSigmoid) or silu (kernels.ActSilu),
// selected by function constant 0. y, o, z [T, Hv, Dv]; w [Dv]. Errors wrap kernels.ErrShape or
// kernels.ErrArg.
func (b *Backend) GDNPost(y, o, z []float32, T, Hv, Dv int, w []float32, eps float32, act kernels.GateAct) error {
	const op = "gdn_post"
	if T <= 0 || Hv <= 0 || Dv <= 0 {
		return fmt.Errorf("%s: T=%d Hv=%d Dv=%d must be positive: %w", op, T, Hv, Dv, kernels.ErrShape)
	}
	if act != kernels.ActSilu && act != kernels.ActSigmoid {
		return fmt.Errorf("%s: unknown gate activation %d: %w", op, int(act), kernels.ErrArg)
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	n := T * Hv * Dv
	if err := checkLens(op, lenCheck{"y", y, n}, lenCheck{"o", o, n}, lenCheck{"z", z, n}, lenCheck{"w", w, Dv}); err != nil {
		return err
	}
	if err := guard32(op, n); err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	by := j.alloc(n)
	if err := j.gdnPost(by, j.f32(o), j.f32(z), T, Hv, Dv, j.f32(w), eps, act); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(y, f32view(by, n))
	return nil
}

// GDNPost encodes gdn_post (Backend.GDNPost on device tensors; w [Dv] is a model weight).
// Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) GDNPost(y, o, z *Tensor, T, Hv, Dv int, w []float32, eps float32, act kernels.GateAct) error {
	const op = "gdn_post"
	n := T * Hv * Dv
	if T <= 0 || Hv <= 0 || Dv <= 0 || len(w) != Dv || y.Len() < n || o.Len() < n || z.Len() < n {
		return j.fail(fmt.Errorf("%s: %w: T=%d Hv=%d Dv=%d len(w)=%d", op, kernels.ErrShape, T, Hv, Dv, len(w)))
	}
	if act != kernels.ActSilu && act != kernels.ActSigmoid {
		return j.fail(fmt.Errorf("%s: unknown gate activation %d: %w", op, int(act), kernels.ErrArg))
	}
	if err := checkEps(op, eps); err != nil {
		return j.fail(err)
	}
	return j.gdnPost(y, o, z, T, Hv, Dv, j.vec(w), eps, act)
}

func (j *Pass) gdnPost(by, bo, bz *Tensor, T, Hv, Dv int, bw *Tensor, eps float32, act kernels.GateAct) error {
	silu := act == kernels.ActSilu
	pipe, err := j.b.pipeline("gdn_prompt.metal", "gdn_post", []mtlConst{boolConst(0, silu)})
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(Dv)
	name := "gdn_post_f32_sigmoid"
	if silu {
		name = "gdn_post_f32_silu"
	}
	j.dispatch(pipe, fmt.Sprintf("%s_tg%d", name, nt), [3]int{T * Hv, 1, 1}, [3]int{nt, 1, 1}, 0,
		by, bo, bz, bw, params(Dv, eps))
	return j.err
}
