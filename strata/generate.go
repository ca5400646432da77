package strata

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratakernels/strata/internal/modelgen"
)

// GeneratedModels returns the names of the checkpoints GeneratedModel writes, sorted. Among
// them: "qwen4exp-small" (a reduced-size Qwen3.8-Flash-Next: D 512, 8 layers, 32 experts top-10,
// vocabulary 8192; the main job's default), "qwen4exp-small-qwen3vocab" (the same with Qwen3's
// vocabulary size, 151936 rows, for Qwen3's tokenizer.json), "qwen3next-small", and the 4-layer
// real-width slices "qwen4exp-slice" and "qwen3next-slice" that the benchmarks run.
func GeneratedModels() []string {
	var names []string
	for name := range modelgen.Presets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// GeneratedModel returns the folder of the generated checkpoint name (one of GeneratedModels):
// a Hugging Face-layout checkpoint (config.json and a bf16 model.safetensors) whose weights are
// random, drawn from the model's fixed seed, so that every machine writes the same bytes and
// strata runs every op at the model's shapes without a download (the outputs mean nothing
// linguistically). The folder is strata/models/NAME-v2 under os.UserCacheDir (the temporary
// directory where there is none). The first call writes it: into a temporary folder beside it,
// renamed into place once complete, so that an interrupted write leaves nothing a later call
// would take for the model; notify, when not nil, is called with the folder before the write
// (seconds for the small models; longer for the slices, 3.2 GB for qwen4exp-slice). Errors: an unknown
// name (the error lists the known ones) and a failed write, naming the folder.
func GeneratedModel(name string, notify func(dir string)) (string, error) {
	return GeneratedModelContext(context.Background(), name, notify)
}

// GeneratedModelContext is GeneratedModel that stops writing when ctx is done (between two
// tensors, within a few seconds for the slices' largest; or once the weights' file, written in
// one piece, is done), removing the temporary folder, and returns an error wrapping ctx's
// (context.Canceled on a cancel): a command's interrupt then ends a long first write without
// leaving anything behind.
func GeneratedModelContext(ctx context.Context, name string, notify func(dir string)) (string, error) {
	spec, ok := modelgen.Presets[name]
	if !ok {
		return "", fmt.Errorf("unknown generated model %q (have %s)", name, strings.Join(GeneratedModels(), ", "))
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "strata", "models", name+"-v2")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, nil
	}
	if notify != nil {
		notify(dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("generating %s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), name+".partial-")
	if err != nil {
		return "", fmt.Errorf("generating %s: %w", name, err)
	}
	defer os.RemoveAll(tmp) // gone once renamed; else what a failed write left
	if err := modelgen.GenerateContext(ctx, tmp, spec); err != nil {
		return "", fmt.Errorf("generating %s into %s: %w", name, dir, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("generating %s: %w", name, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have written the same model meanwhile: its folder is as good.
		if _, serr := os.Stat(filepath.Join(dir, "config.json")); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("generating %s: moving it into %s (a folder there without a config.json is not the model: remove it): %w", name, dir, err)
	}
	return dir, nil
}
