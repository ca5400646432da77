package op

import "fmt"

// MatMul is y [T, N] = x [T, K] W^T for a weight W [N, K] (transformers' nn.Linear without
// bias): float32 activations and accumulation, BF16/F16 weights widened exactly, QAffine weights
// dequantized (scale * q + bias per group, rounded once to float32: optest.Dequant) and FP8Block
// and QFloat weights decoded (code * scale rounded once: optest.DequantFP8, DequantQFloat) inside
// the kernel. Kernels: CPU column-blocked SGEMM through internal/blas (packed blocks dequantized
// into per-worker scratch first; a weight of fewer blocks than cores in tiles of token rows), or
// the int8 and bf16 compute kernels of internal/qdot in those modes; Metal gemm_w16 / gemm_w32, qmm_affine / qmv_affine, qmm_fp /
// qmv_fp, and for GGML weights (decoded as optest.DequantGGML) qmm_gg / qmv_gg.
type MatMul struct {
	Y, X Tensor // F32 [T, N], F32 [T, K]
	T    int    // rows; 0 is allowed (nothing to do)
	W    *Matrix
}

// Check validates the shapes. Errors wrap ErrShape, ErrDType or ErrInvalidArgument (nil weight).
func (a MatMul) Check() error {
	const op = "MatMul"
	if err := a.W.Validate(op); err != nil {
		return err
	}
	if a.T < 0 {
		return fmt.Errorf("%s: %w: T=%d", op, ErrShape, a.T)
	}
	if err := firstErr(checkElems(op, "x", a.T, a.W.K), checkElems(op, "y", a.T, a.W.N)); err != nil {
		return err
	}
	return firstErr(need(op, "x", a.X, F32, a.T*a.W.K), need(op, "y", a.Y, F32, a.T*a.W.N))
}

// RMSNorm is RMSNorm1p per row: y = x * rsqrt(mean(x^2) + eps) * (1 + w) over rows of D (the
// zero-centred norm of qwen3_next and qwen4_exp: Qwen3NextRMSNorm, Qwen4ExpTextRMSNorm). y may
// alias x.
type RMSNorm struct {
	Y, X    Tensor // F32 [Rows, D]
	Rows, D int
	W       []float32 // [D]
	Eps     float32
}

// Check validates the shapes. Errors wrap ErrShape or ErrInvalidArgument (eps).
func (a RMSNorm) Check() error {
	const op = "RMSNorm1p"
	if a.Rows < 0 || a.D <= 0 {
		return fmt.Errorf("%s: %w: rows=%d D=%d", op, ErrShape, a.Rows, a.D)
	}
	if err := checkElems(op, "x", a.Rows, a.D); err != nil {
		return err
	}
	return firstErr(need(op, "x", a.X, F32, a.Rows*a.D), need(op, "y", a.Y, F32, a.Rows*a.D),
		needVec(op, "w", a.W, a.D), checkEps(op, a.Eps))
}

// Add is H += U (+ V): the qwen3_next residual add (V, optional, is the gated shared expert).
type Add struct {
	H, U, V Tensor // F32, all of one length; V may be nil
}

// Check validates the shapes. Errors wrap ErrShape.
func (a Add) Check() error {
	const op = "Add"
	if !Present(a.H) {
		return fmt.Errorf("%s: %w: H is missing", op, ErrInvalidArgument)
	}
	n := a.H.Len()
	if err := firstErr(need(op, "H", a.H, F32, n), need(op, "u", a.U, F32, n)); err != nil {
		return err
	}
	if Present(a.V) {
		return need(op, "v", a.V, F32, n)
	}
	return nil
}

// SigmoidMul is o *= sigmoid(g) element-wise: the output gate of gated attention
// (attn .* sigmoid(gate) in Qwen3NextAttention / Qwen4ExpTextAttention).
type SigmoidMul struct {
	O, G Tensor // F32, one length (any shape)
}

// Check validates the shapes. Errors wrap ErrShape.
func (a SigmoidMul) Check() error {
	const op = "SigmoidMul"
	if !Present(a.O) {
		return fmt.Errorf("%s: %w: o is missing", op, ErrInvalidArgument)
	}
	return firstErr(need(op, "o", a.O, F32, a.O.Len()), need(op, "gate", a.G, F32, a.O.Len()))
}

