package family

import (
	"fmt"
	"strconv"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/op"
)

// Builder writes a Plan: each method records the checkpoint tensor it names (Plan.Tensors, in
// call order) and returns the weight reference. The block methods (GR, GDN, Attention, MoE,
// Dense) are the blocks the families share, named as Hugging Face and MLX files name them under a
// layer; a family composes them and adds its own.
type Builder struct {
	P *Plan
	c *hfconfig.Config
	l Layout
}

// NewBuilder starts the plan of c under layout l (D, Streams, Vocab, Eps from c).
func NewBuilder(c *hfconfig.Config, l Layout) *Builder {
	return &Builder{P: &Plan{Config: c, Layout: l, D: c.D, Streams: max(c.Streams, 1), Vocab: c.Vocab, Eps: c.Eps}, c: c, l: l}
}

func (b *Builder) spec(name string, linear bool, init Init, shape ...int64) {
	b.P.Tensors = append(b.P.Tensors, Spec{Name: name, Shape: shape, Linear: linear, Init: init})
}

// Linear records a Linear weight [n, k] and returns it whole.
func (b *Builder) Linear(name string, n, k int, role string) Mat {
	b.spec(name, true, InitLinear, int64(n), int64(k))
	return Whole(name, n, k, role)
}

// Embedding records an embedding table [n, k] (a Linear for quantization) and returns it.
func (b *Builder) Embedding(name string, n, k int) Mat {
	b.spec(name, true, InitEmbed, int64(n), int64(k))
	return Whole(name, n, k, "embedding")
}

// Stacked records a stacked Linear weight [e, n, k] and returns its e slices.
func (b *Builder) Stacked(name string, e, n, k int, role string) []Mat {
	b.spec(name, true, InitLinear, int64(e), int64(n), int64(k))
	out := make([]Mat, e)
	for i := range out {
		out[i] = Slice(name, i, 0, n, k, role)
	}
	return out
}

// Gain records a norm weight [n]: zero-centred (applied as 1 + w; stored 1 + w where shifted) or
// plain (applied as stored).
func (b *Builder) Gain(name string, n int, zeroCentred, shifted bool) Vec {
	init := InitGain1
	if zeroCentred {
		init = InitGain0
	}
	b.spec(name, false, init, int64(n))
	return Vec{Tensor: name, Len: n, Shifted: shifted}
}

// Vector records a float vector [n] drawn as init.
func (b *Builder) Vector(name string, n int, init Init) Vec {
	b.spec(name, false, init, int64(n))
	return Vec{Tensor: name, Len: n}
}

// Conv records a depthwise conv1d weight of C channels and kernel K in the layout's shape.
func (b *Builder) Conv(name string, C, K int) Vec {
	b.spec(name, false, InitConv, b.l.ConvShape(C, K)...)
	return Vec{Tensor: name, Len: C * K}
}

// GR records a GatedResidual module under pre (hc_norm, input_mix_weight_down/up and, with
// inject, block_inject_weight), its hc_norm stored shifted where shifted.
func (b *Builder) GR(pre string, inject, shifted bool) *GR {
	S, D, R := b.c.Streams, b.c.D, b.c.HCRank
	g := &GR{S: S, D: D, R: R}
	g.Norm = b.Gain(pre+"hc_norm.weight", S*D, true, shifted)
	g.Down = b.Linear(pre+"input_mix_weight_down.weight", R, S*D, "hyper_connection")
	g.Up = b.Linear(pre+"input_mix_weight_up.weight", S*D, R, "hyper_connection")
	if inject {
		inj := b.Linear(pre+"block_inject_weight.weight", S, S*D, "hyper_connection")
		g.Inj = &inj
	}
	return g
}

// gdnCommon records the parts of a Gated DeltaNet layer every projection layout shares.
func (b *Builder) gdnCommon(i int, g *GDN) {
	L := func(s string) string { return b.l.Layer(i, "linear_attn."+s) }
	g.Conv = b.Conv(L("conv1d.weight"), g.Channels(), g.ConvK)
	g.DtBias = b.Vector(L("dt_bias"), g.Hv, InitDtBias)
	g.ALog = b.Vector(L("A_log"), g.Hv, InitALog)
	g.Norm = b.Gain(L("norm.weight"), g.Dv, false, false)
	g.Out = b.Linear(L("out_proj.weight"), b.c.D, g.Hv*g.Dv, "linear_attn")
}

func (b *Builder) gdnSizes() *GDN {
	c := b.c
	act := op.ActSilu
	if c.GateAct == "sigmoid" {
		act = op.ActSigmoid
	}
	return &GDN{Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv, ConvK: c.ConvK, Act: act}
}

