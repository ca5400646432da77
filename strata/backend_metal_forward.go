package strata

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal"
)

// mfwd is one prefill chunk on the metal backend: the same layer loop as fwd (forward.go), with
// every op encoded into one metal.Pass over device tensors (weights from the model's
// metal.Weights, cache tensors aliased by the session's cache slices, activations from the
// session's arena), committed once and waited for once. Only the logits are read back; the
// host writes the embedding rows, the PLE ids and the indexer's layout (integer bookkeeping of
// the positions) into device tensors while encoding.
type mfwd struct {
	j     *metal.Pass
	s     *Session
	mc    *metalCache
	c     *hfconfig.Config
	T     int
	pos0  int
	hn    *metal.Tensor
	hnFor *kernels.GRWeights
	// trace: per-layer copies of H and the QSA selections, reported after the commit (tests).
	traceH   map[int]*metal.Tensor
	traceSel map[int]*qsaTrace
}

type qsaTrace struct {
	plan *kernels.Selection
	tok  *metal.Tensor
}

// buf returns the arena tensor called name with n elements.
func (f *mfwd) buf(name string, n int) (*metal.Tensor, error) {
	t, err := f.mc.arena.Tensor(name, n)
	if err != nil {
		return nil, wrapf(ErrBackend, err, "scratch %s", name)
	}
	return t, nil
}

// op wraps an encoding error with the layer and op named.
func op(layer int, name string, err error) error {
	if err != nil {
		return wrapf(ErrBackend, err, "layer %d: %s", layer, name)
	}
	return nil
}

func (s *Session) runResident(ctx context.Context, tokens []int32, opts PrefillOptions) (*Logits, error) {
	mb := s.m.dev.be.(metalBackend)
	m := s.m
	c := m.cfg
	T, D := len(tokens), c.D
	S := max(c.Streams, 1)
	start := time.Now()
	mc := s.state.dev.(*metalCache)
	j, err := mb.b.NewPass(modelWeights.weights(mb.b, m), mc.arena)
	if err != nil {
		return nil, wrapf(ErrBackend, err, "command buffer")
	}
	committed := false
	defer func() {
		if !committed {
			j.Abandon()
		}
	}()
	f := &mfwd{j: j, s: s, mc: mc, c: c, T: T, pos0: s.pos}
	if s.trace != nil {
		f.traceH = map[int]*metal.Tensor{}
	}
	if s.traceSel != nil {
		f.traceSel = map[int]*qsaTrace{}
	}
	// Back up the fixed-size states inside the command buffer, before any layer writes them.
	for i, st := range mc.fixed {
		if err := j.Copy(st[1], st[0]); err != nil {
			return nil, op(-1, fmt.Sprintf("state backup %d", i), err)
		}
	}
	H, err := f.buf("H", T*S*D)
	if err != nil {
		return nil, err
	}
	hv := H.F32()
	for t, id := range tokens {
		row := m.embed[int(id)*D : (int(id)+1)*D]
		for st := 0; st < S; st++ {
			copy(hv[(t*S+st)*D:], row)
		}
	}
	if c.Streams > 0 {
		if f.hn, err = f.buf("Hn", T*S*D); err != nil {
			return nil, err
		}
	}
	x, err := f.buf("x", T*D)
	if err != nil {
		return nil, err
	}
	u, err := f.buf("u", T*D)
	if err != nil {
		return nil, err
	}
	beta, err := f.buf("beta", T*S)
	if err != nil {
		return nil, err
	}
	for i, ly := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, wrapf(ErrCancelled, err, "before layer %d", i)
		}
		if ly.ple != nil {
			f.hnFor = nil
			if err := f.ple(i, ly, H, tokens); err != nil {
				return nil, err
			}
		}
		if err := f.readBlock(i, ly.attnGR, ly.inNorm, x, beta, H); err != nil {
			return nil, err
		}
		if ly.gdn != nil {
			err = f.gdn(i, ly.gdn, x, u)
		} else {
			err = f.attention(i, ly.attn, x, u)
		}
		if err != nil {
			return nil, err
		}
		if err := f.writeBlock(i, ly.attnGR != nil, H, beta, u, ly.mlpGR); err != nil {
			return nil, err
		}
		if err := f.readBlock(i, ly.mlpGR, ly.postNorm, x, beta, H); err != nil {
			return nil, err
		}
		var nextGR *kernels.GRWeights
		if i+1 < len(m.layers) && m.layers[i+1].ple == nil {
			nextGR = m.layers[i+1].attnGR
		}
		if err := f.mlp(i, ly, x, u, H, beta, nextGR); err != nil {
			return nil, err
		}
		if f.traceH != nil {
			th, err := f.buf(fmt.Sprintf("trace layer_out %d", i), T*S*D)
			if err != nil {
				return nil, err
			}
			if err := j.Copy(th, H); err != nil {
				return nil, op(i, "trace copy", err)
			}
			f.traceH[i] = th
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(m.layers))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapf(ErrCancelled, err, "before the final read")
	}
	rows, first := 1, T-1
	if opts.AllLogits {
		rows, first = T, 0
	}
	xf, err := f.buf("final x", rows*D)
	if err != nil {
		return nil, err
	}
	Hsel := H.Slice(first*S*D, T*S*D)
	if m.mixer != nil {
		err = op(-1, "final mixer", j.GRRead(xf, nil, Hsel, false, rows, m.mixer, float32(c.Eps)))
	} else {
		err = op(-1, "final norm", j.RMSNorm1p(xf, Hsel, rows, D, m.norm, float32(c.Eps)))
	}
	if err != nil {
		return nil, err
	}
	lt, err := f.buf("logits", rows*c.Vocab)
	if err != nil {
		return nil, err
	}
	if err := op(-1, "lm_head", j.MatMul(lt, xf, rows, m.lmHead)); err != nil {
		return nil, err
	}
	committed = true
	if err := j.Commit(); err != nil {
		// The command buffer ran (partly): put the fixed-size states back from their backups.
		for _, st := range mc.fixed {
			copy(st[0].F32(), st[1].F32())
		}
		return nil, wrapf(ErrBackend, err, "prefill command buffer")
	}
	out := &Logits{Rows: rows, Vocab: c.Vocab, Pos0: s.pos + first, Data: make([]float32, rows*c.Vocab)}
	copy(out.Data, lt.F32())
	for i := range m.layers {
		if th, ok := f.traceH[i]; ok {
			s.trace(i, "layer_out", th.F32())
		}
		if ts, ok := f.traceSel[i]; ok {
			toks := ts.tok.I32()
			for t := 0; t < T; t++ {
				if ts.plan.Dense[t] {
					s.traceSel(i, t, nil, true)
				} else {
					s.traceSel(i, t, toks[ts.plan.Offsets[t]:ts.plan.Offsets[t+1]], false)
				}
			}
		}
	}
	out.Stats = Stats{Tokens: T, Total: time.Since(start)}
	return out, nil
}

