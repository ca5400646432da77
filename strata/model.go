package strata

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all" // every model family strata runs
	"github.com/stratakernels/strata/internal/gguf"
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
	// Compute is the arithmetic of the linear layers' products (dense projections, routed and
	// shared experts, lm_head): "f32" (or "", the default: float32, results unchanged), "bf16"
	// (activations rounded to bfloat16, BF16, FP8 and MLX affine weights as bfloat16, float32
	// sums in VDPBF16PS order: the instruction where the CPU has AVX512_BF16, else its FMA
	// emulation) or "int8" (activations quantized per row and block of 32 to int8, MLX affine
	// and FP8 codes and the GGUF block types used as integers with their scales, int32 sums:
	// VNNI, AVX2 maddubs or NEON SDOT; the weights read as stored, each panel of 32 columns
	// packed per call into a small scratch, so that no mode adds resident bytes to the file's:
	// ModelInfo.ResidentBytes is the f32 mode's; but a GGUF file's Q4_0, Q4_1 and Q4_K weights,
	// which int8 packs once at load into panels of their blocks' size and then lets the mapped
	// file's pages go: ResidentBytes counts the panels in place of the blocks). Weights a mode does not take (int8: BF16, F16,
	// F32, MLX float modes; bf16: F16, F32, MLX float modes) run in f32. Model.Compute says what
	// ran with which kernel and why; BENCHMARKS.md gives the speed and the accuracy against the
	// float64 goldens. A CPU option: the metal backend refuses a mode other than f32. Another
	// name is refused (ErrInvalidArgument, naming it).
	Compute string
}

// Model is a loaded checkpoint: its config, its family's plan and its weights (bf16/f16 weights
// and MLX quantized weights stay in their file format, memory-mapped; norms and small vectors are
// widened to float32). A Model is safe for concurrent use by many sessions. Close releases the
// mapping once no session runs.
type Model struct {
	dev   *Device
	cfg   *hfconfig.Config
	plan  *family.Plan
	dir   string
	ck    *safetensors.Checkpoint
	gg    *gguf.File // the GGUF file, in place of ck, of a model loaded from one
	embed *op.Matrix // [vocab, D] as stored (gathered and widened or dequantized per token by op.Embed)
	// head is the final norm or read-only mixer and lm_head (the last stage of a pipeline; else
	// the zero value).
	head   family.HeadOf[*op.Matrix, []float32]
	layers []*layer  // the decoder layers loaded: lo..hi-1
	lo, hi int       // the stage: layers [lo, hi) of cfg.Layers
	info   ModelInfo // the load-time check's findings (Info)
	// weights is the backend's store of this model's weights (uploaded on first use on Metal).
	weights op.Weights
	closed  atomic.Bool
	// use is held shared by every session call in flight and exclusively by Close, so Close
	// waits for running prefills before it unmaps the weights.
	use sync.RWMutex
	fp  fingerprint // computed on first use (Fingerprint)
	// mode is LoadOptions.Compute: state files and prompt-cache checkpoints record it, since a
	// state made in one mode continues with other bits in another.
	mode op.ComputeMode
	// spare holds what the last closed session allocated (Session.Close), handed to the next
	// NewSession so that a process that prefills session after session reuses one set of
	// activation buffers and one cache instead of allocating (and page-faulting) them anew.
	spareMu sync.Mutex
	spare   spareSession
}

// spareSession is a closed session's scratch and cache (both nil for none).
type spareSession struct {
	scratch op.Scratch
	cache   *cache
	maxCtx  int // the cache's capacity
}

// takeSpare returns the spare scratch (or a new one) and the spare cache when it holds maxCtx
// tokens (cleared), else nil after freeing it.
func (m *Model) takeSpare(maxCtx int) (op.Scratch, *cache) {
	m.spareMu.Lock()
	sp := m.spare
	m.spare = spareSession{}
	m.spareMu.Unlock()
	if sp.scratch == nil {
		sp.scratch = m.dev.be.NewScratch()
	}
	if sp.cache != nil && sp.maxCtx != maxCtx {
		sp.cache.free(m.dev.be)
		sp.cache = nil
	}
	if sp.cache != nil {
		sp.cache.clear(m)
	}
	return sp.scratch, sp.cache
}

