package hfconfig

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Spec is one checkpoint tensor the config implies: its full name and shape (PyTorch order,
// e.g. a Linear weight is [out, in]).
type Spec struct {
	Name  string
	Shape []int64
	// Linear marks the weight of a Linear or Embedding module ([out, in], or [E, out, in] for
	// stacked experts): the tensors an MLX conversion may store quantized (<module>.weight as
	// packed codes beside <module>.scales and <module>.biases). Norms, convolutions and the GDN
	// gate vectors are never quantized.
	Linear bool
}

// Module is the module path of a Linear weight: its name without ".weight" (the key of a
// per-module quantization entry).
func (s Spec) Module() string { return strings.TrimSuffix(s.Name, ".weight") }

// Layout is how a checkpoint names its tensors.
type Layout struct {
	// Prefix of the text model: "model." (causal-LM checkpoints) or "model.language_model."
	// (the multimodal qwen4_exp checkpoint). lm_head.weight never carries it.
	Prefix string
	// FusedExperts: experts stored as mlp.experts.gate_up_proj [E, 2I, D] (gate rows first) and
	// mlp.experts.down_proj [E, D, I]; otherwise per expert as
	// mlp.experts.{e}.{gate,up,down}_proj.weight ([I, D], [I, D], [D, I]).
	FusedExperts bool
	// NGramParts > 1: each PLE n-gram table is stored as NGramParts row blocks
	// ple.ple_embedding.ngram_embedding.shard_{k}.weight of equal size, to be concatenated in k
	// order; 0 or 1: one ple.ple_embedding.ngram_embedding.weight.
	NGramParts int
	// SwitchMLP: experts stacked as MLX stores them, mlp.switch_mlp.{gate,up}_proj.weight
	// [E, I, D] and mlp.switch_mlp.down_proj.weight [E, D, I].
	SwitchMLP bool
	// MLX: the checkpoint is an MLX conversion (mlx_lm.convert), decided once from several
	// signals (DetectMLX): experts under switch_mlp, linear_attn.conv1d.weight [C, K, 1], the
	// norms of ShiftedNorm stored as 1 + w, and quantized modules where <module>.scales exists.
	MLX bool
}

// Layer returns the name of a tensor of decoder layer i, e.g. Layer(3, "self_attn.q_proj.weight")
// = "model.layers.3.self_attn.q_proj.weight".
func (l Layout) Layer(i int, suffix string) string {
	return l.Prefix + "layers." + strconv.Itoa(i) + "." + suffix
}

// Model returns the name of a model-level tensor, e.g. Model("embed_tokens.weight").
func (l Layout) Model(suffix string) string { return l.Prefix + suffix }

// ConvShape is the stored shape of a depthwise conv1d weight of C channels and kernel K:
// [C, 1, K] as transformers stores it, [C, K, 1] in an MLX conversion. Both hold the kernel of
// channel c at [c*K, (c+1)*K) in memory.
func (l Layout) ConvShape(C, K int64) []int64 {
	if l.MLX {
		return []int64{C, K, 1}
	}
	return []int64{C, 1, K}
}

// LMHead returns the name of the output projection, "lm_head.weight" in every layout (absent
// from checkpoints with tie_word_embeddings).
func (l Layout) LMHead() string { return "lm_head.weight" }

// skipped reports names that belong to parts of a published checkpoint prefill does not run:
// the multi-token-prediction head and the vision tower.
func skipped(name string) bool {
	return strings.HasPrefix(name, "mtp.") || strings.HasPrefix(name, "model.visual.")
}

var (
	switchRe    = regexp.MustCompile(`layers\.\d+\.mlp\.switch_mlp\.(gate|up|down)_proj\.weight$`)
	perExpertRe = regexp.MustCompile(`layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$`)
	fusedRe     = regexp.MustCompile(`layers\.\d+\.mlp\.experts\.(gate_up|down)_proj$`)
	ngramPartRe = regexp.MustCompile(`^(.*)\.ple\.ple_embedding\.ngram_embedding\.shard_\d+\.weight$`)
)

// DetectLayout infers the Layout from a checkpoint's tensor names (mtp.* and model.visual.*
// ignored): the prefix from where embed_tokens / layers live, the expert storage from the
// expert tensor names (fused, per expert, or MLX's switch_mlp), and split n-gram tables from
// shard_{k} names (then NGramParts = split_ngram_parts). Whether the file is an MLX conversion
// takes more than names (DetectMLX sets Layout.MLX). Errors wrap ErrTensors: no text model
// found, both prefixes, several expert layouts present, or a layer whose number of n-gram
// shards is not split_ngram_parts; ErrUnsupported for mlx-vlm's language_model.model. names.
func (c *Config) DetectLayout(names []string) (Layout, error) {
	var l Layout
	var lm, plain, fused, perExpert, switched, vlm bool
	parts := map[string]int{} // layer prefix -> n-gram table shards
	for _, n := range names {
		if skipped(n) {
			continue
		}
		switch {
		case strings.HasPrefix(n, "language_model.model."):
			vlm = true
		case strings.HasPrefix(n, "model.language_model."):
			lm = true
		case strings.HasPrefix(n, "model.layers.") || strings.HasPrefix(n, "model.embed_tokens."):
			plain = true
		}
		fused = fused || fusedRe.MatchString(n)
		perExpert = perExpert || perExpertRe.MatchString(n)
		switched = switched || switchRe.MatchString(n)
		if m := ngramPartRe.FindStringSubmatch(n); m != nil {
			parts[m[1]]++
		}
	}
	if vlm {
		return l, errMLXQwen4("tensor names start with language_model.model. (mlx-vlm's layout)")
	}
	switch {
	case lm && plain:
		return l, fmt.Errorf("%w: names under both model.language_model. and model.", ErrTensors)
	case lm:
		l.Prefix = "model.language_model."
	case plain:
		l.Prefix = "model."
	default:
		return l, fmt.Errorf("%w: no model.layers.* or model.language_model.layers.* tensors among %d names", ErrTensors, len(names))
	}
	if n := btoi(fused) + btoi(perExpert) + btoi(switched); n > 1 {
		return l, fmt.Errorf("%w: expert tensors in more than one layout: fused (mlp.experts.gate_up_proj) %v, per expert (mlp.experts.{e}.*) %v, stacked (mlp.switch_mlp.*) %v", ErrTensors, fused, perExpert, switched)
	}
	l.FusedExperts, l.SwitchMLP = fused, switched
	if len(parts) > 0 {
		l.NGramParts = c.NGramParts
		layers := make([]string, 0, len(parts))
		for p := range parts {
			layers = append(layers, p)
		}
		sort.Strings(layers)
		for _, p := range layers {
			if parts[p] != c.NGramParts {
				return l, fmt.Errorf("%w: %s.ple.ple_embedding.ngram_embedding is stored as %d shard_{k} tensors, split_ngram_parts is %d", ErrTensors, p, parts[p], c.NGramParts)
			}
		}
	}
	return l, nil
}

// ExpectedTensors lists every tensor the config implies under layout l, with its shape, in a
// fixed order (model-level tensors, then layer by layer). Shapes (D hidden, S streams, R
// hc_lowrank, E experts, I moe_intermediate_size, SI shared_expert_intermediate_size):
//
//	embed_tokens [V, D]; lm_head [V, D] unless tied; qwen3_next: norm [D];
//	qwen4_exp: hyper_connection_mixer.{hc_norm [S*D], input_mix_weight_down [R, S*D], input_mix_weight_up [S*D, R]}
//	per layer, qwen3_next: input_layernorm, post_attention_layernorm [D];
//	qwen4_exp: {attn,mlp}_hyper_connection.{hc_norm, input_mix_weight_down, input_mix_weight_up, block_inject_weight [S, S*D]}
//	linear_attn (C = 2*Hk*dk + Hv*dv): qwen3_next in_proj_qkvz [C + Hv*dv, D], in_proj_ba [2*Hv, D];
//	qwen4_exp in_proj_qkv [C, D], in_proj_z [Hv*dv, D], in_proj_b, in_proj_a [Hv, D];
//	both conv1d [C, 1, K] ([C, K, 1] in an MLX conversion), dt_bias, A_log [Hv], norm [dv], out_proj [D, Hv*dv]
//	self_attn: q_proj [2*Hq*hd, D] (query and gate per head), k_proj, v_proj [Hkv*hd, D], o_proj [D, Hq*hd], q_norm, k_norm [hd];
//	QSA: indexer.index_qk_proj [(nH+kvH)*ihd, D], indexer.{q,k}_layernorm [ihd]
//	MoE: gate [E, D], experts (see Layout), shared_expert.{gate,up}_proj [SI, D], down_proj [D, SI], shared_expert_gate [1, D];
//	(the shapes of Linear weights are the logical [out, in]: CheckCheckpoint reads quantized ones)
//	dense MLP: {gate,up}_proj [DenseI, D], down_proj [D, DenseI]
//	PLE: ple.{key_proj [S*D, P], value_proj [D, P], norm_key, norm_query, norm_conv [S*D], conv1d [S*D, 1, K_ple],
//	ple_embedding.ngram_embedding [PLEVocabRows, P/NGramHeads]}
//
// The config must be valid (Parse and Load validate it).
func (c *Config) ExpectedTensors(l Layout) []Spec {
	D, S, R := int64(c.D), int64(c.Streams), int64(c.HCRank)
	SD := S * D
	var out []Spec
	add := func(name string, shape ...int64) { out = append(out, Spec{Name: name, Shape: shape}) }
	lin := func(name string, shape ...int64) { out = append(out, Spec{Name: name, Shape: shape, Linear: true}) }
	conv := func(name string, C, K int64) { add(name, l.ConvShape(C, K)...) }
	lin(l.Model("embed_tokens.weight"), int64(c.Vocab), D)
	if !c.TieWordEmbeddings {
		lin(l.LMHead(), int64(c.Vocab), D)
	}
	hyper := func(name func(string) string, inject bool) {
		add(name("hc_norm.weight"), SD)
		lin(name("input_mix_weight_down.weight"), R, SD)
		lin(name("input_mix_weight_up.weight"), SD, R)
		if inject {
			lin(name("block_inject_weight.weight"), S, SD)
		}
	}
	if c.Arch == Qwen4Exp {
		hyper(func(s string) string { return l.Model("hyper_connection_mixer." + s) }, false)
	} else {
		add(l.Model("norm.weight"), D)
	}
	Hk, Hv, dk, dv := int64(c.Hk), int64(c.Hv), int64(c.Dk), int64(c.Dv)
	convC := 2*Hk*dk + Hv*dv
	Hq, Hkv, hd := int64(c.Hq), int64(c.Hkv), int64(c.HeadDim)
	for i := 0; i < c.Layers; i++ {
		L := func(s string) string { return l.Layer(i, s) }
		if c.Arch == Qwen4Exp {
			hyper(func(s string) string { return L("attn_hyper_connection." + s) }, true)
			hyper(func(s string) string { return L("mlp_hyper_connection." + s) }, true)
		} else {
			add(L("input_layernorm.weight"), D)
			add(L("post_attention_layernorm.weight"), D)
		}
		switch c.LayerTypes[i] {
		case LinearAttention:
			if c.Arch == Qwen4Exp {
				lin(L("linear_attn.in_proj_qkv.weight"), convC, D)
				lin(L("linear_attn.in_proj_z.weight"), Hv*dv, D)
				lin(L("linear_attn.in_proj_b.weight"), Hv, D)
				lin(L("linear_attn.in_proj_a.weight"), Hv, D)
			} else {
				lin(L("linear_attn.in_proj_qkvz.weight"), convC+Hv*dv, D)
				lin(L("linear_attn.in_proj_ba.weight"), 2*Hv, D)
			}
			conv(L("linear_attn.conv1d.weight"), convC, int64(c.ConvK))
			add(L("linear_attn.dt_bias"), Hv)
			add(L("linear_attn.A_log"), Hv)
			add(L("linear_attn.norm.weight"), dv)
			lin(L("linear_attn.out_proj.weight"), D, Hv*dv)
		case FullAttention, SparseAttention:
			lin(L("self_attn.q_proj.weight"), 2*Hq*hd, D)
			lin(L("self_attn.k_proj.weight"), Hkv*hd, D)
			lin(L("self_attn.v_proj.weight"), Hkv*hd, D)
			lin(L("self_attn.o_proj.weight"), D, Hq*hd)
			add(L("self_attn.q_norm.weight"), hd)
			add(L("self_attn.k_norm.weight"), hd)
			if c.LayerTypes[i] == SparseAttention {
				ihd := int64(c.IdxDim)
				lin(L("self_attn.indexer.index_qk_proj.weight"), int64(c.IdxHeads+c.IdxKVHeads)*ihd, D)
				add(L("self_attn.indexer.q_layernorm.weight"), ihd)
				add(L("self_attn.indexer.k_layernorm.weight"), ihd)
			}
		}
		if c.IsMoELayer(i) {
			E, I, SI := int64(c.Experts), int64(c.MoEI), int64(c.SharedI)
			lin(L("mlp.gate.weight"), E, D)
			switch {
			case l.SwitchMLP:
				lin(L("mlp.switch_mlp.gate_proj.weight"), E, I, D)
				lin(L("mlp.switch_mlp.up_proj.weight"), E, I, D)
				lin(L("mlp.switch_mlp.down_proj.weight"), E, D, I)
			case l.FusedExperts:
				lin(L("mlp.experts.gate_up_proj"), E, 2*I, D)
				lin(L("mlp.experts.down_proj"), E, D, I)
			default:
				for e := 0; e < c.Experts; e++ {
					p := "mlp.experts." + strconv.Itoa(e) + "."
					lin(L(p+"gate_proj.weight"), I, D)
					lin(L(p+"up_proj.weight"), I, D)
					lin(L(p+"down_proj.weight"), D, I)
				}
			}
			lin(L("mlp.shared_expert.gate_proj.weight"), SI, D)
			lin(L("mlp.shared_expert.up_proj.weight"), SI, D)
			lin(L("mlp.shared_expert.down_proj.weight"), D, SI)
			lin(L("mlp.shared_expert_gate.weight"), 1, D)
		} else {
			I := int64(c.DenseI)
			lin(L("mlp.gate_proj.weight"), I, D)
			lin(L("mlp.up_proj.weight"), I, D)
			lin(L("mlp.down_proj.weight"), D, I)
		}
		if j := c.PLEIndex(i); j >= 0 {
			P := int64(c.PLEEmbedDim)
			lin(L("ple.key_proj.weight"), SD, P)
			lin(L("ple.value_proj.weight"), D, P)
			add(L("ple.norm_key.weight"), SD)
			add(L("ple.norm_query.weight"), SD)
			add(L("ple.norm_conv.weight"), SD)
			conv(L("ple.conv1d.weight"), SD, int64(c.PLEConvK))
			rows, width := int64(c.PLEVocabRows(j)), P/int64(c.NGramHeads())
			if l.NGramParts > 1 {
				parts := int64(l.NGramParts)
				// An uneven split cannot be described per part; the whole-table name then
				// appears as missing and every shard_{k} as unexpected.
				if rows%parts == 0 {
					for k := int64(0); k < parts; k++ {
						lin(L(fmt.Sprintf("ple.ple_embedding.ngram_embedding.shard_%d.weight", k)), rows/parts, width)
					}
					continue
				}
			}
			lin(L("ple.ple_embedding.ngram_embedding.weight"), rows, width)
		}
	}
	return out
}

// PLEBuffers lists the three int64 buffers of transformers' Qwen4ExpTextNGramEmbedding for
// every PLE layer, with their shapes: ple.ple_embedding.layer_multipliers [ngram_size],
// ple.ple_embedding.ngram_heads_offsets and ple.ple_embedding.ngram_heads_vocab_sizes
// [(ngram_size-1)*heads_per_ngram]. The published Qwen3.8-Flash-Next checkpoint stores them
// (persistent buffers); files saved where they are not persistent (such as the tiny test
// checkpoints) lack them. They are not weights: strata derives the same values from the config,
// and CheckCheckpoint verifies stored ones against that derivation.
func (c *Config) PLEBuffers(l Layout) []Spec {
	var out []Spec
	for i := 0; i < c.Layers; i++ {
		out = append(out, c.pleBuffers(l, i)...)
	}
	return out
}

// pleBuffers is PLEBuffers of decoder layer i: none, or the three in the order multipliers,
// offsets, vocabulary sizes.
func (c *Config) pleBuffers(l Layout, i int) []Spec {
	if c.PLEIndex(i) < 0 {
		return nil
	}
	heads := int64(c.NGramHeads())
	return []Spec{
		{Name: l.Layer(i, pleMultipliers), Shape: []int64{int64(c.NGramSize)}},
		{Name: l.Layer(i, pleOffsets), Shape: []int64{heads}},
		{Name: l.Layer(i, pleVocabSizes), Shape: []int64{heads}},
	}
}

// Names of the PLE buffers under a decoder layer.
const (
	pleMultipliers = "ple.ple_embedding.layer_multipliers"
	pleOffsets     = "ple.ple_embedding.ngram_heads_offsets"
	pleVocabSizes  = "ple.ple_embedding.ngram_heads_vocab_sizes"
)

// cut joins a sorted copy of names, keeping the first 20 (then " and N more").
func cut(names []string) string {
	s := append([]string(nil), names...)
	sort.Strings(s)
	if len(s) > 20 {
		return strings.Join(s[:20], ", ") + fmt.Sprintf(" and %d more", len(s)-20)
	}
	return strings.Join(s, ", ")
}

// CheckTensors compares a checkpoint's tensor shapes (name -> shape) with ExpectedTensors(l)
// and PLEBuffers(l): the PLE buffers of a layer may be absent, all three together; present,
// they must have their shapes. Names under mtp.* and model.visual.* are skipped. It returns nil
// or one error wrapping ErrTensors that lists every missing, unexpected and wrongly shaped
// tensor (sorted; long lists are cut after 20 names per kind, with the count).
func (c *Config) CheckTensors(l Layout, shapes map[string][]int64) error {
	want := c.ExpectedTensors(l)
	seen := make(map[string]bool, len(want))
	var missing, wrong, extra []string
	check := func(s Spec) {
		if !equalShape(shapes[s.Name], s.Shape) {
			wrong = append(wrong, fmt.Sprintf("%s %v (want %v)", s.Name, shapes[s.Name], s.Shape))
		}
	}
	for _, s := range want {
		seen[s.Name] = true
		if _, ok := shapes[s.Name]; !ok {
			missing = append(missing, s.Name)
			continue
		}
		check(s)
	}
	for i := 0; i < c.Layers; i++ {
		buffers := c.pleBuffers(l, i)
		n := 0
		for _, s := range buffers {
			seen[s.Name] = true
			if _, ok := shapes[s.Name]; ok {
				n++
			}
		}
		for _, s := range buffers {
			if _, ok := shapes[s.Name]; ok {
				check(s)
			} else if n > 0 {
				missing = append(missing, s.Name+" (the layer's other PLE buffers are present)")
			}
		}
	}
	for n := range shapes {
		if !seen[n] && !skipped(n) {
			extra = append(extra, n)
		}
	}
	if len(missing)+len(wrong)+len(extra) == 0 {
		return nil
	}
	var parts []string
	for _, k := range []struct {
		what  string
		names []string
	}{{"missing", missing}, {"wrong shape", wrong}, {"unexpected", extra}} {
		if len(k.names) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s: %s", len(k.names), k.what, cut(k.names)))
		}
	}
	return fmt.Errorf("%w (%s, layout prefix %q, fused experts %v): %s", ErrTensors, c.ModelType, l.Prefix, l.FusedExperts, strings.Join(parts, "; "))
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
