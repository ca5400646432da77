package strata

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// LoadOptions configure LoadModel.
type LoadOptions struct {
	// Progress, when set, is called after each tensor is read with the bytes done so far, the
	// checkpoint's total tensor bytes and the tensor's name.
	Progress func(done, total int64, name string)
	// WidenBudget is how many bytes of float32 copies of bf16/f16 weight matrices the backend's
	// weight store may make at load (op.WeightOptions.WidenBudget), so that GEMMs skip widening
	// them on every call (measured on a 2-core Zen 3 against bf16 widened per call by the AVX2
	// kernel: about 1.07x at T = 512 and none at 2048 on a Qwen3-Next slice, for 2.7x the peak
	// memory; BENCHMARKS.md). Routed experts are widened first, then the other matrices in load
	// order, each one only while the running total stays within the budget. 0 keeps every
	// weight in its file format (memory-mapped); a negative value widens all of them. A widened
	// matrix holds the same values, so results do not change. The metal backend ignores it (its
	// GEMMs widen in registers) and logs that it does.
	WidenBudget int64
	// Layers, when set ([lo, hi), 0 <= lo < hi <= layers), loads only the decoder layers lo..hi-1
	// (and the embedding when lo == 0, the final norm or mixer and lm_head when hi == layers):
	// one stage of a pipeline that splits the model over devices or machines. Its sessions take
	// the residual streams of the stage before (PrefillOptions.Hidden) when lo > 0 and return
	// theirs (Logits.Hidden) when hi < layers; chained stages give the whole model's logits
	// bitwise. The zero value loads every layer.
	Layers [2]int
}

// Model is a loaded checkpoint: its config and weights (bf16/f16 weights and MLX quantized
// weights stay in their file format, memory-mapped; norms and small vectors are widened to
// float32). A Model is safe for
// concurrent use by many sessions. Close releases the mapping once no session runs.
type Model struct {
	dev    *Device
	cfg    *hfconfig.Config
	dir    string
	ck     *safetensors.Checkpoint
	embed  *op.Matrix // [vocab, D] as stored (gathered and widened or dequantized per token by op.Embed)
	lmHead *op.Matrix
	norm   []float32     // qwen3_next final norm
	mixer  *op.GRWeights // qwen4_exp final read-only mixer
	layers []*layer      // the decoder layers loaded: lo..hi-1
	lo, hi int           // the stage: layers [lo, hi) of cfg.Layers
	info   ModelInfo     // the load-time check's findings (Info)
	// weights is the backend's store of this model's weights (uploaded on first use on Metal).
	weights op.Weights
	closed  atomic.Bool
	// use is held shared by every session call in flight and exclusively by Close, so Close
	// waits for running prefills before it unmaps the weights.
	use sync.RWMutex
}

type layer struct {
	index int // in the checkpoint (a stage's first layer need not be 0)
	kind  hfconfig.LayerType
	// qwen3_next pre-norms
	inNorm, postNorm []float32
	// qwen4_exp gated residuals
	attnGR, mlpGR *op.GRWeights
	gdn           *gdnWeights
	attn          *attnWeights
	moe           *moeWeights
	mlp           *mlpWeights // dense MLP layers (qwen3_next mlp_only_layers)
	ple           *pleWeights
}

type gdnWeights struct {
	qkv, z, b, a, out *op.Matrix
	convW, aLog, dt   []float32
	norm              []float32
}

type attnWeights struct {
	q, k, v, o   *op.Matrix
	qNorm, kNorm []float32
	idx          *op.Matrix // indexer index_qk_proj (qwen4_exp), nil otherwise
	idxQN, idxKN []float32
}

type mlpWeights struct {
	gateUp *op.Matrix // [2I, D], gate rows first
	down   *op.Matrix // [D, I]
	I      int
}

type moeWeights struct {
	router     *op.Matrix // [E, D]
	experts    *op.Experts
	shared     *mlpWeights
	sharedGate *op.Matrix // [1, D]
}

type pleWeights struct {
	hash *op.PLEHash
	w    *op.PLEWeights
	// parts, for a table split into row blocks of partRows rows (shard_k tensors), are the
	// blocks as views of the file; w.Table is nil and the backend gathers the rows a prompt uses
	// from them (op.PLEApply.Parts).
	parts    []*op.Matrix
	partRows int
}

