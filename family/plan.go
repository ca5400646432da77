package family

import (
	"strings"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/op"
)

// Plan is a model as strata runs it: its sizes, every layer's blocks with the checkpoint tensors
// their weights are read from (under one Layout: the blocks of blocks.go with M = Mat, V = Vec),
// and every tensor the checkpoint must hold.
// A family builds it (Family.Plan); the runner, the session cache, the memory estimate, resident
// bytes, FLOPs and the checkpoint check are all derived from it.
type Plan struct {
	Config *hfconfig.Config
	Layout Layout
	// D is the hidden size, Streams the residual streams (1, or hc_count), Vocab the logits.
	D, Streams, Vocab int
	Eps               float64
	Embed             Mat // token embedding [Vocab, D]
	Head              Head
	Layers            []Layer
	// Tensors are every tensor the plan reads, in order, with their stored (logical) shapes:
	// what a checkpoint must hold besides Constants and the Skipped groups.
	Tensors []Spec
	// Constants are tensors a checkpoint may hold that strata derives itself and checks instead
	// of loading (e.g. the PLE hash buffers): each group absent, or present whole and equal to
	// its values.
	Constants []ConstantGroup
	// Skipped are the tensor groups a checkpoint may carry that the model does not run.
	Skipped []Skip
}

// GateUpRows is the gate and up rows of d as one Mat [2I, D] (GateUp, or GateUp's rows then Up's).
func GateUpRows(d *Dense) Mat {
	if d.Up == nil {
		return d.GateUp
	}
	return Rows(d.GateUp.Role, d.GateUp, *d.Up)
}

// Mat is where a weight matrix [N, K] is read from: row ranges of checkpoint tensors,
// concatenated in order (one part: a view of the file; several: the rows regrouped into a copy).
type Mat struct {
	N, K  int
	Parts []Part
	// Role names what the matrix is (e.g. "router", "experts", "shared_expert_gate") for
	// conversions that treat some roles apart (MLX quantizes the routers at 8 bits).
	Role string
}

// Part is rows [Row, Row+Rows) of a checkpoint tensor: a 2-D one [n, K] (Index < 0) or slice
// Index of a stacked 3-D one [E, n, K].
type Part struct {
	Tensor    string
	Index     int
	Row, Rows int
}

// Whole is a Mat of one whole 2-D tensor [n, k].
func Whole(tensor string, n, k int, role string) Mat {
	return Mat{N: n, K: k, Parts: []Part{{Tensor: tensor, Index: -1, Rows: n}}, Role: role}
}

// Slice is a Mat of slice e of a stacked tensor [E, n, k], rows [row, row+rows).
func Slice(tensor string, e, row, rows, k int, role string) Mat {
	return Mat{N: rows, K: k, Parts: []Part{{Tensor: tensor, Index: e, Row: row, Rows: rows}}, Role: role}
}

// Rows concatenates row ranges of Mats of the same width into one.
func Rows(role string, ms ...Mat) Mat {
	out := Mat{Role: role}
	for _, m := range ms {
		out.N += m.N
		out.K = m.K
		out.Parts = append(out.Parts, m.Parts...)
	}
	return out
}

// Sub is rows [row, row+rows) of m (m a single part).
func (m Mat) Sub(row, rows int) Mat {
	p := m.Parts[0]
	p.Row += row
	p.Rows = rows
	return Mat{N: rows, K: m.K, Parts: []Part{p}, Role: m.Role}
}

// Vec is a float vector read widened to float32 from a whole tensor. Shifted marks a
// zero-centred gain stored as 1 + w (an MLX conversion's, a GGUF file's): the loader reads it as
// stored - 1. NegExp marks A_log stored as -exp(A_log) (a GGUF file's ssm_a): the loader reads
// it as log(-stored), in float64.
type Vec struct {
	Tensor  string
	Len     int
	Shifted bool
	NegExp  bool
}

// Spec is one checkpoint tensor: its name, its shape as stored (a Linear weight [out, in], the
// logical shape of a quantized one), whether it is the weight of a Linear or Embedding module
// (which a conversion may store quantized), whether it is an Embedding table, and how a generated
// checkpoint draws it.
type Spec struct {
	Name      string
	Shape     []int64
	Linear    bool
	Embedding bool
	// TensorScale names the one scale an FP8 copy of this table stores for the whole tensor,
	// shared by the tables of one module split into row blocks (Qwen3.8-Flash-Next-FP8's n-gram
	// table: ngram_embedding.weight_scale, w = e4m3(code) * scale), instead of a
	// <module>.weight_scale_inv grid; "" for the others.
	TensorScale string
	Init        Init
}

// Module is the module path of a Linear weight: its name without ".weight" (the key of a
// per-module quantization entry, and of modules_to_not_convert).
func (s Spec) Module() string { return strings.TrimSuffix(s.Name, ".weight") }

// Init is how a random checkpoint (internal/modelgen) draws a tensor's values.
type Init int

// Initialisations.
const (
	InitLinear Init = iota // N(0, 1/in) for a Linear [.., out, in]
	InitEmbed              // N(0, 1)
	InitGain0              // a zero-centred gain (applied as 1 + w): N(0, 0.1^2)
	InitGain1              // a plain gain: N(1, 0.1^2)
	InitConv               // a depthwise conv: N(0, 0.5^2)
	InitALog               // log(1 + 15 u), u uniform in [0, 1)
	InitDtBias             // 0.5 + u
)

// ConstantGroup is a set of tensors (e.g. one PLE layer's hash buffers) that a checkpoint holds
// all or none of; present, each must be I64 with exactly the values strata derives.
type ConstantGroup struct {
	Tensors []Constant
	// Group names the kind for reports, e.g. "ple.ple_embedding.{layer_multipliers,...}", with
	// Reason why it is not loaded.
	Group, Reason string
}

