// Package modelgen writes deterministic random checkpoints in the Hugging Face layout
// (config.json + model.safetensors, bf16 weights) for either architecture strata runs, at any
// size: the embedded default model of the main job and the models of the benchmarks. The
// weights are random (seeded), so outputs mean nothing linguistically; they exercise every op
// at the chosen shapes, exactly as a real checkpoint of that shape would.
//
// It also holds the structure of the published releases (Releases: their config.json and
// every tensor's name, dtype and shape, shard by shard) and writes them without weights
// (WriteHeaderOnly), for tests of loading and inspection on the real layouts.
package modelgen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// Spec is the size of a generated model. Zero fields are not defaults: use a preset.
type Spec struct {
	Arch                string // "qwen4_exp_text" or "qwen3_next"
	D, Layers, Vocab    int
	AttnEvery           int // every AttnEvery-th layer (1-based) is attention, the rest GDN
	Hq, Hkv, HeadDim    int
	Hk, Hv, Dk, Dv      int
	Experts, TopK       int
	MoEI, SharedI       int
	Streams, HCRank     int   // qwen4_exp
	IdxHeads, IdxBudget int   // qwen4_exp (index head dim 128, ratio 4)
	PLELayers           []int // 1-based, as ple_layer_ids
	PLEEmbedDim         int
	RopeTheta           float64
	Seed                uint64
	PerExpertLayout     bool // write mlp.experts.{e}.* instead of fused tensors
}

// Presets by name.
var Presets = map[string]Spec{
	// The main job's default: a reduced-size Qwen3.8-Flash-Next architecture (every op of the
	// real model, QSA sparse selection active past 131 tokens).
	"qwen4exp-small": {Arch: "qwen4_exp_text", D: 512, Layers: 8, Vocab: 8192, AttnEvery: 4,
		Hq: 12, Hkv: 1, HeadDim: 256, Hk: 2, Hv: 6, Dk: 128, Dv: 128, Experts: 32, TopK: 10, MoEI: 128, SharedI: 128,
		Streams: 4, HCRank: 64, IdxHeads: 4, IdxBudget: 128, PLELayers: []int{2}, PLEEmbedDim: 128, RopeTheta: 1e7, Seed: 1},
	"qwen3next-small": {Arch: "qwen3_next", D: 512, Layers: 8, Vocab: 8192, AttnEvery: 4,
		Hq: 12, Hkv: 1, HeadDim: 256, Hk: 2, Hv: 6, Dk: 128, Dv: 128, Experts: 32, TopK: 10, MoEI: 128, SharedI: 128,
		RopeTheta: 1e7, Seed: 2, PerExpertLayout: true},
	// qwen4exp-small with the Qwen3 tokenizer's vocabulary size (151936 embedding rows), so that
	// Qwen3's tokenizer.json can turn text into its ids and its predictions back into text (the
	// weights are random: the predicted text means nothing). 464 MB.
	"qwen4exp-small-qwen3vocab": {Arch: "qwen4_exp_text", D: 512, Layers: 8, Vocab: 151936, AttnEvery: 4,
		Hq: 12, Hkv: 1, HeadDim: 256, Hk: 2, Hv: 6, Dk: 128, Dv: 128, Experts: 32, TopK: 10, MoEI: 128, SharedI: 128,
		Streams: 4, HCRank: 64, IdxHeads: 4, IdxBudget: 128, PLELayers: []int{2}, PLEEmbedDim: 128, RopeTheta: 1e7, Seed: 4},
	// A 4-layer slice of Qwen3.8-Flash-Next at real width (3 GDN + 1 QSA, 64 of the 512
	// experts, top-10): the benchmark model.
	"qwen4exp-slice": {Arch: "qwen4_exp_text", D: 2560, Layers: 4, Vocab: 8192, AttnEvery: 4,
		Hq: 24, Hkv: 2, HeadDim: 256, Hk: 16, Hv: 48, Dk: 128, Dv: 128, Experts: 64, TopK: 10, MoEI: 640, SharedI: 640,
		Streams: 4, HCRank: 320, IdxHeads: 4, IdxBudget: 2048, PLELayers: []int{2}, PLEEmbedDim: 256, RopeTheta: 1e7, Seed: 3},
	// A 4-layer slice of Qwen3-Next-80B-A3B at real width (3 GDN + 1 attention, 64 of the 512
	// experts, top-10), in the published per-expert layout that mlx_lm.convert reads: the bf16
	// side of the MLX benchmarks (its 4- and 8-bit conversions come from ConvertMLX).
	"qwen3next-slice": {Arch: "qwen3_next", D: 2048, Layers: 4, Vocab: 8192, AttnEvery: 4,
		Hq: 16, Hkv: 2, HeadDim: 256, Hk: 16, Hv: 32, Dk: 128, Dv: 128, Experts: 64, TopK: 10, MoEI: 512, SharedI: 512,
		RopeTheta: 1e7, Seed: 5, PerExpertLayout: true},
}

