package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// IgnoredFields are config.json fields every family knows and does not need: training-only
// settings, bookkeeping, and token ids of the tokenizer other than eos. Checked ones
// (attention_bias, use_sliding_window, rope_scaling) are read, not listed here. Every other
// mtp_* field belongs to the multi-token-prediction head and is accepted too (Object.Unknown).
var IgnoredFields = map[string]bool{
	"architectures":        true, // read at the top level (Config.Architectures), bookkeeping in text_config
	"transformers_version": true, "_name_or_path": true,
	"initializer_range": true, "router_aux_loss_coef": true, "output_router_logits": true,
	"use_cache": true, "dtype": true, "torch_dtype": true, "attention_dropout": true,
	"bos_token_id": true, "pad_token_id": true,
	// sliding-window fields: meaningful only with use_sliding_window, which must be false.
	"sliding_window": true, "max_window_layers": true,
	"mtp_use_dedicated_embeddings": true,
}

// VisionFields are the top-level fields of a multimodal config besides text_config: the vision
// tower and its special tokens, which a text prefill does not use.
var VisionFields = map[string]bool{
	"vision_config": true, "image_token_id": true, "video_token_id": true,
	"vision_start_token_id": true, "vision_end_token_id": true,
}

// TextDefaults are a family's transformers class defaults of the fields ReadText reads.
type TextDefaults struct {
	Vocab, D, Layers, Hq, Hkv, HeadDim, MaxPositions int
	Hk, Hv, Dk, Dv, ConvK                            int
	// PartialRotary is the default partial_rotary_factor.
	PartialRotary float64
}

// ReadText reads the fields every family has into c: sizes, attention and Gated DeltaNet heads,
// rms_norm_eps, tie_word_embeddings, eos_token_id, the multi-token-prediction head's layer
// count, RoPE (ReadRope), and the settings strata refuses when they are not the ones it runs
// (mamba_ssm_dtype other than float32, hidden_act other than silu, attention_bias,
// use_sliding_window), which it returns as unsupported requests. c.GateAct is set to hidden_act;
// a family whose gated norm uses another activation overrides it. Type errors go to o's errors.
func ReadText(c *Config, o *Object, d TextDefaults) (unsupported []string) {
	c.Vocab = o.Int("vocab_size", d.Vocab)
	c.D = o.Int("hidden_size", d.D)
	c.Layers = o.Int("num_hidden_layers", d.Layers)
	c.Hq = o.Int("num_attention_heads", d.Hq)
	c.Hkv = o.Int("num_key_value_heads", d.Hkv)
	c.HeadDim = o.Int("head_dim", d.HeadDim)
	c.MaxPositions = o.Int("max_position_embeddings", d.MaxPositions)
	c.Eps = o.Float("rms_norm_eps", 1e-6)
	c.TieWordEmbeddings = o.Bool("tie_word_embeddings", false)
	c.Hk = o.Int("linear_num_key_heads", d.Hk)
	c.Hv = o.Int("linear_num_value_heads", d.Hv)
	c.Dk = o.Int("linear_key_head_dim", d.Dk)
	c.Dv = o.Int("linear_value_head_dim", d.Dv)
	c.ConvK = o.Int("linear_conv_kernel_dim", d.ConvK)
	c.Streams = 1
	c.EOS = o.IntOrInts("eos_token_id")
	c.MTPLayers = o.Int("mtp_num_hidden_layers", o.Int("num_nextn_predict_layers", 0))
	if v, ok := o.Get("mtp"); ok {
		var head map[string]json.RawMessage
		if err := json.Unmarshal(v, &head); err != nil || head == nil {
			o.Fail("mtp", "want an object (the multi-token-prediction head), got %s", v)
		}
	}
	// The GDN recurrent state: strata keeps it in float32, as transformers does.
	if st := o.Str("mamba_ssm_dtype", "float32"); st != "float32" {
		unsupported = append(unsupported, fmt.Sprintf("%s %q (strata keeps the Gated DeltaNet state in float32)", o.Name("mamba_ssm_dtype"), st))
	}
	act := o.Str("hidden_act", "silu")
	if act != "silu" {
		unsupported = append(unsupported, fmt.Sprintf("%s %q (strata implements silu MLPs)", o.Name("hidden_act"), act))
	}
	c.GateAct = act
	if o.Bool("attention_bias", false) {
		unsupported = append(unsupported, o.Name("attention_bias")+" true (strata's attention has no biases)")
	}
	if o.Bool("use_sliding_window", false) {
		unsupported = append(unsupported, o.Name("use_sliding_window")+" true")
	}
	return append(unsupported, ReadRope(c, o, d.PartialRotary)...)
}

