package strata

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/safetensors"
)

var tinyModels = []struct {
	name, dir, goldens string
	layerWidth         int
}{
	{"qwen3next", "qwen3next-tiny", "model_goldens.safetensors", 256},
	{"qwen4exp", "qwen4exp-tiny", "q4_model_goldens.safetensors", 1024},
}

func testdata(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata"}, parts...)...)
}

// loadTiny opens the cpu device and loads a tiny checkpoint, closing it with the test.
func loadTiny(t testing.TB, dir string) *Model {
	t.Helper()
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(dev, testdata(dir), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

type goldens struct {
	f *safetensors.File
	t testing.TB
}

func openGoldens(t testing.TB, name string) *goldens {
	t.Helper()
	return openGoldensFile(t, testdata("goldens", name))
}

// openGoldensFile opens a goldens file by path.
func openGoldensFile(t testing.TB, path string) *goldens {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &goldens{f, t}
}

func (g *goldens) f32(name string) []float32 {
	g.t.Helper()
	tn, err := g.f.Tensor(name)
	if err != nil {
		g.t.Fatal(err)
	}
	v, err := tn.Float32()
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func (g *goldens) i32(name string) []int32 {
	g.t.Helper()
	tn, err := g.f.Tensor(name)
	if err != nil {
		g.t.Fatal(err)
	}
	v, err := tn.Int32()
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func maxAbsDiff(a, b []float32) (d, scale float64) {
	if len(a) != len(b) {
		return math.Inf(1), 0
	}
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		scale = math.Max(scale, math.Abs(float64(b[i])))
	}
	return d, scale
}

// TestGoldens prefills prompts a (96 tokens, eos at 50 for qwen4exp) and b (300 tokens) in
// one shot and compares logits, every layer's residual stream and the caches with the
// transformers goldens.
func TestGoldens(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			g := openGoldens(t, tm.goldens)
			for _, prompt := range []string{"a", "b"} {
				s, err := m.NewSession(SessionOptions{MaxContext: 512})
				if err != nil {
					t.Fatal(err)
				}
				goldenRun(t, tm.name, m, s, g, prompt)
			}
		})
	}
}

// goldenRun prefills a golden prompt in one shot on s (an empty session of m, either backend),
// tracing every layer, and checks against the transformers goldens: all logits within 2e-3,
// every layer_out within 2e-3 * max|x|, and the qwen3next caches (checkCaches) or the qwen4exp
// layer-3 QSA selection (exactly qsa_selected.3). It returns the logits.
func goldenRun(t *testing.T, name string, m *Model, s *Session, g *goldens, prompt string) *Logits {
	t.Helper()
	ids := g.i32(prompt + ".input_ids")
	T := len(ids)
	layerOut := map[int][]float32{}
	s.trace = func(layer int, name string, data []float32) {
		if name == "layer_out" {
			layerOut[layer] = append([]float32(nil), data...)
		}
	}
	sel := make([]uint8, T*T)
	s.traceSel = func(layer, row int, keys []int32, dense bool) {
		if layer != 3 {
			return
		}
		if dense {
			for k := 0; k <= row; k++ {
				sel[row*T+k] = 1
			}
			return
		}
		for _, k := range keys {
			sel[row*T+int(k)] = 1
		}
	}
	lg, err := s.Prefill(context.Background(), ids, PrefillOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := maxAbsDiff(lg.Data, g.f32(prompt+".logits"))
	t.Logf("%s on %s, prompt %s (T=%d): logits max|diff| %.3g", name, m.dev.Backend(), prompt, T, d)
	if d > 2e-3 {
		t.Errorf("prompt %s: logits max|diff| %.3g > 2e-3", prompt, d)
	}
	for i := 0; i < m.Layers(); i++ {
		d, scale := maxAbsDiff(layerOut[i], g.f32(fmt.Sprintf("%s.layer_out.%d", prompt, i)))
		if d > 2e-3*scale {
			t.Errorf("prompt %s layer %d: max|diff| %.3g > 2e-3 * %.3g", prompt, i, d, scale)
		}
	}
	if name == "qwen4exp" {
		want := g.i32(prompt + ".qsa_selected.3")
		bad := 0
		for i := range want {
			if uint8(want[i]) != sel[i] {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("prompt %s: layer 3 QSA selection differs from qsa_selected.3 in %d of %d entries", prompt, bad, len(want))
		}
	} else {
		checkCaches(t, m, s, g, prompt, T)
	}
	return lg
}

// checkCaches compares the qwen3next session caches with the goldens: the last 3 conv inputs of
// each GDN layer (transformers keeps 4) and layer 3's K/V cache.
func checkCaches(t *testing.T, m *Model, s *Session, g *goldens, prompt string, T int) {
	c := m.cfg
	C := 2*c.Hk*c.Dk + c.Hv*c.Dv
	for i := 0; i < 3; i++ {
		want := g.f32(fmt.Sprintf("%s.conv_state.%d", prompt, i)) // [1, C, 4] channel-major
		got := s.state.get(i, family.RoleConv).F32()              // [3, C] token-major
		var d, scale float64
		for j := 0; j < c.ConvK-1; j++ {
			for ch := 0; ch < C; ch++ {
				w := float64(want[ch*4+1+j])
				d = math.Max(d, math.Abs(float64(got[j*C+ch])-w))
				scale = math.Max(scale, math.Abs(w))
			}
		}
		if d > 2e-3*scale {
			t.Errorf("prompt %s conv state %d: max|diff| %.3g (scale %.3g)", prompt, i, d, scale)
		}
	}
	kv := c.Hkv * c.HeadDim
	for _, n := range []string{"k", "v"} {
		want := g.f32(fmt.Sprintf("%s.%s_cache.3", prompt, n))
		got := s.state.get(3, family.RoleK).F32()
		if n == "v" {
			got = s.state.get(3, family.RoleV).F32()
		}
		d, scale := maxAbsDiff(got[:T*kv], want)
		if d > 2e-3*scale {
			t.Errorf("prompt %s %s cache: max|diff| %.3g (scale %.3g)", prompt, n, d, scale)
		}
	}
}