// Generate writes the model of spec into dir (created if needed): config.json and
// model.safetensors. The same spec always produces byte-identical files.
func Generate(dir string, spec Spec) error {
	if err := spec.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := spec.config()
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	g := &gen{rng: rand.New(rand.NewPCG(spec.Seed, 0x5eed))}
	spec.tensors(g)
	tmp := filepath.Join(dir, "model.safetensors.tmp")
	if err := safetensors.WriteFile(tmp, g.out, map[string]string{"format": "pt", "generator": "strata modelgen " + spec.Arch}); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "model.safetensors")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(cj, '\n'), 0o644)
}

func (s Spec) check() error {
	if s.Arch != "qwen4_exp_text" && s.Arch != "qwen3_next" {
		return fmt.Errorf("modelgen: unknown arch %q", s.Arch)
	}
	if s.D <= 0 || s.Layers <= 0 || s.Vocab <= 0 || s.AttnEvery <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.HeadDim <= 0 ||
		s.Hk <= 0 || s.Hv%s.Hk != 0 || s.Hq%s.Hkv != 0 || s.TopK > s.Experts || s.Experts <= 0 {
		return fmt.Errorf("modelgen: inconsistent spec %+v", s)
	}
	return nil
}

func (s Spec) layerTypes() []string {
	out := make([]string, s.Layers)
	for i := range out {
		switch {
		case (i+1)%s.AttnEvery != 0:
			out[i] = "linear_attention"
		case s.Arch == "qwen4_exp_text":
			out[i] = "qwen_sparse_attention"
		default:
			out[i] = "full_attention"
		}
	}
	return out
}

