package family

import "github.com/stratakernels/strata/internal/hfconfig"

// The config a family reads and its readers, named here so that a family can be written outside
// this module: Config, Object and the field readers are those of the module's config.json reader
// (internal/hfconfig), under these names. Parse decodes config.json into an Object, reads the
// quantization keys and hands the Object to the family's ReadConfig, which fills the Config with
// the readers below and its transformers class defaults.

// Config is the text model of a config.json: every size and setting of the families strata runs
// (element counts; the config.json field each comes from is named beside it in its definition).
// A family leaves the fields of the parts it does not have at their zero value. Validate checks
// the invariants every family shares.
type Config = hfconfig.Config

// Object is one JSON object of a config.json being read: typed getters that take a default for an
// absent or null field, record a wrong type or value among the object's problems (Fail, Errors)
// and remember what was read, so that Unknown can refuse the fields nobody read.
type Object = hfconfig.Object

// LayerType is the token mixer of one decoder layer (Config.LayerTypes).
type LayerType = hfconfig.LayerType

// Layer types.
const (
	LinearAttention = hfconfig.LinearAttention // Gated DeltaNet
	FullAttention   = hfconfig.FullAttention   // gated GQA attention
	SparseAttention = hfconfig.SparseAttention // gated GQA attention with the QSA indexer
)

// Sentinel errors of config reading and checkpoint checks (errors.Is): ErrConfig for a malformed
// config.json, unknown fields or a broken invariant; ErrUnsupported for a well-formed request
// strata does not implement (strata.ErrUnsupported); ErrTensors for checkpoint tensor names or
// shapes that disagree with the config.
var (
	ErrConfig      = hfconfig.ErrConfig
	ErrUnsupported = hfconfig.ErrUnsupported
	ErrTensors     = hfconfig.ErrTensors
)

// TextDefaults are a family's transformers class defaults of the fields ReadText reads.
type TextDefaults = hfconfig.TextDefaults

// MoEDefaults are a family's defaults of the MoE fields ReadMoE reads.
type MoEDefaults = hfconfig.MoEDefaults

// IgnoredFields are the config.json fields every family knows and does not need (training-only
// settings, bookkeeping, token ids other than eos): pass it to Object.Unknown.
var IgnoredFields = hfconfig.IgnoredFields

// VisionFields are the top-level fields of a multimodal config besides text_config (the vision
// tower and its special tokens): pass it to Object.Unknown on the top level of such a config.
var VisionFields = hfconfig.VisionFields

// ReadText reads the fields every family has into c: sizes, attention and Gated DeltaNet heads,
// rms_norm_eps, tie_word_embeddings, eos_token_id, the multi-token-prediction head's layer count
// and RoPE (rope_parameters or the legacy top-level fields, defaults theta 10000 and
// d.PartialRotary), and returns the settings strata refuses when they are not the ones it runs
// (mamba_ssm_dtype other than float32, hidden_act other than silu, attention_bias,
// use_sliding_window, RoPE scaling) as unsupported requests. Type errors go to o's problems.
func ReadText(c *Config, o *Object, d TextDefaults) (unsupported []string) {
	return hfconfig.ReadText(c, o, d)
}

// ReadMoE reads num_experts, num_experts_per_tok, moe_intermediate_size,
// shared_expert_intermediate_size and norm_topk_prob (default true).
func ReadMoE(c *Config, o *Object, d MoEDefaults) { hfconfig.ReadMoE(c, o, d) }

// ReadSparseStep reads where dense-MLP layers sit among MoE ones: intermediate_size (their width,
// default intermediate), decoder_sparse_step (default 1) and mlp_only_layers (default none).
func ReadSparseStep(c *Config, o *Object, intermediate int) {
	hfconfig.ReadSparseStep(c, o, intermediate)
}

// ReadHyper reads the hyper-connection residual: hc_count streams (default count) and hc_lowrank
// (default rank).
func ReadHyper(c *Config, o *Object, count, rank int) { hfconfig.ReadHyper(c, o, count, rank) }

// ReadPLE reads the PLE n-gram embedding fields (ple_layer_ids, ple_embed_dim, the n-gram hash
// settings, split_ngram_parts and the hash seed).
func ReadPLE(c *Config, o *Object) { hfconfig.ReadPLE(c, o) }

// ReadIndexer reads the QSA indexer fields (indexer_n_heads, indexer_kv_heads, indexer_head_dim,
// indexer_budget, indexer_compress_ratio; no defaults).
func ReadIndexer(c *Config, o *Object) { hfconfig.ReadIndexer(c, o) }

// ReadLayerTypes reads layer_types, or derives them from full_attention_interval (default 4) as
// transformers does (layer i is attn iff (i+1) % interval == 0); names maps the names a family's
// files use to layer types.
func ReadLayerTypes(c *Config, o *Object, attn LayerType, names map[string]LayerType) {
	hfconfig.ReadLayerTypes(c, o, attn, names)
}

// ReadQuantization reads the quantization keys of o (an MLX quantization block or an FP8
// quantization_config) into c.Quant or c.FP8: Parse calls it on the top level before ReadConfig; a
// family whose text model sits under text_config calls it on that object too. Errors wrap
// ErrConfig (a second block, a malformed one) or ErrUnsupported (a method strata does not run).
func ReadQuantization(c *Config, o *Object) error { return hfconfig.ReadQuantization(c, o) }
