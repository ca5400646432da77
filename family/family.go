// Package family is the seam between strata's one runner and the model families it runs. A
// family (one folder under family/, registered in family/all) says how its config.json is read,
// what its layer plan is (each layer's blocks, their weights by role and the checkpoint tensors
// they come from, the session states) and how each checkpoint layout it knows names its tensors
// (Hugging Face, mlx-lm and mlx-vlm conversions). Everything else is derived from the Plan here
// and in package strata: the checkpoint check (CheckCheckpoint), the runner's loop, the session
// cache, the memory estimates, resident bytes, FLOPs and Inspect. No code outside the family
// folders branches on a family.
//
// Adding a family: a folder family/NAME with a type implementing Family (its config reader with
// its transformers class defaults, Prefixes, Plan) that calls Register in an init function, and
// one import line in family/all/all.go. What the module's checkpoint generator (internal/modelgen)
// needs of it for tests (the config.json of a generated checkpoint, presets, the published
// releases' tensor tables) lives in family/NAME/gen, registered with one import line in
// family/all/gen; its tests live in family/NAME.
package family

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/stratakernels/strata/internal/hfconfig"
)

// Family is one model family. Its methods take only this package's types (Config, Object,
// Layout, Plan, ...), so a family can be written outside this module.
type Family interface {
	// Name is the family's name, e.g. "qwen3_next": Config.Family and Model.Arch.
	Name() string
	// ModelTypes are the config.json model_type values (top level) the family reads, each with
	// the model's name for messages (e.g. "Qwen3-Next").
	ModelTypes() map[string]string
	// ReadConfig reads the config (top, the top-level object) into a Config with the family's
	// transformers class defaults (ReadText and the other readers of config.go), recording
	// malformed or unknown fields in top's problems, and returns what it asks for that strata
	// does not implement (named, for ErrUnsupported). Quantization keys are read before it
	// (Config.Quant or Config.FP8 is set; ReadQuantization reads those of a nested text_config).
	ReadConfig(top *Object, c *Config) (unsupported []string)
	// Validate lists the family's own invariants that c breaks beyond Config.Validate's.
	Validate(c *Config) []string
	// Prefixes are the tensor-name layouts of the family's checkpoints: the text model's
	// prefix, the lm_head name, and whether the layout is an MLX conversion's.
	Prefixes() []Prefix
	// Plan builds the model's plan for a checkpoint of layout l. Errors wrap ErrTensors or
	// ErrUnsupported.
	Plan(c *Config, l Layout) (*Plan, error)
}

var (
	mu       sync.RWMutex
	families = map[string]Family{}
	byType   = map[string]Family{}
)

// Register adds a family; it panics on a duplicate name or model_type (a programming error).
func Register(f Family) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := families[f.Name()]; dup {
		panic("family: " + f.Name() + " registered twice")
	}
	families[f.Name()] = f
	for mt := range f.ModelTypes() {
		if other, dup := byType[mt]; dup {
			panic(fmt.Sprintf("family: model_type %q claimed by %s and %s", mt, other.Name(), f.Name()))
		}
		byType[mt] = f
	}
}

// Lookup returns the registered family called name.
func Lookup(name string) (Family, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := families[name]
	return f, ok
}

// ForModelType returns the family that reads model_type mt.
func ForModelType(mt string) (Family, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := byType[mt]
	return f, ok
}

// Names lists the registered families, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(families))
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// otherModelTypes names model types users try that no family reads.
var otherModelTypes = map[string]string{
	"qwen3_moe": "Qwen3 MoE",
	"qwen3":     "Qwen3 (dense)",
	"qwen2_moe": "Qwen2 MoE",
}

func unsupportedModelType(mt string) error {
	what := ""
	if name, ok := otherModelTypes[mt]; ok {
		what = ", " + name + ","
	}
	mu.RLock()
	var known []string
	for t, f := range byType {
		known = append(known, fmt.Sprintf("%s (%s)", t, f.ModelTypes()[t]))
	}
	mu.RUnlock()
	sort.Strings(known)
	return fmt.Errorf("%w: model_type %q%s is not supported: strata runs %s", ErrUnsupported, mt, what, strings.Join(known, ", "))
}

// Load reads and parses dir/config.json (Parse). Errors name the file.
func Load(dir string) (*Config, error) {
	p := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// Parse parses a config.json: the family registered for its model_type reads it, and the result
// is validated (the family's Validate, then Config.Validate). Quantization keys are read
// first, so a quantized format strata does not run is refused by name. Errors wrap
// ErrConfig (malformed JSON, wrong types, unknown fields, broken invariants; every
// problem found is listed in one error) or ErrUnsupported (another model_type, a quantization
// method, RoPE scaling, attention biases, ...), naming the value.
func Parse(data []byte) (*Config, error) {
	var errs []string
	top, err := hfconfig.DecodeObject(data, "", &errs)
	if err != nil {
		return nil, err
	}
	mt := top.Str("model_type", "")
	if mt == "" {
		return nil, fmt.Errorf("%w: model_type is missing", ErrConfig)
	}
	f, ok := ForModelType(mt)
	if !ok {
		return nil, unsupportedModelType(mt)
	}
	c := &Config{Family: f.Name(), ModelType: mt}
	if err := ReadQuantization(c, top); err != nil {
		return nil, err
	}
	c.Architectures, _ = top.Strs("architectures")
	unsupported := f.ReadConfig(top, c)
	if err := top.Errors(); err != nil {
		return nil, err
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, strings.Join(unsupported, "; "))
	}
	// The family's invariants first: they say what the general ones would only imply (a family
	// with experts in every layer whose config has none is not a config of dense layers).
	if bad := f.Validate(c); len(bad) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Of returns the family that read c. It panics when none did (a Config not made by Parse).
func Of(c *Config) Family {
	f, ok := Lookup(c.Family)
	if !ok {
		panic(fmt.Sprintf("family: config of unregistered family %q", c.Family))
	}
	return f
}