func (s Spec) config() map[string]any {
	c := map[string]any{
		"attention_bias": false, "attention_dropout": 0.0, "bos_token_id": nil, "dtype": "bfloat16",
		"head_dim": s.HeadDim, "hidden_act": "silu", "hidden_size": s.D, "initializer_range": 0.02,
		"layer_types": s.layerTypes(), "linear_conv_kernel_dim": 4, "linear_key_head_dim": s.Dk,
		"linear_num_key_heads": s.Hk, "linear_num_value_heads": s.Hv, "linear_value_head_dim": s.Dv,
		"max_position_embeddings": 65536, "model_type": s.Arch, "moe_intermediate_size": s.MoEI,
		"norm_topk_prob": true, "num_attention_heads": s.Hq, "num_experts": s.Experts,
		"num_experts_per_tok": s.TopK, "num_hidden_layers": s.Layers, "num_key_value_heads": s.Hkv,
		"output_router_logits": false, "pad_token_id": nil, "rms_norm_eps": 1e-6,
		"router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": s.SharedI,
		"tie_word_embeddings": false, "use_cache": true, "vocab_size": s.Vocab,
		"rope_parameters":       map[string]any{"partial_rotary_factor": 0.25, "rope_theta": s.RopeTheta, "rope_type": "default"},
		"partial_rotary_factor": 0.25,
	}
	if s.Arch == "qwen3_next" {
		c["architectures"] = []string{"Qwen3NextForCausalLM"}
		c["decoder_sparse_step"] = 1
		c["mlp_only_layers"] = []int{}
		c["intermediate_size"] = s.MoEI * 2
		c["eos_token_id"] = nil
		return c
	}
	delete(c, "partial_rotary_factor")
	c["architectures"] = []string{"Qwen4ExpForCausalLM"}
	c["eos_token_id"] = s.Vocab - 1
	c["hc_count"], c["hc_lowrank"] = s.Streams, s.HCRank
	c["heads_per_ngram"], c["ngram_size"], c["ngram_vocab_size_base"] = 8, 3, 1000
	c["make_ngram_vocab_size_divisible_by"] = 128
	c["indexer_budget"], c["indexer_compress_ratio"], c["indexer_head_dim"] = s.IdxBudget, 4, 128
	c["indexer_kv_heads"], c["indexer_n_heads"] = 1, s.IdxHeads
	c["number_of_conv_states"] = 3
	c["output_gate_type"] = "sigmoid"
	c["ple_conv_kernel_size"], c["ple_embed_dim"], c["ple_layer_ids"] = 4, s.PLEEmbedDim, s.PLELayers
	c["seed"] = 1234
	c["split_ngram_parts"] = 512
	c["rope_parameters"].(map[string]any)["mrope_interleaved"] = true
	c["rope_parameters"].(map[string]any)["mrope_section"] = []int{11, 11, 10}
	return c
}

type gen struct {
	rng *rand.Rand
	out []safetensors.WriteTensor
}

// normal adds a bf16 tensor of N(mean, std) values.
func (g *gen) normal(name string, mean, std float64, shape ...int64) {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	b := make([]byte, 2*n)
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], bf16(float32(mean+std*g.rng.NormFloat64())))
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: b})
}

// fn adds a bf16 tensor whose i-th value is f(i).
func (g *gen) fn(name string, f func(i int) float64, shape ...int64) {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	b := make([]byte, 2*n)
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], bf16(float32(f(int(i)))))
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: b})
}

