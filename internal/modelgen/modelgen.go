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

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all" // the families' config writers
	"github.com/stratakernels/strata/internal/safetensors"
)

// Spec is the size of a generated model. Zero fields are not defaults: use a preset.
type Spec struct {
	Arch                string // config.json model_type: selects the family (package family)
	D, Layers, Vocab    int
	AttnEvery           int // every AttnEvery-th layer (1-based) is attention, the rest GDN
	Hq, Hkv, HeadDim    int
	Hk, Hv, Dk, Dv      int
	Experts, TopK       int
	MoEI, SharedI       int
	Streams, HCRank     int   // hyper-connection streams and rank
	IdxHeads, IdxBudget int   // QSA indexer (index head dim 128, ratio 4)
	PLELayers           []int // 1-based, as ple_layer_ids
	PLEEmbedDim         int
	NGramBase           int // ngram_vocab_size_base (0: the family's default)
	NGramParts          int // > 1: the n-gram tables stored as that many row blocks (split_ngram_parts)
	RopeTheta           float64
	Seed                uint64
	PerExpertLayout     bool   // write mlp.experts.{e}.* instead of fused tensors
	DenseI              int    // dense-MLP width of a family without experts
	Prefix              string // tensor prefix of the text model ("": the family's first)
	// Constants writes the plan's constant tensors (the PLE hash buffers, I64) as the published
	// checkpoints store them; without it they are left out (strata derives them).
	Constants bool
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
	// Reduced Qwen3.5 models in the published multimodal layout (model.language_model.*, the text
	// model under text_config): 3 GDN layers (2 value heads per qk head) + 1 attention layer (6 query
	// heads per KV head, as Qwen3.5-27B), dense MLPs or 16 fused experts top-4. The transformers
	// goldens of family/qwen35/testdata are theirs.
	"qwen35-tiny": {Arch: "qwen3_5", D: 256, Layers: 4, Vocab: 512, AttnEvery: 4,
		Hq: 12, Hkv: 2, HeadDim: 256, Hk: 2, Hv: 4, Dk: 128, Dv: 128, DenseI: 384,
		RopeTheta: 1e7, Seed: 11, Prefix: "model.language_model."},
	"qwen35moe-tiny": {Arch: "qwen3_5_moe", D: 256, Layers: 4, Vocab: 512, AttnEvery: 4,
		Hq: 12, Hkv: 2, HeadDim: 256, Hk: 2, Hv: 4, Dk: 128, Dv: 128, Experts: 16, TopK: 4, MoEI: 64, SharedI: 64,
		RopeTheta: 1e7, Seed: 12, Prefix: "model.language_model."},
	// A 4-layer slice of Qwen3-Next-80B-A3B at real width (3 GDN + 1 attention, 64 of the 512
	// experts, top-10), in the published per-expert layout that mlx_lm.convert reads: the bf16
	// side of the MLX benchmarks (its 4- and 8-bit conversions come from ConvertMLX).
	"qwen3next-slice": {Arch: "qwen3_next", D: 2048, Layers: 4, Vocab: 8192, AttnEvery: 4,
		Hq: 16, Hkv: 2, HeadDim: 256, Hk: 16, Hv: 32, Dk: 128, Dv: 128, Experts: 64, TopK: 10, MoEI: 512, SharedI: 512,
		RopeTheta: 1e7, Seed: 5, PerExpertLayout: true},
	// The sources of the format fixtures (cmd/format-fixtures, FormatFixtures): small models in the
	// published layouts whose conversions (mlx-vlm at 3, 4 and 8 bits in both norm conventions, the
	// FP8 releases' layouts, MLX's float modes) must all load, within a few megabytes each.
	// Qwen3.8-Flash-Next in the multimodal layout (model.language_model.*, fused experts) with its
	// n-gram table split in 128 row blocks of width 32, which MLX's group of 32 divides (512 / 16
	// heads); 3 GDN + 1 QSA layers, 8 experts top-4 of width 32 (ragged 128 x 128 FP8 blocks).
	"qwen4exp-fmt": {Arch: "qwen4_exp", D: 128, Layers: 4, Vocab: 512, AttnEvery: 4,
		Hq: 2, Hkv: 1, HeadDim: 256, Hk: 1, Hv: 2, Dk: 128, Dv: 128, Experts: 8, TopK: 4, MoEI: 32, SharedI: 32,
		Streams: 4, HCRank: 32, IdxHeads: 4, IdxBudget: 32, PLELayers: []int{2}, PLEEmbedDim: 512, NGramBase: 300, NGramParts: 128,
		RopeTheta: 1e7, Seed: 21, Prefix: "model.language_model.", Constants: true},
	// Qwen3-Next in the published per-expert layout, its shared expert 128 wide (the FP8 release
	// regroups the shared expert's gate and up rows in whole 128-row blocks).
	"qwen3next-fmt": {Arch: "qwen3_next", D: 128, Layers: 4, Vocab: 512, AttnEvery: 4,
		Hq: 2, Hkv: 1, HeadDim: 256, Hk: 1, Hv: 2, Dk: 128, Dv: 128, Experts: 8, TopK: 4, MoEI: 32, SharedI: 128,
		RopeTheta: 1e7, Seed: 22, PerExpertLayout: true},
	// The sources of the GGUF fixtures (internal/gguf/testdata): the smallest models that still hold
	// every layer kind (1 GDN + 1 attention layer) and a GDN with 2 value heads per key head over 2
	// key heads, so that the converter's regrouping of Qwen3-Next's in_proj_qkvz and its Qwen3.5
	// V-head reordering both move rows. qwen35-gguf is 256 wide, so llama-quantize's 256-element
	// block types (Q4_K, Q6_K, IQ4_XS) apply to its rows of D; the other two are 128 wide.
	"qwen35-gguf": {Arch: "qwen3_5", D: 256, Layers: 2, Vocab: 128, AttnEvery: 2,
		Hq: 2, Hkv: 1, HeadDim: 32, Hk: 2, Hv: 4, Dk: 32, Dv: 32, DenseI: 64,
		RopeTheta: 1e7, Seed: 31, Prefix: "model.language_model."},
	"qwen35moe-gguf": {Arch: "qwen3_5_moe", D: 128, Layers: 2, Vocab: 128, AttnEvery: 2,
		Hq: 2, Hkv: 1, HeadDim: 32, Hk: 2, Hv: 4, Dk: 32, Dv: 32, Experts: 4, TopK: 2, MoEI: 32, SharedI: 32,
		RopeTheta: 1e7, Seed: 32, Prefix: "model.language_model."},
	"qwen3next-gguf": {Arch: "qwen3_next", D: 128, Layers: 2, Vocab: 128, AttnEvery: 2,
		Hq: 2, Hkv: 1, HeadDim: 32, Hk: 2, Hv: 4, Dk: 32, Dv: 32, Experts: 4, TopK: 2, MoEI: 32, SharedI: 32,
		RopeTheta: 1e7, Seed: 33, PerExpertLayout: true},
}

