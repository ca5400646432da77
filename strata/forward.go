package strata

import (
	"context"
	"math"
	"time"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/kernels"
)

// fwd carries one prefill's scratch and timing.
type fwd struct {
	s     *Session
	c     *hfconfig.Config
	T     int
	pos0  int
	stats Stats
}

// timed runs fn, adds its duration to stage and converts a kernel error into ErrBackend with
// the layer and op named.
func (f *fwd) timed(stage Stage, layer int, op string, fn func() error) error {
	t0 := time.Now()
	err := fn()
	f.stats.Stage[stage] += time.Since(t0)
	if err != nil {
		return wrapf(ErrBackend, err, "layer %d: %s", layer, op)
	}
	return nil
}

func (f *fwd) matmul(layer int, op string, y, x []float32, T int, w *kernels.Matrix) error {
	return f.timed(StageGEMM, layer, op, func() error { return kernels.MatMul(y, x, T, w) })
}

func (s *Session) run(ctx context.Context, tokens []int32, opts PrefillOptions) (*Logits, error) {
	m := s.m
	c := m.cfg
	T, D := len(tokens), c.D
	S := max(c.Streams, 1)
	f := &fwd{s: s, c: c, T: T, pos0: s.pos}
	start := time.Now()

	H := make([]float32, T*S*D)
	for t, id := range tokens {
		row := m.embed[int(id)*D : (int(id)+1)*D]
		for st := 0; st < S; st++ {
			copy(H[(t*S+st)*D:], row)
		}
	}
	x := make([]float32, T*D)
	u := make([]float32, T*D)
	beta := make([]float32, T*S)
	for i, ly := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, wrapf(ErrCancelled, err, "before layer %d", i)
		}
		if ly.ple != nil {
			if err := f.ple(i, ly, H, tokens); err != nil {
				return nil, err
			}
		}
		// mixer block
		if err := f.readBlock(i, ly.attnGR, ly.inNorm, x, beta, H); err != nil {
			return nil, err
		}
		var err error
		if ly.gdn != nil {
			err = f.gdn(i, ly.gdn, x, u)
		} else {
			err = f.attention(i, ly.attn, x, u)
		}
		if err != nil {
			return nil, err
		}
		if err := f.writeBlock(i, ly.attnGR != nil, H, beta, u); err != nil {
			return nil, err
		}
		// MLP block
		if err := f.readBlock(i, ly.mlpGR, ly.postNorm, x, beta, H); err != nil {
			return nil, err
		}
		if err := f.mlp(i, ly, x, u, H, beta); err != nil {
			return nil, err
		}
		if s.trace != nil {
			s.trace(i, "layer_out", H)
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(m.layers))
		}
	}
	// final read / norm and lm_head
	rows, first := 1, T-1
	if opts.AllLogits {
		rows, first = T, 0
	}
	xf := make([]float32, rows*D)
	Hsel := H[first*S*D:]
	if m.mixer != nil {
		if err := f.timed(StageGatedResidual, -1, "final mixer", func() error {
			return kernels.GRRead(xf, nil, Hsel, rows, m.mixer, float32(c.Eps))
		}); err != nil {
			return nil, err
		}
	} else if err := f.timed(StageGatedResidual, -1, "final norm", func() error {
		return kernels.RMSNorm1p(xf, Hsel[:rows*D], rows, D, m.norm, float32(c.Eps))
	}); err != nil {
		return nil, err
	}
	out := &Logits{Rows: rows, Vocab: c.Vocab, Pos0: s.pos + first, Data: make([]float32, rows*c.Vocab)}
	if err := f.matmul(-1, "lm_head", out.Data, xf, rows, m.lmHead); err != nil {
		return nil, err
	}
	f.stats.Tokens = T
	f.stats.Total = time.Since(start)
	out.Stats = f.stats
	return out, nil
}

// readBlock computes a block's input x [T, D]: GatedResidual read (qwen4_exp, with beta
// [T, S]) or RMSNorm1p (qwen3_next).
func (f *fwd) readBlock(layer int, gr *kernels.GRWeights, norm []float32, x, beta, H []float32) error {
	eps := float32(f.c.Eps)
	if gr != nil {
		return f.timed(StageGatedResidual, layer, "gated residual read", func() error {
			return kernels.GRRead(x, beta, H, f.T, gr, eps)
		})
	}
	return f.timed(StageGatedResidual, layer, "rmsnorm", func() error {
		return kernels.RMSNorm1p(x, H, f.T, f.c.D, norm, eps)
	})
}

// writeBlock adds a block output u [T, D] into the residual: H += beta (x) u, or H += u.
func (f *fwd) writeBlock(layer int, gated bool, H, beta, u []float32) error {
	return f.timed(StageGatedResidual, layer, "residual write", func() error {
		if gated {
			return kernels.GRWrite(H, beta, u, f.T, f.c.Streams, f.c.D)
		}
		for i := range u {
			H[i] += u[i]
		}
		return nil
	})
}

