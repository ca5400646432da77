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
	be    backend
	s     *Session
	c     *hfconfig.Config
	T     int
	pos0  int
	stats Stats
	// scratch holds the prefill's activation buffers by name, reused by every layer (one
	// allocation per buffer per prefill instead of one per layer).
	scratch map[string][]float32
	// hn holds the grouped norm of the streams H, valid (hnFor != nil) when the last write
	// produced it in its own pass for the GatedResidual read whose weights hnFor are.
	hn    []float32
	hnFor *kernels.GRWeights
}

// buf returns the scratch buffer called name with n elements, zeroed when zero is set (buffers
// that a kernel overwrites entirely need not be).
func (f *fwd) buf(name string, n int, zero bool) []float32 {
	b := f.scratch[name]
	if cap(b) < n {
		b = make([]float32, n)
		f.scratch[name] = b
		return b
	}
	b = b[:n]
	if zero {
		clear(b)
	}
	return b
}

// sigmoid64 is the logistic function in float64 (the attention output gate, the shared-expert
// gate and SwiGLU's silu of the dense MLPs), written so that neither branch overflows.
func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
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
	return f.timed(StageGEMM, layer, op, func() error { return f.be.matMul(y, x, T, w) })
}

func (s *Session) run(ctx context.Context, tokens []int32, opts PrefillOptions) (*Logits, error) {
	m := s.m
	c := m.cfg
	T, D := len(tokens), c.D
	S := max(c.Streams, 1)
	f := &fwd{be: m.dev.be, s: s, c: c, T: T, pos0: s.pos, scratch: map[string][]float32{}}
	start := time.Now()

	H := make([]float32, T*S*D)
	if c.Streams > 0 {
		f.hn = make([]float32, T*S*D)
	}
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
			f.hnFor = nil // PLE changes H after the last write normalised it
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
		if err := f.writeBlock(i, ly.attnGR != nil, H, beta, u, ly.mlpGR); err != nil {
			return nil, err
		}
		// MLP block
		if err := f.readBlock(i, ly.mlpGR, ly.postNorm, x, beta, H); err != nil {
			return nil, err
		}
		var nextGR *kernels.GRWeights // the next read, when the MLP write may normalise for it
		if i+1 < len(m.layers) && m.layers[i+1].ple == nil {
			nextGR = m.layers[i+1].attnGR
		}
		if err := f.mlp(i, ly, x, u, H, beta, nextGR); err != nil {
			return nil, err
		}
		if s.trace != nil {
			s.trace(i, "layer_out", H)
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(m.layers))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapf(ErrCancelled, err, "after the last layer")
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
			return f.be.grRead(xf, nil, Hsel, rows, m.mixer, float32(c.Eps))
		}); err != nil {
			return nil, err
		}
	} else if err := f.timed(StageGatedResidual, -1, "final norm", func() error {
		return f.be.rmsNorm(xf, Hsel[:rows*D], rows, D, m.norm, float32(c.Eps))
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
			if f.hnFor == gr {
				f.hnFor = nil
				return f.be.grReadNormed(x, beta, f.hn, f.T, gr)
			}
			return f.be.grRead(x, beta, H, f.T, gr, eps)
		})
	}
	return f.timed(StageGatedResidual, layer, "rmsnorm", func() error {
		return f.be.rmsNorm(x, H, f.T, f.c.D, norm, eps)
	})
}

// writeBlock adds a block output u [T, D] into the residual: H += beta (x) u, or H += u.
// With next set (the GatedResidual read that follows) the write also normalises H for it in
// the same pass (gr_norm_h4 fused into the write).
func (f *fwd) writeBlock(layer int, gated bool, H, beta, u []float32, next *kernels.GRWeights) error {
	return f.timed(StageGatedResidual, layer, "residual write", func() error {
		if gated && next != nil {
			f.hnFor = next
			return f.be.grWriteNormH(H, f.hn, beta, u, f.T, f.c.Streams, f.c.D, next.Norm, float32(f.c.Eps))
		}
		if gated {
			return f.be.grWrite(H, beta, u, f.T, f.c.Streams, f.c.D)
		}
		return f.be.add(H, u, nil)
	})
}

