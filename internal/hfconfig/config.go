// Package hfconfig reads the Hugging Face config.json of the two model families strata runs,
// Qwen3-Next (model_type qwen3_next) and Qwen4-Exp (qwen4_exp_text, or qwen4_exp with the text
// model nested under text_config), into one Config, checks its invariants, derives from it
// the name and shape of every checkpoint tensor the model needs, and checks a checkpoint's
// tensor table against it (CheckCheckpoint: the one check both loading and inspecting run).
// MLX conversions of qwen3_next (mlx_lm.convert: stacked switch_mlp experts, transposed conv1d,
// norms stored as 1 + w, affine-quantized modules at 2 to 8 bits) are recognised from several
// signals and described (Layout.MLX, CheckResult.Quant); other quantized checkpoints (FP8,
// ModelOpt, compressed-tensors, AutoRound, AWQ, GPTQ, MLX's mxfp4/nvfp4/mxfp8 modes), MLX
// conversions of qwen4_exp and other model types are refused by name.
//
// Field names, defaults and invariants follow transformers' configuration_qwen3_next.py and
// configuration_qwen4_exp.py (v5.17): a field absent from config.json (or null) takes the
// default of the transformers class for that model_type. A field transformers does not know,
// or one strata does not use and does not list as known-but-ignored, is an error: a config
// strata half-understands would run the wrong model silently.
package hfconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/op"
)

// Arch is the model family.
type Arch int

// Model families.
const (
	// Qwen3Next: Gated DeltaNet + gated full attention, MoE, single residual stream, final norm.
	Qwen3Next Arch = iota + 1
	// Qwen4Exp: Gated DeltaNet + QSA sparse attention, MoE, hyper-connection streams, PLE n-gram
	// embeddings, final read-only stream mixer and no final norm.
	Qwen4Exp
)

// String returns the model family name ("qwen3_next", "qwen4_exp").
func (a Arch) String() string {
	switch a {
	case Qwen3Next:
		return "qwen3_next"
	case Qwen4Exp:
		return "qwen4_exp"
	}
	return fmt.Sprintf("Arch(%d)", int(a))
}

// LayerType is the token mixer of one decoder layer, as named in config.json's layer_types.
type LayerType string

// Layer types.
const (
	LinearAttention LayerType = "linear_attention"      // Gated DeltaNet
	FullAttention   LayerType = "full_attention"        // gated GQA attention (qwen3_next)
	SparseAttention LayerType = "qwen_sparse_attention" // gated GQA attention with the QSA indexer (qwen4_exp)
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

// Config is the text model of a qwen3_next or qwen4_exp config.json. Sizes are element counts;
// the config.json field each one comes from is named beside it.
type Config struct {
	ModelType     string // as written: qwen3_next | qwen4_exp_text | qwen4_exp
	Arch          Arch
	Architectures []string // architectures (the transformers class names), as written; may be empty

	// LanguageModelOnly is language_model_only (top level of a qwen4_exp config): the
	// checkpoint holds the text model only, so it must carry no model.visual.* tensors.
	LanguageModelOnly bool
	// MTPLayers is mtp_num_hidden_layers (or num_nextn_predict_layers): the layers of the
	// multi-token-prediction head stored under mtp.*, which prefill does not run.
	MTPLayers int

	Vocab, D, Layers  int // vocab_size, hidden_size, num_hidden_layers
	LayerTypes        []LayerType
	Eps               float64 // rms_norm_eps
	TieWordEmbeddings bool    // tie_word_embeddings: lm_head reuses embed_tokens (no lm_head tensor)
	MaxPositions      int     // max_position_embeddings

	// Attention: num_attention_heads, num_key_value_heads, head_dim, and
	// RotaryDim = int(HeadDim * partial_rotary_factor).
	Hq, Hkv, HeadDim, RotaryDim int
	RopeTheta                   float64 // rope_parameters.rope_theta or legacy top-level rope_theta

	// Gated DeltaNet: linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
	// linear_value_head_dim, linear_conv_kernel_dim.
	Hk, Hv, Dk, Dv, ConvK int
	GateAct               string // "silu" | "sigmoid": output_gate_type, else hidden_act

	// MoE: num_experts, num_experts_per_tok, moe_intermediate_size,
	// shared_expert_intermediate_size, norm_topk_prob.
	Experts, TopK, MoEI, SharedI int
	NormTopK                     bool

	// qwen3_next dense-MLP layers: intermediate_size, mlp_only_layers (0-based), decoder_sparse_step.
	DenseI            int
	MLPOnlyLayers     []int
	DecoderSparseStep int

	Streams, HCRank int // hc_count (1 for qwen3_next), hc_lowrank (0 for qwen3_next)

	// QSA indexer (qwen4_exp): indexer_n_heads, indexer_kv_heads, indexer_head_dim,
	// indexer_budget (tokens), indexer_compress_ratio (tokens per block).
	IdxHeads, IdxKVHeads, IdxDim, IdxBudget, IdxRatio int

	PLELayerIDs []int // ple_layer_ids as in config, sorted and deduplicated (1-based: layer i has PLE iff i+1 is listed)
	// ple_embed_dim, ple_conv_kernel_size, ngram_size, heads_per_ngram, ngram_vocab_size_base,
	// make_ngram_vocab_size_divisible_by.
	PLEEmbedDim, PLEConvK, NGramSize, HeadsPerNGram, NGramVocabBase, NGramVocabDivisor int
	// NGramParts is split_ngram_parts: how many row blocks a published checkpoint splits each
	// PLE n-gram table into (see Layout.NGramParts).
	NGramParts int
	Seed       int64 // seed of the PLE hash multipliers
	EOS        []int // eos_token_id, int or list

	// Quant is the MLX quantization block (quantization / quantization_config without
	// quant_method; nil for unquantized checkpoints). Which modules are quantized, and how, is
	// read from the tensor table against it (CheckCheckpoint).
	Quant *MLXQuant
}

// Load reads and parses dir/config.json. Errors wrap ErrConfig or ErrUnsupported and name the file.
func Load(dir string) (*Config, error) {
	p := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// IsMoELayer reports whether decoder layer i (0-based) uses the sparse MoE block rather than a
// dense MLP: num_experts > 0, i not in mlp_only_layers and (i+1) % decoder_sparse_step == 0
// (transformers' Qwen3NextDecoderLayer; every qwen4_exp layer is MoE).
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
// g = pleIndex*NGramHeads() + h, so all heads of all PLE layers differ (transformers'
// Qwen4ExpTextNGramEmbedding; op.PLEHeadVocabs). The head's rows start at the running sum of the
// sizes before it.
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
