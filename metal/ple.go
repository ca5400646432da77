package metal

import (
	"fmt"

	"github.com/stratakernels/strata/kernels"
)

// Host side of the PLE kernels of prompt.metal (ple_gather, ple_gate, ple_conv, ple_state).

// PLEApply is one PLE layer on the device (kernels.PLEApply: same arguments and contract): the
// table rows of ids [T, Heads] gathered into emb [T, EmbedDim] (ple_gather), key = emb Key^T and
// value = emb Value^T (gemm_w16/gemm_w32), the gate and the grouped norms per token (ple_gate),
// H += gv + silu(dilated causal conv of gvn) with the carried conv state (ple_conv), and the state
// advanced (ple_state), in one command buffer. The hashed ids come from kernels.PLEHash on the
// host: that is integer bookkeeping over the token history (int64 multiply-XOR and modulo), not
// worth a kernel. H [T, S*D] and convState [(ConvK-1)*Dilation, S*D] are updated in place.
// float32 sums (the CPU op sums dots and the conv in float64): agreement about 1e-6 relative.
// Limits: S <= 8, (ConvK-1)*Dilation <= 32. Errors wrap kernels.ErrShape, kernels.ErrArg (an id
// outside the table) or kernels.ErrDType.
func (b *Backend) PLEApply(H []float32, T int, ids []int32, w *kernels.PLEWeights, convState []float32, eps float32) error {
	const op = "PLEApply"
	if w == nil || w.S <= 0 || w.S > 8 || w.D <= 0 || w.HeadDim <= 0 || w.EmbedDim <= 0 || w.EmbedDim%w.HeadDim != 0 ||
		w.Dilation <= 0 || w.ConvK() < 1 || len(w.NormKey) != w.S*w.D || len(w.NormQuery) != w.S*w.D || len(w.NormConv) != w.S*w.D {
		return fmt.Errorf("%s: %w: PLE weights missing or inconsistent (S must be 1..8)", op, kernels.ErrShape)
	}
	for _, m := range []*kernels.Matrix{w.Table, w.Key, w.Value} {
		if err := gemmWeight(op, m); err != nil {
			return err
		}
	}
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	heads, C, K := E/Hd, S*D, w.ConvK()
	L := (K - 1) * w.Dilation
	if w.Table.K != Hd || w.Key.N != C || w.Key.K != E || w.Value.N != D || w.Value.K != E {
		return fmt.Errorf("%s: %w: table [%d, %d] key [%d, %d] value [%d, %d] for S*D=%d EmbedDim=%d HeadDim=%d",
			op, kernels.ErrShape, w.Table.N, w.Table.K, w.Key.N, w.Key.K, w.Value.N, w.Value.K, C, E, Hd)
	}
	if L > 32 {
		return fmt.Errorf("%s: %w: conv state of %d steps (ple_state holds at most 32)", op, kernels.ErrArg, L)
	}
	if T < 0 || len(H) != T*C || len(ids) != T*heads || len(convState) != L*C {
		return fmt.Errorf("%s: %w: T=%d len(H)=%d len(ids)=%d len(convState)=%d, want %d, %d, %d",
			op, kernels.ErrShape, T, len(H), len(ids), len(convState), T*C, T*heads, L*C)
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || int(id) >= w.Table.N {
			return fmt.Errorf("%s: %w: ids[%d] = %d outside the table's %d rows", op, kernels.ErrArg, i, id, w.Table.N)
		}
	}
	if err := guard32(op, T*C, T*E, w.Table.N*Hd); err != nil || T == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bh, bst := j.f32(H), j.f32(convState)
	if err := j.pleApply(bh, T, j.i32(ids), w, bst, eps); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(H, f32view(bh, len(H)))
	copy(convState, f32view(bst, len(convState)))
	return nil
}

