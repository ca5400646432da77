package family_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
)

// TestMLXLMLayout: the mlx-lm module of each family that has one, and the refusals: a family
// without one, layer_types that disagree with full_attention_interval (given, or mlx-lm's
// default 4), an interval of 0.
func TestMLXLMLayout(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testdata, "qwen3next-tiny", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) *hfconfig.Config {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		c, err := family.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if mod, err := family.MLXLMLayout(edit(func(map[string]any) {})); err != nil || mod != "qwen3_next" {
		t.Fatalf("qwen3next-tiny: %q, %v", mod, err)
	}
	for _, c := range []struct {
		name string
		f    func(m map[string]any)
		msg  string
	}{
		{"interval 2", func(m map[string]any) { m["full_attention_interval"] = 2 }, "layer_types makes layer 1 linear_attention, but mlx-lm's qwen3_next ignores layer_types and makes it an attention layer ((i+1) % full_attention_interval 2)"},
		{"types moved", func(m map[string]any) {
			m["layer_types"] = []string{"full_attention", "linear_attention", "linear_attention", "linear_attention"}
		}, "layer_types makes layer 0 full_attention, but mlx-lm's qwen3_next ignores layer_types and makes it a GDN layer ((i+1) % full_attention_interval 4)"},
		{"interval 0", func(m map[string]any) { m["full_attention_interval"] = 0 }, "full_attention_interval 0"},
	} {
		_, err := family.MLXLMLayout(edit(c.f))
		if !errors.Is(err, hfconfig.ErrUnsupported) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want ErrUnsupported containing %q", c.name, err, c.msg)
		}
	}
	q4, err := family.Load(filepath.Join(testdata, "qwen4exp-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := family.MLXLMLayout(q4); !errors.Is(err, hfconfig.ErrUnsupported) || !strings.Contains(err.Error(), "the qwen4_exp family (model_type qwen4_exp_text) has no mlx-lm model") {
		t.Errorf("qwen4exp-tiny: %v", err)
	}
	for mt, want := range map[string]string{"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe"} {
		if got := family.Of(&hfconfig.Config{Family: "qwen3_5", ModelType: mt}).(family.MLXLM).MLXLMModel(&hfconfig.Config{ModelType: mt}); got != want {
			t.Errorf("%s: mlx-lm module %q, want %q", mt, got, want)
		}
	}
}
