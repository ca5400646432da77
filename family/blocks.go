package family

import (
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/op"
)

// The blocks of a decoder layer are written once, generic over how their weights are held: M
// for a matrix, V for a float vector. A Plan holds them with M = Mat and V = Vec, where the
// checkpoint keeps each weight (the aliases Layer, GDN, Attention, ...); a loaded model holds
// the same blocks with the weights read onto a backend (strata: M = *op.Matrix, V = []float32),
// converted by MapLayer and MapHead. An optional weight is a pointer (*M, *V), nil when absent.

// LayerOf is one decoder layer: an optional PLE n-gram embedding added to the streams first,
// then the mixer block (GDN or Attention, exactly one set) between the residual read In and its
// write, then the MLP block (MoE or MLP) between the read Post and its write.
type LayerOf[M, V any] struct {
	Index    int
	Type     hfconfig.LayerType
	In, Post ReadOf[M, V]
	GDN      *GDNOf[M, V]
	Attn     *AttentionOf[M, V]
	MoE      *MoEOf[M, V]
	MLP      *DenseOf[M, V]
	PLE      *PLEOf[M, V]
}

// HeadOf is what follows the last decoder layer: a final RMSNorm1p (Norm) or a read-only
// GatedResidual mixer (Mixer), then LMHead [Vocab, D] (the embedding's tensor when tied).
type HeadOf[M, V any] struct {
	Norm   *V
	Mixer  *GROf[M, V]
	LMHead M
}

// ReadOf is how a block reads the residual: RMSNorm1p of the single stream (Norm [D]; the write
// adds the block output), or a GatedResidual read of the streams (GR; the write adds beta (x) u).
type ReadOf[M, V any] struct {
	Norm *V
	GR   *GROf[M, V]
}

// GROf is a GatedResidual module over S streams of D with low rank R (docs/MODELS.md
// "GatedResidual"): hc_norm [S*D], input_mix_weight_down [R, S*D], input_mix_weight_up [S*D, R]
// and, for the reads of a layer, block_inject_weight [S, S*D] (nil for the final mixer).
type GROf[M, V any] struct {
	S, D, R  int
	Norm     V
	Down, Up M
	Inj      *M
}

// GDNOf is a Gated DeltaNet mixer: projections QKV [2*Hk*dk + Hv*dv, D] (channels q | k | v),
// Z [Hv*dv, D], B and A [Hv, D], Out [D, Hv*dv]; the depthwise conv over the QKV channels
// (kernel ConvK, Conv holding channel c's taps at [c*ConvK, (c+1)*ConvK)); A_log and dt_bias [Hv];
// the gated norm's weight [dv] (plain, not zero-centred) with activation Act. Map says which qk
// head value head h reads: h / (Hv/Hk) (op.Grouped, the zero value: the Hugging Face and MLX
// files) or h % Hk (op.Tiled: llama.cpp's Qwen3.5 GGUF files, whose converter reorders the value
// heads; every per-value-head row, channel and column of the layer is in that order).
type GDNOf[M, V any] struct {
	Hk, Hv, Dk, Dv, ConvK int
	Act                   op.GateAct
	Map                   op.HeadMap
	QKV, Z, B, A, Out     M
	Conv, ALog, DtBias    V
	Norm                  V
}

// Channels is the width of the short conv (and its state): 2*Hk*dk + Hv*dv.
func (g *GDNOf[M, V]) Channels() int { return 2*g.Hk*g.Dk + g.Hv*g.Dv }

// AttentionOf is a gated GQA attention mixer: Q [Hq*2*HeadDim, D] (per head its query then its
// output gate), K and V [Hkv*HeadDim, D], O [D, Hq*HeadDim]; zero-centred q/k norms [HeadDim];
// partial RoPE over the first Rot dims at Theta; scores scaled by HeadDim^-0.5; an optional QSA
// Indexer that selects the keys past its budget.
type AttentionOf[M, V any] struct {
	Hq, Hkv, HeadDim, Rot int
	Theta                 float64
	Q, K, V, O            M
	QNorm, KNorm          V
	Indexer               *IndexerOf[M, V]
}

// IndexerOf is the QSA indexer: QK [(Heads+1)*Dim, D] (Heads query heads and one key head), its
// zero-centred q/k norms [Dim], blocks of Ratio tokens, Budget tokens kept per query.
type IndexerOf[M, V any] struct {
	Heads, Dim, Ratio, Budget int
	QK                        M
	QNorm, KNorm              V
}

// MoEOf is a routed-experts MLP with a shared expert: Router [E, D] (softmax over all E, top-K,
// renormalised with NormTopK); per expert GateUp[e] ([2I, D], gate rows first, when Up is nil;
// else the gate [I, D] with Up[e] [I, D]) and Down[e] [D, I]; Shared, gated per token by
// sigmoid(SharedGate x) (SharedGate [1, D]).
type MoEOf[M, V any] struct {
	E, TopK, I       int
	NormTopK         bool
	Router           M
	GateUp, Up, Down []M
	Shared           DenseOf[M, V]
	SharedGate       M
}

