package strata

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
)

// ModelInfo describes a checkpoint as its config.json and its tensor table give it, after the
// checks LoadModel runs (Inspect, Model.Info). Sizes are element counts, bytes are bytes; the
// config.json field behind each size is named beside it.
type ModelInfo struct {
	Dir           string
	Arch          string   // model family: its name in package family's registry (as Model.Arch)
	ModelType     string   // model_type as written at the top level of config.json
	Architectures []string // architectures: the transformers class names, as written

	D      int // hidden_size
	Layers int // num_hidden_layers
	// Decoder layers by token mixer: Gated DeltaNet (linear_attention), gated full attention
	// (full_attention), attention with the QSA indexer (sparse past its budget).
	GDNLayers, AttentionLayers, QSALayers int
	Hq, Hkv, HeadDim                      int // num_attention_heads, num_key_value_heads, head_dim
	RotaryDim                             int // head_dim * partial_rotary_factor
	Hk, Hv, Dk, Dv                        int // GDN linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim
	Experts, TopK                         int // num_experts, num_experts_per_tok
	MoEI, SharedI                         int // moe_intermediate_size, shared_expert_intermediate_size
	DenseLayers, DenseI                   int // layers with a dense MLP (no experts, or mlp_only_layers, decoder_sparse_step) and intermediate_size
	Vocab                                 int // vocab_size
	Streams                               int // residual streams: hc_count with hyper-connections, else 1
	QSABudget                             int // indexer_budget in tokens with a QSA indexer, 0 otherwise
	// PLELayers are the 0-based decoder layers with a PLE n-gram embedding (ple_layer_ids - 1).
	PLELayers    []int
	MaxPositions int // max_position_embeddings
	MTPLayers    int // mtp_num_hidden_layers: the multi-token-prediction head, not run by prefill

	// The tensor table: the text model's name prefix ("model." or "model.language_model."),
	// whether routed experts are stored fused (mlp.experts.gate_up_proj) or per expert, and
	// in how many shard_{k} tensors each PLE n-gram table is split (0: one tensor).
	Prefix       string
	FusedExperts bool
	// Layout describes the checkpoint's tensor layout in words: the prefix, the expert storage
	// and, for an MLX conversion, its storage rules (family.Layout.Describe).
	Layout       string
	NGramShards  int
	Shards       int // safetensors files
	Tensors      int // tensors in the checkpoint
	TensorBytes  int64
	UsedTensors  int   // tensors the model loads
	UsedBytes    int64 // their bytes
	WeightDTypes []DTypeBytes
	// MLX reports an MLX conversion (mlx_lm.convert, mlx_vlm.convert): experts stacked under
	// mlp.switch_mlp, conv1d weights [C, K, 1].
	MLX bool
	// ShiftedGains reports zero-centred norm gains stored as 1 + w (read as stored - 1): the
	// pre-norms, final norm and q/k norms of mlx-lm's conversions; in a Qwen3.8-Flash-Next file
	// decided from its signals. Gains says which convention was found and why (config hint,
	// provenance, the stored values), "" where the family decides by layout alone.
	ShiftedGains bool
	Gains        string
	// Quantized groups the quantized modules by format (MLX affine bit width and group size, MLX
	// float mode, FP8 blocks or per-tensor scale; most bytes first); empty for unquantized
	// checkpoints. Quantization is the config's block in words ("MLX affine, 4 bits, group size
	// 64, 8 per-module entries", "FP8 E4M3, blocks of 128 x 128, ..."), "" without one.
	Quantized    []QuantBytes
	Quantization string
	// ResidentBytes is the weight memory of the loaded model: quantized modules packed (codes,
	// scales, biases) and 16-bit weights as stored, memory-mapped or copied where the loader
	// regroups rows; norms and other vectors widened to float32. Inspect reports what loading
	// would hold (in f32); Model.Info what the loaded model holds (float32 copies of
	// LoadOptions.WidenBudget included; the compute modes of LoadOptions.Compute add none: a
	// GGUF 4-bit weight int8 packs at load counts its panels in place of its blocks).
	ResidentBytes int64
	// PLEBuffersChecked is how many PLE layers store their int64 hash constants
	// (layer_multipliers, ngram_heads_offsets, ngram_heads_vocab_sizes), each checked equal
	// to what config.json implies; 0 when the checkpoint stores none (the published
	// Qwen3.8-Flash-Next does).
	PLEBuffersChecked int
	Skipped           []SkippedTensors // tensor groups present and not loaded, with the reason
	// Truncated lists the shards whose data section is shorter than their header describes.
	// Only Inspect can report them (it reads headers alone); LoadModel refuses such a file.
	Truncated []TruncatedShard
}

