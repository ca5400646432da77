package family

// GenSpec is the size of a generated (random-weight) checkpoint of a family: what
// internal/modelgen writes for tests, benchmarks and the main job. Zero fields are not
// defaults; a family reads only the fields of the parts it has.
type GenSpec struct {
	ModelType        string // config.json model_type (selects the family)
	D, Layers, Vocab int
	AttnEvery        int // every AttnEvery-th layer (1-based) is attention, the rest GDN
	Hq, Hkv, HeadDim int
	Hk, Hv, Dk, Dv   int
	Experts, TopK    int // 0 experts: a dense family's MLPs of DenseI
	MoEI, SharedI    int
	DenseI           int
	Streams, HCRank  int   // hyper-connection residual streams
	IdxHeads         int   // QSA indexer heads (head dim 128, blocks of 4)
	IdxBudget        int   // QSA budget in tokens
	PLELayers        []int // 1-based, as ple_layer_ids
	PLEEmbedDim      int
	RopeTheta        float64
	Seed             uint64
	// Experts is how the checkpoint stores the routed experts (PerExpert or Fused).
	ExpertStorage ExpertStorage
	// Prefix is the text model's tensor prefix ("" means the family's first Prefix).
	Prefix string
}

// Generator is implemented by families that internal/modelgen can write random checkpoints of:
// GenConfig returns the config.json of a checkpoint of spec's sizes, as transformers would save it.
type Generator interface {
	GenConfig(s GenSpec) map[string]any
}

// BaseConfig is the part of a generated config.json every family shares: sizes, heads, the
// Gated DeltaNet and MoE fields, RoPE with partial_rotary_factor 0.25 and the bookkeeping
// fields transformers writes, with layer_types from AttnEvery (attn naming the attention layers).
func BaseConfig(s GenSpec, attn string) map[string]any {
	types := make([]string, s.Layers)
	for i := range types {
		types[i] = "linear_attention"
		if s.AttnEvery > 0 && (i+1)%s.AttnEvery == 0 {
			types[i] = attn
		}
	}
	c := map[string]any{
		"attention_bias": false, "attention_dropout": 0.0, "bos_token_id": nil, "dtype": "bfloat16",
		"head_dim": s.HeadDim, "hidden_act": "silu", "hidden_size": s.D, "initializer_range": 0.02,
		"layer_types": types, "linear_conv_kernel_dim": 4, "linear_key_head_dim": s.Dk,
		"linear_num_key_heads": s.Hk, "linear_num_value_heads": s.Hv, "linear_value_head_dim": s.Dv,
		"max_position_embeddings": 65536, "model_type": s.ModelType,
		"num_attention_heads": s.Hq, "num_hidden_layers": s.Layers, "num_key_value_heads": s.Hkv,
		"pad_token_id": nil, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "use_cache": true, "vocab_size": s.Vocab,
		"rope_parameters": map[string]any{"partial_rotary_factor": 0.25, "rope_theta": s.RopeTheta, "rope_type": "default"},
	}
	if s.Experts > 0 {
		c["moe_intermediate_size"], c["num_experts"], c["num_experts_per_tok"] = s.MoEI, s.Experts, s.TopK
		c["shared_expert_intermediate_size"], c["norm_topk_prob"] = s.SharedI, true
		c["output_router_logits"], c["router_aux_loss_coef"] = false, 0.001
	}
	return c
}

// MRoPESection splits the rotary pairs of head_dim hd at partial_rotary_factor 0.25 (hd/8 pairs)
// into the temporal, height and width sections in the releases' proportions 11:11:10.
func MRoPESection(hd int) []int {
	pairs := hd / 8
	return []int{pairs * 11 / 32, pairs * 11 / 32, pairs - 2*(pairs*11/32)}
}
