// Package modelgen writes deterministic random checkpoints in the Hugging Face layout
// (config.json + model.safetensors, bf16 weights) for every family strata runs, at any size: the
// embedded default model of the main job and the models of the tests and benchmarks. The weights
// are random (seeded), so outputs mean nothing linguistically; they exercise every op at the
// chosen shapes, exactly as a real checkpoint of that shape would.
//
// It also writes the published releases' structure (Releases: their config.json and every
// tensor's name, dtype and shape, shard by shard) without weights (WriteHeaderOnly), for tests of
// loading and inspection on the real layouts, and converts checkpoints to the published
// quantized forms (ConvertMLX, ConvertFP8).
//
// It names no family: each family's generator settings (config writer, presets, releases, FP8
// layouts, format fixtures) live in family/NAME/gen and reach it through package genreg, every
// family's imported by family/all/gen.
package modelgen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"     // the families
	_ "github.com/stratakernels/strata/family/all/gen" // their generator settings
	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
)

// Spec is the size of a generated model (genreg.Spec). Zero fields are not defaults: use a preset.
type Spec = genreg.Spec

// Presets by name: every family's (family/NAME/gen), among them the main job's default and the
// benchmark models.
var Presets = genreg.Presets

// Generate writes the model of spec into dir (created if needed): config.json (the family's
// config writer, genreg.Family.Config) and model.safetensors holding every tensor of the family's plan for that
// config, drawn as the plan says (family.Init). The same spec always produces byte-identical files.
func Generate(dir string, spec Spec) error { return GenerateContext(context.Background(), dir, spec) }

// GenerateContext is Generate that stops when ctx is done, between two tensors, or before or
// after the write of the weights (which runs to its end), with ctx's error: what it leaves in
// dir is then no checkpoint (no config.json, which is written last).
func GenerateContext(ctx context.Context, dir string, spec Spec) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	f, ok := family.ForModelType(spec.Arch)
	if !ok {
		return fmt.Errorf("modelgen: no family reads model_type %q", spec.Arch)
	}
	write, ok := genreg.ConfigWriter(f.Name())
	if !ok {
		return fmt.Errorf("modelgen: family %s has no generator settings (family/NAME/gen, imported by family/all/gen)", f.Name())
	}
	cj, err := json.MarshalIndent(write(spec), "", "  ")
	if err != nil {
		return err
	}
	cfg, err := family.Parse(cj)
	if err != nil {
		return fmt.Errorf("modelgen: the generated config: %w", err)
	}
	l := family.Layout{Experts: family.Fused}
	if spec.PerExpertLayout {
		l.Experts = family.PerExpert
	}
	if spec.NGramParts > 1 {
		l.NGramParts = spec.NGramParts
	}
	for _, p := range f.Prefixes() {
		if spec.Prefix == "" && l.Text == "" || p.Text == spec.Prefix {
			l.Prefix = p
		}
	}
	if spec.Prefix != "" && l.Text != spec.Prefix {
		return fmt.Errorf("modelgen: family %s has no tensor prefix %q", f.Name(), spec.Prefix)
	}
	plan, err := f.Plan(cfg, l)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r := &gen{rng: rand.New(rand.NewPCG(spec.Seed, 0x5eed))}
	for _, t := range plan.Tensors {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.draw(t)
	}
	if spec.Constants {
		for _, g := range plan.Constants {
			for _, k := range g.Tensors {
				r.out = append(r.out, genreg.Int64Tensor(k.Name, k.Values))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "model.safetensors.tmp")
	if err := safetensors.WriteFile(tmp, r.out, map[string]string{"format": "pt", "generator": "strata modelgen " + spec.Arch}); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "model.safetensors")); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // done during the write: no config.json, so no checkpoint
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(cj, '\n'), 0o644)
}

func checkSpec(s Spec) error {
	if _, ok := family.ForModelType(s.Arch); !ok {
		return fmt.Errorf("modelgen: unknown arch %q", s.Arch)
	}
	if s.D <= 0 || s.Layers <= 0 || s.Vocab <= 0 || s.AttnEvery <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.HeadDim <= 0 ||
		s.Hk <= 0 || s.Hv%s.Hk != 0 || s.Hq%s.Hkv != 0 || s.TopK > s.Experts || s.Experts < 0 || s.Experts == 0 && s.DenseI <= 0 {
		return fmt.Errorf("modelgen: inconsistent spec %+v", s)
	}
	return nil
}

type gen struct {
	rng *rand.Rand
	out []safetensors.WriteTensor
}

// normal adds a bf16 tensor of N(mean, std) values.
func (g *gen) normal(name string, mean, std float64, shape ...int64) {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	b := make([]byte, 2*n)
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], bf16(float32(mean+std*g.rng.NormFloat64())))
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: b})
}

// fn adds a bf16 tensor whose i-th value is f(i).
func (g *gen) fn(name string, f func(i int) float64, shape ...int64) {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	b := make([]byte, 2*n)
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], bf16(float32(f(int(i)))))
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: b})
}

// bf16 rounds to nearest even.
func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// draw adds tensor t with values drawn as its Init says.
func (g *gen) draw(t family.Spec) {
	in := float64(t.Shape[len(t.Shape)-1])
	switch t.Init {
	case family.InitLinear:
		g.normal(t.Name, 0, 1/math.Sqrt(in), t.Shape...)
	case family.InitEmbed:
		g.normal(t.Name, 0, 1, t.Shape...)
	case family.InitGain0:
		g.normal(t.Name, 0, 0.1, t.Shape...)
	case family.InitGain1:
		g.normal(t.Name, 1, 0.1, t.Shape...)
	case family.InitConv:
		g.normal(t.Name, 0, 0.5, t.Shape...)
	case family.InitALog:
		g.fn(t.Name, func(int) float64 { return math.Log(1 + 15*g.rng.Float64()) }, t.Shape...)
	case family.InitDtBias:
		g.fn(t.Name, func(int) float64 { return 0.5 + g.rng.Float64() }, t.Shape...)
	}
}
