package strata

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// mlxTiny writes the MLX conversion o of qwen3next-tiny (as mlx_lm.convert writes it) into a
// fresh folder, and with hf the float32 Hugging Face checkpoint of its exact weights beside it.
func mlxTiny(t testing.TB, o modelgen.MLXOptions, hf bool) (mlxDir, hfDir string) {
	t.Helper()
	return mlxFrom(t, testdata("qwen3next-tiny"), o, hf)
}

// mlxFrom is mlxTiny for the Hugging Face qwen3_next checkpoint in src.
func mlxFrom(t testing.TB, src string, o modelgen.MLXOptions, hf bool) (mlxDir, hfDir string) {
	t.Helper()
	root := t.TempDir()
	mlxDir = filepath.Join(root, "mlx")
	if err := modelgen.ConvertMLX(src, mlxDir, o); err != nil {
		t.Fatal(err)
	}
	if hf {
		hfDir = filepath.Join(root, "hf")
		if err := modelgen.Dequantize(mlxDir, hfDir, family.PerExpert); err != nil {
			t.Fatal(err)
		}
	}
	return mlxDir, hfDir
}

func loadDir(t testing.TB, dir string) *Model {
	t.Helper()
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(dev, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// mlxVariants are the golden conversions plus an unquantized one (bf16, switch_mlp, shifted
// norms, transposed conv1d).
func mlxVariants() []modelgen.MLXVariant {
	return append([]modelgen.MLXVariant{{Name: "bf16"}}, modelgen.MLXGoldenVariants...)
}

// TestMLXMatchesDequantized: for every MLX conversion of qwen3next-tiny (2 to 8 bits, groups of
// 32, 64 and 128, the 8-bit router, mixed_3_6, and unquantized), strata's logits computed from
// the MLX files (packed weights, switch_mlp experts, norms stored as 1 + w, conv1d [C, K, 1])
// equal, within 1e-4, its logits on the Hugging Face checkpoint of the same weights (float32,
// the published layout; that path is checked against transformers by TestGoldens), for prompts a
// and b in one shot and prompt a in chunks (37 + rest, and 64 + 1 + rest). Reading the norms
// unshifted (the bug other runtimes shipped) moves the logits by O(1).
func TestMLXMatchesDequantized(t *testing.T) {
	g := openGoldens(t, "model_goldens.safetensors")
	for _, v := range mlxVariants() {
		t.Run(v.Name, func(t *testing.T) {
			mlxDir, hfDir := mlxTiny(t, v.MLXOptions, true)
			mq, mf := loadDir(t, mlxDir), loadDir(t, hfDir)
			if !mq.Info().MLX || mf.Info().MLX {
				t.Fatalf("provenance: MLX files %v, Hugging Face files %v", mq.Info().MLX, mf.Info().MLX)
			}
			for _, prompt := range []string{"a", "b"} {
				ids := g.i32(prompt + ".input_ids")
				sq, _ := mq.NewSession(SessionOptions{MaxContext: 512})
				sf, _ := mf.NewSession(SessionOptions{MaxContext: 512})
				want := prefillAll(t, sf, ids, nil)
				got := prefillAll(t, sq, ids, nil)
				d, scale := maxAbsDiff(got, want)
				t.Logf("prompt %s: MLX vs float32 HF logits max|diff| %.3g (max|logit| %.3g)", prompt, d, scale)
				if d > 1e-4 {
					t.Errorf("prompt %s: max|diff| %.3g > 1e-4", prompt, d)
				}
				if prompt != "a" {
					continue
				}
				for _, splits := range [][]int{{37}, {64, 1}} {
					s, _ := mq.NewSession(SessionOptions{MaxContext: 512})
					if d, _ := maxAbsDiff(prefillAll(t, s, ids, splits), want); d > 1e-4 {
						t.Errorf("prompt a in chunks %v: max|diff| %.3g > 1e-4", splits, d)
					}
				}
			}
		})
	}
}

// mlxGoldens is the file of transformers goldens of the MLX conversions: transformers 5.17's
// Qwen3NextForCausalLM in float64 (token-by-token float64 GDN recurrence, stable lower-index
// top-k) on the float32 Hugging Face copy of each conversion's exact weights, made by
// internal/modelgen/cmd/mlx-convert -golden-set and its goldens.py (report beside it). It keeps
// the rows a.rows of prompt a (0, 3, ..., 93, 37, 38, 95) and b.rows of prompt b (0, 5, ...,
// 295, 299).
const mlxGoldens = "testdata/mlx_goldens.safetensors"

// goldenRows returns the rows of x [T, vocab] that the goldens g keep of prompt (its tensor
// PROMPT.rows; all of x when g has none), in that order.
func goldenRows(g *goldens, prompt string, x []float32, vocab int) []float32 {
	g.t.Helper()
	if _, err := g.f.Tensor(prompt + ".rows"); err != nil {
		return x
	}
	var out []float32
	for _, r := range g.i32(prompt + ".rows") {
		if (int(r)+1)*vocab > len(x) {
			g.t.Fatalf("golden row %d outside the %d rows of the logits", r, len(x)/vocab)
		}
		out = append(out, x[int(r)*vocab:(int(r)+1)*vocab]...)
	}
	return out
}

// TestMLXGoldens compares strata on every golden MLX conversion of qwen3next-tiny with
// transformers' float64 logits on the same weights (NAME.{a,b}.logits: the rows the goldens keep),
// within 1e-4, in one shot and in chunks.
func TestMLXGoldens(t *testing.T) {
	g, ids := openGoldensFile(t, mlxGoldens), openGoldens(t, "model_goldens.safetensors")
	for _, v := range modelgen.MLXGoldenVariants {
		t.Run(v.Name, func(t *testing.T) {
			mlxDir, _ := mlxTiny(t, v.MLXOptions, false)
			m := loadDir(t, mlxDir)
			for _, prompt := range []string{"a", "b"} {
				in, want := ids.i32(prompt+".input_ids"), g.f32(v.Name+"."+prompt+".logits")
				for _, splits := range [][]int{nil, {37}} {
					s, _ := m.NewSession(SessionOptions{MaxContext: 512})
					d, _ := maxAbsDiff(goldenRows(g, prompt, prefillAll(t, s, in, splits), m.Vocab()), want)
					t.Logf("prompt %s, chunks %v: logits max|diff| %.3g", prompt, splits, d)
					if d > 1e-4 {
						t.Errorf("prompt %s, chunks %v: max|diff| %.3g > 1e-4", prompt, splits, d)
					}
				}
			}
		})
	}
}

// TestMLXResident: a loaded 4-bit conversion holds its quantized weights as views of the mapped
// file (codes, scales and biases of the experts, the router, the embedding), reports resident
// weight bytes within 2% of the file's tensor bytes (Inspect predicts the same number), about a
// third of the bf16 checkpoint's, and describes the quantization.
func TestMLXResident(t *testing.T) {
	dir, _ := mlxTiny(t, modelgen.MLXOptions{Quantize: true, Bits: 4, Group: 64}, false)
	m := loadDir(t, dir)
	info := m.Info()
	in, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Quantized, in.Quantized) || info.ResidentBytes != in.ResidentBytes {
		t.Fatalf("Info %+v / %d, Inspect %+v / %d", info.Quantized, info.ResidentBytes, in.Quantized, in.ResidentBytes)
	}
	if r := float64(info.ResidentBytes) / float64(info.TensorBytes); r < 1 || r > 1.02 {
		t.Errorf("resident %d bytes, tensors %d: ratio %.3f", info.ResidentBytes, info.TensorBytes, r)
	}
	bf := loadTiny(t, "qwen3next-tiny").Info()
	if r := float64(info.ResidentBytes) / float64(bf.ResidentBytes); r > 0.4 {
		t.Errorf("4-bit resident %d bytes, bf16 %d: ratio %.3f", info.ResidentBytes, bf.ResidentBytes, r)
	}
	if !info.MLX || info.Quantization != "MLX affine, 4 bits, group size 64, 8 per-module entries" || len(info.Quantized) != 2 ||
		info.Quantized[0].Bits != 4 || info.Quantized[1] != (QuantBytes{Format: "8-bit affine in groups of 64", Bits: 8, Group: 64, Modules: 8, Bytes: info.Quantized[1].Bytes}) {
		t.Fatalf("info %v %q %+v", info.MLX, info.Quantization, info.Quantized)
	}
	inside := func(name string, p unsafe.Pointer, n uintptr) {
		tn, err := m.ck.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := uintptr(unsafe.Pointer(&tn.Data[0])), uintptr(unsafe.Pointer(&tn.Data[0]))+uintptr(len(tn.Data))
		if uintptr(p) < lo || uintptr(p)+n > hi {
			t.Errorf("%s: the loaded weight is not a view of the file's bytes", name)
		}
	}
	view := func(mod string, w *op.Matrix) {
		if w.DType != op.QAffine {
			t.Fatalf("%s: %v, want QAffine", mod, w.DType)
		}
		q := w.Q
		inside(mod+".weight", unsafe.Pointer(&q.Codes[0]), 4*uintptr(len(q.Codes)))
		inside(mod+".scales", unsafe.Pointer(&q.Scales[0]), 2*uintptr(len(q.Scales)))
		inside(mod+".biases", unsafe.Pointer(&q.Biases[0]), 2*uintptr(len(q.Biases)))
	}
	view("model.embed_tokens", m.embed)
	view("lm_head", m.head.LMHead)
	for i, ly := range m.layers {
		p := "model.layers." + string(rune('0'+i)) + ".mlp."
		ex := ly.experts
		if !ex.Split() {
			t.Fatalf("layer %d: quantized experts with gate and up fused (copied)", i)
		}
		view(p+"gate", ly.MoE.Router)
		if ly.MoE.Router.Q.Bits != 8 || ly.MoE.SharedGate.Q.Bits != 8 {
			t.Errorf("layer %d: router %d bits, shared expert gate %d bits, want 8", i, ly.MoE.Router.Q.Bits, ly.MoE.SharedGate.Q.Bits)
		}
		for e := 0; e < ex.E; e++ {
			view(p+"switch_mlp.gate_proj", ex.GateUp[e])
			view(p+"switch_mlp.up_proj", ex.Up[e])
			if ex.Down[e].DType != op.BF16 { // in = 32: the group size 64 does not divide it
				t.Errorf("layer %d expert %d down_proj: %v, want BF16", i, e, ex.Down[e].DType)
			}
		}
	}
}

// rewriteMLX copies the MLX conversion src into a fresh folder, passing its tensors (and the
// header metadata) and its config through edit; the shard index is dropped (one file needs none).
func rewriteMLX(t *testing.T, src string, tensors func(ts []safetensors.WriteTensor, md map[string]string) []safetensors.WriteTensor, cfg func(c map[string]any)) string {
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
	md := map[string]string{}
	for k, v := range f.Metadata {
		md[k] = v
	}
	if tensors != nil {
		ts = tensors(ts, md)
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

// TestMLXBadInput: each damaged MLX checkpoint fails Inspect and LoadModel with the same error,
// naming the tensor or entry and what is wrong, wrapping ErrCheckpoint (hfconfig.ErrTensors) or
// ErrUnsupported.
func TestMLXBadInput(t *testing.T) {
	q4, _ := mlxTiny(t, modelgen.MLXOptions{Quantize: true, Bits: 4, Group: 64}, false)
	bf, _ := mlxTiny(t, modelgen.MLXOptions{}, false)
	set := func(name string, f func(*safetensors.WriteTensor)) func([]safetensors.WriteTensor, map[string]string) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == name {
					f(&ts[i])
				}
			}
			return ts
		}
	}
	add := func(extra ...safetensors.WriteTensor) func([]safetensors.WriteTensor, map[string]string) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			return append(ts, extra...)
		}
	}
	bf16s := func(name string, shape ...int64) safetensors.WriteTensor {
		n := int64(2)
		for _, s := range shape {
			n *= s
		}
		return safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: make([]byte, n)}
	}
	entry := func(k string, v any) func(map[string]any) {
		return func(c map[string]any) {
			for _, key := range []string{"quantization", "quantization_config"} {
				c[key].(map[string]any)[k] = v
			}
		}
	}
	const gate = "model.layers.0.mlp.gate"
	const out = "model.layers.1.linear_attn.out_proj"
	cases := []struct {
		name     string
		src      string
		tensors  func([]safetensors.WriteTensor, map[string]string) []safetensors.WriteTensor
		cfg      func(map[string]any)
		sentinel error
		want     []string
	}{
		{"codes of other bits", q4, set(gate+".weight", func(w *safetensors.WriteTensor) { w.Shape[1] = 256 * 4 / 32; w.Data = w.Data[:len(w.Data)/2] }), nil,
			ErrCheckpoint, []string{gate + ".weight holds 4-bit affine in groups of 64", "config.json declares 8-bit affine in groups of 64 for " + gate + " (its own entry"}},
		{"default bits differ", q4, nil, func(c map[string]any) {
			c["quantization"].(map[string]any)["bits"] = 3
			c["quantization_config"].(map[string]any)["bits"] = 3
		}, ErrCheckpoint, []string{"lm_head.weight holds 4-bit affine in groups of 64", "config.json declares 3-bit affine in groups of 64 for lm_head (the default"}},
		{"scales shape", q4, set(out+".scales", func(w *safetensors.WriteTensor) { w.Shape[0] = 255; w.Data = w.Data[:255*12*2] }), nil,
			ErrCheckpoint, []string{out + ".scales has shape [255 12], want [256] + [in/group]"}},
		{"scales dtype", q4, set(out+".scales", func(w *safetensors.WriteTensor) {
			w.DType, w.Data = safetensors.F32, append(w.Data, w.Data...)
		}), nil, ErrCheckpoint, []string{out + ".scales is F32, want BF16 or F16 scales"}},
		{"group not dividing K", q4, func(ts []safetensors.WriteTensor, md map[string]string) []safetensors.WriteTensor {
			for _, n := range []string{out + ".scales", out + ".biases"} {
				ts = set(n, func(w *safetensors.WriteTensor) { w.Shape[1] = 5; w.Data = w.Data[:256*5*2] })(ts, md)
			}
			return ts
		}, nil, ErrCheckpoint, []string{out + ".scales holds 5 groups per row, which do not divide in=768 of " + out + ".weight"}},
		{"biases missing", q4, func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == out+".biases" })
		}, nil, ErrCheckpoint, []string{out + ".biases is missing"}},
		{"entry for no module", q4, nil, entry("model.layers.7.mlp.gate", map[string]any{"group_size": 64, "bits": 8}),
			ErrCheckpoint, []string{`quantization entry "model.layers.7.mlp.gate" names no Linear or Embedding module`}},
		{"entry false for a quantized module", q4, nil, entry(out, false),
			ErrCheckpoint, []string{out + ".scales exists, but config.json's quantization entry for " + out + " is false"}},
		{"entry for a module stored dense", q4, nil, entry("model.layers.0.mlp.shared_expert.down_proj", map[string]any{"group_size": 32, "bits": 4}),
			ErrCheckpoint, []string{"config.json quantizes model.layers.0.mlp.shared_expert.down_proj (4-bit affine in groups of 32), but model.layers.0.mlp.shared_expert.down_proj.scales is missing"}},
		{"quantized conv", q4, add(bf16s("model.layers.0.linear_attn.conv1d.scales", 1280, 4), bf16s("model.layers.0.linear_attn.conv1d.biases", 1280, 4)), nil,
			ErrCheckpoint, []string{"model.layers.0.linear_attn.conv1d.scales: model.layers.0.linear_attn.conv1d.weight is quantized, but only Linear and Embedding weights can be"}},
		{"quantized norm", q4, add(bf16s("model.layers.2.input_layernorm.scales", 4), bf16s("model.layers.2.input_layernorm.biases", 4)), nil,
			ErrCheckpoint, []string{"model.layers.2.input_layernorm.scales: model.layers.2.input_layernorm.weight is quantized"}},
		{"quantized without a block", q4, nil, func(c map[string]any) { delete(c, "quantization"); delete(c, "quantization_config") },
			ErrCheckpoint, []string{"quantized tensors, but config.json has no MLX quantization block"}},
		{"Hugging Face metadata", bf, func(ts []safetensors.WriteTensor, md map[string]string) []safetensors.WriteTensor {
			md["format"] = "pt"
			return ts
		}, nil,
			ErrCheckpoint, []string{"MLX signals: experts stacked under mlp.switch_mlp, model.layers.0.linear_attn.conv1d.weight [1280 4 1] (channels, kernel, 1)",
				`Hugging Face signals: model.safetensors metadata format "pt"`}},
		{"mode mxfp4 over affine tensors", q4, nil, func(c map[string]any) {
			for _, key := range []string{"quantization", "quantization_config"} {
				c[key] = map[string]any{"group_size": 32, "bits": 4, "mode": "mxfp4"}
			}
		}, ErrCheckpoint, []string{"lm_head.weight holds 4-bit affine in groups of 64 (its shapes [512 32] and [512 4], BF16 scales, for in=256), but config.json declares mxfp4 (4 bits in groups of 32) for lm_head"}},
		{"quantization blocks differ", q4, nil, func(c map[string]any) { c["quantization_config"] = map[string]any{"group_size": 64, "bits": 8} },
			ErrCheckpoint, []string{"quantization and quantization_config differ"}},
	}
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := rewriteMLX(t, tc.src, tc.tensors, tc.cfg)
			_, ierr := Inspect(dir)
			m, lerr := LoadModel(dev, dir, LoadOptions{})
			if m != nil {
				m.Close()
			}
			for _, err := range []error{ierr, lerr} {
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("error %v does not wrap %v", err, tc.sentinel)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			}
			if ierr.Error() != lerr.Error() {
				t.Errorf("Inspect and LoadModel disagree:\n%v\n%v", ierr, lerr)
			}
		})
	}
}

