package modelgen

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/safetensors"
)

// tinySpec is a small spec of each architecture (fast to generate).
func tinySpec(arch string) Spec {
	s := Presets["qwen4exp-small"]
	if arch == "qwen3_next" {
		s = Presets["qwen3next-small"]
	}
	s.D, s.Layers, s.Vocab, s.Experts, s.MoEI, s.SharedI, s.HCRank = 64, 4, 300, 6, 16, 16, 8
	s.Hk, s.Hv, s.Dk, s.Dv, s.HeadDim = 1, 2, 32, 32, 64
	s.PLEEmbedDim = 32
	s.TopK = 4
	return s
}

// TestGenerateValidAndDeterministic: a generated checkpoint passes the same config and tensor
// checks as a real one (every tensor the config implies, with its shape), and generating twice
// gives byte-identical files.
func TestGenerateValidAndDeterministic(t *testing.T) {
	for _, arch := range []string{"qwen4_exp_text", "qwen3_next"} {
		t.Run(arch, func(t *testing.T) {
			spec := tinySpec(arch)
			a, b := t.TempDir(), t.TempDir()
			if err := Generate(a, spec); err != nil {
				t.Fatal(err)
			}
			if err := Generate(b, spec); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"config.json", "model.safetensors"} {
				x, _ := os.ReadFile(filepath.Join(a, f))
				y, _ := os.ReadFile(filepath.Join(b, f))
				if len(x) == 0 || !bytes.Equal(x, y) {
					t.Errorf("%s differs between two generations (or is empty)", f)
				}
			}
			cfg, err := family.Load(a)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := safetensors.OpenDir(a)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			res, err := family.CheckCheckpoint(cfg, ck)
			if err != nil {
				t.Fatal(err)
			}
			if fused := res.Plan.Layout.Experts == family.Fused; fused == spec.PerExpertLayout {
				t.Errorf("layout %v for PerExpertLayout=%v", res.Plan.Layout.Experts, spec.PerExpertLayout)
			}
			// A different seed changes the weights.
			spec.Seed++
			c := t.TempDir()
			if err := Generate(c, spec); err != nil {
				t.Fatal(err)
			}
			x, _ := os.ReadFile(filepath.Join(a, "model.safetensors"))
			y, _ := os.ReadFile(filepath.Join(c, "model.safetensors"))
			if bytes.Equal(x, y) {
				t.Error("seed does not change the weights")
			}
		})
	}
}

func TestSpecErrors(t *testing.T) {
	s := tinySpec("qwen3_next")
	s.Hv = 3
	s.Hk = 2
	if err := Generate(t.TempDir(), s); err == nil {
		t.Error("Hv % Hk != 0 accepted")
	}
	s = tinySpec("llama")
	s.Arch = "llama"
	if err := Generate(t.TempDir(), s); err == nil {
		t.Error("unknown arch accepted")
	}
}