// keepSpare makes a closing session's scratch and cache (nil for none) the spare of an open model
// without one, else releases them.
func (m *Model) keepSpare(sc op.Scratch, c *cache, maxCtx int) {
	m.spareMu.Lock()
	defer m.spareMu.Unlock()
	if m.spare.scratch == nil && !m.closed.Load() {
		m.spare = spareSession{scratch: sc, cache: c, maxCtx: maxCtx}
		return
	}
	sc.Release()
	c.free(m.dev.be)
}

// layer is one loaded decoder layer: the plan's layer with each weight read onto the backend
// (family.MapLayer; exactly one mixer and one MLP block set, as the plan says), and what the ops
// take besides its weights.
type layer struct {
	family.LayerOf[*op.Matrix, []float32]
	// experts are the MoE block's routed experts as op.MoEExperts takes them (its GateUp, Up and
	// Down slices, shared: one value per layer, which the metal backend keys its uploads by);
	// nil without a MoE block.
	experts *op.Experts
	// hash is the PLE block's n-gram hash (nil without a PLE block).
	hash *op.PLEHash
}

// The loaded blocks the runner names apart from a layer.
type (
	readBlock  = family.ReadOf[*op.Matrix, []float32]
	grBlock    = family.GROf[*op.Matrix, []float32]
	denseBlock = family.DenseOf[*op.Matrix, []float32]
)

// grWeights is a loaded GatedResidual module as the GatedResidual ops take it.
func grWeights(g *grBlock) *op.GRWeights {
	w := &op.GRWeights{S: g.S, D: g.D, R: g.R, Norm: g.Norm, Down: g.Down, Up: g.Up}
	if g.Inj != nil {
		w.Inj = *g.Inj
	}
	return w
}

// Arch names the model family: its name in package family's registry.
func (m *Model) Arch() string { return m.cfg.Family }

// Vocab is the vocabulary size (logits per token).
func (m *Model) Vocab() int { return m.cfg.Vocab }

// Layers is the number of decoder layers of the checkpoint (a stage loads LayerRange of them).
func (m *Model) Layers() int { return m.cfg.Layers }

// LayerRange is the half-open range [lo, hi) of decoder layers this Model loaded
// (LoadOptions.Layers; [0, Layers()) for a whole model).
func (m *Model) LayerRange() (lo, hi int) { return m.lo, m.hi }

// HiddenSize is the width of one token's residual streams, S*D floats (S streams: 4 for
// Qwen3.8-Flash-Next's hyper-connections, 1 otherwise): the row length of PrefillOptions.Hidden
// and Logits.Hidden.
func (m *Model) HiddenSize() int { return m.plan.Streams * m.plan.D }

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
	s := fmt.Sprintf("%s (%s): D %d, %d layers (%d GDN + %d attention), Hq %d / Hkv %d x %d, GDN Hk %d / Hv %d x %d",
		m.Arch(), c.ModelType, c.D, c.Layers, nGDN, nAttn, c.Hq, c.Hkv, c.HeadDim, c.Hk, c.Hv, c.Dk)
	if c.Experts > 0 {
		s += fmt.Sprintf(", %d experts top-%d", c.Experts, c.TopK)
	}
	s += fmt.Sprintf(", vocab %d, streams %d", c.Vocab, m.plan.Streams)
	s += quantNote(m.info)
	if m.lo > 0 || m.hi < c.Layers {
		s += fmt.Sprintf("; stage: layers %d:%d of %d", m.lo, m.hi, m.cfg.Layers)
	}
	return s
}