// Arch names the architecture: "qwen3_next" or "qwen4_exp".
func (m *Model) Arch() string {
	if m.cfg.Arch == hfconfig.Qwen4Exp {
		return "qwen4_exp"
	}
	return "qwen3_next"
}

// Vocab is the vocabulary size (logits per token).
func (m *Model) Vocab() int { return m.cfg.Vocab }

// Layers is the number of decoder layers of the checkpoint (a stage loads LayerRange of them).
func (m *Model) Layers() int { return m.cfg.Layers }

// LayerRange is the half-open range [lo, hi) of decoder layers this Model loaded
// (LoadOptions.Layers; [0, Layers()) for a whole model).
func (m *Model) LayerRange() (lo, hi int) { return m.lo, m.hi }

// HiddenSize is the width of one token's residual streams, S*D floats (S = 4 streams for
// qwen4_exp, 1 for qwen3_next): the row length of PrefillOptions.Hidden and Logits.Hidden.
func (m *Model) HiddenSize() int { return max(m.cfg.Streams, 1) * m.cfg.D }

// Describe is a one-line summary of the model: sizes, heads and experts, then the MLX
// quantization and the pipeline stage where there are any.
func (m *Model) Describe() string {
	c := m.cfg
	nGDN, nAttn := 0, 0
	for _, t := range c.LayerTypes {
		if t == hfconfig.LinearAttention {
			nGDN++
		} else {
			nAttn++
		}
	}
	s := fmt.Sprintf("%s (%s): D %d, %d layers (%d GDN + %d attention), Hq %d / Hkv %d x %d, GDN Hk %d / Hv %d x %d, %d experts top-%d, vocab %d, streams %d",
		m.Arch(), c.ModelType, c.D, c.Layers, nGDN, nAttn, c.Hq, c.Hkv, c.HeadDim, c.Hk, c.Hv, c.Dk, c.Experts, c.TopK, c.Vocab, max(c.Streams, 1))
	s += quantNote(m.info)
	if m.lo > 0 || m.hi < c.Layers {
		s += fmt.Sprintf("; stage: layers %d..%d", m.lo, m.hi-1)
	}
	return s
}

// Close releases the checkpoint mapping (and, on the metal backend, the device-resident weights).
// It waits for session calls already running to finish; later calls of the model's sessions
// return an error wrapping ErrClosed. Closing twice is a no-op.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.use.Lock()
	defer m.use.Unlock()
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.weights.Release()
	return m.ck.Close()
}

// LoadModel loads a Hugging Face checkpoint directory (config.json plus model.safetensors or
// sharded safetensors with model.safetensors.index.json) of model_type qwen3_next,
// qwen4_exp_text or qwen4_exp, or an MLX conversion of qwen3_next (mlx_lm.convert: bf16, or
// affine-quantized at 2 to 8 bits with per-module entries; its quantized weights stay packed,
// views of the mapped files, and are dequantized inside the kernels). Every tensor the config
// implies must be present with the implied shape (extra mtp.* and model.visual.* tensors are
// skipped): the checks of Inspect, which also refuse other quantized formats by name and compare
// stored PLE hash buffers with the config (ModelInfo tells what was found; see Info). The
// resident weight bytes are logged and reported by Info. Errors wrap ErrCheckpoint (missing or
// corrupt files, tensors that disagree with the config; the message names the file and
// tensor), ErrUnsupported (a format, model type or setting strata does not run, named: e.g.
// `quantization method "fp8" is not supported`), ErrOutOfMemory or ErrInvalidArgument.
func LoadModel(dev *Device, dir string, opts LoadOptions) (*Model, error) {
	if dev == nil {
		return nil, wrapf(ErrInvalidArgument, nil, "nil device")
	}
	if err := checkpointDir(dir); err != nil {
		return nil, err
	}
	cfg, err := hfconfig.Load(dir)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "config")
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "checkpoint %s", dir)
	}
	m, err := build(dev, cfg, ck, dir, opts)
	if err != nil {
		ck.Close()
		return nil, err
	}
	if n, bytes, err := m.prepareWeights(); err != nil {
		ck.Close()
		return nil, wrapf(ErrCheckpoint, err, "preparing weights")
	} else if n > 0 {
		dev.logf(LogInfo, "widened %d weight matrices to float32 (%d MiB)", n, bytes>>20)
	}
	m.info.ResidentBytes = m.residentBytes()
	dev.logf(LogInfo, "loaded %s from %s", m.Describe(), dir)
	dev.logf(LogInfo, "resident weights %.1f MiB (checkpoint tensors %.1f MiB%s)", float64(m.info.ResidentBytes)/(1<<20),
		float64(m.info.TensorBytes)/(1<<20), quantNote(m.info))
	return m, nil
}

