package op

import (
	"fmt"
	"math"
)

// QSAPrep is qsa_prep, the attention layer's step between the projections and the attention:
// from QG [T, Hq, 2D] (q_proj's output, [query | gate] per head) and K, V [T, Hkv, D] (k_proj,
// v_proj) it writes Q = RoPE(RMSNorm1p(query; QNorm)) and Gate [T, Hq, D], and the cache rows
// Pos0..Pos0+T-1 of KC = RoPE(RMSNorm1p(k; KNorm)) and VC = v (KC, VC [>= Pos0+T, Hkv, D]; other
// rows are not touched). RoPE at positions Pos0+t over the first Rot dims (rotate_half pairs,
// inv_freq from RoPEInvFreq, angles in float64). Source: Qwen3NextAttention /
// Qwen4ExpTextAttention (q_norm, k_norm, apply_rotary_pos_emb, the cache update).
type QSAPrep struct {
	Q, Gate, KC, VC, QG, K, V Tensor // all F32
	QNorm, KNorm              []float32
	T, Hq, Hkv, D, Rot, Pos0  int
	Theta                     float64
	Eps                       float32
}

// Check validates the shapes. Errors wrap ErrShape or ErrInvalidArgument.
func (a QSAPrep) Check() error {
	const op = "qsa_prep"
	if a.T <= 0 || a.Hq <= 0 || a.Hkv <= 0 || a.D <= 0 {
		return fmt.Errorf("%s: %w: T=%d Hq=%d Hkv=%d D=%d must be positive", op, ErrShape, a.T, a.Hq, a.Hkv, a.D)
	}
	if err := checkRoPE(op, a.D, a.Rot, a.Pos0, a.Theta); err != nil {
		return err
	}
	if err := firstErr(checkEps(op, a.Eps), checkElems(op, "qg", a.T, a.Hq, 2*a.D), checkElems(op, "k/v cache", a.Pos0+a.T, a.Hkv, a.D)); err != nil {
		return err
	}
	nq, nk := a.T*a.Hq*a.D, a.T*a.Hkv*a.D
	nkv := (a.Pos0 + a.T) * a.Hkv * a.D
	return firstErr(need(op, "q", a.Q, F32, nq), need(op, "gate", a.Gate, F32, nq), need(op, "qg", a.QG, F32, 2*nq),
		need(op, "k", a.K, F32, nk), need(op, "v", a.V, F32, nk),
		needAtLeast(op, "k cache", a.KC, F32, nkv), needAtLeast(op, "v cache", a.VC, F32, nkv),
		needVec(op, "qNorm", a.QNorm, a.D), needVec(op, "kNorm", a.KNorm, a.D))
}

func checkRoPE(op string, d, rot, pos0 int, theta float64) error {
	if rot <= 0 || rot > d || rot%2 != 0 {
		return fmt.Errorf("%s: %w: rot=%d with head dim %d (want even, 0 < rot <= dim)", op, ErrInvalidArgument, rot, d)
	}
	if !(theta > 0) || math.IsInf(theta, 0) {
		return fmt.Errorf("%s: %w: theta=%g", op, ErrInvalidArgument, theta)
	}
	if pos0 < 0 || pos0 > math.MaxInt32 {
		return fmt.Errorf("%s: %w: pos0=%d", op, ErrInvalidArgument, pos0)
	}
	return nil
}

// QSAIndex is the QSA indexer of qwen4_exp for one prefill chunk (transformers'
// Qwen4ExpIndexer): from IQK [T, (NHeads+1)*Dim] (index_qk_proj's output: NHeads query heads then
// one key head per token) it writes the prepared queries IQ = RoPE(RMSNorm1p(q; QNorm)) [T,
// NHeads, Dim], appends the raw keys at rows Pos0..Pos0+T-1 of Keys [>= Pos0+T, Dim] (the session
// cache of raw index keys), and selects, for each query at position p, the top min(Budget/Ratio,
// nb) blocks of Ratio tokens by score_b = sum_h relu(q_h . key_b) / sqrt(Dim), with
// key_b = RoPE(RMSNorm1p(mean of the block's raw keys; KNorm)) at the block's first position,
// exact ties to the lower block and NaN ranking last, plus the tail of the last incomplete block.
// Plan is the selection layout (QSAPlan(P)); the selected tokens of the sparse rows, ascending,
// are written to Tok [Plan.Offsets[T]] I32. Dense rows (p+1 <= Budget + Ratio - 1 when Ratio
// divides Budget) list nothing.
type QSAIndex struct {
	Plan               *Selection
	Tok, IQ, Keys, IQK Tensor
	QNorm, KNorm       []float32
	P                  IndexerParams
}