// Close releases the checkpoint mapping (and, on the metal backend, the device-resident weights)
// and the buffers a closed session left for the next (Session.Close). It waits for session calls
// already running to finish; later calls of the model's sessions return an error wrapping
// ErrClosed. Closing twice is a no-op.
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
	m.spareMu.Lock()
	if sp := m.spare; sp.scratch != nil {
		sp.scratch.Release()
		sp.cache.free(m.dev.be)
	}
	m.spare = spareSession{}
	m.spareMu.Unlock()
	if m.gg != nil {
		return m.gg.Close()
	}
	return m.ck.Close()
}

// LoadModel loads a checkpoint directory (config.json plus model.safetensors or sharded
// safetensors with model.safetensors.index.json) of a model family strata runs (package family's
// registry, family/all) in a layout the family knows: the
// Hugging Face releases (bf16, or block-scaled FP8) and MLX conversions (bf16, affine-quantized
// at 2 to 8 bits with per-module entries, or in the float modes mxfp4, nvfp4, mxfp8); quantized
// and FP8 weights stay packed, views of the mapped files, decoded inside the kernels. Every tensor the family's plan reads must be present with its shape (extra mtp.*
// and vision tensors are skipped): the checks of Inspect, which also refuse other quantized
// formats by name and compare stored constants (the PLE hash buffers) with the config (ModelInfo
// tells what was found; see Info). The resident weight bytes are logged and reported by Info.
// Errors wrap ErrCheckpoint (missing or corrupt files, tensors that disagree with the config; the
// message names the file and tensor), ErrUnsupported (a format, model type or setting strata does
// not run, named: e.g. `quantization method "awq" is not supported`), ErrOutOfMemory or
// ErrInvalidArgument. After an error nothing of the checkpoint stays mapped.
//
// dir may instead name a GGUF file (a path ending in .gguf; a split set by any of its
// NAME-0000i-of-0000N.gguf parts) of a llama.cpp architecture strata maps (qwen3next, qwen35,
// qwen35moe): the config is read from its metadata and its tensors by llama.cpp's names, every
// transform of llama.cpp's converter undone (family.GGUFConfig, family.GGUFPlan; docs/FORMATS.md,
// section GGUF); F32, F16 and BF16 tensors load as those matrices and the block types as op.GGML
// matrices, views of the mapped file. A GGUF model behaves as a directory's: state files and the
// prompt cache carry its fingerprint (Fingerprint).
func LoadModel(dev *Device, dir string, opts LoadOptions) (*Model, error) {
	if dev == nil {
		return nil, wrapf(ErrInvalidArgument, nil, "nil device")
	}
	mode, err := op.ParseComputeMode(opts.Compute)
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, nil, "LoadOptions.Compute: compute mode %q (want f32, bf16 or int8)", opts.Compute)
	}
	if mode != op.ComputeF32 && dev.be.Name() != "cpu" {
		return nil, wrapf(ErrInvalidArgument, nil, "LoadOptions.Compute %q: compute modes are a CPU option; the %s backend runs f32 only", opts.Compute, dev.be.Name())
	}
	var m *Model
	if isGGUF(dir) {
		gg, cfg, res, err := openGGUF(dir, false)
		if err != nil {
			return nil, err
		}
		l := newLoader(nil, res, opts.Progress)
		l.gg = gg
		info := newModelInfo(dir, cfg, nil, res)
		info.Shards = len(gg.Parts)
		if m, err = build(dev, cfg, res, l, info, dir, opts); err != nil {
			gg.Close()
			return nil, err
		}
		m.gg = gg
	} else {
		if err := checkpointDir(dir); err != nil {
			return nil, err
		}
		cfg, err := family.Load(dir)
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "config")
		}
		ck, err := safetensors.OpenDir(dir)
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "checkpoint %s", dir)
		}
		res, err := checkCheckpoint(cfg, ck, dir)
		if err == nil {
			m, err = build(dev, cfg, res, newLoader(ck, res, opts.Progress), newModelInfo(dir, cfg, ck, res), dir, opts)
		}
		if err != nil {
			ck.Close()
			return nil, err
		}
		m.ck = ck
	}
	closeFile := func() {
		if m.gg != nil {
			m.gg.Close()
		} else {
			m.ck.Close()
		}
	}
	m.mode = mode
	if n, bytes, err := m.prepareWeights(); err != nil {
		closeFile()
		return nil, wrapf(ErrCheckpoint, err, "preparing weights")
	} else if n > 0 {
		dev.logf(LogInfo, "widened %d weight matrices to float32 (%d MiB)", n, bytes>>20)
	} else if opts.WidenBudget != 0 && mode == op.ComputeBF16 {
		dev.logf(LogInfo, "widen budget unused: in compute mode bf16 the 16-bit weights are read as bfloat16, not widened")
	}
	dev.logf(LogInfo, "compute %s", m.weights.Compute())
	m.info.ResidentBytes = m.residentBytes()
	dev.logf(LogInfo, "loaded %s from %s", m.Describe(), dir)
	dev.logf(LogInfo, "resident weights %.1f MiB (checkpoint tensors %.1f MiB%s)", float64(m.info.ResidentBytes)/(1<<20),
		float64(m.info.TensorBytes)/(1<<20), quantNote(m.info))
	return m, nil
}

