// Package hfconfig reads Hugging Face config.json files into one Config: the sizes every model
// family strata runs is described by (hidden size, heads, Gated DeltaNet and MoE sizes, residual
// streams, PLE and indexer settings), checks their invariants (Validate) and reads MLX
// quantization blocks (MLXQuant, FP8Quant). It knows no model family: each family (package family and its
// folders) reads its own config.json with the readers here (Object and the field groups of
// text.go), passing its transformers class defaults, and states which field groups it has.
// Package family names Config, Object and the readers publicly (family/config.go), so that a
// family outside this module can use them.
//
// A field absent from config.json (or null) takes the default the family passes (the default of
// its transformers class). A field nobody read and no ignore list names is an error: a config
// strata half-understands would run the wrong model silently.
package hfconfig

import (
	"errors"

	"github.com/stratakernels/strata/op"
)

// LayerType is the token mixer of one decoder layer.
type LayerType string

// Layer types.
const (
	LinearAttention LayerType = "linear_attention"      // Gated DeltaNet
	FullAttention   LayerType = "full_attention"        // gated GQA attention
	SparseAttention LayerType = "qwen_sparse_attention" // gated GQA attention with the QSA indexer (sparse past its budget)
)

// Sentinel errors; every error of the package wraps exactly one of them.
var (
	// ErrConfig: config.json is malformed, has unknown fields, or breaks an invariant.
	ErrConfig = errors.New("hfconfig: invalid config")
	// ErrUnsupported: a well-formed config asks for something strata does not implement
	// (another model_type, a quantization method, a RoPE scaling type, attention biases, several
	// indexer key heads...). It is op.ErrUnsupported, so the loader's errors keep it (strata's
	// ErrUnsupported, the C ABI's STRATA_ERR_UNSUPPORTED).
	ErrUnsupported = op.ErrUnsupported
	// ErrTensors: checkpoint tensor names or shapes disagree with the config.
	ErrTensors = errors.New("hfconfig: checkpoint tensors do not match the config")
)

// Config is the text model of a config.json. Sizes are element counts; the config.json field each
// one comes from is named beside it. A family leaves the fields of the parts it does not have at
// their zero value (Streams 1, no PLE layers, no indexer, no dense-MLP layers).
type Config struct {
	Family        string   // the model family that read it (package family's registry name)
	ModelType     string   // model_type as written at the top level
	Architectures []string // architectures (the transformers class names), as written; may be empty

	// LanguageModelOnly is language_model_only (top level of a multimodal config): the
	// checkpoint holds the text model only, so it must carry no vision tensors.
	LanguageModelOnly bool
	// MTPLayers is mtp_num_hidden_layers (or num_nextn_predict_layers): the layers of the
	// multi-token-prediction head stored under mtp.*, which prefill does not run.
	MTPLayers int

	Vocab, D, Layers int // vocab_size, hidden_size, num_hidden_layers
	LayerTypes       []LayerType
	// FullAttentionInterval is full_attention_interval as written (default 4), also where
	// layer_types decides the layers: MLX readers place layer i's attention by (i+1) % interval
	// and ignore layer_types (family.MLXLMLayout compares the two).
	FullAttentionInterval int
	Eps                   float64 // rms_norm_eps
	TieWordEmbeddings     bool    // tie_word_embeddings: lm_head reuses embed_tokens (no lm_head tensor)
	MaxPositions          int     // max_position_embeddings

	// Attention: num_attention_heads, num_key_value_heads, head_dim, and
	// RotaryDim = int(HeadDim * partial_rotary_factor).
	Hq, Hkv, HeadDim, RotaryDim int
	RopeTheta                   float64 // rope_parameters.rope_theta or legacy top-level rope_theta
	// MRoPESection is rope_parameters.mrope_section (multimodal RoPE): the rotary pairs given to
	// the temporal, height and width positions. For text all three positions are the token's
	// position, so it computes plain partial RoPE; its sum must be RotaryDim/2 (checked).
	MRoPESection []int

	// Gated DeltaNet: linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
	// linear_value_head_dim, linear_conv_kernel_dim.
	Hk, Hv, Dk, Dv, ConvK int
	GateAct               string // "silu" | "sigmoid": the GDN gated norm's activation

	// MoE: num_experts, num_experts_per_tok, moe_intermediate_size,
	// shared_expert_intermediate_size, norm_topk_prob.
	Experts, TopK, MoEI, SharedI int
	NormTopK                     bool

	// Dense-MLP layers: intermediate_size, mlp_only_layers (0-based), decoder_sparse_step; a
	// family without experts has every layer dense.
	DenseI            int
	MLPOnlyLayers     []int
	DecoderSparseStep int

	Streams, HCRank int // hc_count (1: a single residual stream), hc_lowrank

	// QSA indexer: indexer_n_heads, indexer_kv_heads, indexer_head_dim, indexer_budget (tokens),
	// indexer_compress_ratio (tokens per block).
	IdxHeads, IdxKVHeads, IdxDim, IdxBudget, IdxRatio int

	PLELayerIDs []int // ple_layer_ids as in config, sorted and deduplicated (1-based: layer i has PLE iff i+1 is listed)
	// ple_embed_dim, ple_conv_kernel_size, ngram_size, heads_per_ngram, ngram_vocab_size_base,
	// make_ngram_vocab_size_divisible_by.
	PLEEmbedDim, PLEConvK, NGramSize, HeadsPerNGram, NGramVocabBase, NGramVocabDivisor int
	// NGramParts is split_ngram_parts: how many row blocks a published checkpoint splits each
	// PLE n-gram table into.
	NGramParts int
	Seed       int64 // seed of the PLE hash multipliers
	EOS        []int // eos_token_id, int or list

	// Quant is the MLX quantization block (quantization / quantization_config without
	// quant_method), FP8 the quantization_config of an FP8 release (quant_method "fp8"); both nil
	// for unquantized checkpoints. Which modules are quantized, and how, is read from the tensor
	// table against them.
	Quant *MLXQuant
	FP8   *FP8Quant

	// NormsPreshifted is preshifted_norm_weights where the config states it (nil otherwise): true
	// when the zero-centred norm gains are stored as 1 + w, false when stored as w. mlx-vlm's
	// qwen4_exp loader (PR #2114) reads the field as its override; the family weighs it with the
	// checkpoint's other signals.
	NormsPreshifted *bool
}