// TestMLXProvenanceRefused: a Hugging Face checkpoint with an MLX quantization block added, and
// Hugging Face qwen4_exp tensors renamed to mlx-vlm's language_model.model. (fused experts,
// conv1d [C, 1, K]), are refused naming the signals of both.
func TestMLXProvenanceRefused(t *testing.T) {
	hf := t.TempDir()
	for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"} {
		b, err := os.ReadFile(testdata("qwen3next-tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hf, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := os.ReadFile(testdata("qwen3next-tiny", "config.json"))
	var c map[string]any
	_ = json.Unmarshal(raw, &c)
	c["quantization"] = map[string]any{"group_size": 64, "bits": 4}
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(filepath.Join(hf, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Inspect(hf)
	if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, hfconfig.ErrTensors) ||
		!strings.Contains(err.Error(), "MLX signals: config.json quantization block without quant_method") ||
		!strings.Contains(err.Error(), "experts stored one by one (mlp.experts.{e}.*)") ||
		!strings.Contains(err.Error(), `metadata format "pt" in 2 of 2 files (model-00001-of-00002.safetensors, ...)`) {
		t.Fatalf("HF checkpoint with an MLX block: %v", err)
	}

	src, err := safetensors.OpenDir(testdata("qwen4exp-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []safetensors.WriteTensor
	for _, n := range src.Names() {
		tn, _ := src.Tensor(n)
		ts = append(ts, safetensors.WriteTensor{Name: "language_model." + n, DType: tn.DType, Shape: tn.Shape, Data: tn.Data})
	}
	vlm := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(vlm, safetensors.SingleFile), ts, map[string]string{"format": "mlx"}); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(testdata("qwen4exp-tiny", "config.json"))
	if err := os.WriteFile(filepath.Join(vlm, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(vlm); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "MLX signals: model.safetensors metadata format \"mlx\", tensor names under language_model.model.") ||
		!strings.Contains(err.Error(), "Hugging Face signals: experts under mlp.experts.gate_up_proj") {
		t.Fatalf("mlx-vlm names over Hugging Face tensors: %v", err)
	}
}

// TestMLXDeterministicAcrossGOMAXPROCS: a quantized model's logits are bitwise the same with
// one and two worker goroutines (the dequantizing GEMM blocks depend on the shapes only).
func TestMLXDeterministicAcrossGOMAXPROCS(t *testing.T) {
	dir, _ := mlxTiny(t, modelgen.MLXOptions{Quantize: true, Recipe: "mixed_3_6"}, false)
	m := loadDir(t, dir)
	ids := openGoldens(t, "model_goldens.safetensors").i32("b.input_ids")
	run := func(procs int) []float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		s, _ := m.NewSession(SessionOptions{MaxContext: 512})
		return prefillAll(t, s, ids, nil)
	}
	a, b := run(1), run(2)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("logit %d: GOMAXPROCS=1 %v, =2 %v", i, a[i], b[i])
		}
	}
}

// TestMLXTiedEmbeddings: with tie_word_embeddings, mlx_lm drops lm_head and the quantized
// embedding serves as the output projection too; strata's logits on it equal those on the float32
// Hugging Face checkpoint of the same weights (tied as well) within 1e-4.
func TestMLXTiedEmbeddings(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"} {
		b, err := os.ReadFile(testdata("qwen3next-tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := os.ReadFile(testdata("qwen3next-tiny", "config.json"))
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["tie_word_embeddings"] = true
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(filepath.Join(src, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	mlxDir, hfDir := mlxFrom(t, src, modelgen.MLXOptions{Quantize: true, Bits: 6, Group: 32}, true)
	mq, mf := loadDir(t, mlxDir), loadDir(t, hfDir)
	if mq.head.LMHead != mq.embed || mq.embed.DType != op.QAffine || mq.embed.Q.Bits != 6 {
		t.Fatalf("lm_head %p embed %p (%v)", mq.head.LMHead, mq.embed, mq.embed.DType)
	}
	ids := openGoldens(t, "model_goldens.safetensors").i32("a.input_ids")
	sq, _ := mq.NewSession(SessionOptions{MaxContext: 128})
	sf, _ := mf.NewSession(SessionOptions{MaxContext: 128})
	if d, _ := maxAbsDiff(prefillAll(t, sq, ids, nil), prefillAll(t, sf, ids, nil)); d > 1e-4 {
		t.Errorf("tied: max|diff| %.3g > 1e-4", d)
	}
}

// TestMetalMLXGoldens runs every golden MLX conversion on the emulator, the Metal quantized
// kernels reading the packed weights, against transformers' float64 logits of the first 48
// tokens of prompt a, in one shot and, for the 4-bit and the mixed 3/6-bit conversions, in two
// chunks.
func TestMetalMLXGoldens(t *testing.T) {
	g, ids := openGoldensFile(t, mlxGoldens), openGoldens(t, "model_goldens.safetensors")
	dev, err := Open(Options{Backend: "emu", MetalDevice: emuDevice(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	const T, V = 48, 512
	in := ids.i32("a.input_ids")[:T]
	for _, v := range modelgen.MLXGoldenVariants {
		t.Run(v.Name, func(t *testing.T) {
			mlxDir, _ := mlxTiny(t, v.MLXOptions, false)
			m, err := LoadModel(dev, mlxDir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			// the golden rows of prompt a below T, and those rows of strata's logits
			var keep []int
			var want []float32
			all := g.f32(v.Name + ".a.logits")
			for i, r := range g.i32("a.rows") {
				if r < T {
					keep = append(keep, int(r))
					want = append(want, all[i*V:(i+1)*V]...)
				}
			}
			runs := [][]int{nil}
			if v.Name == "q4_g64" || v.Name == "mixed_3_6" {
				runs = append(runs, []int{20})
			}
			for _, splits := range runs {
				s, _ := m.NewSession(SessionOptions{MaxContext: 64})
				got := prefillAll(t, s, in, splits)
				var sel []float32
				for _, r := range keep {
					sel = append(sel, got[r*V:(r+1)*V]...)
				}
				d, _ := maxAbsDiff(sel, want)
				t.Logf("chunks %v: logits max|diff| %.3g", splits, d)
				if d > 1e-4 {
					t.Errorf("chunks %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
		})
	}
	t.Log(dev.Kernels())
}