// build loads the weights of the stage's layers as the plan of res (the checks Inspect runs)
// names them, through l.
func build(dev *Device, cfg *hfconfig.Config, res *family.CheckResult, l *loader, info ModelInfo, dir string, opts LoadOptions) (*Model, error) {
	plan := res.Plan
	var err error
	mode, _ := op.ParseComputeMode(opts.Compute) // checked by LoadModel
	m := &Model{dev: dev, cfg: cfg, plan: plan, dir: dir, info: info, weights: dev.be.NewWeights(op.WeightOptions{WidenBudget: opts.WidenBudget, Compute: mode})}
	m.lo, m.hi = opts.Layers[0], opts.Layers[1]
	if m.lo == 0 && m.hi == 0 {
		m.hi = cfg.Layers
	}
	if m.lo < 0 || m.lo >= m.hi || m.hi > cfg.Layers {
		return nil, wrapf(ErrInvalidArgument, nil, "LoadOptions.Layers [%d, %d) is not a non-empty range of the model's %d layers", m.lo, m.hi, cfg.Layers)
	}
	tied := cfg.TieWordEmbeddings
	if m.lo == 0 || (tied && m.hi == cfg.Layers) {
		if m.embed, err = l.mat(plan.Embed); err != nil {
			return nil, err
		}
	}
	if m.hi == cfg.Layers {
		// A tied lm_head is the embedding's tensor: the loader returns the matrix read above.
		if m.head, err = family.MapHead(&plan.Head, l.mat, l.vec); err != nil {
			return nil, err
		}
	}
	for i := m.lo; i < m.hi; i++ {
		ly, err := l.layer(&plan.Layers[i])
		if err != nil {
			return nil, err
		}
		m.layers = append(m.layers, ly)
	}
	return m, nil
}

// layer loads the weights of one decoder layer's blocks (family.MapLayer) and sets up what its
// ops take besides: the PLE hash (first: a hash the config does not allow reads nothing) and
// the routed experts.
func (l *loader) layer(p *family.Layer) (*layer, error) {
	ly := &layer{}
	if x := p.PLE; x != nil {
		h, err := op.NewPLEHash(x.Vocab, x.NGram, x.HeadsPerNGram, x.Base, x.Divisor, x.Index, x.Seed, x.EOS)
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "PLE layer %d", x.Index)
		}
		ly.hash = h
	}
	w, err := family.MapLayer(p, l.mat, l.vec)
	if err != nil {
		return nil, err
	}
	ly.LayerOf = *w
	// The experts stay views of the file: gate and up apart (op.Experts.Up) where the checkpoint
	// stores them apart, never copied.
	if mw := ly.MoE; mw != nil {
		ly.experts = &op.Experts{E: mw.E, D: mw.Down[0].N, I: mw.I, GateUp: mw.GateUp, Up: mw.Up, Down: mw.Down}
	}
	return ly, nil
}