// PLEApply encodes one PLE layer (Backend.PLEApply on device tensors): H [T, S*D] and
// convState [(ConvK-1)*Dilation, S*D] updated in place from the hashed ids [T, Heads] int32.
// The ids are not range-checked here (the caller hashes them into the table's range).
// Errors wrap kernels.ErrShape, kernels.ErrArg or kernels.ErrDType.
func (j *Pass) PLEApply(H *Tensor, T int, ids *Tensor, w *kernels.PLEWeights, convState *Tensor, eps float32) error {
	const op = "PLEApply"
	if w == nil || w.S <= 0 || w.S > 8 || w.D <= 0 || w.HeadDim <= 0 || w.EmbedDim <= 0 || w.EmbedDim%w.HeadDim != 0 ||
		w.Dilation <= 0 || w.ConvK() < 1 || len(w.NormKey) != w.S*w.D || len(w.NormQuery) != w.S*w.D || len(w.NormConv) != w.S*w.D {
		return j.fail(fmt.Errorf("%s: %w: PLE weights missing or inconsistent (S must be 1..8)", op, kernels.ErrShape))
	}
	for _, m := range []*kernels.Matrix{w.Table, w.Key, w.Value} {
		if err := gemmWeight(op, m); err != nil {
			return j.fail(err)
		}
	}
	C, L := w.S*w.D, (w.ConvK()-1)*w.Dilation
	if L > 32 || T < 0 || H.Len() < T*C || ids.Len() < T*(w.EmbedDim/w.HeadDim) || convState.Len() < L*C {
		return j.fail(fmt.Errorf("%s: %w: T=%d conv state of %d steps (at most 32)", op, kernels.ErrShape, T, L))
	}
	if err := guard32(op, T*C, T*w.EmbedDim, w.Table.N*w.HeadDim); err != nil {
		return j.fail(err)
	}
	if T == 0 {
		return j.err
	}
	return j.pleApply(H, T, ids, w, convState, eps)
}

func (j *Pass) pleApply(bh *Tensor, T int, bids *Tensor, w *kernels.PLEWeights, bst *Tensor, eps float32) error {
	b := j.b
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	heads, C, K := E/Hd, S*D, w.ConvK()
	L := (K - 1) * w.Dilation
	var pipes [4]mtlPipeline
	for i, fn := range []string{"ple_gather", "ple_gate", "ple_conv", "ple_state"} {
		p, err := b.pipeline("prompt.metal", fn, nil)
		if err != nil {
			return j.fail(err)
		}
		pipes[i] = p
	}
	dtype := map[kernels.DType]int{kernels.F32: 0, kernels.BF16: 1, kernels.F16: 2}[w.Table.DType]
	var t16, t32 arg = j.tmp("ple dummy16", 1), j.tmp("ple dummy32", 1)
	if w.Table.DType == kernels.F32 {
		t32 = j.weight(w.Table)
	} else {
		t16 = j.weight(w.Table)
	}
	bemb, bkey, bval := j.tmp("ple emb", T*E), j.tmp("ple key", T*C), j.tmp("ple value", T*D)
	ne := elemThreads(E)
	j.dispatch(pipes[0], fmt.Sprintf("ple_gather_%s_h%d_hd%d", w.Table.DType, heads, Hd), [3]int{(E + ne - 1) / ne, T, 1}, [3]int{ne, 1, 1}, 0,
		bemb, t16, t32, bids, params(T, heads, Hd, dtype))
	b.encodeMatMul(j, bkey, bemb, T, w.Key)
	b.encodeMatMul(j, bval, bemb, T, w.Value)
	bgv, bgvn := j.tmp("ple gv", T*C), j.tmp("ple gvn", T*C)
	nt := elemThreads(D)
	j.dispatch(pipes[1], fmt.Sprintf("ple_gate_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		bgv, bgvn, bkey, bval, bh, j.vec(w.NormKey), j.vec(w.NormQuery), j.vec(w.NormConv), params(D, S, eps))
	prm := params(T, C, K, w.Dilation)
	j.dispatch(pipes[2], fmt.Sprintf("ple_conv_f32_k%d_dil%d", K, w.Dilation), [3]int{(C + 255) / 256, T, 1}, [3]int{256, 1, 1}, 0,
		bh, bgv, bgvn, bst, j.vec(w.ConvW), prm)
	if L > 0 {
		j.dispatch(pipes[3], fmt.Sprintf("ple_state_f32_steps%d", L), [3]int{(C + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
			bst, bgvn, prm)
	}
	return j.err
}
