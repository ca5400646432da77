// Package genreg is what the checkpoint generator (package modelgen) knows of each model family:
// the config.json of a generated checkpoint, the named presets, the published releases' configs
// and tensor tables, the FP8 releases' layouts and the format fixtures. A family's generator
// settings live in its folder (family/NAME/gen), which calls Register in an init function; the
// folder family/all/gen imports them all, and modelgen imports that folder. Nothing here names a
// family: the package holds the registry and the helpers the families' settings share.
package genreg

import (
	"sync"

	"github.com/stratakernels/strata/internal/safetensors"
)

// Spec is the size of a generated (random-weight) checkpoint. Zero fields are not defaults: a
// family reads only the fields of the parts it has, and a preset gives the rest.
type Spec struct {
	Arch                string // config.json model_type: selects the family (package family)
	D, Layers, Vocab    int
	AttnEvery           int // every AttnEvery-th layer (1-based) is attention, the rest GDN
	Hq, Hkv, HeadDim    int
	Hk, Hv, Dk, Dv      int
	Experts, TopK       int
	MoEI, SharedI       int
	Streams, HCRank     int   // hyper-connection streams and rank
	IdxHeads, IdxBudget int   // QSA indexer (index head dim 128, ratio 4)
	PLELayers           []int // 1-based, as ple_layer_ids
	PLEEmbedDim         int
	NGramBase           int // ngram_vocab_size_base (0: the family's default)
	NGramParts          int // > 1: the n-gram tables stored as that many row blocks (split_ngram_parts)
	RopeTheta           float64
	Seed                uint64
	PerExpertLayout     bool   // write mlp.experts.{e}.* instead of fused tensors
	DenseI              int    // dense-MLP width of a family without experts
	Prefix              string // tensor prefix of the text model ("": the family's first)
	// Constants writes the plan's constant tensors (the PLE hash buffers, I64) as the published
	// checkpoints store them; without it they are left out (strata derives them).
	Constants bool
}

// Family is the generator settings of one family, as family/NAME/gen registers them.
type Family struct {
	// Name is the family's name (family.Family.Name): the family that reads the model types
	// of the presets and of the generated configs.
	Name string
	// Config returns the config.json of a generated checkpoint of spec's sizes (spec.Arch one
	// of the family's model types), as transformers would save it.
	Config func(s Spec) map[string]any
	// Presets are named specs of the family's model types (tests, benchmarks, the main job).
	Presets map[string]Spec
	// Releases are the published releases' structure (WriteHeaderOnly in modelgen).
	Releases []Release
	// FP8Releases are the layouts of the published FP8 releases, by release name (ConvertFP8).
	FP8Releases map[string]FP8Options
	// FormatFixtures are the family's format fixtures: its presets as published conversions
	// (the inputs of transformers goldens).
	FormatFixtures []FormatFixture
}

// FormatFixture is one checkpoint of the format fixture set: a generated preset (Source) as it
// is, or converted by modelgen.ConvertMLX (MLX) or modelgen.ConvertFP8 (FP8).
type FormatFixture struct {
	Name   string
	Source string // a preset
	MLX    *MLXOptions
	FP8    *FP8Options
}

var (
	mu      sync.Mutex
	configs = map[string]func(Spec) map[string]any{}

	// Presets are every registered family's presets, by name.
	Presets = map[string]Spec{}
	// Releases are every registered family's published releases, by name.
	Releases = map[string]Release{}
	// FP8Releases are every registered family's FP8 release layouts, by release name.
	FP8Releases = map[string]FP8Options{}
	// FormatFixtures are every registered family's format fixtures, in registration order.
	FormatFixtures []FormatFixture
)

// Register adds a family's generator settings, from an init function. It panics when the family
// is registered twice or a preset, release or fixture name is taken (a programming error).
// modelgen's Presets, Releases and FP8Releases are these maps, so settings registered later (by a
// test) are seen too; modelgen.FormatFixtures is sorted once, when modelgen is initialized, from
// the fixtures registered through family/all/gen.
func Register(f Family) {
	mu.Lock()
	defer mu.Unlock()
	if f.Name == "" || f.Config == nil {
		panic("genreg: a family needs a name and a config writer")
	}
	if _, dup := configs[f.Name]; dup {
		panic("genreg: family " + f.Name + " registered twice")
	}
	configs[f.Name] = f.Config
	for n, s := range f.Presets {
		if _, dup := Presets[n]; dup {
			panic("genreg: preset " + n + " registered twice")
		}
		Presets[n] = s
	}
	for _, r := range f.Releases {
		if _, dup := Releases[r.Name]; dup {
			panic("genreg: release " + r.Name + " registered twice")
		}
		Releases[r.Name] = r
	}
	for n, o := range f.FP8Releases {
		if _, dup := FP8Releases[n]; dup {
			panic("genreg: FP8 release " + n + " registered twice")
		}
		FP8Releases[n] = o
	}
	for _, x := range f.FormatFixtures {
		for _, y := range FormatFixtures {
			if x.Name == y.Name {
				panic("genreg: format fixture " + x.Name + " registered twice")
			}
		}
		FormatFixtures = append(FormatFixtures, x)
	}
}

// ConfigWriter returns the config writer of the family called name.
func ConfigWriter(name string) (func(Spec) map[string]any, bool) {
	mu.Lock()
	defer mu.Unlock()
	w, ok := configs[name]
	return w, ok
}

// Release is the structure of a published bf16 checkpoint: its config.json (the published
// fields and values) and its tensor table (every name, dtype and shape, in checkpoint order),
// split into as many shards as the release has. modelgen.WriteHeaderOnly writes it without its
// weights, so that loading and inspection can be tested on the real layout in seconds and
// megabytes.
//
// The tables are written from the published layouts (docs/FORMATS.md section 1: names,
// prefixes, expert storage, PLE buffers and table shards), not from strata's own expectations,
// so that a test of the checks against them can fail. The text model's tensors are the
// release's; under mtp.* and model.visual.* (which strata skips by prefix) a table holds a
// representative set of the head's and the vision tower's tensors (transformers' module names,
// the configs' sizes), not a transcription.
type Release struct {
	Name   string
	Shards int
	// config returns a fresh copy of config.json (JSON-compatible values).
	config func() map[string]any
	// tensors returns the tensor table; tensors with Data (the PLE hash buffers) hold the
	// release's values.
	tensors func() []safetensors.WriteTensor
}

// NewRelease is the release called name of shards shards, whose config.json and tensor table
// config and tensors build afresh at each call.
func NewRelease(name string, shards int, config func() map[string]any, tensors func() []safetensors.WriteTensor) Release {
	return Release{Name: name, Shards: shards, config: config, tensors: tensors}
}

// Config returns a fresh copy of the release's config.json as a JSON-compatible map.
func (r Release) Config() map[string]any { return r.config() }

// Tensors returns the release's tensor table in checkpoint order. Tensors with Data hold the
// release's values (the PLE hash buffers); the others have nil Data.
func (r Release) Tensors() []safetensors.WriteTensor { return r.tensors() }