// weightRefs lists where the model keeps each weight: the routed experts' matrices, the other
// products prepareWeights hands the backend after them in load order (lm_head last; it is the
// embedding itself when tied), the rest (the embedding and the PLE matrices, which it leaves
// alone), and every float32
// vector (norms, convolutions, gate vectors).
func (m *Model) weightRefs() (experts, rest, other []**op.Matrix, vecs [][]float32) {
	gr := func(g *grBlock) {
		if g != nil {
			rest = append(rest, &g.Down, &g.Up)
			if g.Inj != nil {
				rest = append(rest, g.Inj)
			}
			vecs = append(vecs, g.Norm)
		}
	}
	read := func(r readBlock) {
		if r.Norm != nil {
			vecs = append(vecs, *r.Norm)
		}
		gr(r.GR)
	}
	dense := func(d *denseBlock) {
		rest = append(rest, &d.GateUp)
		if d.Up != nil {
			rest = append(rest, d.Up)
		}
		rest = append(rest, &d.Down)
	}
	other = append(other, &m.embed)
	for _, ly := range m.layers {
		read(ly.In)
		read(ly.Post)
		if g := ly.GDN; g != nil {
			rest = append(rest, &g.QKV, &g.Z, &g.B, &g.A, &g.Out)
			vecs = append(vecs, g.Conv, g.ALog, g.DtBias, g.Norm)
		}
		if a := ly.Attn; a != nil {
			rest = append(rest, &a.Q, &a.K, &a.V, &a.O)
			if x := a.Indexer; x != nil {
				rest = append(rest, &x.QK)
			}
			vecs = append(vecs, a.QNorm, a.KNorm)
			if x := a.Indexer; x != nil {
				vecs = append(vecs, x.QNorm, x.KNorm)
			}
		}
		if mw := ly.MoE; mw != nil {
			for e := range mw.GateUp {
				experts = append(experts, &mw.GateUp[e], &mw.Down[e])
				if mw.Up != nil {
					experts = append(experts, &mw.Up[e])
				}
			}
			rest = append(rest, &mw.Router)
			dense(&mw.Shared)
			rest = append(rest, &mw.SharedGate)
		}
		if ly.MLP != nil {
			dense(ly.MLP)
		}
		if p := ly.PLE; p != nil {
			for i := range p.Table {
				other = append(other, &p.Table[i])
			}
			other = append(other, &p.Key, &p.Value)
			vecs = append(vecs, p.NormKey, p.NormQuery, p.NormConv, p.Conv)
		}
	}
	read(readBlock{Norm: m.head.Norm, GR: m.head.Mixer})
	rest = append(rest, &m.head.LMHead)
	return experts, rest, other, vecs
}

// residentBytes is the memory of the weights the model holds (each matrix once, in its dtype:
// packed codes with scales and biases, 16-bit, or float32 copies the backend made at load; the
// forms a compute mode packed at load in place of the data they came from; the float32
// vectors).
func (m *Model) residentBytes() int64 {
	experts, rest, other, vecs := m.weightRefs()
	refs := append(append(experts, rest...), other...)
	// A matrix's data counts unless every matrix that reads it has a packed form (a tied
	// embedding reads the head's data in its gathers).
	read := map[any]bool{}
	for _, p := range refs {
		if w := *p; w != nil && (w.Compute == nil || !w.Compute.Packed()) { // nil: a pipeline stage without the embedding or head
			read[dataKey(w)] = true
		}
	}
	seen := map[any]bool{}
	var n int64
	for _, p := range refs {
		if w := *p; w != nil && read[dataKey(w)] && !seen[dataKey(w)] {
			seen[dataKey(w)] = true
			n += w.Bytes()
		}
		if w := *p; w != nil && w.Compute != nil && !seen[w.Compute] {
			seen[w.Compute] = true
			n += w.Compute.Bytes()
		}
	}
	for _, v := range vecs {
		n += 4 * int64(len(v))
	}
	return n
}