// DenseOf is a SwiGLU MLP: GateUp [2I, D] (gate rows then up rows), Down [D, I]; or, with Up, the
// gate GateUp [I, D] and Up [I, D] apart (a GGUF file's ffn_gate and ffn_up, kept as views of the
// file rather than their rows copied together).
type DenseOf[M, V any] struct {
	I      int
	GateUp M
	Up     *M
	Down   M
}

// PLEOf is a hashed n-gram embedding layer (qwen4_exp's PLE; docs/MODELS.md "PLE"): Index is its
// position among the PLE layers (it seeds the hash), the hash sizes, the table split into
// len(Table) equal row blocks (one block: unsplit), the key [S*D, EmbedDim] and value
// [D, EmbedDim] projections, the zero-centred norms [S*D] and the depthwise conv [S*D x ConvK]
// with dilation Dilation.
type PLEOf[M, V any] struct {
	Index                                      int
	Vocab, NGram, HeadsPerNGram, Base, Divisor int
	Seed                                       int64
	EOS                                        int32
	S, D, EmbedDim, HeadDim, ConvK             int
	Dilation                                   int
	Table                                      []M
	Key, Value                                 M
	NormKey, NormQuery, NormConv, Conv         V
}

// Heads is the number of hashed heads, EmbedDim / HeadDim.
func (p *PLEOf[M, V]) Heads() int { return p.EmbedDim / p.HeadDim }

// ConvState is the length of the carried conv state: (ConvK-1)*Dilation steps of S*D channels.
func (p *PLEOf[M, V]) ConvState() int { return (p.ConvK - 1) * p.Dilation * p.S * p.D }

// The blocks of a Plan: their weights are where the checkpoint holds them.
type (
	Layer     = LayerOf[Mat, Vec]
	Head      = HeadOf[Mat, Vec]
	Read      = ReadOf[Mat, Vec]
	GR        = GROf[Mat, Vec]
	GDN       = GDNOf[Mat, Vec]
	Attention = AttentionOf[Mat, Vec]
	Indexer   = IndexerOf[Mat, Vec]
	MoE       = MoEOf[Mat, Vec]
	Dense     = DenseOf[Mat, Vec]
	PLE       = PLEOf[Mat, Vec]
)

// MapLayer converts the weights of a layer's blocks with mat and vec (e.g. a plan's references
// into loaded weights), keeping every size; absent blocks and weights stay absent. The weights
// are converted block by block in a fixed order (In, Post, the mixer, the MLP, the PLE; within a
// block as its fields are listed, the MoE's router and shared gate first, the PLE's table last),
// and the first error stops the conversion and is returned.
func MapLayer[M1, V1, M2, V2 any](l *LayerOf[M1, V1], mat func(M1) (M2, error), vec func(V1) (V2, error)) (*LayerOf[M2, V2], error) {
	c := &mapper[M1, V1, M2, V2]{mat: mat, vec: vec}
	out := &LayerOf[M2, V2]{Index: l.Index, Type: l.Type, In: c.read(l.In), Post: c.read(l.Post),
		GDN: c.gdn(l.GDN), Attn: c.attention(l.Attn), MoE: c.moe(l.MoE), MLP: c.dense(l.MLP), PLE: c.ple(l.PLE)}
	if c.err != nil {
		return nil, c.err
	}
	return out, nil
}

// MapHead converts the weights of the head with mat and vec as MapLayer does: LMHead, then the
// final norm or mixer.
func MapHead[M1, V1, M2, V2 any](h *HeadOf[M1, V1], mat func(M1) (M2, error), vec func(V1) (V2, error)) (HeadOf[M2, V2], error) {
	c := &mapper[M1, V1, M2, V2]{mat: mat, vec: vec}
	out := HeadOf[M2, V2]{LMHead: c.m(h.LMHead), Norm: c.optV(h.Norm), Mixer: c.gr(h.Mixer)}
	return out, c.err
}

// mapper converts weights from (M1, V1) to (M2, V2), keeping the first error; after it, every
// conversion returns the zero value without calling mat or vec.
type mapper[M1, V1, M2, V2 any] struct {
	mat func(M1) (M2, error)
	vec func(V1) (V2, error)
	err error
}

func (c *mapper[M1, V1, M2, V2]) m(x M1) (y M2) {
	if c.err == nil {
		y, c.err = c.mat(x)
	}
	return y
}

func (c *mapper[M1, V1, M2, V2]) v(x V1) (y V2) {
	if c.err == nil {
		y, c.err = c.vec(x)
	}
	return y
}

