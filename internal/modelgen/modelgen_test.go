package modelgen

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/safetensors"
)

// smallPresets are the registered presets of a few megabytes (hidden size at most 256, vocabulary
// at most 1024), sorted: every family has some.
func smallPresets(t *testing.T) []string {
	var names []string
	for n, s := range Presets {
		if s.D <= 256 && s.Vocab <= 1024 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("no small preset registered")
	}
	return names
}

// TestGenerateValidAndDeterministic: for every small preset of every family, a generated
// checkpoint passes the same config and tensor checks as a real one (every tensor the config
// implies, with its shape, in the layout the spec asks for), generating twice gives
// byte-identical files, and another seed other weights.
func TestGenerateValidAndDeterministic(t *testing.T) {
	families := map[string]bool{}
	for _, name := range smallPresets(t) {
		t.Run(name, func(t *testing.T) {
			spec := Presets[name]
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
			families[cfg.Family] = true
			ck, err := safetensors.OpenDir(a)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			res, err := family.CheckCheckpoint(cfg, ck)
			if err != nil {
				t.Fatal(err)
			}
			l := res.Plan.Layout
			if spec.Experts > 0 && (l.Experts == family.PerExpert) != spec.PerExpertLayout {
				t.Errorf("layout %v for PerExpertLayout=%v", l.Experts, spec.PerExpertLayout)
			}
			if spec.Prefix != "" && l.Text != spec.Prefix {
				t.Errorf("prefix %q, want %q", l.Text, spec.Prefix)
			}
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
	for _, f := range family.Names() {
		if !families[f] {
			t.Errorf("family %s has no small preset: its generator settings are untested here", f)
		}
	}
}

func TestSpecErrors(t *testing.T) {
	s := Presets[smallPresets(t)[0]]
	s.Hv, s.Hk = 3, 2
	if err := Generate(t.TempDir(), s); err == nil {
		t.Error("Hv % Hk != 0 accepted")
	}
	s = Presets[smallPresets(t)[0]]
	s.Arch = "llama"
	if err := Generate(t.TempDir(), s); err == nil {
		t.Error("unknown arch accepted")
	}
	s = Presets[smallPresets(t)[0]]
	s.Prefix = "transformer."
	if err := Generate(t.TempDir(), s); err == nil {
		t.Error("unknown tensor prefix accepted")
	}
}

// TestGenerateCancelled: with its context done, GenerateContext and the conversions stop with
// the context's error and leave no checkpoint (no config.json) where they were writing.
func TestGenerateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if err := GenerateContext(ctx, filepath.Join(dir, "g"), Presets["qwen3next-fmt"]); !errors.Is(err, context.Canceled) {
		t.Fatalf("GenerateContext with a cancelled context: %v", err)
	}
	src := filepath.Join(dir, "src")
	if err := Generate(src, Presets["qwen3next-fmt"]); err != nil {
		t.Fatal(err)
	}
	for name, convert := range map[string]func(string) error{
		"mlx": func(dst string) error {
			return ConvertMLXContext(ctx, src, dst, MLXOptions{Quantize: true, Bits: 4, Group: 64})
		},
		"fp8": func(dst string) error {
			return ConvertFP8Context(ctx, src, dst, FP8Releases["qwen3-next-80b-a3b-instruct-fp8"])
		},
	} {
		if err := convert(filepath.Join(dir, name)); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s conversion with a cancelled context: %v", name, err)
		}
	}
	for _, d := range []string{"g", "mlx", "fp8"} {
		if _, err := os.Stat(filepath.Join(dir, d, "config.json")); err == nil {
			t.Errorf("%s: a config.json after the cancelled write", d)
		}
	}
}