func (f *fwd) gdn(layer int, w *gdnWeights, x, u []float32) error {
	c, T := f.c, f.T
	st := f.s.state
	Hk, Hv, dk, dv := c.Hk, c.Hv, c.Dk, c.Dv
	C := 2*Hk*dk + Hv*dv
	qkv := make([]float32, T*C)
	z := make([]float32, T*Hv*dv)
	a := make([]float32, T*Hv)
	b := make([]float32, T*Hv)
	if err := f.matmul(layer, "in_proj_qkv", qkv, x, T, w.qkv); err != nil {
		return err
	}
	if err := f.matmul(layer, "in_proj_z", z, x, T, w.z); err != nil {
		return err
	}
	if err := f.matmul(layer, "in_proj_b", b, x, T, w.b); err != nil {
		return err
	}
	if err := f.matmul(layer, "in_proj_a", a, x, T, w.a); err != nil {
		return err
	}
	q := make([]float32, T*Hk*dk)
	k := make([]float32, T*Hk*dk)
	v := make([]float32, T*Hv*dv)
	g := make([]float32, T*Hv)
	beta := make([]float32, T*Hv)
	p := kernels.GDNParams{T: T, Hk: Hk, Hv: Hv, Dk: dk, Dv: dv, ConvK: c.ConvK, Map: kernels.Grouped}
	if err := f.timed(StageGDN, layer, "gdn_pre", func() error {
		return kernels.GDNPre(q, k, v, g, beta, qkv, a, b, st.conv[layer], w.convW, w.aLog, w.dt, p)
	}); err != nil {
		return err
	}
	o := make([]float32, T*Hv*dv)
	if err := f.timed(StageGDN, layer, "gdn_scan", func() error {
		return kernels.GDNScan(o, st.rec[layer], q, k, v, g, beta, p, kernels.Chunked)
	}); err != nil {
		return err
	}
	act := kernels.ActSilu
	if c.GateAct == "sigmoid" {
		act = kernels.ActSigmoid
	}
	y := qkv[:T*Hv*dv] // reuse
	if err := f.timed(StageGDN, layer, "gdn_post", func() error {
		return kernels.GDNPost(y, o, z, T, Hv, dv, w.norm, float32(c.Eps), act)
	}); err != nil {
		return err
	}
	return f.matmul(layer, "out_proj", u, y, T, w.out)
}

func (f *fwd) attention(layer int, w *attnWeights, x, u []float32) error {
	c, T, pos0 := f.c, f.T, f.pos0
	st := f.s.state
	Hq, Hkv, hd := c.Hq, c.Hkv, c.HeadDim
	eps := float32(c.Eps)
	qg := make([]float32, T*Hq*2*hd)
	if err := f.matmul(layer, "q_proj", qg, x, T, w.q); err != nil {
		return err
	}
	kc, vc := st.k[layer], st.v[layer]
	kNew := kc[pos0*Hkv*hd : (pos0+T)*Hkv*hd]
	vNew := vc[pos0*Hkv*hd : (pos0+T)*Hkv*hd]
	if err := f.matmul(layer, "k_proj", kNew, x, T, w.k); err != nil {
		return err
	}
	if err := f.matmul(layer, "v_proj", vNew, x, T, w.v); err != nil {
		return err
	}
	q := make([]float32, T*Hq*hd)
	gate := make([]float32, T*Hq*hd)
	for t := 0; t < T; t++ {
		for h := 0; h < Hq; h++ {
			src := qg[(t*Hq+h)*2*hd:]
			copy(q[(t*Hq+h)*hd:(t*Hq+h+1)*hd], src[:hd])
			copy(gate[(t*Hq+h)*hd:(t*Hq+h+1)*hd], src[hd:2*hd])
		}
	}
	var sel *kernels.Selection
	if err := f.timed(StageAttention, layer, "q/k norm + rope", func() error {
		if err := kernels.RMSNorm1p(q, q, T*Hq, hd, w.qNorm, eps); err != nil {
			return err
		}
		if err := kernels.RMSNorm1p(kNew, kNew, T*Hkv, hd, w.kNorm, eps); err != nil {
			return err
		}
		if err := kernels.RoPE(q, T, Hq, hd, c.RotaryDim, pos0, c.RopeTheta); err != nil {
			return err
		}
		return kernels.RoPE(kNew, T, Hkv, hd, c.RotaryDim, pos0, c.RopeTheta)
	}); err != nil {
		return err
	}
	if w.idx != nil {
		nh, dh := c.IdxHeads, c.IdxDim
		iqk := make([]float32, T*(nh+1)*dh)
		if err := f.matmul(layer, "indexer index_qk_proj", iqk, x, T, w.idx); err != nil {
			return err
		}
		iq := make([]float32, T*nh*dh)
		keys := st.idxK[layer]
		for t := 0; t < T; t++ {
			copy(iq[t*nh*dh:(t+1)*nh*dh], iqk[t*(nh+1)*dh:])
			copy(keys[(pos0+t)*dh:(pos0+t+1)*dh], iqk[(t*(nh+1)+nh)*dh:])
		}
		sel = &kernels.Selection{}
		if err := f.timed(StageAttention, layer, "qsa_index", func() error {
			if err := kernels.RMSNorm1p(iq, iq, T*nh, dh, w.idxQN, eps); err != nil {
				return err
			}
			if err := kernels.RoPE(iq, T, nh, dh, c.RotaryDim, pos0, c.RopeTheta); err != nil {
				return err
			}
			return kernels.QSASelect(sel, iq, keys, w.idxKN, kernels.IndexerParams{
				T: T, Pos0: pos0, NHeads: nh, Dim: dh, Ratio: c.IdxRatio, Budget: c.IdxBudget,
				Rot: c.RotaryDim, Theta: c.RopeTheta, Eps: eps})
		}); err != nil {
			return err
		}
		if f.s.traceSel != nil {
			for t := 0; t < T; t++ {
				if sel.Dense[t] {
					f.s.traceSel(layer, t, nil, true)
				} else {
					f.s.traceSel(layer, t, sel.Tokens[sel.Offsets[t]:sel.Offsets[t+1]], false)
				}
			}
		}
	}
	o := make([]float32, T*Hq*hd)
	if err := f.timed(StageAttention, layer, "qsa_flash", func() error {
		return kernels.Attention(o, nil, q, kc, vc, kernels.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: hd, Pos0: pos0, Scale: float32(1 / math.Sqrt(float64(hd)))}, sel)
	}); err != nil {
		return err
	}
	for i := range o {
		o[i] *= float32(1 / (1 + math.Exp(-float64(gate[i]))))
	}
	return f.matmul(layer, "o_proj", u, o, T, w.o)
}