// MoEDefaults are a family's defaults of the MoE fields.
type MoEDefaults struct {
	Experts, TopK, MoEI, SharedI int
}

// ReadMoE reads num_experts, num_experts_per_tok, moe_intermediate_size,
// shared_expert_intermediate_size and norm_topk_prob (default true).
func ReadMoE(c *Config, o *Object, d MoEDefaults) {
	c.Experts = o.Int("num_experts", d.Experts)
	c.TopK = o.Int("num_experts_per_tok", d.TopK)
	c.MoEI = o.Int("moe_intermediate_size", d.MoEI)
	c.SharedI = o.Int("shared_expert_intermediate_size", d.SharedI)
	c.NormTopK = o.Bool("norm_topk_prob", true)
}

// ReadSparseStep reads where dense-MLP layers sit among MoE ones: intermediate_size (their
// width), decoder_sparse_step (default 1: every layer MoE) and mlp_only_layers (default none).
func ReadSparseStep(c *Config, o *Object, intermediate int) {
	c.DenseI = o.Int("intermediate_size", intermediate)
	c.DecoderSparseStep = o.Int("decoder_sparse_step", 1)
	c.MLPOnlyLayers = o.Ints("mlp_only_layers", []int{})
}

// ReadHyper reads the hyper-connection residual: hc_count streams and hc_lowrank.
func ReadHyper(c *Config, o *Object, count, rank int) {
	c.Streams = o.Int("hc_count", count)
	c.HCRank = o.Int("hc_lowrank", rank)
}

// ReadPLE reads the PLE n-gram embedding fields: ple_layer_ids, ple_embed_dim (default
// hidden_size), ple_conv_kernel_size, ngram_size, heads_per_ngram, ngram_vocab_size_base,
// make_ngram_vocab_size_divisible_by, split_ngram_parts and the hash seed (default 1234).
func ReadPLE(c *Config, o *Object) {
	c.PLELayerIDs = sortedUnique(o.Ints("ple_layer_ids", nil))
	c.PLEEmbedDim = o.Int("ple_embed_dim", c.D)
	c.PLEConvK = o.Int("ple_conv_kernel_size", 4)
	c.NGramSize = o.Int("ngram_size", 3)
	c.HeadsPerNGram = o.Int("heads_per_ngram", 8)
	c.NGramVocabBase = o.Int("ngram_vocab_size_base", 20_000_000)
	c.NGramVocabDivisor = o.Int("make_ngram_vocab_size_divisible_by", 128)
	c.NGramParts = o.Int("split_ngram_parts", 512)
	c.Seed = int64(o.Int("seed", 1234))
}

// ReadIndexer reads the QSA indexer fields: indexer_n_heads, indexer_kv_heads,
// indexer_head_dim, indexer_budget and indexer_compress_ratio (no defaults: Validate requires
// them when a layer is SparseAttention).
func ReadIndexer(c *Config, o *Object) {
	c.IdxHeads = o.Int("indexer_n_heads", 0)
	c.IdxKVHeads = o.Int("indexer_kv_heads", 0)
	c.IdxDim = o.Int("indexer_head_dim", 0)
	c.IdxBudget = o.Int("indexer_budget", 0)
	c.IdxRatio = o.Int("indexer_compress_ratio", 0)
}