func build(dev *Device, cfg *hfconfig.Config, ck *safetensors.Checkpoint, dir string, opts LoadOptions) (*Model, error) {
	res, err := checkCheckpoint(cfg, ck, dir) // the checks Inspect runs
	if err != nil {
		return nil, err
	}
	layout := res.Layout
	l := &loader{ck: ck, layout: layout, quant: res.Quant, total: res.Bytes, progress: opts.Progress}
	m := &Model{dev: dev, cfg: cfg, dir: dir, ck: ck, info: newModelInfo(dir, cfg, ck, res), weights: dev.be.NewWeights(op.WeightOptions{WidenBudget: opts.WidenBudget})}
	c := cfg
	D := c.D
	m.lo, m.hi = opts.Layers[0], opts.Layers[1]
	if m.lo == 0 && m.hi == 0 {
		m.hi = c.Layers
	}
	if m.lo < 0 || m.lo >= m.hi || m.hi > c.Layers {
		return nil, wrapf(ErrInvalidArgument, nil, "LoadOptions.Layers [%d, %d) is not a non-empty range of the model's %d layers", m.lo, m.hi, c.Layers)
	}
	if m.lo == 0 || (c.TieWordEmbeddings && m.hi == c.Layers) {
		if m.embed, err = l.matrix(layout.Model("embed_tokens.weight"), c.Vocab, D); err != nil {
			return nil, err
		}
	}
	if m.hi == c.Layers {
		if c.TieWordEmbeddings {
			m.lmHead = m.embed
		} else if m.lmHead, err = l.matrix("lm_head.weight", c.Vocab, D); err != nil {
			return nil, err
		}
		if c.Arch == hfconfig.Qwen4Exp {
			if m.mixer, err = loadGR(l, layout.Model("hyper_connection_mixer."), c, false); err != nil {
				return nil, err
			}
		} else if m.norm, err = l.vec(layout.Model("norm.weight"), int64(D)); err != nil {
			return nil, err
		}
	}
	S := max(c.Streams, 1)
	for i := m.lo; i < m.hi; i++ {
		ly := &layer{index: i, kind: c.LayerTypes[i]}
		p := func(s string) string { return layout.Layer(i, s) }
		if c.Arch == hfconfig.Qwen4Exp {
			if ly.attnGR, err = loadGR(l, p("attn_hyper_connection."), c, true); err != nil {
				return nil, err
			}
			if ly.mlpGR, err = loadGR(l, p("mlp_hyper_connection."), c, true); err != nil {
				return nil, err
			}
		} else {
			if ly.inNorm, err = l.vec(p("input_layernorm.weight"), int64(D)); err != nil {
				return nil, err
			}
			if ly.postNorm, err = l.vec(p("post_attention_layernorm.weight"), int64(D)); err != nil {
				return nil, err
			}
		}
		if ly.kind == hfconfig.LinearAttention {
			if ly.gdn, err = loadGDN(l, p, c); err != nil {
				return nil, err
			}
		} else if ly.attn, err = loadAttn(l, p, c); err != nil {
			return nil, err
		}
		if c.IsMoELayer(i) {
			if ly.moe, err = loadMoE(l, p, c); err != nil {
				return nil, err
			}
		} else if ly.mlp, err = loadMLP(l, p("mlp."), D, c.DenseI); err != nil {
			return nil, err
		}
		if pi := c.PLEIndex(i); pi >= 0 {
			if ly.ple, err = loadPLE(l, p("ple."), c, pi, S); err != nil {
				return nil, err
			}
		}
		m.layers = append(m.layers, ly)
	}
	return m, nil
}