// Constant is one derived int64 tensor and an explanation of element i.
type Constant struct {
	Name   string
	Values []int64
	Why    func(i int) string
}

// Skip is a group of checkpoint tensors (names starting with Prefix) the model does not load.
type Skip struct {
	Prefix, Reason string
	// Vision marks the vision tower (a checkpoint with language_model_only must carry none).
	Vision bool
}

// State is one part of a session's state for one layer: per cached token Row elements with the
// shape RowShape (attention K and V, the indexer's keys), or a fixed-size state of Shape (the GDN
// conv and recurrent states, the PLE conv state and token context). Host states live in host
// memory (the PLE's last token ids, integer bookkeeping); the others on the device.
type State struct {
	Layer int
	Role  string
	DType op.DType
	Row   int   // elements per token, 0 for a fixed-size state
	Shape []int // per token (Row > 0) or the whole state
	Host  bool
}

// Len is the element count of a fixed-size state, or of rows tokens of a per-token one.
func (s State) Len(rows int) int {
	if s.Row > 0 {
		return rows * s.Row
	}
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// State roles.
const (
	RoleK         = "k"          // attention K after k_norm and RoPE [Hkv, HeadDim] per token
	RoleV         = "v"          // attention V [Hkv, HeadDim] per token
	RoleIndexKeys = "index_keys" // QSA indexer raw keys [Dim] per token
	RoleConv      = "conv"       // GDN short-conv state [ConvK-1, channels]: the last inputs, oldest first
	RoleRecurrent = "recurrent"  // GDN recurrent state [Hv, dk, dv] float32
	RolePLEConv   = "ple_conv"   // PLE conv state [(ConvK-1)*Dilation, S*D]
	RolePLETokens = "ple_tokens" // PLE token context: the last 2 token ids (int32, host)
)

// States lists the layer's session states, in a fixed order (mixer, then PLE).
func (l *LayerOf[M, V]) States() []State {
	var out []State
	i := l.Index
	if g := l.GDN; g != nil {
		out = append(out,
			State{Layer: i, Role: RoleConv, DType: op.F32, Shape: []int{g.ConvK - 1, g.Channels()}},
			State{Layer: i, Role: RoleRecurrent, DType: op.F32, Shape: []int{g.Hv, g.Dk, g.Dv}})
	}
	if a := l.Attn; a != nil {
		kv := a.Hkv * a.HeadDim
		out = append(out,
			State{Layer: i, Role: RoleK, DType: op.F32, Row: kv, Shape: []int{a.Hkv, a.HeadDim}},
			State{Layer: i, Role: RoleV, DType: op.F32, Row: kv, Shape: []int{a.Hkv, a.HeadDim}})
		if x := a.Indexer; x != nil {
			out = append(out, State{Layer: i, Role: RoleIndexKeys, DType: op.F32, Row: x.Dim, Shape: []int{x.Dim}})
		}
	}
	if p := l.PLE; p != nil {
		out = append(out,
			State{Layer: i, Role: RolePLEConv, DType: op.F32, Shape: []int{(p.ConvK - 1) * p.Dilation, p.S * p.D}},
			State{Layer: i, Role: RolePLETokens, DType: op.I32, Shape: []int{2}, Host: true})
	}
	return out
}

// Walk lists every matrix and vector of the plan in a fixed order (the embedding and head, then
// layer by layer, block by block): two plans of one config under different layouts list the same
// weights at the same positions, which is how a conversion maps one layout onto another.
func (p *Plan) Walk() (mats []Mat, vecs []Vec) {
	read := func(r Read) {
		if r.Norm != nil {
			vecs = append(vecs, *r.Norm)
		}
		if g := r.GR; g != nil {
			vecs = append(vecs, g.Norm)
			mats = append(mats, g.Down, g.Up)
			if g.Inj != nil {
				mats = append(mats, *g.Inj)
			}
		}
	}
	mats = append(mats, p.Embed, p.Head.LMHead)
	read(Read{Norm: p.Head.Norm, GR: p.Head.Mixer})
	for _, l := range p.Layers {
		read(l.In)
		read(l.Post)
		if g := l.GDN; g != nil {
			mats = append(mats, g.QKV, g.Z, g.B, g.A, g.Out)
			vecs = append(vecs, g.Conv, g.ALog, g.DtBias, g.Norm)
		}
		if a := l.Attn; a != nil {
			mats = append(mats, a.Q, a.K, a.V, a.O)
			vecs = append(vecs, a.QNorm, a.KNorm)
			if x := a.Indexer; x != nil {
				mats = append(mats, x.QK)
				vecs = append(vecs, x.QNorm, x.KNorm)
			}
		}
		if m := l.MoE; m != nil {
			mats = append(mats, m.Router, m.SharedGate, GateUpRows(&m.Shared), m.Shared.Down)
			for e := range m.GateUp {
				// gate, up, down whatever the storage (fused gate_up rows split in halves)
				if m.Up != nil {
					mats = append(mats, m.GateUp[e], m.Up[e], m.Down[e])
				} else {
					mats = append(mats, m.GateUp[e].Sub(0, m.I), m.GateUp[e].Sub(m.I, m.I), m.Down[e])
				}
			}
		}
		if d := l.MLP; d != nil {
			mats = append(mats, GateUpRows(d), d.Down)
		}
		if x := l.PLE; x != nil {
			mats = append(mats, x.Key, x.Value)
			mats = append(mats, x.Table...)
			vecs = append(vecs, x.NormKey, x.NormQuery, x.NormConv, x.Conv)
		}
	}
	return mats, vecs
}
