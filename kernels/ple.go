package kernels

import (
	"github.com/stratakernels/strata/op"

	"math"
)

// pleApply adds one PLE layer's output to the raw streams H [T, S*D] in place, for the hashed
// ids [T, Heads] of the same tokens (op.PLEHash.IDs; Heads = EmbedDim/HeadDim):
//
//	emb    = concat over heads of Table[ids[t, h]]                      [T, EmbedDim]
//	key    = grouped RMSNorm1p(Key emb; NormKey)                        [T, S, D]
//	value  = Value emb                                                  [T, D]
//	query  = grouped RMSNorm1p(H; NormQuery)                            [T, S, D]
//	gate_s = key_s . query_s / sqrt(D); gate_s = sign(gate_s) * sqrt(max(|gate_s|, 1e-6))
//	gv_s   = sigmoid(gate_s) * value;  gvn = grouped RMSNorm1p(gv; NormConv)
//	conv   = depthwise causal conv of gvn over time, kernel ConvK, dilation Dilation:
//	         conv[t, c] = sum_j ConvW[c, j] * gvn[t - (ConvK-1-j)*Dilation, c]
//	H     += gv + silu(conv)
//
// convState [(ConvK-1)*Dilation, S*D] holds the gvn of the steps before this call (zeros at
// the start of a sequence) and is replaced by the last steps of the history, so calls over
// consecutive chunks equal one call over the whole stream. Dots and the conv sum run in
// float64. Source: Qwen4ExpTextPLELayer. Parallel over tokens and channels.
// Errors wrap op.ErrShape, op.ErrInvalidArgument (an id outside the table) or op.ErrDType.
func pleApply(H []float32, T int, ids []int32, w *op.PLEWeights, convState []float32, eps float32) error {
	return execPLEApply(op.PLEApply{H: op.HostF32(H), T: T, IDs: op.HostI32(ids), W: w, ConvState: op.HostF32(convState), Eps: eps})
}

func execPLEApply(a op.PLEApply) error {
	if err := a.Check(); err != nil {
		return err
	}
	H, T, w, convState, eps := a.H.F32(), a.T, a.W, a.ConvState.F32(), a.Eps
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	heads, C := E/Hd, S*D
	ids := a.IDs.I32()
	if err := a.CheckIDs(ids); err != nil {
		return err
	}
	// The rows of a split table are read from its parts in place (views of the checkpoint).
	emb := make([]float32, T*E)
	parallelFor(T, 16, func(lo, hi int) {
		first, _ := a.Row(0)
		sb := make([]float32, packedScratch(first, 1)) // every part has the first's format
		for i := lo * heads; i < hi*heads; i++ {
			m, r := a.Row(ids[i])
			rowF32(emb[i*Hd:(i+1)*Hd], m, r, sb)
		}
	})
	if T == 0 {
		return nil
	}
	key := make([]float32, T*C)
	value := make([]float32, T*D)
	if err := matMulChecked(key, emb, T, w.Key); err != nil {
		return err
	}
	if err := matMulChecked(value, emb, T, w.Value); err != nil {
		return err
	}
	gv := make([]float32, T*C)
	gvn := make([]float32, T*C)
	invSqrtD := 1 / math.Sqrt(float64(D))
	parallelFor(T, 4, func(lo, hi int) {
		q := make([]float32, C)
		for t := lo; t < hi; t++ {
			kt := key[t*C : (t+1)*C]
			grNormRow(kt, kt, w.NormKey, D, eps)
			grNormRow(q, H[t*C:(t+1)*C], w.NormQuery, D, eps)
			vt := value[t*D : (t+1)*D]
			for s := 0; s < S; s++ {
				var dot float64
				for d := 0; d < D; d++ {
					dot += float64(kt[s*D+d]) * float64(q[s*D+d])
				}
				g := float32(dot * invSqrtD)
				if g != 0 { // torch.sign(0) = 0 keeps a zero gate at zero
					g = float32(math.Copysign(math.Sqrt(math.Max(math.Abs(float64(g)), 1e-6)), float64(g)))
				}
				sg := sigmoid32(g)
				row := gv[t*C+s*D : t*C+(s+1)*D]
				for d, v := range vt {
					row[d] = sg * v
				}
			}
			grNormRow(gvn[t*C:(t+1)*C], gv[t*C:(t+1)*C], w.NormConv, D, eps)
		}
	})
	K, dil := w.ConvK(), w.Dilation
	L := (K - 1) * dil
	// at(t, c) is gvn of step t, reading the carried state for t < 0.
	at := func(t, c int) float64 {
		if t < 0 {
			return float64(convState[(L+t)*C+c])
		}
		return float64(gvn[t*C+c])
	}
	parallelFor(T, 4, func(lo, hi int) {
		conv := make([]float32, C)
		for t := lo; t < hi; t++ {
			for c := 0; c < C; c++ {
				var acc float64
				for j := 0; j < K; j++ {
					acc += float64(w.ConvW[c*K+j]) * at(t-(K-1-j)*dil, c)
				}
				conv[c] = float32(acc)
			}
			siluRow(conv, conv, 1)
			for c, v := range conv {
				H[t*C+c] += gv[t*C+c] + v
			}
		}
	})
	// New state: the last L steps of (old state ++ gvn).
	if T >= L {
		copy(convState, gvn[(T-L)*C:])
	} else {
		copy(convState, convState[T*C:])
		copy(convState[(L-T)*C:], gvn)
	}
	return nil
}