// matrixRefs lists where the model keeps each weight matrix: the routed experts, the other
// products prepareWeights hands the backend after them in load order (lm_head last; it is the
// embedding itself when tied), and the rest (the embedding and the PLE matrices, which it
// leaves alone).
func (m *Model) matrixRefs() (experts, rest, other []**op.Matrix) {
	addGR := func(g *op.GRWeights) {
		if g != nil {
			rest = append(rest, &g.Down, &g.Up)
			if g.Inj != nil {
				rest = append(rest, &g.Inj)
			}
		}
	}
	other = append(other, &m.embed)
	for _, ly := range m.layers {
		addGR(ly.attnGR)
		addGR(ly.mlpGR)
		if g := ly.gdn; g != nil {
			rest = append(rest, &g.qkv, &g.z, &g.b, &g.a, &g.out)
		}
		if a := ly.attn; a != nil {
			rest = append(rest, &a.q, &a.k, &a.v, &a.o)
			if a.idx != nil {
				rest = append(rest, &a.idx)
			}
		}
		if mw := ly.moe; mw != nil {
			for e := range mw.experts.GateUp {
				experts = append(experts, &mw.experts.GateUp[e], &mw.experts.Down[e])
				if mw.experts.Split() {
					experts = append(experts, &mw.experts.Up[e])
				}
			}
			rest = append(rest, &mw.router, &mw.shared.gateUp, &mw.shared.down, &mw.sharedGate)
		}
		if ly.mlp != nil {
			rest = append(rest, &ly.mlp.gateUp, &ly.mlp.down)
		}
		if ly.ple != nil {
			other = append(other, &ly.ple.w.Table, &ly.ple.w.Key, &ly.ple.w.Value)
			for i := range ly.ple.parts {
				other = append(other, &ly.ple.parts[i])
			}
		}
	}
	addGR(m.mixer)
	rest = append(rest, &m.lmHead)
	return experts, rest, other
}

// residentBytes is the memory of the weights the model holds (each matrix once, in its dtype:
// packed codes with scales and biases, 16-bit, or float32 copies the backend made at load; the
// float32 vectors).
func (m *Model) residentBytes() int64 {
	experts, rest, other := m.matrixRefs()
	seen := map[*op.Matrix]bool{}
	var n int64
	for _, p := range append(append(experts, rest...), other...) {
		if w := *p; w != nil && !seen[w] { // nil: a pipeline stage without the embedding or head
			seen[w] = true
			n += w.Bytes()
		}
	}
	vec := func(vs ...[]float32) {
		for _, v := range vs {
			n += 4 * int64(len(v))
		}
	}
	gr := func(g *op.GRWeights) {
		if g != nil {
			vec(g.Norm)
		}
	}
	vec(m.norm)
	gr(m.mixer)
	for _, ly := range m.layers {
		vec(ly.inNorm, ly.postNorm)
		gr(ly.attnGR)
		gr(ly.mlpGR)
		if g := ly.gdn; g != nil {
			vec(g.convW, g.aLog, g.dt, g.norm)
		}
		if a := ly.attn; a != nil {
			vec(a.qNorm, a.kNorm, a.idxQN, a.idxKN)
		}
		if ly.ple != nil {
			w := ly.ple.w
			vec(w.NormKey, w.NormQuery, w.NormConv, w.ConvW)
		}
	}
	return n
}

// prepareWeights hands the weight matrices to the backend's store (op.Weights.Prepare) in
// priority order, routed experts first, then the other products in load order, and keeps the
// matrix it returns for each: on the CPU a float32 copy of a 16-bit matrix while
// LoadOptions.WidenBudget lasts. It reports how many matrices were replaced and their bytes.
func (m *Model) prepareWeights() (n int, bytes int64, err error) {
	experts, rest, _ := m.matrixRefs()
	for _, p := range append(experts, rest...) {
		w := *p
		if w == nil { // a stage without the head
			continue
		}
		got, err := m.weights.Prepare(w)
		if err != nil {
			return n, bytes, err
		}
		if got != w {
			*p = got
			n++
			bytes += got.Bytes()
		}
	}
	return n, bytes, nil
}

