package strata

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/op"
)

// fwd is one prefill: the model's layer loop, written once over op tensors and op.Pass calls.
// On the CPU every op runs when it is called; on Metal (and the emulator) the calls encode one
// command buffer that runs at Commit. Activations come from the session's scratch, the cache
// from the session's state list, weights from the model's store. The host writes only what it
// computes itself (the token ids, the PLE n-gram ids) before the ops that read them, and reads
// only the logits (and the traces tests ask for) after the Pass.
type fwd struct {
	p     op.Pass
	s     *Session
	plan  *family.Plan
	eps   float32
	T     int
	pos0  int
	err   error
	host  [numStages]time.Duration // host bookkeeping time per stage (PLE ids)
	stage Stage
	// hn holds the grouped norm of the streams H, valid (hnFor != nil) when the last write
	// produced it in its own pass for the GatedResidual read hnFor.
	hn    op.Tensor
	hnFor *grBlock
	// traces, reported after the Pass (tests).
	traceH   map[int]op.Tensor
	traceSel map[int]qsaTrace
}

// stageOther tags the ops of no named stage (the embedding gather, trace copies): their time
// shows in Stats.Total only.
const stageOther = numStages

type qsaTrace struct {
	plan *op.Selection
	tok  op.Tensor
}

// buf returns the scratch tensor called name with n elements of dt, recording the first error.
func (f *fwd) buf(name string, dt op.DType, n int) op.Tensor {
	if f.err != nil {
		return nil
	}
	t, err := f.s.scratch.Tensor(name, dt, n)
	if err != nil {
		f.err = wrapf(ErrOutOfMemory, err, "scratch %s of %d elements", name, n)
		return nil
	}
	return t
}

// mixer returns float32 tensors of the given element counts, carved one after another (each
// start rounded up to mixerAlign elements) out of one scratch buffer that the GDN and attention
// mixers share: a layer has one mixer, and its tensors are dead once the layer's output
// projection has run. nil when f has an error.
func (f *fwd) mixer(sizes ...int) []op.Tensor {
	n := 0
	for _, s := range sizes {
		n += roundUp(s, mixerAlign)
	}
	buf := f.f32("mixer", n)
	if buf == nil {
		return nil
	}
	out := make([]op.Tensor, len(sizes))
	off := 0
	for i, s := range sizes {
		out[i] = buf.Slice(off, off+s)
		off += roundUp(s, mixerAlign)
	}
	return out
}

// mixerAlign is the alignment, in elements, of the mixer's tensors inside their buffer (256
// bytes: more than any kernel's vector loads need).
const mixerAlign = 64

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// f32 and i32 are buf for the two dtypes.
func (f *fwd) f32(name string, n int) op.Tensor { return f.buf(name, op.F32, n) }
func (f *fwd) i32(name string, n int) op.Tensor { return f.buf(name, op.I32, n) }

// do runs (CPU) or encodes (Metal) one op under stage, recording the first error with the layer
// and op named.
func (f *fwd) do(stage Stage, layer int, name string, call func() error) {
	if f.err != nil {
		return
	}
	if stage != f.stage {
		f.stage = stage
		f.p.Stage(int(stage))
	}
	if err := call(); err != nil {
		where := name
		if layer >= 0 {
			where = fmt.Sprintf("layer %d: %s", layer, name)
		}
		f.err = opError(where, err)
	}
}

// opError wraps the error of an op inside a pass. The prefill's own arguments were checked
// before the pass began, so an op refusing its operands (op.ErrInvalidArgument, ErrShape or
// ErrDType: a NaN or Inf logit reaching a MoE router, from the weights or the activations) is
// the backend's failure, ErrBackend, not the caller's; other sentinels (out of memory,
// cancelled) keep their class.
func opError(where string, err error) error {
	if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrShape) || errors.Is(err, ErrDType) {
		return fmt.Errorf("%w: %s: %v", ErrBackend, where, err)
	}
	return wrapf(ErrBackend, err, "%s", where)
}

