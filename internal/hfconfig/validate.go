package hfconfig

import (
	"fmt"
	"strings"
)

// Size limits: well above any published model, low enough that products of sizes (tensor
// shapes, PLE vocabularies) cannot overflow int64 and that a hostile config cannot make
// ExpectedTensors allocate without bound.
const (
	maxDim     = 1 << 24 // any single size (vocab, hidden, heads x dims, ...)
	maxLayers  = 1 << 10
	maxCount   = 1 << 16 // heads
	maxExperts = 1 << 13
	maxHeadDim = 1 << 14
	maxNGram   = 1 << 40 // ngram_vocab_size_base (trial division stays under 2^20 steps per number)
)

// Validate checks the invariants strata relies on and returns one error listing every broken
// one. Errors wrap ErrConfig, or ErrUnsupported for a valid configuration strata does not run
// (indexer_kv_heads != 1, gate activations other than silu/sigmoid). The invariants are
// transformers' own (its configuration classes' validate_architecture) plus the shape
// relations the kernels assume: Hq % Hkv == 0, Hv % Hk == 0, an even rotary dim <= head dim.
func (c *Config) Validate() error {
	var bad, unsup []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	in := func(name string, v, lo, hi int) bool {
		ok := v >= lo && v <= hi
		check(ok, "%s = %d outside [%d, %d]", name, v, lo, hi)
		return ok
	}
	in("vocab_size", c.Vocab, 1, 1<<30)
	in("hidden_size", c.D, 1, maxDim)
	layersOK := in("num_hidden_layers", c.Layers, 1, maxLayers)
	in("max_position_embeddings", c.MaxPositions, 1, 1<<40)
	check(c.Eps > 0 && c.Eps < 1, "rms_norm_eps = %v outside (0, 1)", c.Eps)
	check(c.RopeTheta > 0, "rope_theta = %v must be positive", c.RopeTheta)

	hqOK := in("num_attention_heads", c.Hq, 1, maxCount)
	hkvOK := in("num_key_value_heads", c.Hkv, 1, maxCount)
	if hqOK && hkvOK {
		check(c.Hq%c.Hkv == 0, "num_attention_heads %d not a multiple of num_key_value_heads %d", c.Hq, c.Hkv)
	}
	if in("head_dim", c.HeadDim, 1, maxHeadDim) {
		check(c.RotaryDim > 0 && c.RotaryDim%2 == 0 && c.RotaryDim <= c.HeadDim,
			"rotary dim int(head_dim * partial_rotary_factor) = %d must be even and in (0, head_dim %d]", c.RotaryDim, c.HeadDim)
	}
	hkOK := in("linear_num_key_heads", c.Hk, 1, maxCount)
	hvOK := in("linear_num_value_heads", c.Hv, 1, maxCount)
	if hkOK && hvOK {
		check(c.Hv%c.Hk == 0, "linear_num_value_heads %d not a multiple of linear_num_key_heads %d", c.Hv, c.Hk)
	}
	in("linear_key_head_dim", c.Dk, 1, maxHeadDim)
	in("linear_value_head_dim", c.Dv, 1, maxHeadDim)
	in("linear_conv_kernel_dim", c.ConvK, 1, 64)
	if c.GateAct != "silu" && c.GateAct != "sigmoid" {
		unsup = append(unsup, fmt.Sprintf("gate activation %q (output_gate_type or hidden_act; strata implements silu and sigmoid)", c.GateAct))
	}

	if layersOK {
		check(len(c.LayerTypes) == c.Layers, "layer_types has %d entries for %d layers", len(c.LayerTypes), c.Layers)
	}
	for i, t := range c.LayerTypes {
		switch t {
		case LinearAttention, FullAttention, SparseAttention:
		default:
			check(false, "layer %d: unknown layer type %q", i, t)
		}
	}
	if len(c.MRoPESection) > 0 {
		sum, neg := 0, false
		for _, s := range c.MRoPESection {
			sum += s
			neg = neg || s < 0
		}
		// For text the temporal, height and width positions are all the token's position, so the
		// sections only split the rotary pairs; they must cover them exactly.
		check(!neg && 2*sum == c.RotaryDim, "rope_parameters.mrope_section %v: its sections hold %d rotary pairs, the rotary dim int(head_dim * partial_rotary_factor) = %d has %d",
			c.MRoPESection, sum, c.RotaryDim, c.RotaryDim/2)
	}

	moe, dense := false, false
	if layersOK {
		for i := 0; i < c.Layers; i++ {
			if c.IsMoELayer(i) {
				moe = true
			} else {
				dense = true
			}
		}
	}
	if in("num_experts", c.Experts, 0, maxExperts) && moe {
		in("num_experts_per_tok", c.TopK, 1, c.Experts)
		in("moe_intermediate_size", c.MoEI, 1, maxDim)
		in("shared_expert_intermediate_size", c.SharedI, 1, maxDim)
	}
	if c.Experts > 0 && in("decoder_sparse_step", c.DecoderSparseStep, 1, maxLayers) && layersOK {
		seen := map[int]bool{}
		for _, l := range c.MLPOnlyLayers {
			check(l >= 0 && l < c.Layers, "mlp_only_layers entry %d outside [0, %d)", l, c.Layers)
			check(!seen[l], "mlp_only_layers lists layer %d twice", l)
			seen[l] = true
		}
	}
	if dense {
		in("intermediate_size (dense MLP layers)", c.DenseI, 1, maxDim)
	}
	if c.Streams != 1 {
		in("hc_count", c.Streams, 2, 64)
		in("hc_lowrank", c.HCRank, 1, maxDim)
	}
	c.validateIndexer(in, check, &unsup)
	c.validatePLE(in, check, layersOK)
	for _, e := range c.EOS {
		check(e >= 0 && e < c.Vocab, "eos_token_id %d outside [0, vocab_size %d)", e, c.Vocab)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	if len(unsup) > 0 {
		return fmt.Errorf("%w: %s", ErrUnsupported, strings.Join(unsup, "; "))
	}
	return nil
}

func (c *Config) validateIndexer(in func(string, int, int, int) bool, check func(bool, string, ...any), unsup *[]string) {
	if !c.HasLayer(SparseAttention) {
		return
	}
	// Every sparse attention layer builds the indexer, so its fields are required.
	in("indexer_n_heads", c.IdxHeads, 1, maxCount)
	in("indexer_head_dim", c.IdxDim, 1, maxHeadDim)
	if in("indexer_kv_heads", c.IdxKVHeads, 1, maxCount) && c.IdxKVHeads != 1 {
		*unsup = append(*unsup, fmt.Sprintf("indexer_kv_heads = %d (strata, like transformers, supports only 1 indexer key head)", c.IdxKVHeads))
	}
	budgetOK := in("indexer_budget", c.IdxBudget, 1, 1<<40)
	if in("indexer_compress_ratio", c.IdxRatio, 1, 1<<20) && budgetOK {
		check(c.IdxBudget%c.IdxRatio == 0, "indexer_budget %d not a multiple of indexer_compress_ratio %d", c.IdxBudget, c.IdxRatio)
	}
	// The indexer applies the attention's cos/sin (RotaryDim wide) to its own heads.
	check(c.IdxDim <= 0 || c.RotaryDim <= c.IdxDim, "rotary dim %d exceeds indexer_head_dim %d", c.RotaryDim, c.IdxDim)
}

func (c *Config) validatePLE(in func(string, int, int, int) bool, check func(bool, string, ...any), layersOK bool) {
	for i, id := range c.PLELayerIDs {
		check(i == 0 || id > c.PLELayerIDs[i-1], "ple_layer_ids must be sorted and unique: %v", c.PLELayerIDs)
		if !layersOK || !in("ple_layer_ids entry (1-based)", id, 1, c.Layers) {
			continue
		}
		if id-1 < len(c.LayerTypes) {
			check(c.LayerTypes[id-1] == LinearAttention, "ple_layer_ids %d: PLE is supported only on linear_attention layers, layer %d is %s", id, id-1, c.LayerTypes[id-1])
		}
	}
	if len(c.PLELayerIDs) == 0 {
		return
	}
	check(len(c.EOS) > 0, "eos_token_id must be set when PLE layers are present (segments restart after eos)")
	in("ple_conv_kernel_size", c.PLEConvK, 1, 64)
	in("make_ngram_vocab_size_divisible_by", c.NGramVocabDivisor, 1, 1<<20)
	in("ngram_vocab_size_base", c.NGramVocabBase, 2, maxNGram)
	in("split_ngram_parts", c.NGramParts, 1, 1<<20)
	sizeOK := in("ngram_size", c.NGramSize, 2, 16)
	headsOK := in("heads_per_ngram", c.HeadsPerNGram, 1, 1024)
	if in("ple_embed_dim", c.PLEEmbedDim, 1, maxDim) && sizeOK && headsOK {
		check(c.PLEEmbedDim%c.NGramHeads() == 0, "ple_embed_dim %d not a multiple of (ngram_size-1)*heads_per_ngram = %d", c.PLEEmbedDim, c.NGramHeads())
	}
}