func loadGR(l *loader, pre string, c *hfconfig.Config, inject bool) (*op.GRWeights, error) {
	S, D, R := c.Streams, c.D, c.HCRank
	g := &op.GRWeights{S: S, D: D, R: R}
	var err error
	if g.Norm, err = l.vec(pre+"hc_norm.weight", int64(S*D)); err != nil {
		return nil, err
	}
	if g.Down, err = l.matrix(pre+"input_mix_weight_down.weight", R, S*D); err != nil {
		return nil, err
	}
	if g.Up, err = l.matrix(pre+"input_mix_weight_up.weight", S*D, R); err != nil {
		return nil, err
	}
	if inject {
		if g.Inj, err = l.matrix(pre+"block_inject_weight.weight", S, S*D); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func loadGDN(l *loader, p func(string) string, c *hfconfig.Config) (*gdnWeights, error) {
	D, Hk, Hv, dk, dv := c.D, c.Hk, c.Hv, c.Dk, c.Dv
	C := 2*Hk*dk + Hv*dv
	g := &gdnWeights{}
	var err error
	if c.Arch == hfconfig.Qwen4Exp {
		if g.qkv, err = l.matrix(p("linear_attn.in_proj_qkv.weight"), C, D); err != nil {
			return nil, err
		}
		if g.z, err = l.matrix(p("linear_attn.in_proj_z.weight"), Hv*dv, D); err != nil {
			return nil, err
		}
		if g.b, err = l.matrix(p("linear_attn.in_proj_b.weight"), Hv, D); err != nil {
			return nil, err
		}
		if g.a, err = l.matrix(p("linear_attn.in_proj_a.weight"), Hv, D); err != nil {
			return nil, err
		}
	} else {
		// Qwen3-Next groups the fused projections per qk head g (r = Hv/Hk value heads each):
		// qkvz rows [q_g | k_g | v of the r heads | z of the r heads], ba rows [b of r | a of r].
		// Regroup once at load into the qwen4_exp order [q | k | v], z, b, a.
		r := Hv / Hk
		grp := 2*dk + 2*r*dv
		qkvz, err := l.matrix(p("linear_attn.in_proj_qkvz.weight"), Hk*grp, D)
		if err != nil {
			return nil, err
		}
		var qkv, z []rowPart
		for part := 0; part < 3; part++ { // q, k, v
			for h := 0; h < Hk; h++ {
				switch part {
				case 0:
					qkv = append(qkv, rowPart{qkvz, h * grp, dk})
				case 1:
					qkv = append(qkv, rowPart{qkvz, h*grp + dk, dk})
				case 2:
					qkv = append(qkv, rowPart{qkvz, h*grp + 2*dk, r * dv})
				}
			}
		}
		for h := 0; h < Hk; h++ {
			z = append(z, rowPart{qkvz, h*grp + 2*dk + r*dv, r * dv})
		}
		if g.qkv, err = concatRows(qkv); err != nil {
			return nil, wrapf(ErrCheckpoint, err, "regrouping in_proj_qkvz")
		}
		if g.z, err = concatRows(z); err != nil {
			return nil, wrapf(ErrCheckpoint, err, "regrouping in_proj_qkvz")
		}
		ba, err := l.matrix(p("linear_attn.in_proj_ba.weight"), 2*Hv, D)
		if err != nil {
			return nil, err
		}
		var bs, as []rowPart
		for h := 0; h < Hk; h++ {
			bs = append(bs, rowPart{ba, h * 2 * r, r})
			as = append(as, rowPart{ba, h*2*r + r, r})
		}
		if g.b, err = concatRows(bs); err != nil {
			return nil, wrapf(ErrCheckpoint, err, "regrouping in_proj_ba")
		}
		if g.a, err = concatRows(as); err != nil {
			return nil, wrapf(ErrCheckpoint, err, "regrouping in_proj_ba")
		}
	}
	if g.convW, err = l.vec(p("linear_attn.conv1d.weight"), l.layout.ConvShape(int64(C), int64(c.ConvK))...); err != nil {
		return nil, err
	}
	if g.aLog, err = l.vec(p("linear_attn.A_log"), int64(Hv)); err != nil {
		return nil, err
	}
	if g.dt, err = l.vec(p("linear_attn.dt_bias"), int64(Hv)); err != nil {
		return nil, err
	}
	if g.norm, err = l.vec(p("linear_attn.norm.weight"), int64(dv)); err != nil {
		return nil, err
	}
	if g.out, err = l.matrix(p("linear_attn.out_proj.weight"), D, Hv*dv); err != nil {
		return nil, err
	}
	return g, nil
}

func loadAttn(l *loader, p func(string) string, c *hfconfig.Config) (*attnWeights, error) {
	D, Hq, Hkv, hd := c.D, c.Hq, c.Hkv, c.HeadDim
	a := &attnWeights{}
	var err error
	if a.q, err = l.matrix(p("self_attn.q_proj.weight"), Hq*hd*2, D); err != nil {
		return nil, err
	}
	if a.k, err = l.matrix(p("self_attn.k_proj.weight"), Hkv*hd, D); err != nil {
		return nil, err
	}
	if a.v, err = l.matrix(p("self_attn.v_proj.weight"), Hkv*hd, D); err != nil {
		return nil, err
	}
	if a.o, err = l.matrix(p("self_attn.o_proj.weight"), D, Hq*hd); err != nil {
		return nil, err
	}
	if a.qNorm, err = l.vec(p("self_attn.q_norm.weight"), int64(hd)); err != nil {
		return nil, err
	}
	if a.kNorm, err = l.vec(p("self_attn.k_norm.weight"), int64(hd)); err != nil {
		return nil, err
	}
	if c.Arch == hfconfig.Qwen4Exp {
		// Every qwen4_exp attention layer carries the QSA indexer (transformers builds it
		// unconditionally); with budget >= context it selects every token.
		nh, dh := c.IdxHeads+c.IdxKVHeads, c.IdxDim
		if a.idx, err = l.matrix(p("self_attn.indexer.index_qk_proj.weight"), nh*dh, D); err != nil {
			return nil, err
		}
		if a.idxQN, err = l.vec(p("self_attn.indexer.q_layernorm.weight"), int64(dh)); err != nil {
			return nil, err
		}
		if a.idxKN, err = l.vec(p("self_attn.indexer.k_layernorm.weight"), int64(dh)); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func loadMLP(l *loader, pre string, D, I int) (*mlpWeights, error) {
	gate, err := l.matrix(pre+"gate_proj.weight", I, D)
	if err != nil {
		return nil, err
	}
	up, err := l.matrix(pre+"up_proj.weight", I, D)
	if err != nil {
		return nil, err
	}
	gu, err := concatRows([]rowPart{{gate, 0, I}, {up, 0, I}})
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "%sgate_proj/up_proj", pre)
	}
	down, err := l.matrix(pre+"down_proj.weight", D, I)
	if err != nil {
		return nil, err
	}
	return &mlpWeights{gateUp: gu, down: down, I: I}, nil
}

func loadMoE(l *loader, p func(string) string, c *hfconfig.Config) (*moeWeights, error) {
	D, E, I := c.D, c.Experts, c.MoEI
	mw := &moeWeights{}
	var err error
	if mw.router, err = l.matrix(p("mlp.gate.weight"), E, D); err != nil {
		return nil, err
	}
	ex := &op.Experts{E: E, D: D, I: I, GateUp: make([]*op.Matrix, E), Down: make([]*op.Matrix, E)}
	switch {
	case l.layout.SwitchMLP:
		gate, err := l.matrices(p("mlp.switch_mlp.gate_proj.weight"), E, I, D)
		if err != nil {
			return nil, err
		}
		up, err := l.matrices(p("mlp.switch_mlp.up_proj.weight"), E, I, D)
		if err != nil {
			return nil, err
		}
		if ex.Down, err = l.matrices(p("mlp.switch_mlp.down_proj.weight"), E, D, I); err != nil {
			return nil, err
		}
		// The experts stay views of the file: gate and up apart (op.Experts.Up).
		ex.GateUp, ex.Up = gate, up
	case l.layout.FusedExperts:
		if ex.GateUp, err = l.matrices(p("mlp.experts.gate_up_proj"), E, 2*I, D); err != nil {
			return nil, err
		}
		if ex.Down, err = l.matrices(p("mlp.experts.down_proj"), E, D, I); err != nil {
			return nil, err
		}
	default:
		// One tensor per expert and projection (Qwen3-Next's releases): views of the file, gate
		// and up apart (op.Experts.Up), never copied.
		ex.Up = make([]*op.Matrix, E)
		for e := 0; e < E; e++ {
			pre := p(fmt.Sprintf("mlp.experts.%d.", e))
			if ex.GateUp[e], err = l.matrix(pre+"gate_proj.weight", I, D); err != nil {
				return nil, err
			}
			if ex.Up[e], err = l.matrix(pre+"up_proj.weight", I, D); err != nil {
				return nil, err
			}
			if ex.Down[e], err = l.matrix(pre+"down_proj.weight", D, I); err != nil {
				return nil, err
			}
		}
	}
	mw.experts = ex
	if mw.shared, err = loadMLP(l, p("mlp.shared_expert."), D, c.SharedI); err != nil {
		return nil, err
	}
	if mw.sharedGate, err = l.matrix(p("mlp.shared_expert_gate.weight"), 1, D); err != nil {
		return nil, err
	}
	return mw, nil
}

func loadPLE(l *loader, pre string, c *hfconfig.Config, pleIndex, S int) (*pleWeights, error) {
	eos := int32(-1)
	if len(c.EOS) > 0 {
		eos = int32(c.EOS[0])
	}
	h, err := op.NewPLEHash(c.Vocab, c.NGramSize, c.HeadsPerNGram, c.NGramVocabBase, c.NGramVocabDivisor, pleIndex, c.Seed, eos)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "PLE layer %d", pleIndex)
	}
	D := c.D
	heads := (c.NGramSize - 1) * c.HeadsPerNGram
	hd := c.PLEEmbedDim / heads
	w := &op.PLEWeights{S: S, D: D, EmbedDim: c.PLEEmbedDim, HeadDim: hd, Dilation: c.NGramSize}
	rows := h.TableRows()
	if parts := l.layout.NGramParts; parts > 1 {
		// Published checkpoints split the n-gram table into equal row blocks shard_{k} (128
		// blocks, 102 GB in Qwen3.8-Flash-Next): kept as views of the file, never concatenated;
		// the backend gathers the rows a prompt uses from them.
		if rows%parts != 0 {
			return nil, wrapf(ErrCheckpoint, nil, "%sple_embedding.ngram_embedding: %d rows do not split into %d equal shards", pre, rows, parts)
		}
		pw := &pleWeights{hash: h, w: w, partRows: rows / parts}
		for k := 0; k < parts; k++ {
			m, err := l.matrix(fmt.Sprintf("%sple_embedding.ngram_embedding.shard_%d.weight", pre, k), rows/parts, hd)
			if err != nil {
				return nil, err
			}
			pw.parts = append(pw.parts, m)
		}
		if err := loadPLEProjections(l, pre, c, w, S, D); err != nil {
			return nil, err
		}
		return pw, nil
	} else if w.Table, err = l.matrix(pre+"ple_embedding.ngram_embedding.weight", rows, hd); err != nil {
		return nil, err
	}
	if err := loadPLEProjections(l, pre, c, w, S, D); err != nil {
		return nil, err
	}
	return &pleWeights{hash: h, w: w}, nil
}

