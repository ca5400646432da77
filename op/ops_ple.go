package op

import "fmt"

// PLEApply adds one PLE layer's output to the raw streams H [T, S*D] in place, for the hashed
// ids [T, Heads] of the same tokens (PLEHash.IDs; Heads = EmbedDim/HeadDim):
//
//	emb    = concat over heads of Table[ids[t, h]] (or Emb, gathered)   [T, EmbedDim]
//	key    = grouped RMSNorm1p(Key emb; NormKey)                        [T, S, D]
//	value  = Value emb                                                  [T, D]
//	query  = grouped RMSNorm1p(H; NormQuery)                            [T, S, D]
//	gate_s = key_s . query_s / sqrt(D); gate_s = sign(gate_s) * sqrt(max(|gate_s|, 1e-6))
//	gv_s   = sigmoid(gate_s) * value;  gvn = grouped RMSNorm1p(gv; NormConv)
//	conv   = depthwise causal conv of gvn over time, kernel ConvK, dilation Dilation:
//	         conv[t, c] = sum_j ConvW[c, j] * gvn[t - (ConvK-1-j)*Dilation, c]
//	H     += gv + silu(conv)
//
// ConvState [(ConvK-1)*Dilation, S*D] holds the gvn of the steps before this call (zeros at the
// start of a sequence) and is replaced by the last steps of the history, so calls over
// consecutive chunks equal one call over the whole stream. Source: Qwen4ExpTextPLELayer.
type PLEApply struct {
	H   Tensor // F32 [T, S*D]
	T   int
	IDs Tensor // I32 [T, Heads]; not read when Emb is set
	// Emb, when set, holds the table rows of the ids already gathered, F32 [T, EmbedDim] (heads
	// in order): for a table split over several tensors (the published releases store it as
	// row blocks shard_k), which the caller gathers on the host (the rows a prompt touches are
	// a few MB of a table of up to ~100 GB). W.Table is then not read and may be nil.
	Emb       Tensor
	W         *PLEWeights
	ConvState Tensor // F32 [W.ConvStateLen()]
	Eps       float32
}

// Check validates the shapes (not the id values: CheckIDs). Errors wrap ErrShape, ErrDType or
// ErrInvalidArgument (also for neither Emb nor W.Table given).
func (a PLEApply) Check() error {
	const op = "PLEApply"
	if err := a.W.Validate(op); err != nil {
		return err
	}
	if a.T < 0 {
		return fmt.Errorf("%s: %w: T=%d", op, ErrShape, a.T)
	}
	if err := checkElems(op, "H", a.T, a.W.S, a.W.D); err != nil {
		return err
	}
	in := need(op, "ids", a.IDs, I32, a.T*a.W.Heads())
	switch {
	case Present(a.Emb):
		in = need(op, "emb", a.Emb, F32, a.T*a.W.EmbedDim)
	case a.W.Table == nil:
		in = fmt.Errorf("%s: %w: no table (W.Table) and no gathered rows (Emb)", op, ErrInvalidArgument)
	}
	return firstErr(need(op, "H", a.H, F32, a.T*a.W.S*a.W.D), in,
		need(op, "convState", a.ConvState, F32, a.W.ConvStateLen()), checkEps(op, a.Eps))
}

// CheckIDs validates host ids against the table (Check first; not needed with Emb). Errors wrap
// ErrInvalidArgument.
func (a PLEApply) CheckIDs(ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= a.W.Table.N {
			return fmt.Errorf("PLEApply: %w: ids[%d] = %d outside the table's %d rows", ErrInvalidArgument, i, id, a.W.Table.N)
		}
	}
	return nil
}
