package qwen35_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modeltest"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/strata"
)

// The generated checkpoints the goldens of testdata/goldens.safetensors were computed from
// (testdata/README.md): sha256 of model.safetensors of each preset and of its MLX 4-bit
// conversion (groups of 64).
var fixtureSHA = map[string]string{
	"qwen35-tiny":         "0c7215c67070606cbdd3beb29a87c5b9fae6cdc957c9dc39ebc293531496f1ab",
	"qwen35-tiny-mlx4":    "bd7aaf4cf435f4f4a4ffa0875a0ce12846f24c1b5a85b2c6872a1636f8fd3097",
	"qwen35moe-tiny":      "f84f450048d24d2f36722d300e63b78dd4c45072a22363acbf21ec8e15e2c3d2",
	"qwen35moe-tiny-mlx4": "9019a801ebb4bedeb769489d23399cee8e2d587d962b4b5059991c3f7143f270",
}

var mlx4 = modelgen.MLXOptions{Quantize: true, Bits: 4, Group: 64}

// fixture writes the checkpoint name (a preset, or a preset's "-mlx4" conversion) into a fresh
// folder and checks its bytes are those the goldens were made from.
func fixture(t testing.TB, name string) string {
	t.Helper()
	root := t.TempDir()
	base := strings.TrimSuffix(name, "-mlx4")
	dir := filepath.Join(root, base)
	if err := modelgen.Generate(dir, modelgen.Presets[base]); err != nil {
		t.Fatal(err)
	}
	if base != name {
		mlx := filepath.Join(root, name)
		if err := modelgen.ConvertMLX(dir, mlx, mlx4); err != nil {
			t.Fatal(err)
		}
		dir = mlx
	}
	b, err := os.ReadFile(filepath.Join(dir, safetensors.SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != fixtureSHA[name] {
		t.Fatalf("%s: the generated checkpoint changed (sha256 %s, the goldens were made from %s): regenerate the goldens (testdata/README.md)", name, got, fixtureSHA[name])
	}
	return dir
}

type goldens struct{ f *safetensors.File }

func openGoldens(t testing.TB) *goldens {
	t.Helper()
	f, err := safetensors.Open(filepath.Join("testdata", "goldens.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &goldens{f}
}

func (g *goldens) f32(t testing.TB, name string) []float32 {
	t.Helper()
	tn, err := g.f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// promptIDs are the input ids of the repository's model goldens (prompt a: 96 tokens, b: 300).
func promptIDs(t testing.TB, prompt string) []int32 {
	t.Helper()
	f, err := safetensors.Open(filepath.Join("..", "..", "testdata", "goldens", "model_goldens.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn, err := f.Tensor(prompt + ".input_ids")
	if err != nil {
		t.Fatal(err)
	}
	raw := tn.Data
	ids := make([]int32, len(raw)/4)
	for i := range ids {
		ids[i] = int32(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
	}
	return ids
}

func load(t testing.TB, backend, dir string) *strata.Model {
	t.Helper()
	dev, err := strata.Open(strata.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// prefill runs ids through a new session in calls of the given sizes (the rest last) and
// returns every token's logits.
func prefill(t testing.TB, m *strata.Model, ids []int32, opts strata.PrefillOptions, splits ...int) []float32 {
	t.Helper()
	s, err := m.NewSession(strata.SessionOptions{MaxContext: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts.AllLogits = true
	var out []float32
	at := 0
	for _, n := range append(splits, len(ids)-at) {
		if at+n > len(ids) {
			n = len(ids) - at
		}
		if n == 0 {
			continue
		}
		lg, err := s.Prefill(context.Background(), ids[at:at+n], opts)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg.Data...)
		at += n
	}
	return out
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestGoldens: strata's logits of the generated Qwen3.5 (dense) and Qwen3.5-MoE checkpoints in
// the published multimodal layout, and of their MLX 4-bit conversions (mlx-vlm's layout), are
// within 1e-4 of transformers' float64 logits on the values each file holds (every row of prompt a,
// the rows b.rows of prompt b: modeltest.GoldenRows), on the CPU and on the emulator (the Metal
// kernels), one-shot and chunked.
func TestGoldens(t *testing.T) {
	g := openGoldens(t)
	a, b := promptIDs(t, "a"), promptIDs(t, "b")
	for _, name := range []string{"qwen35-tiny", "qwen35moe-tiny", "qwen35-tiny-mlx4", "qwen35moe-tiny-mlx4"} {
		t.Run(name, func(t *testing.T) {
			dir := fixture(t, name)
			for _, backend := range []string{"cpu", "emu"} {
				if backend == "emu" && testing.Short() {
					continue
				}
				m := load(t, backend, dir)
				runs := []struct {
					what   string
					ids    []int32
					golden string
					opts   strata.PrefillOptions
					splits []int
				}{
					{"a one-shot", a, "a", strata.PrefillOptions{}, nil},
					{"a in calls of 37 + 1 + rest", a, "a", strata.PrefillOptions{}, []int{37, 1}},
					{"b one-shot", b, "b", strata.PrefillOptions{Step: strata.OneShot}, nil},
					{"b in steps of 64", b, "b", strata.PrefillOptions{Step: 64}, nil},
				}
				for _, r := range runs {
					if backend == "emu" && r.golden == "b" && r.opts.Step == 64 {
						continue // the emulator is slow: one b run, the chunked a run covers continuation
					}
					got := modeltest.SelectRows(t, prefill(t, m, r.ids, r.opts, r.splits...), modeltest.GoldenRows(t, g.f, r.golden), m.Vocab())
					d := maxAbsDiff(got, g.f32(t, name+"."+r.golden+".logits"))
					t.Logf("%s on %s, %s: logits max|diff| %.3g", name, backend, r.what, d)
					if d > 1e-4 {
						t.Errorf("%s on %s, %s: logits max|diff| %.3g > 1e-4", name, backend, r.what, d)
					}
				}
			}
		})
	}
}

// rewrite copies the Hugging Face checkpoint src into a fresh folder, passing its tensors and
// config through the edits.
func rewrite(t *testing.T, src string, tensors func([]safetensors.WriteTensor) []safetensors.WriteTensor, cfg func(map[string]any)) string {
	t.Helper()
	dst := t.TempDir()
	f, err := safetensors.Open(filepath.Join(src, safetensors.SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.WriteTensor
	for _, n := range f.Names() {
		tn, _ := f.Tensor(n)
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: tn.DType, Shape: slices.Clone(tn.Shape), Data: slices.Clone(tn.Data)})
	}
	if tensors != nil {
		ts = tensors(ts)
	}
	md := map[string]string{}
	for k, v := range f.Metadata {
		md[k] = v
	}
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.SingleFile), ts, md); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		cfg(c)
	}
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(filepath.Join(dst, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// perExpert rewrites fused experts (gate_up_proj [E, 2I, D], down_proj [E, D, I]) as one tensor per
// expert and projection, as the published per-expert files store them.
func perExpert(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	for _, w := range ts {
		pre, ok := strings.CutSuffix(w.Name, "experts.gate_up_proj")
		if !ok {
			if p, ok := strings.CutSuffix(w.Name, "experts.down_proj"); ok {
				E, per := int(w.Shape[0]), len(w.Data)/int(w.Shape[0])
				for e := 0; e < E; e++ {
					out = append(out, safetensors.WriteTensor{Name: fmt.Sprintf("%sexperts.%d.down_proj.weight", p, e), DType: w.DType,
						Shape: slices.Clone(w.Shape[1:]), Data: w.Data[e*per : (e+1)*per]})
				}
				continue
			}
			out = append(out, w)
			continue
		}
		E, I2, D := int(w.Shape[0]), int(w.Shape[1]), int(w.Shape[2])
		half := I2 / 2 * D * 2 // bytes of one projection (bf16)
		for e := 0; e < E; e++ {
			base := e * I2 * D * 2
			for j, proj := range []string{"gate_proj", "up_proj"} {
				out = append(out, safetensors.WriteTensor{Name: fmt.Sprintf("%sexperts.%d.%s.weight", pre, e, proj), DType: w.DType,
					Shape: []int64{int64(I2 / 2), int64(D)}, Data: w.Data[base+j*half : base+(j+1)*half]})
			}
		}
	}
	return out
}

// TestLayouts: the same weights give the same logits stored with one tensor per expert instead of
// fused (within 1e-5: gate and up then run as two GEMMs instead of one, summing in another
// order), and bitwise under the text-only layout (prefix model., a flat qwen3_5_moe_text config, as
// a transformers text-model save writes it), and with mtp.* and model.visual.* tensors beside them
// (skipped and reported by Inspect).
func TestLayouts(t *testing.T) {
	src := fixture(t, "qwen35moe-tiny")
	ids := promptIDs(t, "a")
	want := prefill(t, load(t, "cpu", src), ids, strata.PrefillOptions{})
	flat := func(c map[string]any) {
		text := c["text_config"].(map[string]any)
		for k := range c {
			delete(c, k)
		}
		for k, v := range text {
			c[k] = v
		}
		c["architectures"] = []string{"Qwen3_5MoeForCausalLM"}
	}
	bf16 := func(name string, shape ...int64) safetensors.WriteTensor {
		n := int64(1)
		for _, s := range shape {
			n *= s
		}
		return safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: make([]byte, 2*n)}
	}
	for _, tc := range []struct {
		name    string
		tensors func([]safetensors.WriteTensor) []safetensors.WriteTensor
		cfg     func(map[string]any)
		skipped []string
		tol     float64
	}{
		{"per expert", perExpert, nil, nil, 1e-5},
		{"text-only re-save", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				ts[i].Name = strings.Replace(ts[i].Name, "model.language_model.", "model.", 1)
			}
			return ts
		}, flat, nil, 0},
		{"mtp and vision tensors", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			return append(ts, bf16("mtp.fc.weight", 256, 512), bf16("mtp.norm.weight", 256),
				bf16("model.visual.patch_embed.proj.weight", 64, 3, 2, 16, 16), bf16("model.visual.blocks.0.norm1.weight", 64))
		}, nil, []string{"mtp.*", "model.visual.*"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := rewrite(t, src, tc.tensors, tc.cfg)
			info, err := strata.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			var skipped []string
			for _, s := range info.Skipped {
				skipped = append(skipped, s.Group)
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tc.skipped)
			}
			got := prefill(t, load(t, "cpu", dir), ids, strata.PrefillOptions{})
			if d := maxAbsDiff(got, want); d > tc.tol {
				t.Errorf("logits differ from the published layout's by %.3g (allowed %g)", d, tc.tol)
			}
		})
	}
}

// TestBadInput: configs that do not fit the family and checkpoints that mix or miss expert
// tensors are refused at load (and by Inspect) naming the field or tensor; nothing of a refused
// checkpoint stays mapped.
func TestBadInput(t *testing.T) {
	src := fixture(t, "qwen35moe-tiny")
	text := func(edit func(tc map[string]any)) func(map[string]any) {
		return func(c map[string]any) { edit(c["text_config"].(map[string]any)) }
	}
	rope := func(tc map[string]any) map[string]any { return tc["rope_parameters"].(map[string]any) }
	for _, tc := range []struct {
		name     string
		tensors  func([]safetensors.WriteTensor) []safetensors.WriteTensor
		cfg      func(map[string]any)
		sentinel error
		want     string
	}{
		{"rope sections", nil, text(func(tc map[string]any) { rope(tc)["mrope_section"] = []int{11, 11, 11} }),
			strata.ErrCheckpoint, "rope_parameters.mrope_section [11 11 11]: its sections hold 33 rotary pairs"},
		{"layer types against the interval", nil, text(func(tc map[string]any) { tc["full_attention_interval"] = 2 }),
			strata.ErrCheckpoint, "full_attention_interval 2 places"},
		{"unknown layer type", nil, text(func(tc map[string]any) {
			tc["layer_types"] = []string{"linear_attention", "linear_attention", "linear_attention", "qwen_sparse_attention"}
		}), strata.ErrCheckpoint, `unknown type "qwen_sparse_attention" for qwen3_5`},
		{"head counts", nil, text(func(tc map[string]any) { tc["linear_num_value_heads"] = 3 }),
			strata.ErrCheckpoint, "linear_num_value_heads 3 not a multiple of linear_num_key_heads 2"},
		{"norm_topk_prob false", nil, text(func(tc map[string]any) { tc["norm_topk_prob"] = false }),
			strata.ErrUnsupported, "norm_topk_prob false"},
		{"sigmoid output gate", nil, text(func(tc map[string]any) { tc["output_gate_type"] = "sigmoid" }),
			strata.ErrUnsupported, `output_gate_type "sigmoid"`},
		{"dense layers", nil, text(func(tc map[string]any) { tc["mlp_only_layers"] = []int{1} }),
			strata.ErrUnsupported, "mlp_only_layers [1]"},
		{"tied embeddings disagree", nil, func(c map[string]any) { c["tie_word_embeddings"] = true },
			strata.ErrCheckpoint, "tie_word_embeddings: true disagrees with text_config.tie_word_embeddings false"},
		{"fused and per-expert tensors", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			var out []safetensors.WriteTensor
			for _, w := range perExpert(ts) {
				if !strings.Contains(w.Name, "layers.1.mlp.experts.") {
					out = append(out, w)
				}
			}
			for _, w := range ts {
				if strings.Contains(w.Name, "layers.1.mlp.experts.") {
					out = append(out, w)
				}
			}
			return out
		}, nil, strata.ErrCheckpoint, "expert tensors in more than one layout"},
		{"a missing expert", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			var out []safetensors.WriteTensor
			for _, w := range perExpert(ts) {
				if w.Name != "model.language_model.layers.2.mlp.experts.7.up_proj.weight" {
					out = append(out, w)
				}
			}
			return out
		}, nil, strata.ErrCheckpoint, "1 missing: model.language_model.layers.2.mlp.experts.7.up_proj.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := rewrite(t, src, tc.tensors, tc.cfg)
			_, ierr := strata.Inspect(dir)
			dev, err := strata.Open(strata.Options{Backend: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			_, lerr := strata.LoadModel(dev, dir, strata.LoadOptions{})
			for what, err := range map[string]error{"Inspect": ierr, "LoadModel": lerr} {
				if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want %v mentioning %q", what, err, tc.sentinel, tc.want)
				}
			}
			maps, err := os.ReadFile("/proc/self/maps")
			if err == nil && strings.Contains(string(maps), dir) {
				t.Errorf("%s is still mapped after the refusal", dir)
			}
		})
	}
}

// TestPublishedReleases: header-only checkpoints with the structure of the published
// Qwen3.5-35B-A3B and Qwen3.5-122B-A10B (config.json, every tensor's name, dtype and shape, no
// weights) pass Inspect: the text model's 693 and 831 tensors (A_log and the gated norm in F32),
// the multi-token-prediction head and the vision tower skipped.
func TestPublishedReleases(t *testing.T) {
	for name, want := range map[string]struct{ D, layers, used, experts int }{
		"qwen3.5-35b-a3b":   {2048, 40, 693, 256},
		"qwen3.5-122b-a10b": {3072, 48, 831, 256},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := modelgen.WriteHeaderOnly(dir, modelgen.Releases[name], modelgen.HeaderOnly{}); err != nil {
				t.Fatal(err)
			}
			info, err := strata.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			var skipped []string
			for _, s := range info.Skipped {
				skipped = append(skipped, s.Group)
			}
			if info.Arch != "qwen3_5" || info.D != want.D || info.Layers != want.layers || info.UsedTensors != want.used ||
				info.Experts != want.experts || info.GDNLayers != 3*want.layers/4 || info.Prefix != "model.language_model." ||
				!info.FusedExperts || !slices.Equal(skipped, []string{"mtp.*", "model.visual.*"}) || info.RotaryDim != 64 {
				t.Errorf("%+v", *info)
			}
		})
	}
}

// TestMLXWithMTP: an MLX conversion that kept the multi-token-prediction head (some published
// files do) is still an MLX conversion: mtp.* is skipped and reported, the logits unchanged.
func TestMLXWithMTP(t *testing.T) {
	src := fixture(t, "qwen35moe-tiny-mlx4")
	ids := promptIDs(t, "a")
	want := prefill(t, load(t, "cpu", src), ids, strata.PrefillOptions{})
	dir := rewrite(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return append(ts, safetensors.WriteTensor{Name: "mtp.norm.weight", DType: safetensors.BF16, Shape: []int64{256}, Data: make([]byte, 512)})
	}, nil)
	info, err := strata.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !info.MLX || len(info.Skipped) != 1 || info.Skipped[0].Group != "mtp.*" {
		t.Fatalf("MLX %v, skipped %+v", info.MLX, info.Skipped)
	}
	if d := maxAbsDiff(prefill(t, load(t, "cpu", dir), ids, strata.PrefillOptions{}), want); d != 0 {
		t.Errorf("logits differ by %.3g", d)
	}
}
