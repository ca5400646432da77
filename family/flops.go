package family

// LayerFLOPs counts the floating-point operations of layer l over T tokens after pos0 cached ones:
// gemm is the dense products (2 flops per multiply-add: projections, GatedResidual mixing,
// router, the K routed experts each token uses plus the shared expert), mix the token-mixing
// work that is not a weight product: attention scores and P V over the keys each query attends
// (causal, and QSA-selected past the budget) plus the indexer's block scores, and the GDN
// recurrence at 6 dk dv flops per token and value head (S^T k, k delta^T, S^T q). Norms,
// activations and elementwise ops are not counted.
func LayerFLOPs(l *Layer, pos0, T int) (gemm, mix float64) {
	t := float64(T)
	gemm = readFLOPs(l.In, t) + readFLOPs(l.Post, t)
	if g := l.GDN; g != nil {
		gemm += g.QKV.flops(t) + g.Z.flops(t) + g.B.flops(t) + g.A.flops(t) + g.Out.flops(t)
		mix += 6 * t * float64(g.Hv*g.Dk*g.Dv)
	}
	if a := l.Attn; a != nil {
		gemm += a.Q.flops(t) + a.K.flops(t) + a.V.flops(t) + a.O.flops(t)
		x := a.Indexer
		if x != nil {
			gemm += x.QK.flops(t)
		}
		for p := pos0; p < pos0+T; p++ {
			keys := p + 1
			if x != nil && x.Ratio > 0 {
				nb := (p + 1) / x.Ratio
				mix += 2 * float64(x.Heads*x.Dim*nb)
				if keep := x.Budget / x.Ratio; nb > keep {
					keys = keep*x.Ratio + (p + 1 - nb*x.Ratio)
				}
			}
			mix += 4 * float64(a.Hq*a.HeadDim*keys) // Q K^T and P V
		}
	}
	if m := l.MoE; m != nil {
		gemm += m.Router.flops(t)
		gemm += 2 * t * float64(m.TopK) * 3 * float64(m.Down[0].N*m.I) // routed experts (gate, up, down)
		gemm += denseFLOPs(&m.Shared, t) + m.SharedGate.flops(t)
	}
	if m := l.MLP; m != nil {
		gemm += denseFLOPs(m, t)
	}
	return gemm, mix
}

// HeadFLOPs counts the head's products for rows rows of logits (the final mixer and lm_head).
func HeadFLOPs(h *Head, rows int) float64 {
	r := float64(rows)
	f := h.LMHead.flops(r)
	if h.Mixer != nil {
		f += grFLOPs(h.Mixer, r)
	}
	return f
}

func (m Mat) flops(t float64) float64 { return 2 * t * float64(m.N) * float64(m.K) }

func denseFLOPs(d *Dense, t float64) float64 { f := GateUpRows(d); return f.flops(t) + d.Down.flops(t) }

func grFLOPs(g *GR, t float64) float64 {
	f := g.Down.flops(t) + g.Up.flops(t)
	if g.Inj != nil {
		f += g.Inj.flops(t)
	}
	return f
}

func readFLOPs(r Read, t float64) float64 {
	if r.GR != nil {
		return grFLOPs(r.GR, t)
	}
	return 0
}