// IsMoELayer reports whether decoder layer i (0-based) uses the sparse MoE block rather than a
// dense MLP: num_experts > 0, i not in mlp_only_layers and (i+1) % decoder_sparse_step == 0
// (transformers' sparse-step rule; a family with MoE everywhere sets DecoderSparseStep 1).
func (c *Config) IsMoELayer(i int) bool {
	if c.Experts <= 0 || c.DecoderSparseStep <= 0 {
		return false
	}
	for _, l := range c.MLPOnlyLayers {
		if l == i {
			return false
		}
	}
	return (i+1)%c.DecoderSparseStep == 0
}

// PLEIndex returns the index into PLELayerIDs of decoder layer i (0-based), i.e. the
// ple_layer_index that seeds that layer's n-gram hashing, or -1 when layer i has no PLE.
func (c *Config) PLEIndex(i int) int {
	for j, id := range c.PLELayerIDs {
		if id == i+1 {
			return j
		}
	}
	return -1
}

// NGramHeads is the number of hashed n-gram embedding heads of one PLE layer:
// (ngram_size - 1) * heads_per_ngram.
func (c *Config) NGramHeads() int { return (c.NGramSize - 1) * c.HeadsPerNGram }

// PLEHeadVocabs returns the vocabulary size of every n-gram head of the PLE layer with index
// pleIndex (see PLEIndex): head h gets the (g+1)-th prime >= ngram_vocab_size_base with
// g = pleIndex*NGramHeads() + h, so all heads of all PLE layers differ (op.PLEHeadVocabs). The
// head's rows start at the running sum of the sizes before it.
func (c *Config) PLEHeadVocabs(pleIndex int) []int {
	var out []int
	for _, v := range op.PLEHeadVocabs(c.NGramVocabBase, c.NGramHeads(), pleIndex) {
		out = append(out, int(v))
	}
	return out
}

// PLEVocabRows is the row count of the n-gram embedding table of PLE layer pleIndex: the sum of
// PLEHeadVocabs rounded up to a multiple of make_ngram_vocab_size_divisible_by.
func (c *Config) PLEVocabRows(pleIndex int) int {
	total := 0
	for _, v := range c.PLEHeadVocabs(pleIndex) {
		total += v
	}
	d := max(c.NGramVocabDivisor, 1)
	return (total + d - 1) / d * d
}

// EOSToken is the first eos_token_id, or -1 when there is none.
func (c *Config) EOSToken() int32 {
	if len(c.EOS) > 0 {
		return int32(c.EOS[0])
	}
	return -1
}

// HasLayer reports whether some decoder layer has type t.
func (c *Config) HasLayer(t LayerType) bool {
	for _, x := range c.LayerTypes {
		if x == t {
			return true
		}
	}
	return false
}
