package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
)

// TestFixturesAndReaders writes the whole fixture set and checks that its manifest is
// testdata/fixtures.json, the one the goldens beside it were made from (testdata/README.md). With
// the float32 copies of its weights it runs goldens.py --check on it (numpy only): every fixture's
// sha256 against fixtures.json, the script's own decoders and name mapping (its weights within
// each format's error of the bf16 source, its reading of the gains' convention equal to how each
// file was written and to strata's), and its decoding equal in float32 to strata's
// (modelgen.Dequantize). A fixture written again into another folder has the same bytes. It runs
// $PYTHON (as the Makefile: /usr/bin/python3, Debian's numpy); that part is skipped where it has no
// numpy.
func TestFixturesAndReaders(t *testing.T) {
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	numpy := exec.Command(python, "-c", "import numpy").Run()
	dir := t.TempDir()
	if err := run(dir, nil, numpy == nil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("testdata", "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, committed) {
		t.Errorf("the fixtures written differ from testdata/fixtures.json, the ones the goldens were made from: regenerate the goldens (testdata/README.md)\n%s", raw)
	}
	if numpy == nil {
		out, err := exec.Command(python, "goldens.py", "--check", dir).CombinedOutput()
		t.Logf("goldens.py --check:\n%s", out)
		if err != nil {
			t.Errorf("goldens.py --check: %v", err)
		}
	} else {
		t.Logf("goldens.py --check skipped: %s with numpy is needed: %v", python, numpy)
	}
	var manifest []entry
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != len(modelgen.FormatFixtures) {
		t.Fatalf("%d fixtures in fixtures.json, %d in the set", len(manifest), len(modelgen.FormatFixtures))
	}
	for _, e := range manifest {
		if e.Kind != "mlx" {
			continue
		}
		f, _ := modelgen.FormatFixtureNamed(e.Name)
		if _, sum, err := f.Write(t.TempDir()); err != nil || sum != e.SHA256 {
			t.Fatalf("written again: %s %v, first %+v", sum, err, e)
		}
		break
	}
}