// Check validates the shapes and that Plan is P's layout. Errors wrap ErrShape or
// ErrInvalidArgument.
func (a QSAIndex) Check() error {
	const op = "qsa_index"
	p := a.P
	if err := p.Check(op); err != nil {
		return err
	}
	if p.Rot == 0 {
		return fmt.Errorf("%s: %w: rotary dim 0", op, ErrInvalidArgument)
	}
	if err := firstErr(checkElems(op, "index qk", p.T, p.NHeads+1, p.Dim), checkElems(op, "index keys", p.Pos0+p.T, p.Dim)); err != nil {
		return err
	}
	if a.Plan == nil {
		return fmt.Errorf("%s: %w: nil selection plan", op, ErrInvalidArgument)
	}
	want := QSAPlan(p)
	if err := a.Plan.checkLayout(op, p.T, int(want.Offsets[p.T])); err != nil {
		return err
	}
	for t := 0; t <= p.T; t++ {
		if a.Plan.Offsets[t] != want.Offsets[t] || (t < p.T && a.Plan.Dense[t] != want.Dense[t]) {
			return fmt.Errorf("%s: %w: selection plan row %d differs from QSAPlan's layout", op, ErrInvalidArgument, t)
		}
	}
	return firstErr(need(op, "tokens", a.Tok, I32, int(want.Offsets[p.T])), need(op, "iq", a.IQ, F32, p.T*p.NHeads*p.Dim),
		need(op, "iqk", a.IQK, F32, p.T*(p.NHeads+1)*p.Dim), needAtLeast(op, "index keys", a.Keys, F32, (p.Pos0+p.T)*p.Dim),
		needVec(op, "qNorm", a.QNorm, p.Dim), needVec(op, "kNorm", a.KNorm, p.Dim))
}

// Attention is causal, optionally QSA-sparse grouped-query attention for a prefill chunk:
//
//	O[t, h] = sum_s softmax_s(Scale * Q[t, h] . K[s, h/HPG]) V[s, h/HPG]
//
// over the positions s that row t may attend: 0..Pos0+t when Sel is nil or Sel.Dense[t], else
// the tokens Tok[Sel.Offsets[t]:Sel.Offsets[t+1]]. LSE [T, Hq] (optional) receives the natural
// log-sum-exp of the scaled scores. Q, O [T, Hq, D]; K, V the cache [>= Pos0+T, Hkv, D] (later rows
// ignored). Source: eager_attention_forward of Qwen3NextAttention / Qwen4ExpTextAttention with
// the causal and QSA masks, computed as a blocked online softmax (FlashAttention).
//
// NaN and Inf are not scanned for. On the CPU backend (package kernels) they propagate under
// IEEE rules into the rows that attend them and only those: a NaN in Q[t, h], or in a key row
// that row attends, makes O[t, h] and LSE[t, h] NaN; a NaN in element j of an attended value
// row makes element j of O[t, h] NaN; an infinity gives what the formula's arithmetic gives
// (a +Inf score makes the row NaN); rows that do not attend a position (later ones, unlisted
// ones, other KV heads) are bitwise as without it.
type Attention struct {
	O, LSE, Q, K, V Tensor // F32; LSE may be nil
	P               AttnParams
	Sel             *Selection // nil: dense causal; else the layout of Tok
	Tok             Tensor     // I32 [Sel.Offsets[T]] with Sel
}

// Check validates the shapes and the selection's layout (not its tokens: Selection.CheckTokens).
// Errors wrap ErrShape or ErrInvalidArgument.
func (a Attention) Check() error {
	const op = "attention"
	p := a.P
	if err := firstErr(checkElems(op, "q", p.T, p.Hq, p.D), checkElems(op, "k/v cache", p.Pos0+p.T, p.Hkv, p.D)); err != nil {
		return err
	}
	if p.T <= 0 || p.Hq <= 0 || p.Hkv <= 0 || p.D <= 0 {
		return fmt.Errorf("%s: T=%d Hq=%d Hkv=%d D=%d must be positive: %w", op, p.T, p.Hq, p.Hkv, p.D, ErrShape)
	}
	if p.Pos0 < 0 {
		return fmt.Errorf("%s: pos0=%d is negative: %w", op, p.Pos0, ErrInvalidArgument)
	}
	if p.Hq%p.Hkv != 0 {
		return fmt.Errorf("%s: Hkv=%d does not divide Hq=%d (HPG must be an integer): %w", op, p.Hkv, p.Hq, ErrInvalidArgument)
	}
	if !(p.Scale > 0) || math.IsInf(float64(p.Scale), 1) {
		return fmt.Errorf("%s: scale=%v must be finite and positive: %w", op, p.Scale, ErrInvalidArgument)
	}
	nq := p.T * p.Hq * p.D
	nkv := (p.Pos0 + p.T) * p.Hkv * p.D
	if err := firstErr(need(op, "q", a.Q, F32, nq), need(op, "o", a.O, F32, nq),
		needAtLeast(op, "k", a.K, F32, nkv), needAtLeast(op, "v", a.V, F32, nkv)); err != nil {
		return err
	}
	if a.K.Len()%(p.Hkv*p.D) != 0 || a.V.Len()%(p.Hkv*p.D) != 0 {
		return fmt.Errorf("%s: len(k)=%d len(v)=%d, want multiples of Hkv*D=%d: %w", op, a.K.Len(), a.V.Len(), p.Hkv*p.D, ErrShape)
	}
	if Present(a.LSE) {
		if err := need(op, "lse", a.LSE, F32, p.T*p.Hq); err != nil {
			return err
		}
	}
	if a.Sel == nil {
		if Present(a.Tok) {
			return fmt.Errorf("%s: %w: selection tokens without a selection layout", op, ErrInvalidArgument)
		}
		return nil
	}
	if !Present(a.Tok) {
		return fmt.Errorf("%s: %w: a selection layout without its tokens", op, ErrInvalidArgument)
	}
	if a.Tok.DType() != I32 {
		return fmt.Errorf("%s: %w: selection tokens are %v, want I32", op, ErrDType, a.Tok.DType())
	}
	return a.Sel.checkLayout(op, p.T, a.Tok.Len())
}
