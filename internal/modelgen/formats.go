package modelgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
)

// FormatFixture is one checkpoint of the format fixture set: a generated preset (Source) as it
// is, or converted by ConvertMLX (MLX) or ConvertFP8 (FP8). It is genreg.FormatFixture, with Write.
type FormatFixture struct {
	Name   string
	Source string // a preset of Presets
	MLX    *MLXOptions
	FP8    *FP8Options
}

// FormatFixtures are the published forms of the families' format presets (their MLX conversions,
// their FP8 releases' layouts), every family's (family/NAME/gen), sorted by name.
// cmd/format-fixtures writes them for the transformers goldens.
var FormatFixtures = formatFixtures()

func formatFixtures() []FormatFixture {
	out := make([]FormatFixture, 0, len(genreg.FormatFixtures))
	for _, f := range genreg.FormatFixtures {
		out = append(out, FormatFixture(f))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FormatFixtureNamed returns the fixture called name.
func FormatFixtureNamed(name string) (FormatFixture, bool) {
	for _, f := range FormatFixtures {
		if f.Name == name {
			return f, true
		}
	}
	return FormatFixture{}, false
}

// Write writes the fixture into root/Name, generating its source into root/Source first when
// that folder does not hold it yet, and returns the folder and the sha256 of its
// model.safetensors (hex), the bytes goldens made from it apply to. The same fixture always gives
// the same bytes.
func (f FormatFixture) Write(root string) (dir, sum string, err error) {
	spec, ok := Presets[f.Source]
	if !ok {
		return "", "", fmt.Errorf("modelgen: fixture %s: no preset %q", f.Name, f.Source)
	}
	src := filepath.Join(root, f.Source)
	if _, err := os.Stat(filepath.Join(src, safetensors.SingleFile)); err != nil {
		if err := Generate(src, spec); err != nil {
			return "", "", err
		}
	}
	dir = filepath.Join(root, f.Name)
	switch {
	case f.MLX != nil:
		err = ConvertMLX(src, dir, *f.MLX)
	case f.FP8 != nil:
		err = ConvertFP8(src, dir, *f.FP8)
	case f.Name != f.Source:
		err = fmt.Errorf("modelgen: fixture %s: neither a conversion nor its source %s", f.Name, f.Source)
	}
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, safetensors.SingleFile))
	if err != nil {
		return "", "", err
	}
	h := sha256.Sum256(b)
	return dir, hex.EncodeToString(h[:]), nil
}