func (f *fwd) matmul(layer int, name string, y, x op.Tensor, T int, w *op.Matrix) {
	f.do(StageGEMM, layer, name, func() error { return f.p.MatMul(op.MatMul{Y: y, X: x, T: T, W: w}) })
}

// stepSpec is what one prefill step computes: rows of logits (0: none, for the steps before the
// last of a long prompt; 1: the last token's; T: every token's), the residual streams it starts
// from (a pipeline stage after the first: hidden [T, S*D]; nil: the embedding) and whether it
// returns its streams (a stage before the last).
type stepSpec struct {
	rows      int
	hidden    []float32
	keepH     bool
	progress  func(done, total int)
	doneLayer int // layers of earlier steps, for progress
	allLayers int
}

// run prefills tokens at the session position in one Pass. The caller checked the arguments,
// backs up the state and restores it on error.
func (s *Session) run(ctx context.Context, tokens []int32, spec stepSpec) (*Logits, error) {
	m := s.m
	plan := m.plan
	T, D, S := len(tokens), plan.D, plan.Streams
	start := time.Now()
	p, err := m.dev.be.Begin(m.weights, s.scratch)
	if err != nil {
		return nil, opError("begin pass", err)
	}
	f := &fwd{p: p, s: s, plan: plan, eps: float32(plan.Eps), T: T, pos0: s.pos, stage: -1}
	committed := false
	defer func() {
		if !committed {
			p.Abandon()
		}
	}()
	if s.trace != nil {
		f.traceH = map[int]op.Tensor{}
	}
	if s.traceSel != nil {
		f.traceSel = map[int]qsaTrace{}
	}
	tok := f.i32("tokens", T)
	H := f.f32("H", T*S*D)
	x := f.f32("x", T*D)
	u := f.f32("u", T*D)
	beta := f.f32("beta", T*S)
	if S > 1 {
		f.hn = f.f32("Hn", T*S*D)
	}
	if f.err != nil {
		return nil, f.err
	}
	copy(tok.I32(), tokens)
	if spec.hidden != nil {
		copy(H.F32(), spec.hidden) // the previous stage's streams: written before the Pass reads them
	} else {
		f.do(stageOther, -1, "embed", func() error {
			return p.Embed(op.Embed{H: H, Tokens: tok, T: T, S: S, Table: m.embed})
		})
	}
	for i, ly := range m.layers {
		li := ly.Index
		if err := ctx.Err(); err != nil {
			return nil, wrapf(ErrCancelled, err, "before layer %d", li)
		}
		if ly.PLE != nil {
			f.hnFor = nil // PLE changes H after the last write normalised it
			f.ple(li, ly, H, tokens)
		}
		// mixer block
		f.readBlock(li, ly.In, x, beta, H)
		if ly.GDN != nil {
			f.gdn(li, ly, x, u)
		} else {
			f.attention(li, ly, x, u)
		}
		f.writeBlock(li, ly.In.GR != nil, H, beta, u, ly.Post.GR)
		// MLP block
		f.readBlock(li, ly.Post, x, beta, H)
		var nextGR *grBlock // the next read, when the MLP write may normalise for it
		if i+1 < len(m.layers) && m.layers[i+1].PLE == nil {
			nextGR = m.layers[i+1].In.GR
		}
		f.mlp(li, ly, x, u, H, beta, nextGR)
		if f.traceH != nil {
			th := f.f32(fmt.Sprintf("trace layer_out %d", li), T*S*D)
			f.do(stageOther, li, "trace copy", func() error { return p.Copy(op.Copy{Dst: th, Src: H}) })
			f.traceH[li] = th
		}
		if f.err != nil {
			return nil, f.err
		}
		if spec.progress != nil {
			spec.progress(spec.doneLayer+i+1, spec.allLayers)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapf(ErrCancelled, err, "after the last layer")
	}
	// final read / norm and lm_head (the last stage of a pipeline; the last step of a long prompt)
	rows, first := spec.rows, T-spec.rows
	var lt op.Tensor
	if rows > 0 {
		xf := f.f32("final x", rows*D)
		lt = f.f32("logits", rows*plan.Vocab)
		if f.err != nil {
			return nil, f.err
		}
		Hsel := H.Slice(first*S*D, T*S*D)
		if g := m.head.Mixer; g != nil {
			f.do(StageGatedResidual, -1, "final mixer", func() error {
				return p.GRRead(op.GRRead{X: xf, H: Hsel, T: rows, G: grWeights(g), Eps: f.eps})
			})
		} else {
			f.do(StageGatedResidual, -1, "final norm", func() error {
				return p.RMSNorm(op.RMSNorm{Y: xf, X: Hsel, Rows: rows, D: D, W: *m.head.Norm, Eps: f.eps})
			})
		}
		f.matmul(-1, "lm_head", lt, xf, rows, m.head.LMHead)
		if f.err != nil {
			return nil, f.err
		}
	}
	committed = true
	tm, err := p.Commit()
	if err != nil {
		return nil, opError("prefill pass", err)
	}
	out := &Logits{Rows: rows, Vocab: plan.Vocab, Pos0: s.pos + first}
	if rows > 0 {
		out.Data = append([]float32(nil), lt.F32()...)
	}
	if spec.keepH {
		out.Hidden = append([]float32(nil), H.F32()...)
	}
	for _, ly := range m.layers {
		li := ly.Index
		if th, ok := f.traceH[li]; ok {
			s.trace(li, "layer_out", th.F32())
		}
		if ts, ok := f.traceSel[li]; ok {
			toks := ts.tok.I32()
			for t := 0; t < T; t++ {
				if ts.plan.Dense[t] {
					s.traceSel(li, t, nil, true)
				} else {
					s.traceSel(li, t, toks[ts.plan.Offsets[t]:ts.plan.Offsets[t+1]], false)
				}
			}
		}
	}
	st := Stats{Tokens: T, Total: time.Since(start), Device: tm.Total, PerStage: tm.PerStage}
	for i := range st.Stage {
		st.Stage[i] = f.host[i]
		if i < len(tm.Stage) {
			st.Stage[i] += tm.Stage[i]
		}
		if i < len(tm.CPU) {
			st.CPU[i], st.SysCPU[i] = tm.CPU[i], tm.Sys[i]
		}
	}
	out.Stats = st
	return out, nil
}

// readBlock computes a block's input x [T, D]: a GatedResidual read (with beta [T, S]) or
// RMSNorm1p of the single stream.
func (f *fwd) readBlock(layer int, r readBlock, x, beta, H op.Tensor) {
	eps, gr := f.eps, r.GR
	if gr != nil {
		f.do(StageGatedResidual, layer, "gated residual read", func() error {
			if f.hnFor == gr {
				f.hnFor = nil
				return f.p.GRRead(op.GRRead{X: x, Beta: beta, H: f.hn, Normed: true, T: f.T, G: grWeights(gr), Eps: eps})
			}
			return f.p.GRRead(op.GRRead{X: x, Beta: beta, H: H, T: f.T, G: grWeights(gr), Eps: eps})
		})
		return
	}
	f.do(StageGatedResidual, layer, "rmsnorm", func() error {
		return f.p.RMSNorm(op.RMSNorm{Y: x, X: H, Rows: f.T, D: f.plan.D, W: *r.Norm, Eps: eps})
	})
}

// writeBlock adds a block output u [T, D] into the residual: H += beta (x) u, or H += u.
// With next set (the GatedResidual read that follows) the write also normalises H for it in
// the same pass (gr_norm_h4 fused into the write).
func (f *fwd) writeBlock(layer int, gated bool, H, beta, u op.Tensor, next *grBlock) {
	S, D := f.plan.Streams, f.plan.D
	f.do(StageGatedResidual, layer, "residual write", func() error {
		switch {
		case gated && next != nil:
			f.hnFor = next
			return f.p.GRWrite(op.GRWrite{H: H, Hn: f.hn, Beta: beta, U: u, T: f.T, S: S, D: D, Norm: next.Norm, Eps: f.eps})
		case gated:
			return f.p.GRWrite(op.GRWrite{H: H, Beta: beta, U: u, T: f.T, S: S, D: D})
		}
		return f.p.Add(op.Add{H: H, U: u})
	})
}

func (f *fwd) gdn(layer int, ly *layer, x, u op.Tensor) {
	T, p, w := f.T, f.p, ly.GDN
	st := f.s.state
	Hk, Hv, dk, dv := w.Hk, w.Hv, w.Dk, w.Dv
	C := 2*Hk*dk + Hv*dv
	t := f.mixer(T*C, T*Hv*dv, T*Hv, T*Hv, T*Hk*dk, T*Hk*dk, T*Hv*dv, T*Hv, T*Hv, T*Hv*dv)
	if f.err != nil {
		return
	}
	qkv, z, a, b, q, k, v, g, beta, o := t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]
	f.matmul(layer, "in_proj_qkv", qkv, x, T, w.QKV)
	f.matmul(layer, "in_proj_z", z, x, T, w.Z)
	f.matmul(layer, "in_proj_b", b, x, T, w.B)
	f.matmul(layer, "in_proj_a", a, x, T, w.A)
	prm := op.GDNParams{T: T, Hk: Hk, Hv: Hv, Dk: dk, Dv: dv, ConvK: w.ConvK, Map: w.Map}
	f.do(StageGDN, layer, "gdn_pre", func() error {
		return p.GDNPre(op.GDNPre{Q: q, K: k, V: v, G: g, Beta: beta, QKV: qkv, A: a, B: b,
			ConvState: st.get(layer, family.RoleConv), ConvW: w.Conv, ALog: w.ALog, DtBias: w.DtBias, P: prm})
	})
	f.do(StageGDN, layer, "gdn_scan", func() error {
		return p.GDNScan(op.GDNScan{O: o, State: st.get(layer, family.RoleRecurrent), Q: q, K: k, V: v, G: g, Beta: beta, P: prm})
	})
	y := qkv.Slice(0, T*Hv*dv) // reuse
	f.do(StageGDN, layer, "gdn_post", func() error {
		return p.GDNPost(op.GDNPost{Y: y, O: o, Z: z, T: T, Hv: Hv, Dv: dv, W: w.Norm, Eps: f.eps, Act: w.Act})
	})
	f.matmul(layer, "out_proj", u, y, T, w.Out)
}

