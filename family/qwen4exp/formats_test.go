package qwen4exp_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modeltest"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/strata"
)

// The format fixtures (modelgen.FormatFixtures) are written once per test binary into root.
var (
	root     string
	fixtures sync.Map // name -> *fixtureDirs
)

type fixtureDirs struct {
	once          sync.Once
	dir, sum, f32 string // sum: the sha256 of dir's model.safetensors
	err, ferr     error
	f32once       sync.Once
}

func TestMain(m *testing.M) {
	var err error
	if root, err = os.MkdirTemp("", "qwen4exp-formats"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

var writeMu sync.Mutex // fixtures share their generated source

func entry(name string) *fixtureDirs {
	e, _ := fixtures.LoadOrStore(name, &fixtureDirs{})
	return e.(*fixtureDirs)
}

// fixture is the folder of the format fixture name.
func fixture(t testing.TB, name string) string {
	t.Helper()
	dir, _ := written(t, name)
	return dir
}

// written is the folder of the format fixture name and the sha256 of its model.safetensors.
func written(t testing.TB, name string) (dir, sum string) {
	t.Helper()
	e := entry(name)
	e.once.Do(func() {
		f, ok := modelgen.FormatFixtureNamed(name)
		if !ok {
			e.err = fmt.Errorf("no fixture %q", name)
			return
		}
		writeMu.Lock()
		defer writeMu.Unlock()
		e.dir, e.sum, e.err = f.Write(root)
	})
	if e.err != nil {
		t.Fatal(e.err)
	}
	return e.dir, e.sum
}

// floatCopy is the float32 Hugging Face checkpoint of the exact weights of fixture name.
func floatCopy(t testing.TB, name string) string {
	t.Helper()
	dir := fixture(t, name)
	e := entry(name)
	e.f32once.Do(func() {
		e.f32 = filepath.Join(root, "_float32", name)
		e.ferr = modelgen.Dequantize(dir, e.f32, family.Fused)
	})
	if e.ferr != nil {
		t.Fatal(e.ferr)
	}
	return e.f32
}

// converted are the qwen4_exp fixtures in a form other than their bf16 source.
func converted() []modelgen.FormatFixture {
	var out []modelgen.FormatFixture
	for _, f := range modelgen.FormatFixtures {
		if f.Source == "qwen4exp-fmt" && f.Name != f.Source {
			out = append(out, f)
		}
	}
	return out
}

// TestFormatsMatchFloatCopy: strata's logits computed from each form of the generated
// Qwen3.8-Flash-Next (mlx-vlm at 3, 4 and 8 bits in both norm conventions, mxfp4, nvfp4, mxfp8,
// the FP8 release's layout: packed weights, switch_mlp experts, the n-gram table's 128 quantized
// row blocks, conv1d [C, K, 1], gains read as stored or as stored - 1) equal its logits on the
// float32 Hugging Face checkpoint of the same weights within 1e-4 on the CPU, prompts a and b
// one-shot and prompt a in calls of 37 + 1 + rest: the decoding alone, strata against itself.
// TestFormatGoldens runs the same cases on both backends against transformers.
func TestFormatsMatchFloatCopy(t *testing.T) {
	a, b := modeltest.PromptIDs(t, "a"), modeltest.PromptIDs(t, "b")
	for _, f := range converted() {
		t.Run(f.Name, func(t *testing.T) {
			want := modeltest.Load(t, "cpu", floatCopy(t, f.Name))
			wa, wb := modeltest.Prefill(t, want, a), modeltest.Prefill(t, want, b)
			m := modeltest.Load(t, "cpu", fixture(t, f.Name))
			for _, r := range []struct {
				what   string
				ids    []int32
				want   []float32
				splits []int
			}{{"a", a, wa, nil}, {"a in calls of 37 + 1 + rest", a, wa, []int{37, 1}}, {"b", b, wb, nil}} {
				d := modeltest.MaxAbsDiff(modeltest.Prefill(t, m, r.ids, r.splits...), r.want)
				t.Logf("prompt %s: max|diff| %.3g against the float32 copy", r.what, d)
				if d > 1e-4 {
					t.Errorf("prompt %s: max|diff| %.3g > 1e-4", r.what, d)
				}
			}
		})
	}
}

// TestFormatsInspect: Inspect describes every fixture as it is (the quantization block, the
// formats of its modules, the convention of its gains and why), loading holds what Inspect
// predicts, and the resident weights are the file's tensors (within 5%: the norms and convolutions
// widened to float32 are 3% of this small model; the FP8 table's one scale is repeated per block).
func TestFormatsInspect(t *testing.T) {
	cases := map[string]struct {
		quant   string
		formats []string
		shifted bool
	}{
		"qwen4exp-fmt-mlx3":         {"MLX affine, 3 bits, group size 32, 136 per-module entries", []string{"3-bit affine in groups of 32", "8-bit affine in groups of 64"}, false},
		"qwen4exp-fmt-mlx4":         {"MLX affine, 4 bits, group size 64, 136 per-module entries", []string{"4-bit affine in groups of 64", "4-bit affine in groups of 32", "8-bit affine in groups of 64"}, false},
		"qwen4exp-fmt-mlx4-shifted": {"MLX affine, 4 bits, group size 64, 136 per-module entries", []string{"4-bit affine in groups of 64", "4-bit affine in groups of 32", "8-bit affine in groups of 64"}, true},
		"qwen4exp-fmt-mlx8-shifted": {"MLX affine, 8 bits, group size 128, 136 per-module entries", []string{"8-bit affine in groups of 128", "8-bit affine in groups of 32", "8-bit affine in groups of 64"}, true},
		"qwen4exp-fmt-mxfp4":        {"MLX mxfp4, 4 bits, group size 32, 136 per-module entries", []string{"mxfp4 (4 bits in groups of 32)", "8-bit affine in groups of 64"}, false},
		"qwen4exp-fmt-nvfp4":        {"MLX nvfp4, 4 bits, group size 16, 136 per-module entries", []string{"nvfp4 (4 bits in groups of 16)", "8-bit affine in groups of 64"}, false},
		"qwen4exp-fmt-mxfp8":        {"MLX mxfp8, 8 bits, group size 32, 136 per-module entries", []string{"mxfp8 (8 bits in groups of 32)", "8-bit affine in groups of 64"}, false},
		"qwen4exp-fmt-fp8": {"FP8 E4M3, blocks of 128 x 128, 70 modules_to_not_convert entries, 1 modules_to_convert",
			[]string{"FP8 E4M3 in 128 x 128 blocks, BF16 scales", "FP8 E4M3, one BF16 scale per tensor"}, false},
	}
	for _, f := range converted() {
		t.Run(f.Name, func(t *testing.T) {
			want, ok := cases[f.Name]
			if !ok {
				t.Fatalf("no expectation for %s", f.Name)
			}
			dir := fixture(t, f.Name)
			in, err := strata.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			var formats []string
			for _, q := range in.Quantized {
				formats = append(formats, q.Format)
			}
			slices.Sort(formats)
			slices.Sort(want.formats)
			reading := "stored as w: "
			if want.shifted {
				reading = "stored as 1 + w: "
			}
			if in.Quantization != want.quant || !slices.Equal(formats, want.formats) || in.ShiftedGains != want.shifted ||
				!strings.HasPrefix(in.Gains, reading) || !strings.Contains(in.Gains, "stored values: the zero-centred gains' mean is") ||
				in.NGramShards != 128 || in.PLEBuffersChecked != 1 {
				t.Fatalf("Inspect: quantization %q, formats %v, shifted %v, gains %q, shards %d, buffers %d", in.Quantization, formats, in.ShiftedGains, in.Gains, in.NGramShards, in.PLEBuffersChecked)
			}
			if f.MLX != nil && (!in.MLX || in.Prefix != "language_model.model.") || f.FP8 != nil && (in.MLX || in.Prefix != "model.language_model." || in.FusedExperts) {
				t.Errorf("layout: MLX %v, prefix %s, fused %v", in.MLX, in.Prefix, in.FusedExperts)
			}
			loaded := modeltest.Load(t, "cpu", dir).Info()
			if loaded.ResidentBytes != in.ResidentBytes {
				t.Errorf("loaded model holds %d bytes of weights, Inspect predicted %d", loaded.ResidentBytes, in.ResidentBytes)
			}
			if r := float64(in.ResidentBytes) / float64(in.TensorBytes); r < 1 || r > 1.05 {
				t.Errorf("resident %d bytes for %d bytes of tensors: ratio %.3f", in.ResidentBytes, in.TensorBytes, r)
			}
		})
	}
}

// TestGainSignals: the convention of the zero-centred gains is decided from every signal, and a
// file whose signals disagree is refused naming each signal and its reading: config.json's
// preshifted_norm_weights against the stored values (both ways), a Hugging Face file whose gains
// were stored shifted (provenance against values), and an mlx-vlm conversion with no readable
// values and no config hint (no signal at all).
func TestGainSignals(t *testing.T) {
	hint := func(v bool) func(map[string]any) {
		return func(c map[string]any) { c["text_config"].(map[string]any)["preshifted_norm_weights"] = v }
	}
	w, s := fixture(t, "qwen4exp-fmt-mlx4"), fixture(t, "qwen4exp-fmt-mlx4-shifted")
	shiftHF := func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
		for i, x := range ts {
			if !strings.HasSuffix(x.Name, "hc_norm.weight") && !strings.HasSuffix(x.Name, "_norm.weight") && !strings.HasSuffix(x.Name, "layernorm.weight") &&
				!strings.Contains(x.Name, ".ple.norm_") {
				continue
			}
			v := make([]float32, len(x.Data)/2)
			for j := range v {
				v[j] = bf16To(uint16(x.Data[2*j])|uint16(x.Data[2*j+1])<<8) + 1
			}
			ts[i].Data = bf16Bytes(v)
		}
		return ts
	}
	cases := []struct {
		name    string
		dir     string
		edit    func([]safetensors.WriteTensor, map[string]string) []safetensors.WriteTensor
		cfg     func(map[string]any)
		shifted bool
		wants   []string // nil: accepted
	}{
		{"w with the hint false", w, nil, hint(false), false, nil},
		{"1 + w with the hint true", s, nil, hint(true), true, nil},
		{"w with the hint true", w, nil, hint(true), false, []string{"config.json preshifted_norm_weights true (reads 1 + w)", "stored values: the zero-centred gains' mean is 0.00", "(reads w)"}},
		{"1 + w with the hint false", s, nil, hint(false), false, []string{"config.json preshifted_norm_weights false (reads w)", "stored values: the zero-centred gains' mean is 1.00", "(reads 1 + w)"}},
		{"Hugging Face file with shifted gains", fixture(t, "qwen4exp-fmt"), shiftHF, nil, false,
			[]string{"provenance: a Hugging Face checkpoint (transformers stores the gains as w) (reads w)", "stored values: the zero-centred gains' mean is 1.00", "(reads 1 + w)"}},
	}
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := modeltest.Rewrite(t, tc.dir, tc.edit, tc.cfg)
			in, ierr := strata.Inspect(dir)
			m, lerr := strata.LoadModel(dev, dir, strata.LoadOptions{})
			if m != nil {
				m.Close()
			}
			if tc.wants == nil {
				if ierr != nil || lerr != nil {
					t.Fatalf("refused: %v / %v", ierr, lerr)
				}
				if in.ShiftedGains != tc.shifted || !strings.Contains(in.Gains, "config.json preshifted_norm_weights") {
					t.Fatalf("shifted %v, gains %q", in.ShiftedGains, in.Gains)
				}
				return
			}
			for _, err := range []error{ierr, lerr} {
				if !errors.Is(err, strata.ErrCheckpoint) || !errors.Is(err, hfconfig.ErrTensors) || !strings.Contains(err.Error(), "signals disagree on how its zero-centred norm gains are stored") {
					t.Fatalf("error %v, want the signals' disagreement", err)
				}
				for _, want := range tc.wants {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
			}
			if ierr.Error() != lerr.Error() {
				t.Errorf("Inspect and LoadModel disagree:\n%v\n%v", ierr, lerr)
			}
		})
	}
	t.Run("no signal", func(t *testing.T) {
		c, err := family.Load(w)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.OpenDirHeaders(w)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		shapes := map[string][]int64{}
		for _, n := range ck.Names() {
			tn, _ := ck.Tensor(n)
			shapes[n] = tn.Shape
		}
		tab := family.Table{Names: ck.Names(), Shapes: shapes, Files: ck.Files()}
		if _, err := family.DetectLayout(c, tab); !errors.Is(err, hfconfig.ErrTensors) || !strings.Contains(err.Error(), "cannot tell how this mlx-vlm conversion stores its zero-centred norm gains") {
			t.Fatalf("no values, no hint: %v", err)
		}
		v := true
		c.NormsPreshifted = &v
		if l, err := family.DetectLayout(c, tab); err != nil || !l.ShiftedGains || l.GainsWhy != "stored as 1 + w: config.json preshifted_norm_weights true (reads 1 + w)" {
			t.Fatalf("the hint alone: %+v %v", l, err)
		}
	})
}

