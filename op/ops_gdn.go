package op

import "fmt"

// GDNPre is gdn_pre: the depthwise causal short conv over the in_proj channels, silu, the split
// into q, k, v, the l2 norm and scale of q and k, and the gates (docs/MODELS.md "Gated DeltaNet layer";
// transformers' Qwen3NextGatedDeltaNet / Qwen4ExpTextGatedDeltaNet).
//
// Inputs: QKV [T, C] (C = P.Channels() = 2*Hk*Dk + Hv*Dv, the in_proj_qkv output, channels
// q | k | v before the conv); A, B [T, Hv] (in_proj_a / in_proj_b); ConvW [C, ConvK] (no bias;
// ConvW[c][ConvK-1] multiplies the current token); ALog, DtBias [Hv]. ConvState [ConvK-1, C]
// holds the previous ConvK-1 inputs, token-major, oldest first (zeros at the start); it is read
// and replaced by the last ConvK-1 inputs of the history, so consecutive calls equal one call
// over the concatenated tokens.
//
// Outputs (must not alias the inputs): Q, K [T, Hk, Dk] = l2norm(silu(conv)) per head with
// l2norm(x) = x / sqrt(sum x^2 + 1e-6), Q further scaled by Dk^-0.5; V [T, Hv, Dv] = silu(conv);
// Beta [T, Hv] = sigmoid(b); G [T, Hv] = -exp(ALog) * softplus(a + DtBias), the log decay
// (softplus(x) = x for x > 20, as torch). All tensors F32.
type GDNPre struct {
	Q, K, V, G, Beta Tensor
	QKV, A, B        Tensor
	ConvState        Tensor
	ConvW            []float32
	ALog, DtBias     []float32
	P                GDNParams
}

// Check validates the shapes. Errors wrap ErrShape or ErrInvalidArgument.
func (a GDNPre) Check() error {
	const op = "gdn_pre"
	p := a.P
	if err := checkElems(op, "qkv", p.T, p.Channels()); err != nil {
		return err
	}
	if err := p.check(op); err != nil {
		return err
	}
	if p.ConvK < 1 {
		return fmt.Errorf("%s: ConvK=%d must be >= 1: %w", op, p.ConvK, ErrShape)
	}
	C, T, K := p.Channels(), p.T, p.ConvK
	return firstErr(
		need(op, "q", a.Q, F32, T*p.Hk*p.Dk), need(op, "k", a.K, F32, T*p.Hk*p.Dk), need(op, "v", a.V, F32, T*p.Hv*p.Dv),
		need(op, "g", a.G, F32, T*p.Hv), need(op, "beta", a.Beta, F32, T*p.Hv),
		need(op, "qkv", a.QKV, F32, T*C), need(op, "a", a.A, F32, T*p.Hv), need(op, "b", a.B, F32, T*p.Hv),
		need(op, "convState", a.ConvState, F32, (K-1)*C), needVec(op, "convW", a.ConvW, C*K),
		needVec(op, "ALog", a.ALog, p.Hv), needVec(op, "dtBias", a.DtBias, p.Hv))
}

// GDNScan is gdn_scan, the gated delta rule over T tokens for every value head h (reading qk
// head P.Map(h)) from the fp32 state S_h [Dk, Dv]:
//
//	S = exp(g_t) S;  delta = beta_t (v_t - S^T k_t);  S = S + k_t delta^T;  o_t = S^T q_t
//
// Q, K [T, Hk, Dk] already l2-normalised (Q scaled by Dk^-0.5) unless NormQK, V [T, Hv, Dv],
// G, Beta [T, Hv], State [Hv, Dk, Dv] read and replaced by the final state, O [T, Hv, Dv]; all
// F32. Mode picks the algorithm (ScanAuto: the backend's default; Chunked: the WY form of
// flash-linear-attention over chunks of GDNChunk tokens; Recurrent: token by token); all agree
// within float32 rounding. NaN and Inf are not scanned for: a NaN in g reaches the value heads
// that read it.
type GDNScan struct {
	O, State         Tensor
	Q, K, V, G, Beta Tensor
	P                GDNParams
	Mode             ScanMode
	// NormQK scans l2-normalised copies of raw q and k: per head over Dk,
	// x / sqrt(sum x^2 + 1e-6), q further times Dk^-0.5 (the normalisation of GDNPre, i.e.
	// transformers' l2norm with use_qk_l2norm_in_kernel), for callers that hold the
	// projections before it. Q and K are not modified.
	NormQK bool
}

// Check validates the shapes. Errors wrap ErrShape or ErrInvalidArgument.
func (a GDNScan) Check() error {
	const op = "gdn_scan"
	p := a.P
	if err := firstErr(checkElems(op, "v", p.T, p.Hv, p.Dv), checkElems(op, "q", p.T, p.Hk, p.Dk), checkElems(op, "state", p.Hv, p.Dk, p.Dv)); err != nil {
		return err
	}
	if err := p.check(op); err != nil {
		return err
	}
	if a.Mode != ScanAuto && a.Mode != Chunked && a.Mode != Recurrent {
		return fmt.Errorf("%s: unknown scan mode %d: %w", op, int(a.Mode), ErrInvalidArgument)
	}
	T := p.T
	return firstErr(
		need(op, "o", a.O, F32, T*p.Hv*p.Dv), need(op, "state", a.State, F32, p.Hv*p.Dk*p.Dv),
		need(op, "q", a.Q, F32, T*p.Hk*p.Dk), need(op, "k", a.K, F32, T*p.Hk*p.Dk), need(op, "v", a.V, F32, T*p.Hv*p.Dv),
		need(op, "g", a.G, F32, T*p.Hv), need(op, "beta", a.Beta, F32, T*p.Hv))
}

// GDNPost is gdn_post, the gated RMSNorm of the scan output per value head:
// y = W * (o * rsqrt(mean(o^2) + Eps)) * act(z), act = silu (Qwen3-Next) or sigmoid
// (Qwen3.8-Flash-Next). Y, O, Z [T, Hv, Dv] F32; W [Dv]; Y may alias O or Z.
type GDNPost struct {
	Y, O, Z   Tensor
	T, Hv, Dv int
	W         []float32
	Eps       float32
	Act       GateAct
}

// Check validates the shapes. Errors wrap ErrShape or ErrInvalidArgument.
func (a GDNPost) Check() error {
	const op = "gdn_post"
	if a.T <= 0 || a.Hv <= 0 || a.Dv <= 0 {
		return fmt.Errorf("%s: T=%d Hv=%d Dv=%d must be positive: %w", op, a.T, a.Hv, a.Dv, ErrShape)
	}
	if a.Act != ActSilu && a.Act != ActSigmoid {
		return fmt.Errorf("%s: unknown gate activation %d: %w", op, int(a.Act), ErrInvalidArgument)
	}
	if err := checkElems(op, "o", a.T, a.Hv, a.Dv); err != nil {
		return err
	}
	n := a.T * a.Hv * a.Dv
	return firstErr(checkEps(op, a.Eps), need(op, "y", a.Y, F32, n), need(op, "o", a.O, F32, n),
		need(op, "z", a.Z, F32, n), needVec(op, "w", a.W, a.Dv))
}