func (f *fwd) attention(layer int, ly *layer, x, u op.Tensor) {
	T, pos0, p, a := f.T, f.pos0, f.p, ly.Attn
	st := f.s.state
	Hq, Hkv, hd := a.Hq, a.Hkv, a.HeadDim
	eps := f.eps
	t := f.mixer(T*Hq*2*hd, T*Hkv*hd, T*Hkv*hd, T*Hq*hd, T*Hq*hd, T*Hq*hd)
	if f.err != nil {
		return
	}
	qg, kRaw, vRaw, q, gate, o := t[0], t[1], t[2], t[3], t[4], t[5]
	f.matmul(layer, "q_proj", qg, x, T, a.Q)
	f.matmul(layer, "k_proj", kRaw, x, T, a.K)
	f.matmul(layer, "v_proj", vRaw, x, T, a.V)
	kc, vc := st.get(layer, family.RoleK), st.get(layer, family.RoleV)
	f.do(StageAttention, layer, "qsa_prep", func() error {
		return p.QSAPrep(op.QSAPrep{Q: q, Gate: gate, KC: kc, VC: vc, QG: qg, K: kRaw, V: vRaw, QNorm: a.QNorm, KNorm: a.KNorm,
			T: T, Hq: Hq, Hkv: Hkv, D: hd, Rot: a.Rot, Pos0: pos0, Theta: a.Theta, Eps: eps})
	})
	var plan *op.Selection
	var tok op.Tensor
	if ix := a.Indexer; ix != nil {
		nh, dh := ix.Heads, ix.Dim
		ip := op.IndexerParams{T: T, Pos0: pos0, NHeads: nh, Dim: dh, Ratio: ix.Ratio, Budget: ix.Budget,
			Rot: a.Rot, Theta: a.Theta, Eps: eps}
		plan = op.QSAPlan(ip)
		iqk, iq := f.f32("indexer qk", T*(nh+1)*dh), f.f32("indexer q", T*nh*dh)
		// One token tensor per layer: the traces read each layer's after the Pass.
		tok = f.i32(fmt.Sprintf("qsa tokens %d", layer), int(plan.Offsets[T]))
		if f.err != nil {
			return
		}
		f.matmul(layer, "indexer index_qk_proj", iqk, x, T, ix.QK)
		f.do(StageIndexer, layer, "qsa_index", func() error {
			return p.QSAIndex(op.QSAIndex{Plan: plan, Tok: tok, IQ: iq, Keys: st.get(layer, family.RoleIndexKeys), IQK: iqk,
				QNorm: ix.QNorm, KNorm: ix.KNorm, P: ip})
		})
		if f.traceSel != nil {
			f.traceSel[layer] = qsaTrace{plan: plan, tok: tok}
		}
	}
	ap := op.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: hd, Pos0: pos0, Scale: float32(1 / math.Sqrt(float64(hd)))}
	f.do(StageAttention, layer, "qsa_flash", func() error {
		return p.Attention(op.Attention{O: o, Q: q, K: kc, V: vc, P: ap, Sel: plan, Tok: tok})
	})
	f.do(StageAttention, layer, "output gate", func() error { return p.SigmoidMul(op.SigmoidMul{O: o, G: gate}) })
	f.matmul(layer, "o_proj", u, o, T, a.O)
}

