package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
)

// TestFixturesAndReaders writes the whole fixture set with the float32 copies of its weights and
// runs goldens.py --check on it (numpy only): every fixture's sha256 against fixtures.json, the
// script's own decoders and name mapping (its weights within each format's error of the bf16
// source, its reading of the gains' convention equal to how each file was written and to strata's),
// and its decoding equal in float32 to strata's (modelgen.Dequantize). A fixture written again
// into another folder has the same bytes. It runs $PYTHON (as the Makefile: /usr/bin/python3,
// Debian's numpy) and is skipped where that has no numpy.
func TestFixturesAndReaders(t *testing.T) {
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s with numpy is needed: %v", python, err)
	}
	dir := t.TempDir()
	if err := run(dir, nil, true); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "goldens.py", "--check", dir).CombinedOutput()
	t.Logf("goldens.py --check:\n%s", out)
	if err != nil {
		t.Fatalf("goldens.py --check: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []entry
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != len(modelgen.FormatFixtures) {
		t.Fatalf("%d fixtures in fixtures.json, %d in the set", len(manifest), len(modelgen.FormatFixtures))
	}
	f, _ := modelgen.FormatFixtureNamed("qwen4exp-fmt-mlx4-shifted")
	if _, sum, err := f.Write(t.TempDir()); err != nil || sum != manifest[3].SHA256 || manifest[3].Name != f.Name {
		t.Fatalf("written again: %s %v, first %+v", sum, err, manifest[3])
	}
}