func (f *mfwd) readBlock(layer int, gr *kernels.GRWeights, norm []float32, x, beta, H *metal.Tensor) error {
	eps := float32(f.c.Eps)
	if gr != nil {
		if f.hnFor == gr {
			f.hnFor = nil
			return op(layer, "gated residual read", f.j.GRRead(x, beta, f.hn, true, f.T, gr, eps))
		}
		return op(layer, "gated residual read", f.j.GRRead(x, beta, H, false, f.T, gr, eps))
	}
	return op(layer, "rmsnorm", f.j.RMSNorm1p(x, H, f.T, f.c.D, norm, eps))
}

func (f *mfwd) writeBlock(layer int, gated bool, H, beta, u *metal.Tensor, next *kernels.GRWeights) error {
	c := f.c
	if gated && next != nil {
		f.hnFor = next
		return op(layer, "residual write", f.j.GRApply(H, f.hn, beta, nil, nil, nil, u, f.T, c.Streams, 0, c.D, next.Norm, float32(c.Eps)))
	}
	if gated {
		return op(layer, "residual write", f.j.GRApply(H, nil, beta, nil, nil, nil, u, f.T, c.Streams, 0, c.D, nil, float32(c.Eps)))
	}
	return op(layer, "residual add", f.j.Add(H, u, nil))
}

