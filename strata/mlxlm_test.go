package strata

import (
	"bytes"
	"context"
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
	"github.com/stratakernels/strata/internal/safetensors"
)

// mlxlmModels are the checkpoints the mlx-lm export is tested on: the tiny Qwen3-Next of
// testdata and the generated Qwen3.5 pair (dense and MoE) whose goldens family/qwen35 holds.
var mlxlmModels = []struct{ name, module string }{
	{"qwen3next-tiny", "qwen3_next"}, {"qwen35-tiny", "qwen3_5"}, {"qwen35moe-tiny", "qwen3_5_moe"},
}

// mlxlmCheckpoint returns the directory of a test checkpoint, generating the Qwen3.5 ones.
func mlxlmCheckpoint(t *testing.T, name string) string {
	t.Helper()
	if name == "qwen3next-tiny" {
		return testdata(name)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := modelgen.Generate(dir, modelgen.Presets[name]); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mlxlmDevice opens the cpu, or the Metal kernels on the MSL emulator (skipping without clang).
func mlxlmDevice(t *testing.T, backend string) *Device {
	t.Helper()
	opts := Options{Backend: backend}
	if backend == "emu" {
		opts.MetalDevice = emuDevice(t)
	}
	dev, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// readMLXLMFile reads a written cache file with strata's safetensors reader and checks the
// header is as mlx writes it: compact JSON with sorted keys, no padding, __metadata__ present.
func readMLXLMFile(t *testing.T, path string) *safetensors.File {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(raw[0]) | int(raw[1])<<8 | int(raw[2])<<16 | int(raw[3])<<24
	head := raw[8 : 8+n]
	var obj map[string]any
	if err := json.Unmarshal(head, &obj); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	again, _ := json.Marshal(obj) // Go sorts map keys: the compact sorted form
	if !bytes.Equal(again, head) || head[len(head)-1] != '}' {
		t.Fatalf("%s: the header is not compact sorted JSON without padding:\n%s", path, head)
	}
	if _, ok := obj["__metadata__"]; !ok {
		t.Fatalf("%s: no __metadata__", path)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func tensorF32(t *testing.T, f *safetensors.File, name string) (*safetensors.Tensor, []float32) {
	t.Helper()
	tn, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	if tn.NumElements() == 0 {
		return tn, nil
	}
	v, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return tn, v
}

// TestMLXLMCacheFile prefills 95 tokens of prompt a into each model on the cpu, and 24 on the
// emulator (the check is of the layout and of the values read back from the device, which 24
// tokens hold: the conv window of 3 rows, K/V of many; the emulator runs the kernels thread by
// thread), and writes the mlx-lm cache in both formats as float32 and in the model's dtype
// (bfloat16): read back with the safetensors reader, the names, dtypes, shapes and metadata are
// save_prompt_cache's, and the values are the session state file's (bitwise in float32, after
// the layout changes: K/V [T, Hkv, D] -> [1, Hkv, T, D], recurrent [Hv, Dk, Dv] -> [1, Hv, Dv, Dk];
// bfloat16 within half an ulp).
func TestMLXLMCacheFile(t *testing.T) {
	prompt := openGoldens(t, "model_goldens.safetensors").i32("a.input_ids")
	for _, mm := range mlxlmModels {
		dir := mlxlmCheckpoint(t, mm.name)
		for _, backend := range []string{"cpu", "emu"} {
			t.Run(mm.name+"/"+backend, func(t *testing.T) {
				ids := prompt[:95]
				if backend == "emu" {
					ids = prompt[:24]
				}
				m, err := LoadModel(mlxlmDevice(t, backend), dir, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				s, err := m.NewSession(SessionOptions{MaxContext: 128})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.Prefill(context.Background(), ids, PrefillOptions{}); err != nil {
					t.Fatal(err)
				}
				out := t.TempDir()
				statePath := filepath.Join(out, "s.state")
				if err := s.SaveStateFile(statePath); err != nil {
					t.Fatal(err)
				}
				state, err := safetensors.Open(statePath)
				if err != nil {
					t.Fatal(err)
				}
				defer state.Close()
				for _, format := range []string{MLXLMFormatNew, MLXLMFormatLegacy} {
					for _, dtype := range []string{"float32", ""} {
						path := filepath.Join(out, fmt.Sprintf("%s-%s.safetensors", format, dtype))
						if err := s.SaveMLXLMCache(path, MLXLMOptions{Format: format, DType: dtype, Model: "org/" + mm.name}); err != nil {
							t.Fatal(err)
						}
						checkMLXLMFile(t, m, readMLXLMFile(t, path), state, format, dtype, "org/"+mm.name, len(ids))
					}
				}
				// the default format is the new one, the default model the checkpoint directory
				def := filepath.Join(out, "default.safetensors")
				if err := s.SaveMLXLMCache(def, MLXLMOptions{}); err != nil {
					t.Fatal(err)
				}
				abs, _ := filepath.Abs(dir)
				checkMLXLMFile(t, m, readMLXLMFile(t, def), state, MLXLMFormatNew, "", abs, len(ids))
				var buf bytes.Buffer
				if err := s.WriteMLXLMCache(&buf, MLXLMOptions{}); err != nil {
					t.Fatal(err)
				}
				if raw, _ := os.ReadFile(def); !bytes.Equal(raw, buf.Bytes()) {
					t.Fatal("WriteMLXLMCache and SaveMLXLMCache wrote different bytes")
				}
				if left, _ := filepath.Glob(filepath.Join(out, ".*tmp*")); len(left) > 0 {
					t.Fatalf("temporary files left: %v", left)
				}
			})
		}
	}
}

// checkMLXLMFile checks one written file against the model's plan and the state file.
func checkMLXLMFile(t *testing.T, m *Model, f, state *safetensors.File, format, dtype, model string, T int) {
	t.Helper()
	act := safetensors.BF16 // the generated and test checkpoints are stored in bfloat16
	if dtype == "float32" {
		act = safetensors.F32
	}
	want := map[string]string{"1.model": model, "1.tokenizer_config": "{}"}
	var names []string
	type pair struct {
		name, state string
		dt          safetensors.DType
		shape       []int64
		perm        func([]float32) []float32
	}
	var pairs []pair
	for _, ly := range m.layers {
		i := ly.Index
		want[fmt.Sprintf("0.%d", i)] = ""
		st := func(role string) string { return fmt.Sprintf("layers.%d.%s", i, role) }
		if g := ly.GDN; g != nil {
			want[fmt.Sprintf("2.%d", i)] = "ArraysCache"
			conv, rec := fmt.Sprintf("%d.0", i), fmt.Sprintf("%d.1", i)
			if format == MLXLMFormatNew {
				conv, rec = fmt.Sprintf("%d.0.0", i), fmt.Sprintf("%d.0.1", i)
				for _, e := range []string{fmt.Sprintf("%d.1", i), fmt.Sprintf("%d.2", i)} {
					tn, _ := tensorF32(t, f, e)
					if tn.DType != safetensors.F32 || !slices.Equal(tn.Shape, []int64{0}) {
						t.Fatalf("%s: %s %v, want F32 [0]", e, tn.DType, tn.Shape)
					}
					names = append(names, e)
				}
			}
			Hv, Dk, Dv := g.Hv, g.Dk, g.Dv
			pairs = append(pairs,
				pair{conv, st("conv"), act, []int64{1, int64(g.ConvK - 1), int64(g.Channels())}, func(x []float32) []float32 { return x }},
				pair{rec, st("recurrent"), safetensors.F32, []int64{1, int64(Hv), int64(Dv), int64(Dk)}, func(x []float32) []float32 {
					out := make([]float32, len(x))
					for h := range Hv {
						for a := range Dk {
							for b := range Dv {
								out[(h*Dv+b)*Dk+a] = x[(h*Dk+a)*Dv+b]
							}
						}
					}
					return out
				}})
		} else {
			a := ly.Attn
			want[fmt.Sprintf("2.%d", i)] = "KVCache"
			kv := func(x []float32) []float32 {
				out := make([]float32, len(x))
				for p := range T {
					for h := range a.Hkv {
						copy(out[(h*T+p)*a.HeadDim:(h*T+p+1)*a.HeadDim], x[(p*a.Hkv+h)*a.HeadDim:])
					}
				}
				return out
			}
			shape := []int64{1, int64(a.Hkv), int64(T), int64(a.HeadDim)}
			pairs = append(pairs, pair{fmt.Sprintf("%d.0", i), st("k"), act, shape, kv}, pair{fmt.Sprintf("%d.1", i), st("v"), act, shape, kv})
		}
	}
	if !maps2Equal(f.Metadata, want) {
		t.Fatalf("metadata %v, want %v", f.Metadata, want)
	}
	for _, p := range pairs {
		names = append(names, p.name)
		tn, got := tensorF32(t, f, p.name)
		if tn.DType != p.dt || !slices.Equal(tn.Shape, p.shape) {
			t.Fatalf("%s: %s %v, want %s %v", p.name, tn.DType, tn.Shape, p.dt, p.shape)
		}
		_, src := tensorF32(t, state, p.state)
		ref := p.perm(src)
		for k := range ref {
			if p.dt == safetensors.F32 && math.Float32bits(got[k]) != math.Float32bits(ref[k]) {
				t.Fatalf("%s element %d: %v, the state file's %s holds %v", p.name, k, got[k], p.state, ref[k])
			}
			if d := math.Abs(float64(got[k]) - float64(ref[k])); d > math.Abs(float64(ref[k]))/256 {
				t.Fatalf("%s element %d: %v is more than half a bfloat16 ulp from %v", p.name, k, got[k], ref[k])
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, f.Names()) {
		t.Fatalf("tensors %v, want %v", f.Names(), names)
	}
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestMLXLMCacheRefusals: each export mlx-lm could not continue from is refused by name, with
// nothing written (no file, no temporary file, nothing on the writer) and the session unchanged.
func TestMLXLMCacheRefusals(t *testing.T) {
	ids := openGoldens(t, "model_goldens.safetensors").i32("a.input_ids")[:20]
	dev := mlxlmDevice(t, "cpu")
	session := func(t *testing.T, dir string, opts LoadOptions, prefill bool) *Session {
		m, err := LoadModel(dev, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		s, err := m.NewSession(SessionOptions{MaxContext: 64})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if prefill {
			var o PrefillOptions
			if opts.Layers[0] > 0 {
				o.Hidden = make([]float32, len(ids)*m.HiddenSize())
			}
			if _, err := s.Prefill(context.Background(), ids, o); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	// qwen3next-tiny with full_attention_interval 2: strata runs its layer_types, mlx-lm would
	// make layers 1 and 3 attention layers
	shifted := t.TempDir()
	src := testdata("qwen3next-tiny")
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "config.json" {
			raw = bytes.Replace(raw, []byte(`"head_dim": 256,`), []byte(`"head_dim": 256, "full_attention_interval": 2,`), 1)
		}
		if err := os.WriteFile(filepath.Join(shifted, e.Name()), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := testdata("qwen3next-tiny")
	cases := []struct {
		name   string
		s      *Session
		opts   MLXLMOptions
		path   string
		is     error
		phrase string
	}{
		{"qwen4_exp", session(t, testdata("qwen4exp-tiny"), LoadOptions{}, true), MLXLMOptions{}, "", ErrUnsupported, "the qwen4_exp family (model_type qwen4_exp_text) has no mlx-lm model"},
		{"layer_types", session(t, shifted, LoadOptions{}, true), MLXLMOptions{}, "", ErrUnsupported, "layer_types makes layer 1 linear_attention, but mlx-lm's qwen3_next ignores layer_types and makes it an attention layer"},
		{"stage", session(t, good, LoadOptions{Layers: [2]int{2, 4}}, true), MLXLMOptions{}, "", ErrUnsupported, "a pipeline stage (layers 2:4 of 4)"},
		{"format", session(t, good, LoadOptions{}, true), MLXLMOptions{Format: "current"}, "", ErrInvalidArgument, `mlx-lm cache format "current"`},
		{"dtype", session(t, good, LoadOptions{}, true), MLXLMOptions{DType: "bf16"}, "", ErrInvalidArgument, `mlx-lm cache dtype "bf16"`},
		{"empty", session(t, good, LoadOptions{}, false), MLXLMOptions{}, "", ErrInvalidArgument, "the session is empty (position 0)"},
		{"name", session(t, good, LoadOptions{}, true), MLXLMOptions{}, "cache.bin", ErrInvalidArgument, "must end in .safetensors"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cache.safetensors")
			if c.path != "" {
				path = filepath.Join(dir, c.path)
			}
			before, err := c.s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			err = c.s.SaveMLXLMCache(path, c.opts)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.phrase) {
				t.Fatalf("got %v, want %v naming %q", err, c.is, c.phrase)
			}
			t.Log(err)
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Fatalf("files left after a refusal: %v", left)
			}
			if c.path == "" {
				var buf bytes.Buffer
				if err := c.s.WriteMLXLMCache(&buf, c.opts); !errors.Is(err, c.is) || buf.Len() > 0 {
					t.Fatalf("WriteMLXLMCache: %v, %d bytes written", err, buf.Len())
				}
			}
			after, err := c.s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !before.Equal(after) {
				t.Fatal("a refused export changed the session")
			}
		})
	}
}

// TestMLXLMHalfRounding: float16 and bfloat16 conversion round to nearest even, keep
// subnormals and signs, and the range check refuses what would round to infinity.
func TestMLXLMHalfRounding(t *testing.T) {
	f16 := []struct {
		v    float32
		bits uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {1 + 0x1p-11, 0x3c00}, {1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{1 + 3*0x1p-11, 0x3c02}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.8p-25, 0x0001}, {3 * 0x1p-25, 0x0002},
		{0x1p-14, 0x0400}, {0x1.ffcp-15, 0x0400}, {-0x1p-24, 0x8001}, {0x1p-30, 0}, {65519, 0x7bff}, {0.1, 0x2e66},
	}
	for _, c := range f16 {
		if got := f16Bits(c.v); got != c.bits {
			t.Errorf("f16(%g) = %#04x, want %#04x", c.v, got, c.bits)
		}
	}
	bf := []struct {
		v    float32
		bits uint16
	}{{1, 0x3f80}, {1 + 0x1p-8, 0x3f80}, {1 + 3*0x1p-8, 0x3f82}, {1 + 0x1p-8 + 0x1p-20, 0x3f81}, {-0x1p-130, 0x8008}}
	for _, c := range bf {
		if got := bf16Bits(c.v); got != c.bits {
			t.Errorf("bf16(%g) = %#04x, want %#04x", c.v, got, c.bits)
		}
	}
	for _, c := range []struct {
		dt safetensors.DType
		v  float32
		ok bool
	}{
		{safetensors.F16, 65519, true}, {safetensors.F16, 65520, false}, {safetensors.BF16, 0x1.fefffep127, true},
		{safetensors.BF16, 0x1.ff8p127, false}, {safetensors.F32, math.MaxFloat32, true}, {safetensors.F32, float32(math.Inf(-1)), false},
		{safetensors.F32, float32(math.NaN()), false},
	} {
		x := []float32{0, c.v}
		err := checkMLXLMValues(&mlxlmTensor{name: "t", dt: c.dt, elems: func() []float32 { return x }})
		if (err == nil) != c.ok {
			t.Errorf("%s %g: error %v, want ok %v", c.dt, c.v, err, c.ok)
		}
	}
}