func (c *mapper[M1, V1, M2, V2]) ms(xs []M1) []M2 {
	if xs == nil {
		return nil
	}
	out := make([]M2, len(xs))
	for i, x := range xs {
		out[i] = c.m(x)
	}
	return out
}

func (c *mapper[M1, V1, M2, V2]) optM(x *M1) *M2 {
	if x == nil {
		return nil
	}
	y := c.m(*x)
	return &y
}

func (c *mapper[M1, V1, M2, V2]) optV(x *V1) *V2 {
	if x == nil {
		return nil
	}
	y := c.v(*x)
	return &y
}

func (c *mapper[M1, V1, M2, V2]) read(r ReadOf[M1, V1]) ReadOf[M2, V2] {
	return ReadOf[M2, V2]{Norm: c.optV(r.Norm), GR: c.gr(r.GR)}
}

func (c *mapper[M1, V1, M2, V2]) gr(g *GROf[M1, V1]) *GROf[M2, V2] {
	if g == nil {
		return nil
	}
	return &GROf[M2, V2]{S: g.S, D: g.D, R: g.R, Norm: c.v(g.Norm), Down: c.m(g.Down), Up: c.m(g.Up), Inj: c.optM(g.Inj)}
}

func (c *mapper[M1, V1, M2, V2]) gdn(g *GDNOf[M1, V1]) *GDNOf[M2, V2] {
	if g == nil {
		return nil
	}
	return &GDNOf[M2, V2]{Hk: g.Hk, Hv: g.Hv, Dk: g.Dk, Dv: g.Dv, ConvK: g.ConvK, Act: g.Act, Map: g.Map,
		QKV: c.m(g.QKV), Z: c.m(g.Z), B: c.m(g.B), A: c.m(g.A), Out: c.m(g.Out),
		Conv: c.v(g.Conv), ALog: c.v(g.ALog), DtBias: c.v(g.DtBias), Norm: c.v(g.Norm)}
}

func (c *mapper[M1, V1, M2, V2]) attention(a *AttentionOf[M1, V1]) *AttentionOf[M2, V2] {
	if a == nil {
		return nil
	}
	return &AttentionOf[M2, V2]{Hq: a.Hq, Hkv: a.Hkv, HeadDim: a.HeadDim, Rot: a.Rot, Theta: a.Theta,
		Q: c.m(a.Q), K: c.m(a.K), V: c.m(a.V), O: c.m(a.O), QNorm: c.v(a.QNorm), KNorm: c.v(a.KNorm),
		Indexer: c.indexer(a.Indexer)}
}

func (c *mapper[M1, V1, M2, V2]) indexer(x *IndexerOf[M1, V1]) *IndexerOf[M2, V2] {
	if x == nil {
		return nil
	}
	return &IndexerOf[M2, V2]{Heads: x.Heads, Dim: x.Dim, Ratio: x.Ratio, Budget: x.Budget,
		QK: c.m(x.QK), QNorm: c.v(x.QNorm), KNorm: c.v(x.KNorm)}
}

func (c *mapper[M1, V1, M2, V2]) moe(m *MoEOf[M1, V1]) *MoEOf[M2, V2] {
	if m == nil {
		return nil
	}
	return &MoEOf[M2, V2]{E: m.E, TopK: m.TopK, I: m.I, NormTopK: m.NormTopK,
		Router: c.m(m.Router), SharedGate: c.m(m.SharedGate),
		GateUp: c.ms(m.GateUp), Up: c.ms(m.Up), Down: c.ms(m.Down), Shared: *c.dense(&m.Shared)}
}

func (c *mapper[M1, V1, M2, V2]) dense(d *DenseOf[M1, V1]) *DenseOf[M2, V2] {
	if d == nil {
		return nil
	}
	return &DenseOf[M2, V2]{I: d.I, GateUp: c.m(d.GateUp), Up: c.optM(d.Up), Down: c.m(d.Down)}
}

func (c *mapper[M1, V1, M2, V2]) ple(p *PLEOf[M1, V1]) *PLEOf[M2, V2] {
	if p == nil {
		return nil
	}
	return &PLEOf[M2, V2]{Index: p.Index, Vocab: p.Vocab, NGram: p.NGram, HeadsPerNGram: p.HeadsPerNGram, Base: p.Base,
		Divisor: p.Divisor, Seed: p.Seed, EOS: p.EOS, S: p.S, D: p.D, EmbedDim: p.EmbedDim, HeadDim: p.HeadDim,
		ConvK: p.ConvK, Dilation: p.Dilation,
		Key: c.m(p.Key), Value: c.m(p.Value),
		NormKey: c.v(p.NormKey), NormQuery: c.v(p.NormQuery), NormConv: c.v(p.NormConv), Conv: c.v(p.Conv),
		Table: c.ms(p.Table)}
}