// GDN records a Gated DeltaNet layer with separate projections: in_proj_qkv [C, D] (q | k | v),
// in_proj_z [Hv*dv, D], in_proj_b and in_proj_a [Hv, D].
func (b *Builder) GDN(i int) *GDN {
	g, D := b.gdnSizes(), b.c.D
	L := func(s string) string { return b.l.Layer(i, "linear_attn."+s) }
	g.QKV = b.Linear(L("in_proj_qkv.weight"), g.Channels(), D, "linear_attn")
	g.Z = b.Linear(L("in_proj_z.weight"), g.Hv*g.Dv, D, "linear_attn")
	g.B = b.Linear(L("in_proj_b.weight"), g.Hv, D, "linear_attn")
	g.A = b.Linear(L("in_proj_a.weight"), g.Hv, D, "linear_attn")
	b.gdnCommon(i, g)
	return g
}

// GDNGrouped records a Gated DeltaNet layer whose fused projections are grouped per qk head h
// (r = Hv/Hk value heads each): in_proj_qkvz rows [q_h | k_h | v of the r heads | z of the r
// heads], in_proj_ba rows [b of the r heads | a of the r heads]. The plan regroups their rows
// into the separate layout's order [q | k | v], z, b, a.
func (b *Builder) GDNGrouped(i int) *GDN {
	g, D := b.gdnSizes(), b.c.D
	Hk, Hv, dk, dv := g.Hk, g.Hv, g.Dk, g.Dv
	r := Hv / Hk
	grp := 2*dk + 2*r*dv
	L := func(s string) string { return b.l.Layer(i, "linear_attn."+s) }
	qkvz := b.Linear(L("in_proj_qkvz.weight"), Hk*grp, D, "linear_attn")
	ba := b.Linear(L("in_proj_ba.weight"), 2*Hv, D, "linear_attn")
	var q, k, v, z, bs, as []Mat
	for h := 0; h < Hk; h++ {
		q = append(q, qkvz.Sub(h*grp, dk))
		k = append(k, qkvz.Sub(h*grp+dk, dk))
		v = append(v, qkvz.Sub(h*grp+2*dk, r*dv))
		z = append(z, qkvz.Sub(h*grp+2*dk+r*dv, r*dv))
		bs = append(bs, ba.Sub(h*2*r, r))
		as = append(as, ba.Sub(h*2*r+r, r))
	}
	g.QKV = Rows("linear_attn", append(append(q, k...), v...)...)
	g.Z = Rows("linear_attn", z...)
	g.B = Rows("linear_attn", bs...)
	g.A = Rows("linear_attn", as...)
	b.gdnCommon(i, g)
	return g
}

// Attention records a gated attention layer: q_proj [Hq*2*hd, D] (per head the query, then the
// output gate), k_proj and v_proj [Hkv*hd, D], o_proj [D, Hq*hd], q_norm and k_norm [hd]
// (zero-centred, stored shifted where shifted), partial RoPE over c.RotaryDim dims at c.RopeTheta.
func (b *Builder) Attention(i int, shifted bool) *Attention {
	c := b.c
	D, Hq, Hkv, hd := c.D, c.Hq, c.Hkv, c.HeadDim
	L := func(s string) string { return b.l.Layer(i, "self_attn."+s) }
	a := &Attention{Hq: Hq, Hkv: Hkv, HeadDim: hd, Rot: c.RotaryDim, Theta: c.RopeTheta}
	a.Q = b.Linear(L("q_proj.weight"), Hq*hd*2, D, "self_attn")
	a.K = b.Linear(L("k_proj.weight"), Hkv*hd, D, "self_attn")
	a.V = b.Linear(L("v_proj.weight"), Hkv*hd, D, "self_attn")
	a.O = b.Linear(L("o_proj.weight"), D, Hq*hd, "self_attn")
	a.QNorm = b.Gain(L("q_norm.weight"), hd, true, shifted)
	a.KNorm = b.Gain(L("k_norm.weight"), hd, true, shifted)
	return a
}

// Indexer records the QSA indexer of attention layer i: index_qk_proj [(nH + kvH) * ihd, D] and
// its q/k layernorms [ihd] (zero-centred, stored shifted where shifted).
func (b *Builder) Indexer(i int, shifted bool) *Indexer {
	c := b.c
	L := func(s string) string { return b.l.Layer(i, "self_attn.indexer."+s) }
	x := &Indexer{Heads: c.IdxHeads, Dim: c.IdxDim, Ratio: c.IdxRatio, Budget: c.IdxBudget}
	x.QK = b.Linear(L("index_qk_proj.weight"), (c.IdxHeads+c.IdxKVHeads)*c.IdxDim, c.D, "indexer")
	x.QNorm = b.Gain(L("q_layernorm.weight"), c.IdxDim, true, shifted)
	x.KNorm = b.Gain(L("k_layernorm.weight"), c.IdxDim, true, shifted)
	return x
}

