package strata

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
)

// TestGeneratedModel: the first call writes the model into the user cache directory (saying so),
// with the bytes modelgen.Generate writes for the preset and no partial folder left beside it;
// the second finds it without writing; an unknown name is refused, naming the known ones.
func TestGeneratedModel(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux and the BSDs
	t.Setenv("HOME", cache)           // on darwin: HOME/Library/Caches
	const name = "qwen3next-gguf"
	if !slices.Contains(GeneratedModels(), name) || !slices.IsSorted(GeneratedModels()) {
		t.Fatalf("GeneratedModels() = %v", GeneratedModels())
	}
	var told []string
	dir, err := GeneratedModel(name, func(d string) { told = append(told, d) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, cache) || filepath.Base(dir) != name+"-v2" || len(told) != 1 || told[0] != dir {
		t.Fatalf("dir %s, notified %v", dir, told)
	}
	want := t.TempDir()
	if err := modelgen.Generate(want, modelgen.Presets[name]); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		a, errA := os.ReadFile(filepath.Join(dir, f))
		b, errB := os.ReadFile(filepath.Join(want, f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from modelgen.Generate's (%v, %v)", f, errA, errB)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Errorf("the models folder holds %v, want the one model", ents)
	}
	again, err := GeneratedModel(name, func(string) { t.Error("written twice") })
	if err != nil || again != dir {
		t.Errorf("second call: %s, %v", again, err)
	}
	if _, err := GeneratedModel("no-such-model", nil); err == nil || !strings.Contains(err.Error(), "qwen4exp-small") {
		t.Errorf("unknown name: %v", err)
	}
}

// TestGeneratedModelCancelled: GeneratedModelContext stopped while it writes (the context is
// cancelled once the write is announced) returns the cancellation and leaves the cache without
// the model's folder or a partial one; a later call writes the model.
func TestGeneratedModelCancelled(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux and the BSDs
	t.Setenv("HOME", cache)           // on darwin: HOME/Library/Caches
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := GeneratedModelContext(ctx, "qwen35-tiny", func(string) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("GeneratedModelContext cancelled during the write: %v", err)
	}
	models := filepath.Join(cache, "strata", "models")
	if ents, _ := os.ReadDir(models); len(ents) != 0 {
		t.Fatalf("the cache holds %v after the cancelled write, want nothing", ents)
	}
	dir, err := GeneratedModel("qwen35-tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
}