// TestOtherWidthsMatchFloatCopy: mlx-vlm conversions at the bit widths the fixture set leaves
// out (2 bits in groups of 128, 5 in 32, 6 in 64) give the logits of the float32 copy of their
// weights within 1e-4 on the CPU, prompt a one-shot and in calls of 37 + rest.
func TestOtherWidthsMatchFloatCopy(t *testing.T) {
	a := modeltest.PromptIDs(t, "a")
	src := fixture(t, "qwen4exp-fmt")
	for _, o := range []modelgen.MLXOptions{{Quantize: true, Bits: 2, Group: 128, VLM: true, GainsAsW: true},
		{Quantize: true, Bits: 5, Group: 32, VLM: true}, {Quantize: true, Bits: 6, Group: 64, VLM: true, GainsAsW: true}} {
		t.Run(fmt.Sprintf("%d bits in groups of %d", o.Bits, o.Group), func(t *testing.T) {
			dir, f32 := filepath.Join(t.TempDir(), "mlx"), filepath.Join(t.TempDir(), "f32")
			if err := modelgen.ConvertMLX(src, dir, o); err != nil {
				t.Fatal(err)
			}
			if err := modelgen.Dequantize(dir, f32, family.Fused); err != nil {
				t.Fatal(err)
			}
			want := modeltest.Prefill(t, modeltest.Load(t, "cpu", f32), a)
			m := modeltest.Load(t, "cpu", dir)
			for _, splits := range [][]int{nil, {37}} {
				if d := modeltest.MaxAbsDiff(modeltest.Prefill(t, m, a, splits...), want); d > 1e-4 {
					t.Errorf("calls %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
		})
	}
}

// TestConventionsAgree: the 4-bit conversions storing the gains as w and as 1 + w hold the same
// weights but for the rounding of bf16(1 + w) (spacing 2^-8 near 1), so their logits agree within
// 0.1 (measured 0.041), ten times closer than either is to the bf16 source (4-bit rounding: 0.47);
// a convention misread would add or take 1 from every zero-centred gain.
func TestConventionsAgree(t *testing.T) {
	a := modeltest.PromptIDs(t, "a")
	w := modeltest.Prefill(t, modeltest.Load(t, "cpu", fixture(t, "qwen4exp-fmt-mlx4")), a)
	s := modeltest.Prefill(t, modeltest.Load(t, "cpu", fixture(t, "qwen4exp-fmt-mlx4-shifted")), a)
	src := modeltest.Prefill(t, modeltest.Load(t, "cpu", fixture(t, "qwen4exp-fmt")), a)
	d, q := modeltest.MaxAbsDiff(w, s), modeltest.MaxAbsDiff(w, src)
	t.Logf("w against 1 + w: max|diff| %.3g; w against the bf16 source: %.3g", d, q)
	if d > 0.1 || d > q/4 {
		t.Errorf("the two conventions' logits differ by %.3g (the 4-bit rounding moves them by %.3g)", d, q)
	}
}