// swiglu runs a dense SwiGLU MLP: y [T, D] = down(silu(gate x) * up x).
func (f *fwd) swiglu(layer int, op string, y, x []float32, w *mlpWeights) error {
	T, I := f.T, w.I
	gu := make([]float32, T*2*w.I)
	if err := f.matmul(layer, op+" gate_up", gu, x, T, w.gateUp); err != nil {
		return err
	}
	h := make([]float32, T*I)
	for t := 0; t < T; t++ {
		for j := 0; j < I; j++ {
			g := float64(gu[t*2*I+j])
			h[t*I+j] = float32(g/(1+math.Exp(-g))) * gu[t*2*I+I+j]
		}
	}
	return f.matmul(layer, op+" down", y, h, T, w.down)
}

func (f *fwd) mlp(layer int, ly *layer, x, u, H, beta []float32) error {
	c, T, D := f.c, f.T, f.c.D
	if ly.mlp != nil {
		if err := f.swiglu(layer, "mlp", u, x, ly.mlp); err != nil {
			return err
		}
		return f.writeBlock(layer, ly.mlpGR != nil, H, beta, u)
	}
	mw := ly.moe
	E, K := c.Experts, c.TopK
	rl := make([]float32, T*E)
	if err := f.matmul(layer, "router", rl, x, T, mw.router); err != nil {
		return err
	}
	wts := make([]float32, T*K)
	idx := make([]int32, T*K)
	ye := make([]float32, T*K*D)
	rk := make([]int32, T*K)
	if err := f.timed(StageMoE, layer, "route + experts", func() error {
		if err := kernels.TopKRoute(wts, idx, rl, T, E, K, c.NormTopK); err != nil {
			return err
		}
		return kernels.MoEExperts(ye, rk, x, T, idx, K, mw.experts)
	}); err != nil {
		return err
	}
	sh := make([]float32, T*D)
	if err := f.swiglu(layer, "shared_expert", sh, x, mw.shared); err != nil {
		return err
	}
	sg := make([]float32, T)
	if err := f.matmul(layer, "shared_expert_gate", sg, x, T, mw.sharedGate); err != nil {
		return err
	}
	for t := 0; t < T; t++ {
		gv := float32(1 / (1 + math.Exp(-float64(sg[t]))))
		for j := 0; j < D; j++ {
			sh[t*D+j] *= gv
		}
	}
	if ly.mlpGR != nil {
		return f.timed(StageMoE, layer, "gr_apply_moec", func() error {
			return kernels.GRApplyMoEC(H, beta, ye, T*K, rk, wts, sh, T, c.Streams, K, D)
		})
	}
	return f.timed(StageMoE, layer, "moe_comb", func() error {
		if err := kernels.MoECombine(u, ye, T*K, rk, wts, T, K, D); err != nil {
			return err
		}
		for i := range u {
			H[i] += u[i] + sh[i]
		}
		return nil
	})
}

func (f *fwd) ple(layer int, ly *layer, H []float32, tokens []int32) error {
	st := f.s.state
	return f.timed(StagePLE, layer, "ple", func() error {
		heads := ly.ple.hash.Heads()
		ids := make([]int32, f.T*heads)
		if err := ly.ple.hash.IDs(ids, tokens, st.pleCtx[layer]); err != nil {
			return err
		}
		return kernels.PLEApply(H, f.T, ids, ly.ple.w, st.pleConv[layer], float32(f.c.Eps))
	})
}