// Generate writes the model of spec into dir (created if needed): config.json (the family's,
// family.Generator) and model.safetensors holding every tensor of the family's plan for that
// config, drawn as the plan says (family.Init). The same spec always produces byte-identical files.
func Generate(dir string, spec Spec) error {
	if err := spec.check(); err != nil {
		return err
	}
	gs := spec.genSpec()
	f, ok := family.ForModelType(gs.ModelType)
	if !ok {
		return fmt.Errorf("modelgen: no family reads model_type %q", gs.ModelType)
	}
	g, ok := f.(family.Generator)
	if !ok {
		return fmt.Errorf("modelgen: family %s cannot generate checkpoints", f.Name())
	}
	cj, err := json.MarshalIndent(g.GenConfig(gs), "", "  ")
	if err != nil {
		return err
	}
	cfg, err := family.Parse(cj)
	if err != nil {
		return fmt.Errorf("modelgen: the generated config: %w", err)
	}
	l := family.Layout{Experts: gs.ExpertStorage}
	if gs.NGramParts > 1 {
		l.NGramParts = gs.NGramParts
	}
	for _, p := range f.Prefixes() {
		if gs.Prefix == "" && l.Text == "" || p.Text == gs.Prefix {
			l.Prefix = p
		}
	}
	if gs.Prefix != "" && l.Text != gs.Prefix {
		return fmt.Errorf("modelgen: family %s has no tensor prefix %q", f.Name(), gs.Prefix)
	}
	plan, err := f.Plan(cfg, l)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r := &gen{rng: rand.New(rand.NewPCG(spec.Seed, 0x5eed))}
	for _, t := range plan.Tensors {
		r.draw(t)
	}
	if spec.Constants {
		for _, g := range plan.Constants {
			for _, k := range g.Tensors {
				r.out = append(r.out, int64Tensor(k.Name, k.Values))
			}
		}
	}
	tmp := filepath.Join(dir, "model.safetensors.tmp")
	if err := safetensors.WriteFile(tmp, r.out, map[string]string{"format": "pt", "generator": "strata modelgen " + spec.Arch}); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "model.safetensors")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(cj, '\n'), 0o644)
}