// DTypeBytes is one element type of a checkpoint's weights: safetensors dtype name (BF16, F16,
// F32), how many of the loaded tensors have it and their bytes.
type DTypeBytes struct {
	DType   string
	Tensors int
	Bytes   int64
}

// QuantBytes is one format of a quantized checkpoint's modules (Format: "4-bit affine in groups
// of 64", "mxfp4 (4 bits in groups of 32)", "FP8 E4M3 in 128 x 128 blocks, BF16 scales", ...;
// Bits and Group for the MLX formats): how many modules (stacked experts count once per layer)
// and the bytes of their codes, scales and biases.
type QuantBytes struct {
	Format      string
	Bits, Group int
	Modules     int
	Bytes       int64
}

// SkippedTensors is a group of tensors a checkpoint carries that the model does not load:
// its name pattern (mtp.*, model.visual.*, the PLE hash buffers), size and why.
type SkippedTensors struct {
	Group   string
	Tensors int
	Bytes   int64
	Reason  string
}

// TruncatedShard is a safetensors file whose data section holds Present of the Size bytes its
// header describes.
type TruncatedShard struct {
	File          string // file name inside Dir
	Present, Size int64
}

// Inspect validates the checkpoint in dir without loading it and describes it: config.json
// (fields, invariants, the MLX quantization block or FP8 quantization_config; other
// quantizations and model types refused by name), whether it is an MLX conversion and how it
// stores the zero-centred norm gains (and why), the quantized modules, the shard index and every
// tensor header (names, dtypes, shapes, offsets), and the tensor table against the config
// (every tensor the model needs with its shape and a weight dtype, the PLE hash buffers'
// values), exactly as LoadModel checks them. It reads no tensor data but the PLE buffers (a
// few hundred bytes) and maps nothing: its cost is that of reading the headers (under 1 MB for
// the 131 shards of Qwen3.8-Flash-Next, 360 GB of weights). A shard whose data section is
// truncated is reported in ModelInfo.Truncated, not refused: its header is complete (LoadModel
// refuses it). Errors wrap ErrCheckpoint (the message names the file and tensor) or
// ErrUnsupported (the format or value by name, e.g. `quantization method "awq" is not
// supported`).
//
// dir may name a GGUF file instead (LoadModel): its headers are read and checked as loading
// would (InspectGGUF describes more of it: types by class, tokenizer, refusals).
func Inspect(dir string) (*ModelInfo, error) {
	if isGGUF(dir) {
		f, cfg, res, err := openGGUF(dir, true)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		info := newModelInfo(dir, cfg, nil, res)
		info.Shards = len(f.Parts)
		return &info, nil
	}
	if err := checkpointDir(dir); err != nil {
		return nil, err
	}
	cfg, err := family.Load(dir)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "config")
	}
	ck, err := safetensors.OpenDirHeaders(dir)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "checkpoint %s", dir)
	}
	defer ck.Close()
	res, err := checkCheckpoint(cfg, ck, dir)
	if err != nil {
		return nil, err
	}
	info := newModelInfo(dir, cfg, ck, res)
	return &info, nil
}

// Info describes the loaded model's checkpoint as Inspect does (Truncated is empty: LoadModel
// refuses truncated files). The slices are copies.
func (m *Model) Info() ModelInfo {
	in := m.info
	in.Architectures = append([]string(nil), in.Architectures...)
	in.PLELayers = append([]int(nil), in.PLELayers...)
	in.WeightDTypes = append([]DTypeBytes(nil), in.WeightDTypes...)
	in.Quantized = append([]QuantBytes(nil), in.Quantized...)
	in.Skipped = append([]SkippedTensors(nil), in.Skipped...)
	in.Truncated = append([]TruncatedShard(nil), in.Truncated...)
	return in
}

// checkpointDir reports a missing dir, or one that is not a directory, as ErrCheckpoint.
func checkpointDir(dir string) error {
	if st, err := os.Stat(dir); err != nil {
		return wrapf(ErrCheckpoint, err, "checkpoint directory %q", dir)
	} else if !st.IsDir() {
		return wrapf(ErrCheckpoint, nil, "checkpoint %q is not a directory (want the folder holding config.json and the safetensors files)", dir)
	}
	return nil
}