// loadPLEProjections loads a PLE layer's key and value projections, norms and conv weights.
func loadPLEProjections(l *loader, pre string, c *hfconfig.Config, w *op.PLEWeights, S, D int) error {
	var err error
	if w.Key, err = l.matrix(pre+"key_proj.weight", S*D, c.PLEEmbedDim); err != nil {
		return err
	}
	if w.Value, err = l.matrix(pre+"value_proj.weight", D, c.PLEEmbedDim); err != nil {
		return err
	}
	if w.NormKey, err = l.vec(pre+"norm_key.weight", int64(S*D)); err != nil {
		return err
	}
	if w.NormQuery, err = l.vec(pre+"norm_query.weight", int64(S*D)); err != nil {
		return err
	}
	if w.NormConv, err = l.vec(pre+"norm_conv.weight", int64(S*D)); err != nil {
		return err
	}
	if w.ConvW, err = l.vec(pre+"conv1d.weight", l.layout.ConvShape(int64(S*D), int64(c.PLEConvK))...); err != nil {
		return err
	}
	return nil
}

// PrefillFLOPs counts the floating-point operations of one prefill of T tokens after pos0
// cached ones with lastRows rows of logits (1, or T for all logits): gemm is the dense products
// (2 flops per multiply-add: projections, GatedResidual mixing, router, the K routed experts
// each token actually uses plus the shared expert, lm_head), total adds the token-mixing work
// that is not a weight product: attention scores and P V over the keys each query attends
// (causal, and QSA-selected past the budget) plus the indexer's block scores, and the GDN
// recurrence at 6 dk dv flops per token and value head (S^T k, k delta^T, S^T q). Norms,
// activations and elementwise ops are not counted.
func (m *Model) PrefillFLOPs(pos0, T, lastRows int) (gemm, total float64) {
	c := m.cfg
	t, D := float64(T), float64(c.D)
	S := float64(max(c.Streams, 1))
	var mix float64
	grRead := func(g *op.GRWeights) float64 {
		if g == nil {
			return 0
		}
		f := 2 * t * (2 * float64(g.R) * S * D)
		if g.Inj != nil {
			f += 2 * t * S * S * D
		}
		return f
	}
	for _, ly := range m.layers {
		gemm += grRead(ly.attnGR) + grRead(ly.mlpGR)
		if ly.gdn != nil {
			Hk, Hv, dk, dv := float64(c.Hk), float64(c.Hv), float64(c.Dk), float64(c.Dv)
			gemm += 2 * t * D * (2*Hk*dk + Hv*dv + Hv*dv + 2*Hv) // qkv, z, b, a
			gemm += 2 * t * Hv * dv * D                          // out_proj
			mix += 6 * t * Hv * dk * dv
		}
		if ly.attn != nil {
			Hq, Hkv, hd := float64(c.Hq), float64(c.Hkv), float64(c.HeadDim)
			gemm += 2 * t * D * (2*Hq*hd + 2*Hkv*hd) // q (+ gate), k, v
			gemm += 2 * t * Hq * hd * D              // o_proj
			idx := ly.attn.idx != nil
			if idx {
				gemm += 2 * t * D * float64((c.IdxHeads+c.IdxKVHeads)*c.IdxDim)
			}
			for p := pos0; p < pos0+T; p++ {
				keys := p + 1
				if idx && c.IdxRatio > 0 {
					nb := (p + 1) / c.IdxRatio
					mix += 2 * float64(c.IdxHeads*c.IdxDim*nb)
					if keep := c.IdxBudget / c.IdxRatio; nb > keep {
						keys = keep*c.IdxRatio + (p + 1 - nb*c.IdxRatio)
					}
				}
				mix += 4 * Hq * hd * float64(keys) // Q K^T and P V
			}
		}
		if mw := ly.moe; mw != nil {
			E, K, I := float64(c.Experts), float64(c.TopK), float64(c.MoEI)
			gemm += 2 * t * D * E                        // router
			gemm += 2 * t * K * 3 * D * I                // routed experts (gate, up, down)
			gemm += 2 * t * 3 * D * float64(mw.shared.I) // shared expert
			gemm += 2 * t * D                            // shared expert gate
		}
		if ly.mlp != nil {
			gemm += 2 * t * 3 * D * float64(ly.mlp.I)
		}
	}
	gemm += grRead(m.mixer) * float64(lastRows) / t
	gemm += 2 * float64(lastRows) * D * float64(c.Vocab)
	return gemm, gemm + mix
}

// quantNote describes a checkpoint's quantization for the load log: "; MLX, affine, 4 bits, ..."
// or "" for an unquantized Hugging Face checkpoint.
func quantNote(in ModelInfo) string {
	switch {
	case in.Quantization != "":
		return "; MLX " + in.Quantization
	case in.MLX:
		return "; MLX conversion, not quantized"
	}
	return ""
}