// swiglu runs a dense SwiGLU MLP: y [T, D] = down(silu(gate x) * up x).
func (f *fwd) swiglu(layer int, name string, y, x op.Tensor, w *denseBlock) {
	T, I := f.T, w.I
	gu, h := f.f32(name+" gate_up", T*2*I), f.f32(name+" h", T*I)
	if f.err != nil {
		return
	}
	a := op.SwiGLU{H: h, GU: gu, Rows: T, I: I}
	if w.Up != nil { // gate and up stored apart: two products into the halves of the scratch
		a.GU, a.U = gu.Slice(0, T*I), gu.Slice(T*I, 2*T*I)
		f.matmul(layer, name+" gate", a.GU, x, T, w.GateUp)
		f.matmul(layer, name+" up", a.U, x, T, *w.Up)
	} else {
		f.matmul(layer, name+" gate_up", gu, x, T, w.GateUp)
	}
	f.do(StageMoE, layer, name+" swiglu", func() error { return f.p.SwiGLU(a) })
	f.matmul(layer, name+" down", y, h, T, w.Down)
}

func (f *fwd) mlp(layer int, ly *layer, x, u, H, beta op.Tensor, next *grBlock) {
	T, D, S, p := f.T, f.plan.D, f.plan.Streams, f.p
	gated := ly.Post.GR != nil
	if ly.MLP != nil {
		f.swiglu(layer, "mlp", u, x, ly.MLP)
		f.writeBlock(layer, gated, H, beta, u, next)
		return
	}
	mw := ly.MoE
	E, K := mw.E, mw.TopK
	rl, wts, idx := f.f32("router logits", T*E), f.f32("moe w", T*K), f.i32("moe idx", T*K)
	ye, rk := f.f32("experts out", T*K*D), f.i32("moe rk", T*K)
	sh, sg := f.f32("shared out", T*D), f.f32("shared gate", T)
	if f.err != nil {
		return
	}
	f.matmul(layer, "router", rl, x, T, mw.Router)
	f.do(StageMoE, layer, "route", func() error {
		return p.TopKRoute(op.TopKRoute{W: wts, Idx: idx, Logits: rl, T: T, E: E, K: K, Norm: mw.NormTopK})
	})
	f.do(StageMoE, layer, "experts", func() error {
		return p.MoEExperts(op.MoEExperts{YE: ye, RK: rk, X: x, Idx: idx, T: T, K: K, Ex: ly.experts})
	})
	f.swiglu(layer, "shared_expert", sh, x, &mw.Shared)
	f.matmul(layer, "shared_expert_gate", sg, x, T, mw.SharedGate)
	f.do(StageMoE, layer, "shared expert gate", func() error {
		return p.RowSigmoidScale(op.RowSigmoidScale{X: sh, S: sg, Rows: T, D: D})
	})
	switch {
	case gated && next != nil:
		f.hnFor = next
		f.do(StageMoE, layer, "gr_norm_h_moec", func() error {
			return p.GRApplyMoEC(op.GRApplyMoEC{H: H, Hn: f.hn, Beta: beta, YE: ye, RK: rk, W: wts, Shared: sh,
				T: T, S: S, K: K, D: D, Norm: next.Norm, Eps: f.eps})
		})
	case gated:
		f.do(StageMoE, layer, "gr_apply_moec", func() error {
			return p.GRApplyMoEC(op.GRApplyMoEC{H: H, Beta: beta, YE: ye, RK: rk, W: wts, Shared: sh, T: T, S: S, K: K, D: D})
		})
	default:
		f.do(StageMoE, layer, "moe_comb", func() error {
			return p.MoECombine(op.MoECombine{Out: u, YE: ye, RK: rk, W: wts, T: T, K: K, D: D})
		})
		f.do(StageMoE, layer, "residual add", func() error { return p.Add(op.Add{H: H, U: u, V: sh}) })
	}
}