// bufs returns arena tensors of the given names and sizes.
func (f *mfwd) bufs(names []string, sizes ...int) ([]*metal.Tensor, error) {
	out := make([]*metal.Tensor, len(names))
	for i, n := range names {
		t, err := f.buf(n, sizes[i])
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

func (f *mfwd) gdn(layer int, w *gdnWeights, x, u *metal.Tensor) error {
	c, T, j := f.c, f.T, f.j
	st := f.s.state
	Hk, Hv, dk, dv := c.Hk, c.Hv, c.Dk, c.Dv
	C := 2*Hk*dk + Hv*dv
	b, err := f.bufs([]string{"gdn qkv", "gdn z", "gdn a", "gdn b", "gdn q", "gdn k", "gdn v", "gdn g", "gdn beta", "gdn o"},
		T*C, T*Hv*dv, T*Hv, T*Hv, T*Hk*dk, T*Hk*dk, T*Hv*dv, T*Hv, T*Hv, T*Hv*dv)
	if err != nil {
		return err
	}
	qkv, z, a, bb, q, k, v, g, beta, o := b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]
	for _, p := range []struct {
		name string
		y    *metal.Tensor
		w    *kernels.Matrix
	}{{"in_proj_qkv", qkv, w.qkv}, {"in_proj_z", z, w.z}, {"in_proj_b", bb, w.b}, {"in_proj_a", a, w.a}} {
		if err := op(layer, p.name, j.MatMul(p.y, x, T, p.w)); err != nil {
			return err
		}
	}
	p := kernels.GDNParams{T: T, Hk: Hk, Hv: Hv, Dk: dk, Dv: dv, ConvK: c.ConvK, Map: kernels.Grouped}
	conv := f.mc.tensor(st.conv[layer])
	if err := op(layer, "gdn_pre", j.GDNPre(q, k, v, g, beta, qkv, a, bb, conv, w.convW, w.aLog, w.dt, p)); err != nil {
		return err
	}
	if err := op(layer, "gdn_scan", j.GDNScan(o, f.mc.tensor(st.rec[layer]), q, k, v, g, beta, p)); err != nil {
		return err
	}
	act := kernels.ActSilu
	if c.GateAct == "sigmoid" {
		act = kernels.ActSigmoid
	}
	y := qkv.Slice(0, T*Hv*dv)
	if err := op(layer, "gdn_post", j.GDNPost(y, o, z, T, Hv, dv, w.norm, float32(c.Eps), act)); err != nil {
		return err
	}
	return op(layer, "out_proj", j.MatMul(u, y, T, w.out))
}

func (f *mfwd) attention(layer int, w *attnWeights, x, u *metal.Tensor) error {
	c, T, pos0, j := f.c, f.T, f.pos0, f.j
	st := f.s.state
	Hq, Hkv, hd := c.Hq, c.Hkv, c.HeadDim
	eps := float32(c.Eps)
	b, err := f.bufs([]string{"attn qg", "attn k", "attn v", "attn q", "attn gate", "attn o"},
		T*Hq*2*hd, T*Hkv*hd, T*Hkv*hd, T*Hq*hd, T*Hq*hd, T*Hq*hd)
	if err != nil {
		return err
	}
	qg, kRaw, vRaw, q, gate, o := b[0], b[1], b[2], b[3], b[4], b[5]
	if err := op(layer, "q_proj", j.MatMul(qg, x, T, w.q)); err != nil {
		return err
	}
	if err := op(layer, "k_proj", j.MatMul(kRaw, x, T, w.k)); err != nil {
		return err
	}
	if err := op(layer, "v_proj", j.MatMul(vRaw, x, T, w.v)); err != nil {
		return err
	}
	kc, vc := f.mc.tensor(st.k[layer]), f.mc.tensor(st.v[layer])
	if err := op(layer, "qsa_prep", j.QSAPrep(q, gate, kc, vc, qg, kRaw, vRaw, w.qNorm, w.kNorm, T, Hq, Hkv, hd, c.RotaryDim, pos0, c.RopeTheta, eps)); err != nil {
		return err
	}
	var plan *kernels.Selection
	var tok *metal.Tensor
	if w.idx != nil {
		nh, dh := c.IdxHeads, c.IdxDim
		ip := kernels.IndexerParams{T: T, Pos0: pos0, NHeads: nh, Dim: dh, Ratio: c.IdxRatio, Budget: c.IdxBudget,
			Rot: c.RotaryDim, Theta: c.RopeTheta, Eps: eps}
		plan = metal.QSAPlan(ip)
		b, err := f.bufs([]string{"indexer qk", "indexer q", fmt.Sprintf("qsa tokens %d", layer)},
			T*(nh+1)*dh, T*nh*dh, len(plan.Tokens))
		if err != nil {
			return err
		}
		iqk, iq := b[0], b[1]
		tok = b[2]
		if err := op(layer, "indexer index_qk_proj", j.MatMul(iqk, x, T, w.idx)); err != nil {
			return err
		}
		if err := op(layer, "qsa_index", j.QSAIndex(plan, tok, iq, f.mc.tensor(st.idxK[layer]), iqk, w.idxQN, w.idxKN, ip)); err != nil {
			return err
		}
		if f.traceSel != nil {
			f.traceSel[layer] = &qsaTrace{plan: plan, tok: tok}
		}
	}
	ap := kernels.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: hd, Pos0: pos0, Scale: float32(1 / math.Sqrt(float64(hd)))}
	if err := op(layer, "qsa_flash", j.Attention(o, q, kc, vc, ap, plan, tok)); err != nil {
		return err
	}
	if err := op(layer, "output gate", j.SigmoidMul(o, gate)); err != nil {
		return err
	}
	return op(layer, "o_proj", j.MatMul(u, o, T, w.o))
}

