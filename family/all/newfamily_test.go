package all_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/strata"
)

// tinyHybrid is a family added by this test alone, as a new family's folder would add it: a
// text-only hybrid of Gated DeltaNet layers (separate projections) and gated attention layers
// with dense SwiGLU MLPs, its checkpoints under the prefix backbone. It names only package
// family's types (Config, Object, the field readers, Layout, Builder, Plan), so it could live
// outside this module; its generator settings (genreg) are what a family/NAME/gen adds.
type tinyHybrid struct{}

func (tinyHybrid) Name() string { return "tiny_hybrid" }

func (tinyHybrid) ModelTypes() map[string]string {
	return map[string]string{"tiny_hybrid": "Tiny hybrid (a test family)"}
}

func (tinyHybrid) ReadConfig(top *family.Object, c *family.Config) []string {
	unsupported := family.ReadText(c, top, family.TextDefaults{Vocab: 512, D: 256, Layers: 4, Hq: 4, Hkv: 1, HeadDim: 64,
		MaxPositions: 4096, Hk: 2, Hv: 4, Dk: 64, Dv: 64, ConvK: 4, PartialRotary: 0.25})
	c.DenseI = top.Int("intermediate_size", 0)
	family.ReadLayerTypes(c, top, family.FullAttention, map[string]family.LayerType{
		"linear_attention": family.LinearAttention, "full_attention": family.FullAttention,
	})
	top.Unknown(family.IgnoredFields)
	return unsupported
}

func (tinyHybrid) Validate(c *family.Config) []string {
	if c.DenseI <= 0 {
		return []string{fmt.Sprintf("tiny_hybrid needs intermediate_size > 0, not %d", c.DenseI)}
	}
	return nil
}

func (tinyHybrid) Prefixes() []family.Prefix {
	return []family.Prefix{{Text: "backbone.", LMHead: "lm_head.weight"}}
}

func (tinyHybrid) Plan(c *family.Config, l family.Layout) (*family.Plan, error) {
	b := family.NewBuilder(c, l)
	p := b.P
	p.Embed = b.Embedding(l.Model("embed_tokens.weight"), c.Vocab, c.D)
	b.Head()
	norm := b.Gain(l.Model("norm.weight"), c.D, true, l.ShiftedGains)
	p.Head.Norm = &norm
	for i := 0; i < c.Layers; i++ {
		ly := family.Layer{Index: i, Type: c.LayerTypes[i]}
		in := b.Gain(l.Layer(i, "input_layernorm.weight"), c.D, true, l.ShiftedGains)
		post := b.Gain(l.Layer(i, "post_attention_layernorm.weight"), c.D, true, l.ShiftedGains)
		ly.In.Norm, ly.Post.Norm = &in, &post
		if ly.Type == family.LinearAttention {
			ly.GDN = b.GDN(i)
		} else {
			ly.Attn = b.Attention(i, l.ShiftedGains)
		}
		b.MLP(&ly)
		p.Layers = append(p.Layers, ly)
	}
	b.Skip()
	return p, p.Check()
}

// tinySpec is the test family's generated model: 3 GDN layers (2 value heads per key head) and
// 1 attention layer (4 query heads per KV head), dense MLPs.
var tinySpec = genreg.Spec{Arch: "tiny_hybrid", D: 128, Layers: 4, Vocab: 256, AttnEvery: 4,
	Hq: 4, Hkv: 1, HeadDim: 64, Hk: 2, Hv: 4, Dk: 32, Dv: 32, DenseI: 192, RopeTheta: 1e6, Seed: 7}

func init() {
	family.Register(tinyHybrid{})
	genreg.Register(genreg.Family{
		Name: "tiny_hybrid",
		Config: func(s genreg.Spec) map[string]any {
			c := genreg.BaseConfig(s, "full_attention")
			c["architectures"] = []string{"TinyHybridForCausalLM"}
			c["intermediate_size"] = s.DenseI
			return c
		},
		Presets: map[string]genreg.Spec{"tiny-hybrid": tinySpec},
	})
}

// TestNewFamily: a family and its generator settings registered from outside every folder
// strata's code lives in are found by the config parser (by model_type), the checkpoint check,
// the generator (its preset, its config writer) and the runner. Its generated checkpoint has
// every tensor under its prefix, and the runner gives bitwise the logits of the same weights as
// a Qwen3.5 text-only checkpoint (the same blocks in the same order, drawn from the same seed
// under Qwen3.5's names), in one call and in calls of 7 + 1 + rest (each against the same calls).
func TestNewFamily(t *testing.T) {
	if _, ok := family.ForModelType("tiny_hybrid"); !ok {
		t.Fatal("tiny_hybrid is not registered")
	}
	spec, ok := modelgen.Presets["tiny-hybrid"]
	if !ok {
		t.Fatal("the test family's preset is not among modelgen.Presets")
	}
	dir := t.TempDir()
	if err := modelgen.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	cfg, err := family.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	res, err := family.CheckCheckpoint(cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Family != "tiny_hybrid" || res.Plan.Layout.Text != "backbone." || len(res.Plan.Layers) != 4 {
		t.Fatalf("family %s, prefix %q, %d layers", cfg.Family, res.Plan.Layout.Text, len(res.Plan.Layers))
	}

	ref := spec
	ref.Arch = "qwen3_5_text"
	refDir := t.TempDir()
	if err := modelgen.Generate(refDir, ref); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, 40)
	for i := range ids {
		ids[i] = int32((i*29 + 3) % spec.Vocab)
	}
	for _, splits := range [][]int{nil, {7, 1}} {
		want, got := prefill(t, refDir, ids, splits...), prefill(t, dir, ids, splits...)
		if len(got) != len(want) {
			t.Fatalf("calls %v: %d logits, want %d", splits, len(got), len(want))
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("calls %v: logit %d is %g, the Qwen3.5 checkpoint's %g", splits, i, got[i], want[i])
			}
		}
	}
}

// prefill loads the checkpoint in dir on the CPU and returns every token's logits of ids, run in
// calls of the given sizes (the rest last).
func prefill(t *testing.T, dir string, ids []int32, splits ...int) []float32 {
	t.Helper()
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(strata.SessionOptions{MaxContext: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []float32
	at := 0
	for _, n := range append(splits, len(ids)) {
		n = min(n, len(ids)-at)
		if n == 0 {
			continue
		}
		lg, err := s.Prefill(context.Background(), ids[at:at+n], strata.PrefillOptions{AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg.Data...)
		at += n
	}
	return out
}