// ReadRope reads rope_parameters and the legacy top-level rope_theta, partial_rotary_factor and
// rope_scaling. A value given in both places must agree. Defaults: theta 10000 (transformers'
// default) and partial_rotary_factor prf. rope_parameters may carry mrope_section and
// mrope_interleaved (multimodal RoPE): the sections split the rotary pairs between the
// temporal, height and width positions, and for text all three are the token's position, so
// whatever the sections and their interleaving the result is plain partial RoPE; the sections
// are kept (Config.MRoPESection) for Validate to check that they cover the rotary dim exactly.
func ReadRope(c *Config, o *Object, prf float64) (unsupported []string) {
	theta := 10000.0
	legacyTheta, hasLegacyTheta := o.Float("rope_theta", 0), o.Has("rope_theta")
	legacyPRF, hasLegacyPRF := o.Float("partial_rotary_factor", 0), o.Has("partial_rotary_factor")
	if v, ok := o.Get("rope_scaling"); ok {
		unsupported = append(unsupported, fmt.Sprintf("%s %s (strata implements plain RoPE)", o.Name("rope_scaling"), v))
	}
	if hasLegacyTheta {
		theta = legacyTheta
	}
	if hasLegacyPRF {
		prf = legacyPRF
	}
	if raw, ok := o.m["rope_parameters"]; ok && string(bytes.TrimSpace(raw)) == "null" {
		// Null elsewhere means "the default"; here it would hide the rotary settings the family's
		// checks then report as another field's error.
		o.Fail("rope_parameters", "null: want an object (rope_theta, partial_rotary_factor, ...), or leave the key out")
	}
	if raw, ok := o.Get("rope_parameters"); ok {
		rp, err := DecodeObject(raw, o.Name("rope_parameters"), o.errs)
		if err != nil {
			o.Fail("rope_parameters", "not a JSON object")
		} else {
			if t := rp.Str("rope_type", "default"); t != "default" {
				unsupported = append(unsupported, fmt.Sprintf("%s %q (strata implements plain RoPE)", rp.Name("rope_type"), t))
			}
			if rp.Has("rope_theta") {
				v := rp.Float("rope_theta", theta)
				if hasLegacyTheta && v != legacyTheta {
					rp.Fail("rope_theta", "%v disagrees with top-level rope_theta %v", v, legacyTheta)
				}
				theta = v
			}
			if rp.Has("partial_rotary_factor") {
				v := rp.Float("partial_rotary_factor", prf)
				if hasLegacyPRF && v != legacyPRF {
					rp.Fail("partial_rotary_factor", "%v disagrees with top-level partial_rotary_factor %v", v, legacyPRF)
				}
				prf = v
			}
			c.MRoPESection = rp.Ints("mrope_section", nil)
			rp.Bool("mrope_interleaved", false) // the layout of the sections: no effect on text positions
			rp.Unknown()
		}
	}
	c.RopeTheta = theta
	if prf <= 0 || prf > 1 {
		o.Fail("partial_rotary_factor", "%v outside (0, 1]", prf)
	}
	c.RotaryDim = int(float64(c.HeadDim) * prf)
	return unsupported
}

// ReadLayerTypes reads layer_types, or derives them from full_attention_interval (default 4) as
// transformers does: layer i is attention iff (i+1) % interval == 0. names maps the names a
// family's files use to layer types (e.g. "linear_attention", the legacy "mamba" and
// "attention"); attn is the type of the derived attention layers.
func ReadLayerTypes(c *Config, o *Object, attn LayerType, names map[string]LayerType) {
	interval := o.Int("full_attention_interval", 4)
	c.FullAttentionInterval = interval
	list, ok := o.Strs("layer_types")
	if !ok {
		if interval <= 0 {
			o.Fail("full_attention_interval", "%d must be positive", interval)
			return
		}
		if c.Layers < 0 || c.Layers > maxLayers {
			return // Validate reports the layer count
		}
		c.LayerTypes = make([]LayerType, c.Layers)
		for i := range c.LayerTypes {
			c.LayerTypes[i] = LinearAttention
			if (i+1)%interval == 0 {
				c.LayerTypes[i] = attn
			}
		}
		return
	}
	c.LayerTypes = make([]LayerType, len(list))
	for i, n := range list {
		t, ok := names[n]
		if !ok {
			known := make([]string, 0, len(names))
			for k := range names {
				known = append(known, k)
			}
			sort.Strings(known)
			o.Fail("layer_types", "layer %d: unknown type %q for %s (its layer types: %v)", i, n, c.Family, known)
			continue
		}
		c.LayerTypes[i] = t
	}
}

func sortedUnique(v []int) []int {
	if v == nil {
		return []int{}
	}
	s := append([]int(nil), v...)
	sort.Ints(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
