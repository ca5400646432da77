package op

import "fmt"

// PLEApply adds one PLE layer's output to the raw streams H [T, S*D] in place, for the hashed
// ids [T, Heads] of the same tokens (PLEHash.IDs; Heads = EmbedDim/HeadDim):
//
//	emb    = concat over heads of table[ids[t, h]]                      [T, EmbedDim]
//	key    = grouped RMSNorm1p(Key emb; NormKey)                        [T, S, D]
//	value  = Value emb                                                  [T, D]
//	query  = grouped RMSNorm1p(H; NormQuery)                            [T, S, D]
//	gate_s = key_s . query_s / sqrt(D); gate_s = sign(gate_s) * sqrt(max(|gate_s|, 1e-6))
//	gv_s   = sigmoid(gate_s) * value;  gvn = grouped RMSNorm1p(gv; NormConv)
//	conv   = depthwise causal conv of gvn over time, kernel ConvK, dilation Dilation:
//	         conv[t, c] = sum_j ConvW[c, j] * gvn[t - (ConvK-1-j)*Dilation, c]
//	H     += gv + silu(conv)
//
// The table is W.Table, or Parts. ConvState [(ConvK-1)*Dilation, S*D] holds the gvn of the
// steps before this call (zeros at the start of a sequence) and is replaced by the last steps of
// the history, so calls over consecutive chunks equal one call over the whole stream. Source:
// Qwen4ExpTextPLELayer.
type PLEApply struct {
	H   Tensor // F32 [T, S*D]
	T   int
	IDs Tensor // I32 [T, Heads], rows of the table (CheckIDs)
	W   *PLEWeights
	// Parts, when set, is the table instead of W.Table (which must then be nil): its row blocks
	// of PartRows rows each, in order, so table row r is row r % PartRows of Parts[r / PartRows]
	// (Row). The published releases store the table so (shard_k tensors: 128 blocks, 102 GB in
	// Qwen3.8-Flash-Next), and the blocks stay views of the files: each backend gathers the rows
	// the ids name from them (a prompt reads a few MB). Every part is [PartRows, HeadDim], all of
	// one dtype and quantization format. The results are those of the unsplit table, bitwise.
	Parts     []*Matrix
	PartRows  int
	ConvState Tensor // F32 [W.ConvStateLen()]
	Eps       float32
}

// Check validates the shapes (not the id values: CheckIDs). Errors wrap ErrShape, ErrDType or
// ErrInvalidArgument (also for no table, or both W.Table and Parts).
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
	if err := a.checkParts(op); err != nil {
		return err
	}
	return firstErr(need(op, "H", a.H, F32, a.T*a.W.S*a.W.D), need(op, "ids", a.IDs, I32, a.T*a.W.Heads()),
		need(op, "convState", a.ConvState, F32, a.W.ConvStateLen()), checkEps(op, a.Eps))
}

// checkParts checks that exactly one table is given and the parts' shapes and formats.
func (a PLEApply) checkParts(op string) error {
	switch {
	case a.W.Table != nil && a.Parts != nil:
		return fmt.Errorf("%s: %w: both a table (W.Table) and its parts (Parts)", op, ErrInvalidArgument)
	case a.W.Table != nil:
		return nil
	case len(a.Parts) == 0:
		return fmt.Errorf("%s: %w: no table (W.Table) and no parts (Parts)", op, ErrInvalidArgument)
	}
	if a.PartRows <= 0 || int64(a.PartRows)*int64(len(a.Parts)) > MaxElems {
		return fmt.Errorf("%s: %w: %d parts of %d rows", op, ErrShape, len(a.Parts), a.PartRows)
	}
	first := a.Parts[0]
	for k, m := range a.Parts {
		if err := m.Validate(op); err != nil {
			return fmt.Errorf("table part %d: %w", k, err)
		}
		if m.N != a.PartRows || m.K != a.W.HeadDim {
			return fmt.Errorf("%s: %w: table part %d is [%d, %d], want [%d, %d]", op, ErrShape, k, m.N, m.K, a.PartRows, a.W.HeadDim)
		}
		if m.format() != first.format() {
			return fmt.Errorf("%s: %w: table part %d is %s, part 0 %s", op, ErrDType, k, m.format(), first.format())
		}
	}
	return nil
}

// TableRows is the number of rows of the table: W.Table's, or len(Parts) * PartRows.
func (a PLEApply) TableRows() int {
	if a.W.Table != nil {
		return a.W.Table.N
	}
	return len(a.Parts) * a.PartRows
}

// Row returns the matrix that holds table row id and the row's index in it (W.Table and id, or
// its part and id % PartRows), for an id CheckIDs accepted.
func (a PLEApply) Row(id int32) (*Matrix, int) {
	if a.W.Table != nil {
		return a.W.Table, int(id)
	}
	return a.Parts[int(id)/a.PartRows], int(id) % a.PartRows
}

// CheckIDs validates host ids against the table (Check first). Errors wrap ErrInvalidArgument.
func (a PLEApply) CheckIDs(ids []int32) error {
	rows := a.TableRows()
	for i, id := range ids {
		if id < 0 || int(id) >= rows {
			return fmt.Errorf("PLEApply: %w: ids[%d] = %d outside the table's %d rows", ErrInvalidArgument, i, id, rows)
		}
	}
	return nil
}