func (f *mfwd) swiglu(layer int, name string, y, x *metal.Tensor, w *mlpWeights) error {
	T, I := f.T, w.I
	b, err := f.bufs([]string{name + " gate_up", name + " h"}, T*2*I, T*I)
	if err != nil {
		return err
	}
	if err := op(layer, name+" gate_up", f.j.MatMul(b[0], x, T, w.gateUp)); err != nil {
		return err
	}
	if err := op(layer, name+" swiglu", f.j.SwiGLU(b[1], b[0], T, I)); err != nil {
		return err
	}
	return op(layer, name+" down", f.j.MatMul(y, b[1], T, w.down))
}

func (f *mfwd) mlp(layer int, ly *layer, x, u, H, beta *metal.Tensor, next *kernels.GRWeights) error {
	c, T, D, j := f.c, f.T, f.c.D, f.j
	if ly.mlp != nil {
		if err := f.swiglu(layer, "mlp", u, x, ly.mlp); err != nil {
			return err
		}
		return f.writeBlock(layer, ly.mlpGR != nil, H, beta, u, next)
	}
	mw := ly.moe
	E, K := c.Experts, c.TopK
	b, err := f.bufs([]string{"router logits", "moe w", "moe idx", "experts out", "moe rk", "shared out", "shared gate"},
		T*E, T*K, T*K, T*K*D, T*K, T*D, T)
	if err != nil {
		return err
	}
	rl, wts, idx, ye, rk, sh, sg := b[0], b[1], b[2], b[3], b[4], b[5], b[6]
	if err := op(layer, "router", j.MatMul(rl, x, T, mw.router)); err != nil {
		return err
	}
	if err := op(layer, "route", j.TopKRoute(wts, idx, rl, T, E, K, c.NormTopK)); err != nil {
		return err
	}
	if err := op(layer, "experts", j.MoEExperts(ye, rk, x, T, idx, K, mw.experts)); err != nil {
		return err
	}
	if err := f.swiglu(layer, "shared_expert", sh, x, mw.shared); err != nil {
		return err
	}
	if err := op(layer, "shared_expert_gate", j.MatMul(sg, x, T, mw.sharedGate)); err != nil {
		return err
	}
	if err := op(layer, "shared expert gate", j.RowSigmoidScale(sh, sg, T, D)); err != nil {
		return err
	}
	if ly.mlpGR != nil && next != nil {
		f.hnFor = next
		return op(layer, "gr_norm_h_moec", j.GRApply(H, f.hn, beta, ye, rk, wts, sh, T, c.Streams, K, D, next.Norm, float32(c.Eps)))
	}
	if ly.mlpGR != nil {
		return op(layer, "gr_apply_moec", j.GRApply(H, nil, beta, ye, rk, wts, sh, T, c.Streams, K, D, nil, float32(c.Eps)))
	}
	if err := op(layer, "moe_comb", j.MoECombine(u, ye, rk, wts, T, K, D)); err != nil {
		return err
	}
	return op(layer, "residual add", j.Add(H, u, sh))
}

func (f *mfwd) ple(layer int, ly *layer, H *metal.Tensor, tokens []int32) error {
	st := f.s.state
	heads := ly.ple.hash.Heads()
	ids, err := f.buf(fmt.Sprintf("ple ids %d", layer), f.T*heads)
	if err != nil {
		return err
	}
	if err := ly.ple.hash.IDs(ids.I32(), tokens, st.pleCtx[layer]); err != nil {
		return op(layer, "ple ids", err)
	}
	return op(layer, "ple", f.j.PLEApply(H, f.T, ids, ly.ple.w, f.mc.tensor(st.pleConv[layer]), float32(f.c.Eps)))
}