// SwiGLU is h = silu(gu[:, :I]) * gu[:, I:] per row (the gated MLP activation; gate columns first),
// or, with U, h = silu(gu) * u for the gate gu and the up product u apart (a weight whose gate and
// up projections are stored apart and multiplied one by one).
type SwiGLU struct {
	H, GU   Tensor // F32 [Rows, I], F32 [Rows, 2I] (or [Rows, I] with U)
	U       Tensor // nil, or F32 [Rows, I]
	Rows, I int
}

// Check validates the shapes. Errors wrap ErrShape.
func (a SwiGLU) Check() error {
	const op = "SwiGLU"
	if a.Rows < 0 || a.I <= 0 {
		return fmt.Errorf("%s: %w: rows=%d I=%d", op, ErrShape, a.Rows, a.I)
	}
	if err := checkElems(op, "gu", a.Rows, 2, a.I); err != nil {
		return err
	}
	if Present(a.U) {
		return firstErr(need(op, "h", a.H, F32, a.Rows*a.I), need(op, "gu", a.GU, F32, a.Rows*a.I), need(op, "u", a.U, F32, a.Rows*a.I))
	}
	return firstErr(need(op, "h", a.H, F32, a.Rows*a.I), need(op, "gu", a.GU, F32, 2*a.Rows*a.I))
}

// RowSigmoidScale is x[r, :] *= sigmoid(s[r]) (the shared expert's gate,
// sigmoid(shared_expert_gate(x)) * shared_expert(x)).
type RowSigmoidScale struct {
	X, S    Tensor // F32 [Rows, D], F32 [Rows]
	Rows, D int
}

// Check validates the shapes. Errors wrap ErrShape.
func (a RowSigmoidScale) Check() error {
	const op = "RowSigmoidScale"
	if a.Rows < 0 || a.D <= 0 {
		return fmt.Errorf("%s: %w: rows=%d D=%d", op, ErrShape, a.Rows, a.D)
	}
	if err := checkElems(op, "x", a.Rows, a.D); err != nil {
		return err
	}
	return firstErr(need(op, "x", a.X, F32, a.Rows*a.D), need(op, "s", a.S, F32, a.Rows))
}

// Copy copies Src into Dst (one dtype, one length): state backups and trace copies inside a Pass.
type Copy struct {
	Dst, Src Tensor
}

// Check validates the shapes. Errors wrap ErrShape or ErrDType.
func (a Copy) Check() error {
	const op = "Copy"
	if !Present(a.Src) {
		return fmt.Errorf("%s: %w: src is missing", op, ErrInvalidArgument)
	}
	return need(op, "dst", a.Dst, a.Src.DType(), a.Src.Len())
}

// Embed gathers token embeddings into the S streams: H[t, s, :] = Table[Tokens[t], :] (widened
// to float32 exactly; a QAffine, FP8Block or QFloat table's gathered rows dequantized, exactly as
// MatMul decodes them) for every stream s (transformers' embed_tokens, repeated into the
// hyper-connection streams of qwen4_exp; S = 1 for qwen3_next).
type Embed struct {
	H      Tensor // F32 [T, S*D]
	Tokens Tensor // I32 [T], each in [0, Table.N)
	T, S   int
	Table  *Matrix // [vocab, D]
}

// Check validates the shapes (not the token values: CheckTokens). Errors wrap ErrShape,
// ErrDType or ErrInvalidArgument.
func (a Embed) Check() error {
	const op = "Embed"
	if err := a.Table.Validate(op); err != nil {
		return err
	}
	if a.T < 0 || a.S <= 0 {
		return fmt.Errorf("%s: %w: T=%d S=%d", op, ErrShape, a.T, a.S)
	}
	if err := checkElems(op, "H", a.T, a.S, a.Table.K); err != nil {
		return err
	}
	return firstErr(need(op, "H", a.H, F32, a.T*a.S*a.Table.K), need(op, "tokens", a.Tokens, I32, a.T))
}

// CheckTokens validates host token ids against the table. Errors wrap ErrInvalidArgument.
func (a Embed) CheckTokens(tokens []int32) error {
	for i, t := range tokens {
		if t < 0 || int(t) >= a.Table.N {
			return fmt.Errorf("Embed: %w: token %d at index %d is outside [0, %d)", ErrInvalidArgument, t, i, a.Table.N)
		}
	}
	return nil
}
