package tests

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestTestdataMatchesShared: the repository's testdata/ is an unchanged copy of the reference
// checkpoints and transformers goldens. Where the shared original is present beside the
// repository (../shared/testdata), every file must be byte-identical in both directions.
func TestTestdataMatchesShared(t *testing.T) {
	shared := filepath.Join("..", "..", "shared", "testdata")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared copy of the reference data beside the repository (%v): nothing to compare", err)
	}
	local := filepath.Join("..", "testdata")
	sums := func(root string) map[string][32]byte {
		out := map[string][32]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[rel] = sha256.Sum256(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := sums(local), sums(shared)
	for name, h := range b {
		if got, ok := a[name]; !ok {
			t.Errorf("testdata/%s is missing", name)
		} else if got != h {
			t.Errorf("testdata/%s differs from the shared original", name)
		}
	}
	for name := range a {
		if _, ok := b[name]; !ok {
			t.Errorf("testdata/%s is not in the shared original", name)
		}
	}
	t.Logf("%d files compared", len(b))
}