// checkCheckpoint is the tensor-table check of LoadModel and Inspect (family.CheckCheckpoint).
func checkCheckpoint(cfg *hfconfig.Config, ck *safetensors.Checkpoint, dir string) (*family.CheckResult, error) {
	res, err := family.CheckCheckpoint(cfg, ck)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "checkpoint %s", dir)
	}
	return res, nil
}

// newModelInfo describes a checkpoint from its config and check; ck is nil for a GGUF file
// (whose res.Quant is empty).
func newModelInfo(dir string, c *hfconfig.Config, ck *safetensors.Checkpoint, res *family.CheckResult) ModelInfo {
	l := res.Plan.Layout
	in := ModelInfo{
		Dir: dir, Arch: c.Family, ModelType: c.ModelType, Architectures: append([]string(nil), c.Architectures...),
		D: c.D, Layers: c.Layers, Hq: c.Hq, Hkv: c.Hkv, HeadDim: c.HeadDim, RotaryDim: c.RotaryDim,
		Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv, Experts: c.Experts, TopK: c.TopK, MoEI: c.MoEI, SharedI: c.SharedI,
		Vocab: c.Vocab, Streams: res.Plan.Streams, MaxPositions: c.MaxPositions, MTPLayers: c.MTPLayers,
		Prefix: l.Text, FusedExperts: l.Experts == family.Fused, Layout: l.Describe(), NGramShards: l.NGramParts,
		Tensors: res.Tensors, TensorBytes: res.Bytes,
		UsedTensors: res.Used, UsedBytes: res.UsedBytes, PLEBuffersChecked: res.ConstantsChecked,
		MLX: l.MLX, ShiftedGains: l.ShiftedGains, Gains: l.GainsWhy, ResidentBytes: res.ResidentBytes,
	}
	switch {
	case c.Quant != nil:
		in.Quantization = "MLX " + c.Quant.Describe()
	case c.FP8 != nil:
		in.Quantization = c.FP8.Describe()
	}
	byQ := map[string]*QuantBytes{}
	counted := map[string]bool{} // a scale shared by the row blocks of one table counts once
	for _, q := range res.Quant {
		k := q.Describe()
		b := byQ[k]
		if b == nil {
			b = &QuantBytes{Format: k}
			if q.Format == family.MLXAffine || q.Format == family.MLXFloat {
				b.Bits, b.Group = q.Bits, q.Group
			}
			byQ[k] = b
		}
		b.Modules++
		for _, n := range q.Tensors() {
			if t, err := ck.Tensor(n); err == nil && !counted[n] {
				counted[n] = true
				b.Bytes += t.ByteSize()
			}
		}
	}
	for _, b := range byQ {
		in.Quantized = append(in.Quantized, *b)
	}
	sort.Slice(in.Quantized, func(i, j int) bool {
		a, b := in.Quantized[i], in.Quantized[j]
		if a.Bytes != b.Bytes {
			return a.Bytes > b.Bytes
		}
		return a.Format < b.Format
	})
	for i, t := range c.LayerTypes {
		switch t {
		case hfconfig.LinearAttention:
			in.GDNLayers++
		case hfconfig.FullAttention:
			in.AttentionLayers++
		case hfconfig.SparseAttention:
			in.QSALayers++
		}
		if !c.IsMoELayer(i) {
			in.DenseLayers++
		}
		if c.PLEIndex(i) >= 0 {
			in.PLELayers = append(in.PLELayers, i)
		}
	}
	if in.DenseLayers > 0 {
		in.DenseI = c.DenseI
	}
	if in.QSALayers > 0 {
		in.QSABudget = c.IdxBudget
	}
	for _, d := range res.DTypes {
		in.WeightDTypes = append(in.WeightDTypes, DTypeBytes{d.DType, d.Tensors, d.Bytes})
	}
	for _, g := range res.Skipped {
		in.Skipped = append(in.Skipped, SkippedTensors{g.Group, g.Tensors, g.Bytes, g.Reason})
	}
	if ck == nil { // a GGUF file: the caller sets Shards
		return in
	}
	in.Shards = len(ck.Files())
	for _, f := range ck.Files() {
		if f.DataPresent() < f.DataSize() {
			in.Truncated = append(in.Truncated, TruncatedShard{filepath.Base(f.Path), f.DataPresent(), f.DataSize()})
		}
	}
	return in
}