// MoE records the sparse MoE block of layer i: the router mlp.gate [E, D], the experts in the
// layout's storage, the shared expert and its gate mlp.shared_expert_gate [1, D].
func (b *Builder) MoE(i int) *MoE {
	c := b.c
	D, E, I := c.D, c.Experts, c.MoEI
	L := func(s string) string { return b.l.Layer(i, "mlp."+s) }
	m := &MoE{E: E, TopK: c.TopK, I: I, NormTopK: c.NormTopK}
	m.Router = b.Linear(L("gate.weight"), E, D, "router")
	switch b.l.Experts {
	case Stacked:
		m.GateUp = b.Stacked(L("switch_mlp.gate_proj.weight"), E, I, D, "experts")
		m.Up = b.Stacked(L("switch_mlp.up_proj.weight"), E, I, D, "experts")
		m.Down = b.Stacked(L("switch_mlp.down_proj.weight"), E, D, I, "experts")
	case Fused:
		m.GateUp = b.Stacked(L("experts.gate_up_proj"), E, 2*I, D, "experts")
		m.Down = b.Stacked(L("experts.down_proj"), E, D, I, "experts")
	default:
		for e := 0; e < E; e++ {
			p := "experts." + strconv.Itoa(e) + "."
			m.GateUp = append(m.GateUp, b.Linear(L(p+"gate_proj.weight"), I, D, "experts"))
			m.Up = append(m.Up, b.Linear(L(p+"up_proj.weight"), I, D, "experts"))
			m.Down = append(m.Down, b.Linear(L(p+"down_proj.weight"), D, I, "experts"))
		}
	}
	m.Shared = *b.Dense(b.l.Layer(i, "mlp.shared_expert."), c.SharedI, "shared_expert")
	m.SharedGate = b.Linear(L("shared_expert_gate.weight"), 1, D, "shared_expert_gate")
	return m
}

// Dense records a SwiGLU MLP under pre: gate_proj and up_proj [I, D] (their rows concatenated,
// gate first) and down_proj [D, I].
func (b *Builder) Dense(pre string, I int, role string) *Dense {
	D := b.c.D
	gate := b.Linear(pre+"gate_proj.weight", I, D, role)
	up := b.Linear(pre+"up_proj.weight", I, D, role)
	return &Dense{I: I, GateUp: Rows(role, gate, up), Down: b.Linear(pre+"down_proj.weight", D, I, role)}
}

// MLP records layer i's MLP block: the MoE block where c.IsMoELayer(i), else a dense MLP of
// intermediate_size under mlp.
func (b *Builder) MLP(ly *Layer) {
	if b.c.IsMoELayer(ly.Index) {
		ly.MoE = b.MoE(ly.Index)
		return
	}
	ly.MLP = b.Dense(b.l.Layer(ly.Index, "mlp."), b.c.DenseI, "mlp")
}

// Head sets the plan's lm_head: the embedding when tie_word_embeddings (an lm_head tensor the
// checkpoint stores anyway is skipped, as transformers ties it to the embedding), else the
// layout's lm_head [Vocab, D].
func (b *Builder) Head() {
	if b.c.TieWordEmbeddings {
		b.P.Head.LMHead = b.P.Embed
		b.P.Skipped = append(b.P.Skipped, Skip{Prefix: b.l.LMHead, Reason: "tie_word_embeddings: lm_head is the embedding, the stored copy is not used"})
		return
	}
	b.P.Head.LMHead = b.Linear(b.l.LMHead, b.c.Vocab, b.c.D, "lm_head")
}

// Skip adds the layout's skipped groups to the plan (the multi-token-prediction head's reason
// with its layer count where the config gives one).
func (b *Builder) Skip() {
	for _, s := range b.l.Skipped {
		if s.Prefix == "mtp." && b.c.MTPLayers > 0 {
			s.Reason = fmt.Sprintf("multi-token-prediction head (mtp_num_hidden_layers %d): used in decoding, not by prefill", b.c.MTPLayers)
		}
		b.P.Skipped = append(b.P.Skipped, s)
	}
}

// Check returns an error when a plan's layer mixes up its blocks (one mixer, one MLP), a
// programming error of a family caught by tests.
func (p *Plan) Check() error {
	for _, l := range p.Layers {
		if (l.GDN == nil) == (l.Attn == nil) || (l.MoE == nil) == (l.MLP == nil) || (l.In.GR == nil) == (l.In.Norm == nil) {
			return fmt.Errorf("family %s: layer %d of the plan needs one mixer, one MLP and one kind of residual read", p.Config.Family, l.Index)
		}
	}
	return nil
}
