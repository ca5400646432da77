package family_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/hfconfig"

	"github.com/stratakernels/strata/internal/safetensors"
)

// checkpointShapes opens a tiny checkpoint and returns its config and name -> shape map.
func checkpointShapes(t *testing.T, dir string) (*hfconfig.Config, map[string][]int64) {
	t.Helper()
	dir = filepath.Join(testdata, dir)
	c, err := family.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	shapes := map[string][]int64{}
	for _, n := range ck.Names() {
		tn, err := ck.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		shapes[n] = tn.Shape
	}
	return c, shapes
}

// TestTinyCheckpointTensors: every tensor the config implies is in the checkpoint with the
// implied shape, and nothing else is (CheckTensors passes); the expected lists have exactly the
// checkpoint's size, and the layout detected is the one the testdata README describes.
func TestTinyCheckpointTensors(t *testing.T) {
	cases := []struct {
		dir   string
		fused bool
	}{{"qwen3next-tiny", false}, {"qwen4exp-tiny", true}}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			c, shapes := checkpointShapes(t, tc.dir)
			names := make([]string, 0, len(shapes))
			for n := range shapes {
				names = append(names, n)
			}
			l, err := family.DetectNames(c, names)
			if err != nil {
				t.Fatal(err)
			}
			if l.Text != "model." || (l.Experts == family.Fused) != tc.fused || l.NGramParts != 0 {
				t.Fatalf("layout %+v", l)
			}
			exp := family.ExpectedTensors(c, l)
			if len(exp) != len(shapes) {
				t.Errorf("config implies %d tensors, checkpoint has %d", len(exp), len(shapes))
			}
			for _, s := range exp {
				got, ok := shapes[s.Name]
				if !ok {
					t.Errorf("missing %s", s.Name)
				} else if !reflect.DeepEqual(got, s.Shape) {
					t.Errorf("%s: checkpoint %v, config implies %v", s.Name, got, s.Shape)
				}
			}
			if err := family.CheckTensors(c, l, shapes); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func cloneShapes(m map[string][]int64) map[string][]int64 {
	out := make(map[string][]int64, len(m))
	for k, v := range m {
		out[k] = append([]int64(nil), v...)
	}
	return out
}

// TestCheckTensorsErrors damages the qwen4exp-tiny name/shape set one way per case.
func TestCheckTensorsErrors(t *testing.T) {
	c, shapes := checkpointShapes(t, "qwen4exp-tiny")
	l := layoutOf(t, c, "model.", family.Fused, false)
	cases := []struct {
		name  string
		edit  func(m map[string][]int64)
		wants []string
	}{
		{"missing", func(m map[string][]int64) { delete(m, "model.layers.3.self_attn.indexer.k_layernorm.weight") },
			[]string{"1 missing: model.layers.3.self_attn.indexer.k_layernorm.weight"}},
		{"extra", func(m map[string][]int64) { m["model.layers.0.self_attn.q_proj.weight"] = []int64{6144, 256} },
			[]string{"1 unexpected: model.layers.0.self_attn.q_proj.weight"}},
		{"wrong shape", func(m map[string][]int64) { m["model.layers.1.ple.value_proj.weight"] = []int64{96, 256} },
			[]string{"1 wrong shape: model.layers.1.ple.value_proj.weight [96 256] (want [256 96])"}},
		{"wrong rank", func(m map[string][]int64) { m["model.layers.0.linear_attn.conv1d.weight"] = []int64{1280, 4} },
			[]string{"model.layers.0.linear_attn.conv1d.weight [1280 4] (want [1280 1 4])"}},
		{"all three at once", func(m map[string][]int64) {
			delete(m, "lm_head.weight")
			m["model.norm.weight"] = []int64{256}
			m["model.embed_tokens.weight"] = []int64{511, 256}
		}, []string{"1 missing: lm_head.weight", "1 wrong shape: model.embed_tokens.weight", "1 unexpected: model.norm.weight"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := cloneShapes(shapes)
			tc.edit(m)
			err := family.CheckTensors(c, l, m)
			if !errors.Is(err, hfconfig.ErrTensors) {
				t.Fatalf("error %v does not wrap hfconfig.ErrTensors", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Tied embeddings: a stored lm_head is skipped (transformers ties it to the embedding), and
	// none is needed.
	tied := *c
	tied.TieWordEmbeddings = true
	if err := family.CheckTensors(&tied, l, shapes); err != nil {
		t.Fatalf("tied embeddings with a stored lm_head: %v", err)
	}
	delete(shapes, "lm_head.weight")
	if err := family.CheckTensors(&tied, l, shapes); err != nil {
		t.Fatalf("tied embeddings: %v", err)
	}
}

// renamed moves every text-model tensor under model.language_model. and adds the mtp.* and
// model.visual.* tensors a published multimodal checkpoint carries.
func renamed(m map[string][]int64) map[string][]int64 {
	out := map[string][]int64{}
	for k, v := range m {
		if strings.HasPrefix(k, "model.") {
			k = "model.language_model." + strings.TrimPrefix(k, "model.")
		}
		out[k] = v
	}
	out["mtp.fc.weight"] = []int64{256, 512}
	out["mtp.layers.0.self_attn.q_proj.weight"] = []int64{6144, 256}
	out["model.visual.blocks.0.attn.qkv.weight"] = []int64{3456, 1152}
	return out
}

func namesOf(m map[string][]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLanguageModelPrefix: the multimodal layout is detected and checks clean, with mtp.* and
// model.visual.* names skipped, and Layer/Model/LMHead name tensors under it.
func TestLanguageModelPrefix(t *testing.T) {
	c, shapes := checkpointShapes(t, "qwen4exp-tiny")
	m := renamed(shapes)
	l, err := family.DetectNames(c, namesOf(m))
	if err != nil {
		t.Fatal(err)
	}
	if l.Text != "model.language_model." || l.Experts != family.Fused {
		t.Fatalf("layout %+v", l)
	}
	if err := family.CheckTensors(c, l, m); err != nil {
		t.Fatal(err)
	}
	if got := l.Layer(3, "self_attn.q_proj.weight"); got != "model.language_model.layers.3.self_attn.q_proj.weight" {
		t.Fatalf("Layer: %s", got)
	}
	if got := l.Model("embed_tokens.weight"); got != "model.language_model.embed_tokens.weight" {
		t.Fatalf("Model: %s", got)
	}
	if got := (family.Layout{Prefix: family.Prefix{Text: "model."}}).Layer(3, "self_attn.q_proj.weight"); got != "model.layers.3.self_attn.q_proj.weight" {
		t.Fatalf("Layer: %s", got)
	}
	if l.LMHead != "lm_head.weight" {
		t.Fatalf("LMHead: %s", l.LMHead)
	}
	// The plain-prefix layout sees every text tensor as missing and unexpected.
	if err := family.CheckTensors(c, layoutOf(t, c, "model.", family.Fused, false), m); !errors.Is(err, hfconfig.ErrTensors) {
		t.Fatalf("wrong prefix: %v", err)
	}
	// Both prefixes at once cannot be a real checkpoint.
	m["model.layers.0.linear_attn.A_log"] = []int64{6}
	if _, err := family.DetectNames(c, namesOf(m)); !errors.Is(err, hfconfig.ErrTensors) {
		t.Fatalf("mixed prefixes: %v", err)
	}
	if _, err := family.DetectNames(c, []string{"lm_head.weight", "mtp.fc.weight"}); !errors.Is(err, hfconfig.ErrTensors) {
		t.Fatalf("no text model: %v", err)
	}
}

// TestExpertLayouts converts the fused qwen4exp-tiny experts to per-expert names (and the
// per-expert qwen3next-tiny experts to fused names): each checks clean under the layout
// DetectLayout infers and fails under the other; mixing both is an error.
func TestExpertLayouts(t *testing.T) {
	c4, s4 := checkpointShapes(t, "qwen4exp-tiny")
	per := map[string][]int64{}
	for k, v := range s4 {
		if i := strings.Index(k, "mlp.experts."); i >= 0 {
			pre := k[:i+len("mlp.experts.")]
			for e := 0; e < c4.Experts; e++ {
				ep := pre + strconv.Itoa(e) + "."
				if strings.HasSuffix(k, "gate_up_proj") {
					per[ep+"gate_proj.weight"] = []int64{v[1] / 2, v[2]}
					per[ep+"up_proj.weight"] = []int64{v[1] / 2, v[2]}
				} else {
					per[ep+"down_proj.weight"] = []int64{v[1], v[2]}
				}
			}
			continue
		}
		per[k] = v
	}
	l, err := family.DetectNames(c4, namesOf(per))
	if err != nil || l.Experts != family.PerExpert {
		t.Fatalf("per-expert layout: %+v %v", l, err)
	}
	if err := family.CheckTensors(c4, l, per); err != nil {
		t.Fatal(err)
	}
	if err := family.CheckTensors(c4, layoutOf(t, c4, "model.", family.Fused, false), per); !errors.Is(err, hfconfig.ErrTensors) {
		t.Fatalf("per-expert names under the fused layout: %v", err)
	}

	c3, s3 := checkpointShapes(t, "qwen3next-tiny")
	fused := map[string][]int64{}
	for k, v := range s3 {
		if i := strings.Index(k, "mlp.experts."); i >= 0 {
			pre := k[:i+len("mlp.experts.")]
			fused[pre+"gate_up_proj"] = []int64{int64(c3.Experts), 2 * int64(c3.MoEI), int64(c3.D)}
			fused[pre+"down_proj"] = []int64{int64(c3.Experts), int64(c3.D), int64(c3.MoEI)}
			continue
		}
		fused[k] = v
	}
	l, err = family.DetectNames(c3, namesOf(fused))
	if err != nil || l.Experts != family.Fused {
		t.Fatalf("fused layout: %+v %v", l, err)
	}
	if err := family.CheckTensors(c3, l, fused); err != nil {
		t.Fatal(err)
	}
	fused["model.layers.0.mlp.experts.0.up_proj.weight"] = []int64{32, 256}
	if _, err := family.DetectNames(c3, namesOf(fused)); !errors.Is(err, hfconfig.ErrTensors) {
		t.Fatalf("mixed expert layouts: %v", err)
	}
}

// TestSplitNGramTable: a checkpoint storing the PLE table as split_ngram_parts row blocks
// (ngram_embedding.shard_{k}.weight) is detected and checked part by part.
func TestSplitNGramTable(t *testing.T) {
	c, shapes := checkpointShapes(t, "qwen4exp-tiny")
	c.NGramParts = 4 // 16896 rows = 4 x 4224
	m := cloneShapes(shapes)
	whole := "model.layers.1.ple.ple_embedding.ngram_embedding.weight"
	delete(m, whole)
	for k := 0; k < 4; k++ {
		m["model.layers.1.ple.ple_embedding.ngram_embedding.shard_"+strconv.Itoa(k)+".weight"] = []int64{4224, 6}
	}
	l, err := family.DetectNames(c, namesOf(m))
	if err != nil || l.NGramParts != 4 {
		t.Fatalf("layout %+v %v", l, err)
	}
	if err := family.CheckTensors(c, l, m); err != nil {
		t.Fatal(err)
	}
	m["model.layers.1.ple.ple_embedding.ngram_embedding.shard_3.weight"] = []int64{4223, 6}
	if err := family.CheckTensors(c, l, m); !errors.Is(err, hfconfig.ErrTensors) || !strings.Contains(err.Error(), "shard_3") {
		t.Fatalf("short part: %v", err)
	}
}

// layoutOf is the layout of c's family with the text prefix text, the expert storage and MLX as
// given.
func layoutOf(t *testing.T, c *hfconfig.Config, text string, ex family.ExpertStorage, mlx bool) family.Layout {
	t.Helper()
	for _, p := range family.Of(c).Prefixes() {
		if p.Text == text {
			return family.Layout{Prefix: p, Experts: ex, MLX: mlx}
		}
	}
	t.Fatalf("%s has no prefix %s", c.Family, text)
	return family.Layout{}
}