func (s Spec) check() error {
	if _, ok := family.ForModelType(s.Arch); !ok {
		return fmt.Errorf("modelgen: unknown arch %q", s.Arch)
	}
	if s.D <= 0 || s.Layers <= 0 || s.Vocab <= 0 || s.AttnEvery <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.HeadDim <= 0 ||
		s.Hk <= 0 || s.Hv%s.Hk != 0 || s.Hq%s.Hkv != 0 || s.TopK > s.Experts || s.Experts < 0 || s.Experts == 0 && s.DenseI <= 0 {
		return fmt.Errorf("modelgen: inconsistent spec %+v", s)
	}
	return nil
}

// genSpec is the family's view of the spec.
func (s Spec) genSpec() family.GenSpec {
	ex := family.Fused
	if s.PerExpertLayout {
		ex = family.PerExpert
	}
	return family.GenSpec{ModelType: s.Arch, D: s.D, Layers: s.Layers, Vocab: s.Vocab, AttnEvery: s.AttnEvery,
		Hq: s.Hq, Hkv: s.Hkv, HeadDim: s.HeadDim, Hk: s.Hk, Hv: s.Hv, Dk: s.Dk, Dv: s.Dv,
		Experts: s.Experts, TopK: s.TopK, MoEI: s.MoEI, SharedI: s.SharedI, DenseI: s.DenseI,
		Streams: s.Streams, HCRank: s.HCRank, IdxHeads: s.IdxHeads, IdxBudget: s.IdxBudget,
		PLELayers: s.PLELayers, PLEEmbedDim: s.PLEEmbedDim, NGramBase: s.NGramBase, NGramParts: s.NGramParts, RopeTheta: s.RopeTheta, Seed: s.Seed,
		ExpertStorage: ex, Prefix: s.Prefix}
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

// int64Tensor is an I64 tensor [len(v)] of v.
func int64Tensor(name string, v []int64) safetensors.WriteTensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return safetensors.WriteTensor{Name: name, DType: safetensors.I64, Shape: []int64{int64(len(v))}, Data: b}
}

// bf16 rounds to nearest even.
func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// draw adds tensor t with values drawn as its Init says.
func (g *gen) draw(t family.Spec) {
	in := float64(t.Shape[len(t.Shape)-1])
	switch t.Init {
	case family.InitLinear:
		g.normal(t.Name, 0, 1/math.Sqrt(in), t.Shape...)
	case family.InitEmbed:
		g.normal(t.Name, 0, 1, t.Shape...)
	case family.InitGain0:
		g.normal(t.Name, 0, 0.1, t.Shape...)
	case family.InitGain1:
		g.normal(t.Name, 1, 0.1, t.Shape...)
	case family.InitConv:
		g.normal(t.Name, 0, 0.5, t.Shape...)
	case family.InitALog:
		g.fn(t.Name, func(int) float64 { return math.Log(1 + 15*g.rng.Float64()) }, t.Shape...)
	case family.InitDtBias:
		g.fn(t.Name, func(int) float64 { return 0.5 + g.rng.Float64() }, t.Shape...)
	}
}