// bf16 rounds to nearest even.
func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func (s Spec) tensors(g *gen) {
	D := int64(s.D)
	lin := func(name string, n, k int64) { g.normal(name, 0, 1/math.Sqrt(float64(k)), n, k) }
	norm := func(name string, n int64) { g.normal(name, 0, 0.1, n) }
	g.normal("model.embed_tokens.weight", 0, 1, int64(s.Vocab), D)
	lin("lm_head.weight", int64(s.Vocab), D)
	q4 := s.Arch == "qwen4_exp_text"
	S, R := int64(s.Streams), int64(s.HCRank)
	gr := func(pre string, inject bool) {
		norm(pre+"hc_norm.weight", S*D)
		lin(pre+"input_mix_weight_down.weight", R, S*D)
		lin(pre+"input_mix_weight_up.weight", S*D, R)
		if inject {
			lin(pre+"block_inject_weight.weight", S, S*D)
		}
	}
	if q4 {
		gr("model.hyper_connection_mixer.", false)
	} else {
		norm("model.norm.weight", D)
	}
	types := s.layerTypes()
	Hk, Hv, dk, dv := int64(s.Hk), int64(s.Hv), int64(s.Dk), int64(s.Dv)
	C := 2*Hk*dk + Hv*dv
	for i := 0; i < s.Layers; i++ {
		p := "model.layers." + strconv.Itoa(i) + "."
		if q4 {
			gr(p+"attn_hyper_connection.", true)
			gr(p+"mlp_hyper_connection.", true)
		} else {
			norm(p+"input_layernorm.weight", D)
			norm(p+"post_attention_layernorm.weight", D)
		}
		if types[i] == "linear_attention" {
			la := p + "linear_attn."
			if q4 {
				lin(la+"in_proj_qkv.weight", C, D)
				lin(la+"in_proj_z.weight", Hv*dv, D)
				lin(la+"in_proj_b.weight", Hv, D)
				lin(la+"in_proj_a.weight", Hv, D)
			} else {
				lin(la+"in_proj_qkvz.weight", 2*Hk*dk+2*Hv*dv, D)
				lin(la+"in_proj_ba.weight", 2*Hv, D)
			}
			g.normal(la+"conv1d.weight", 0, 0.5, C, 1, 4)
			g.fn(la+"A_log", func(int) float64 { return math.Log(1 + 15*g.rng.Float64()) }, Hv)
			g.fn(la+"dt_bias", func(int) float64 { return 0.5 + g.rng.Float64() }, Hv)
			g.normal(la+"norm.weight", 1, 0.1, dv)
			lin(la+"out_proj.weight", D, Hv*dv)
		} else {
			sa := p + "self_attn."
			hd := int64(s.HeadDim)
			lin(sa+"q_proj.weight", int64(s.Hq)*hd*2, D)
			lin(sa+"k_proj.weight", int64(s.Hkv)*hd, D)
			lin(sa+"v_proj.weight", int64(s.Hkv)*hd, D)
			lin(sa+"o_proj.weight", D, int64(s.Hq)*hd)
			norm(sa+"q_norm.weight", hd)
			norm(sa+"k_norm.weight", hd)
			if q4 {
				lin(sa+"indexer.index_qk_proj.weight", int64(s.IdxHeads+1)*128, D)
				norm(sa+"indexer.q_layernorm.weight", 128)
				norm(sa+"indexer.k_layernorm.weight", 128)
			}
		}
		m := p + "mlp."
		E, I, SI := int64(s.Experts), int64(s.MoEI), int64(s.SharedI)
		lin(m+"gate.weight", E, D)
		if s.PerExpertLayout {
			for e := int64(0); e < E; e++ {
				ep := m + "experts." + strconv.FormatInt(e, 10) + "."
				lin(ep+"gate_proj.weight", I, D)
				lin(ep+"up_proj.weight", I, D)
				lin(ep+"down_proj.weight", D, I)
			}
		} else {
			g.normal(m+"experts.gate_up_proj", 0, 1/math.Sqrt(float64(D)), E, 2*I, D)
			g.normal(m+"experts.down_proj", 0, 1/math.Sqrt(float64(I)), E, D, I)
		}
		lin(m+"shared_expert.gate_proj.weight", SI, D)
		lin(m+"shared_expert.up_proj.weight", SI, D)
		lin(m+"shared_expert.down_proj.weight", D, SI)
		lin(m+"shared_expert_gate.weight", 1, D)
		if q4 {
			for pi, id := range s.PLELayers {
				if id != i+1 {
					continue
				}
				pp := p + "ple."
				rows := pleTableRows(pi, 1000, 16, 128)
				hd := int64(s.PLEEmbedDim / 16)
				g.normal(pp+"ple_embedding.ngram_embedding.weight", 0, 1, rows, hd)
				lin(pp+"key_proj.weight", S*D, int64(s.PLEEmbedDim))
				lin(pp+"value_proj.weight", D, int64(s.PLEEmbedDim))
				norm(pp+"norm_key.weight", S*D)
				norm(pp+"norm_query.weight", S*D)
				norm(pp+"norm_conv.weight", S*D)
				g.normal(pp+"conv1d.weight", 0, 0.3, S*D, 1, 4)
			}
		}
	}
}

// pleTableRows is the n-gram table size of PLE layer pleIndex: the sum of its head vocabularies
// (op.PLEHeadVocabs), padded to a multiple of div.
func pleTableRows(pleIndex, base, heads, div int) int64 {
	var total int64
	for _, v := range op.PLEHeadVocabs(base, heads, pleIndex) {
		total += v
	}
	d := int64(div)
	return (total + d - 1) / d * d
}