// ple hashes the n-gram ids on the host (integer bookkeeping over the token history, with the
// session's carried context) into the layer's id tensor, then runs the PLE op.
func (f *fwd) ple(layer int, ly *layer, H op.Tensor, tokens []int32) {
	if f.err != nil {
		return
	}
	ids := f.i32(fmt.Sprintf("ple ids %d", layer), f.T*ly.hash.Heads())
	if f.err != nil {
		return
	}
	x := ly.PLE
	w := &op.PLEWeights{S: x.S, D: x.D, EmbedDim: x.EmbedDim, HeadDim: x.HeadDim, Dilation: x.Dilation,
		Key: x.Key, Value: x.Value, NormKey: x.NormKey, NormQuery: x.NormQuery, NormConv: x.NormConv, ConvW: x.Conv}
	a := op.PLEApply{H: H, T: f.T, IDs: ids, W: w, ConvState: f.s.state.get(layer, family.RolePLEConv), Eps: f.eps}
	if len(x.Table) == 1 {
		w.Table = x.Table[0]
	} else {
		// A table split into row blocks (128 in Qwen3.8-Flash-Next, 102 GB): views of the file,
		// never concatenated; the backend gathers the rows a prompt uses from them.
		a.Parts, a.PartRows = x.Table, x.Table[0].N
	}
	t0 := time.Now()
	err := ly.hash.IDs(ids.I32(), tokens, f.s.state.pleCtx[layer])
	f.host[StagePLE] += time.Since(t0)
	if err != nil {
		f.err = opError(fmt.Sprintf("layer %d: ple ids", layer), err)
		return
	}
	f.do(StagePLE, layer, "ple", func() error { return f.p.PLEApply(a) })
}