// dataKey identifies a matrix's data, so that a copy carrying a compute form (op.Matrix.Compute)
// and the matrix it came from (a tied embedding) count once.
func dataKey(w *op.Matrix) any {
	switch {
	case w.Q != nil:
		return w.Q
	case w.FP8 != nil:
		return w.FP8
	case w.QF != nil:
		return w.QF
	case w.GG != nil:
		return w.GG
	case len(w.F32) > 0:
		return &w.F32[0]
	case len(w.U16) > 0:
		return &w.U16[0]
	}
	return w
}

// Compute describes the compute mode the model's products run in (LoadOptions.Compute): the
// mode, the kernel for each weight format, how many matrices, and why any ran in f32, e.g.
// "int8 (activations in blocks of 32, ...): int8 avx2 (vpmaddubsw) for MLX 4-bit (groups of
// 64): 1036; f32 for BF16 (int8 would requantize the weights): 9".
func (m *Model) Compute() string { return m.weights.Compute() }

// prepareWeights hands the weight matrices to the backend's store (op.Weights.Prepare) in
// priority order, routed experts first, then the other products in load order, and keeps the
// matrix it returns for each: on the CPU a float32 copy of a 16-bit matrix while
// LoadOptions.WidenBudget lasts, or in int8 mode a GGUF 4-bit matrix packed into the kernels'
// panels (then the process drops its pages of the matrix's part of the mapped file).
// It reports how many matrices were replaced by float32 copies and their bytes.
func (m *Model) prepareWeights() (n int, bytes int64, err error) {
	experts, rest, _, _ := m.weightRefs()
	for _, p := range append(experts, rest...) {
		w := *p
		if w == nil { // a stage without the head
			continue
		}
		got, err := m.weights.Prepare(w)
		if err != nil {
			return n, bytes, err
		}
		if c := got.Compute; c != nil && c.Packed() && w.GG != nil {
			// The packed matrix no longer reads the file: its pages need not stay resident
			// beside the panels (they stay in the page cache). The tensors still read as
			// stored (norms, the embedding, the types not packed) keep theirs; a tied
			// embedding packed as the head faults its pages back in as it is read.
			m.gg.Evict(w.GG.Data)
		}
		if got != w {
			*p = got
			if got.Compute == nil { // else the same data with its compute form
				n++
				bytes += got.Bytes()
			}
		}
	}
	return n, bytes, nil
}

// PrefillFLOPs counts the floating-point operations of one prefill of T tokens after pos0
// cached ones with lastRows rows of logits (1, or T for all logits), from the plan of the layers
// loaded (family.LayerFLOPs, family.HeadFLOPs): gemm is the dense products, total adds the
// token-mixing work (attention over the keys each query attends, the indexer's block scores,
// the GDN recurrence).
func (m *Model) PrefillFLOPs(pos0, T, lastRows int) (gemm, total float64) {
	var mix float64
	for _, ly := range m.layers {
		g, x := family.LayerFLOPs(&m.plan.Layers[ly.Index], pos0, T)
		gemm += g
		mix += x
	}
	gemm += family.HeadFLOPs(&m.plan.Head, lastRows)
	return gemm, gemm + mix
}

// quantNote describes a checkpoint's quantization for the load log: "; MLX affine, 4 bits, ...",
// "; FP8 E4M3, ..." or "" for an unquantized Hugging Face checkpoint.
func quantNote(in ModelInfo) string {
	switch {
	case in.Quantization != "":
		return "; " + in.Quantization
	case in.MLX:
		return "; MLX conversion, not quantized"
	}
	return ""
}