func (f *fwd) gdn(layer int, w *gdnWeights, x, u []float32) error {
	c, T := f.c, f.T
	st := f.s.state
	Hk, Hv, dk, dv := c.Hk, c.Hv, c.Dk, c.Dv
	C := 2*Hk*dk + Hv*dv
	qkv := f.buf("gdn qkv", T*C, false)
	z := f.buf("gdn z", T*Hv*dv, false)
	a := f.buf("gdn a", T*Hv, false)
	b := f.buf("gdn b", T*Hv, false)
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
	q := f.buf("gdn q", T*Hk*dk, true)
	k := f.buf("gdn k", T*Hk*dk, true)
	v := f.buf("gdn v", T*Hv*dv, true)
	g := f.buf("gdn g", T*Hv, true)
	beta := f.buf("gdn beta", T*Hv, true)
	p := kernels.GDNParams{T: T, Hk: Hk, Hv: Hv, Dk: dk, Dv: dv, ConvK: c.ConvK, Map: kernels.Grouped}
	if err := f.timed(StageGDN, layer, "gdn_pre", func() error {
		return f.be.gdnPre(q, k, v, g, beta, qkv, a, b, st.conv[layer], w.convW, w.aLog, w.dt, p)
	}); err != nil {
		return err
	}
	o := f.buf("gdn o", T*Hv*dv, true)
	if err := f.timed(StageGDN, layer, "gdn_scan", func() error {
		return f.be.gdnScan(o, st.rec[layer], q, k, v, g, beta, p)
	}); err != nil {
		return err
	}
	act := kernels.ActSilu
	if c.GateAct == "sigmoid" {
		act = kernels.ActSigmoid
	}
	y := qkv[:T*Hv*dv] // reuse
	if err := f.timed(StageGDN, layer, "gdn_post", func() error {
		return f.be.gdnPost(y, o, z, T, Hv, dv, w.norm, float32(c.Eps), act)
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
	qg := f.buf("attn qg", T*Hq*2*hd, false)
	if err := f.matmul(layer, "q_proj", qg, x, T, w.q); err != nil {
		return err
	}
	kc, vc := st.k[layer], st.v[layer]
	kRaw := f.buf("attn k", T*Hkv*hd, false)
	vRaw := f.buf("attn v", T*Hkv*hd, false)
	if err := f.matmul(layer, "k_proj", kRaw, x, T, w.k); err != nil {
		return err
	}
	if err := f.matmul(layer, "v_proj", vRaw, x, T, w.v); err != nil {
		return err
	}
	q := f.buf("attn q", T*Hq*hd, false)
	gate := f.buf("attn gate", T*Hq*hd, false)
	var sel *kernels.Selection
	if err := f.timed(StageAttention, layer, "q/k norm + rope (qsa_prep)", func() error {
		return f.be.attnPrep(q, gate, kc, vc, qg, kRaw, vRaw, w.qNorm, w.kNorm, T, Hq, Hkv, hd, c.RotaryDim, pos0, c.RopeTheta, eps)
	}); err != nil {
		return err
	}
	if w.idx != nil {
		nh, dh := c.IdxHeads, c.IdxDim
		iqk := f.buf("indexer qk", T*(nh+1)*dh, false)
		if err := f.matmul(layer, "indexer index_qk_proj", iqk, x, T, w.idx); err != nil {
			return err
		}
		iq := f.buf("indexer q", T*nh*dh, false)
		sel = &kernels.Selection{}
		if err := f.timed(StageAttention, layer, "qsa_index", func() error {
			return f.be.qsaIndex(sel, iq, st.idxK[layer], iqk, w.idxQN, w.idxKN, kernels.IndexerParams{
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
	o := f.buf("attn o", T*Hq*hd, true)
	if err := f.timed(StageAttention, layer, "qsa_flash", func() error {
		return f.be.attention(o, q, kc, vc, kernels.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: hd, Pos0: pos0, Scale: float32(1 / math.Sqrt(float64(hd)))}, sel)
	}); err != nil {
		return err
	}
	if err := f.timed(StageAttention, layer, "output gate", func() error {
		return f.be.sigmoidMul(o, gate)
	}); err != nil {
		return err
	}
	return f.matmul(layer, "o_proj", u, o, T, w.o)
}

// swiglu runs a dense SwiGLU MLP: y [T, D] = down(silu(gate x) * up x).
func (f *fwd) swiglu(layer int, op string, y, x []float32, w *mlpWeights) error {
	T, I := f.T, w.I
	gu := f.buf(op+" gate_up", T*2*w.I, false)
	if err := f.matmul(layer, op+" gate_up", gu, x, T, w.gateUp); err != nil {
		return err
	}
	h := f.buf(op+" h", T*I, false)
	if err := f.timed(StageMoE, layer, op+" swiglu", func() error { return f.be.swiglu(h, gu, T, I) }); err != nil {
		return err
	}
	return f.matmul(layer, op+" down", y, h, T, w.down)
}

func (f *fwd) mlp(layer int, ly *layer, x, u, H, beta []float32, next *kernels.GRWeights) error {
	c, T, D := f.c, f.T, f.c.D
	if ly.mlp != nil {
		if err := f.swiglu(layer, "mlp", u, x, ly.mlp); err != nil {
			return err
		}
		return f.writeBlock(layer, ly.mlpGR != nil, H, beta, u, next)
	}
	mw := ly.moe
	E, K := c.Experts, c.TopK
	rl := f.buf("router logits", T*E, false)
	if err := f.matmul(layer, "router", rl, x, T, mw.router); err != nil {
		return err
	}
	wts := make([]float32, T*K)
	idx := make([]int32, T*K)
	ye := f.buf("experts out", T*K*D, false)
	rk := make([]int32, T*K)
	if err := f.timed(StageMoE, layer, "route + experts", func() error {
		if err := f.be.topKRoute(wts, idx, rl, T, E, K, c.NormTopK); err != nil {
			return err
		}
		return f.be.moeExperts(ye, rk, x, T, idx, K, mw.experts)
	}); err != nil {
		return err
	}
	sh := f.buf("shared out", T*D, false)
	if err := f.swiglu(layer, "shared_expert", sh, x, mw.shared); err != nil {
		return err
	}
	sg := f.buf("shared gate", T, false)
	if err := f.matmul(layer, "shared_expert_gate", sg, x, T, mw.sharedGate); err != nil {
		return err
	}
	if err := f.timed(StageMoE, layer, "shared expert gate", func() error { return f.be.rowSigmoidScale(sh, sg, T, D) }); err != nil {
		return err
	}
	if ly.mlpGR != nil && next != nil {
		f.hnFor = next
		return f.timed(StageMoE, layer, "gr_norm_h_moec", func() error {
			return f.be.grNormHMoEC(H, f.hn, beta, ye, T*K, rk, wts, sh, T, c.Streams, K, D, next.Norm, float32(c.Eps))
		})
	}
	if ly.mlpGR != nil {
		return f.timed(StageMoE, layer, "gr_apply_moec", func() error {
			return f.be.grApplyMoEC(H, beta, ye, T*K, rk, wts, sh, T, c.Streams, K, D)
		})
	}
	return f.timed(StageMoE, layer, "moe_comb", func() error {
		if err := f.be.moeCombine(u, ye, T*K, rk, wts, T, K, D); err != nil {
			return err
		}
		return f.be.add(H, u, sh)
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
		return f.be.pleApply(H, f.T, ids, ly.ple.w, st.pleConv[layer], float32(f.c.Eps))
	})
}
