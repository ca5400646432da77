// Command format-fixtures writes the format fixture set (modelgen.FormatFixtures, every family's):
// the families' generated format presets and their mlx-vlm, mlx-lm and FP8 forms, the
// inputs of the transformers goldens made by goldens.py beside this file (kept, with the
// fixtures.json they were made from, in testdata/; its README says how):
//
//	go run ./internal/modelgen/cmd/format-fixtures DIR
//	python3 internal/modelgen/cmd/format-fixtures/goldens.py DIR testdata/goldens/model_goldens.safetensors OUT
//
// It writes DIR/NAME for every fixture (or the NAMEs given) and DIR/fixtures.json: per fixture
// its source, its kind and format, how it stores the zero-centred gains (as written, and as
// strata reads them), and the sha256 of its model.safetensors. With -dequantized it also writes DIR/_float32/NAME, the float32 Hugging Face
// checkpoint of each converted fixture's exact weights (modelgen.Dequantize), against which
// `goldens.py --check` tests its own decoders.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/strata"
)

// entry is one fixture of fixtures.json.
type entry struct {
	Name      string `json:"name"`
	Source    string `json:"source"`
	ModelType string `json:"model_type"`
	Kind      string `json:"kind"` // "hf", "mlx" or "fp8"
	// Quantization is the config's block in words; Formats the quantized modules' formats.
	Quantization string   `json:"quantization,omitempty"`
	Formats      []string `json:"formats,omitempty"`
	// GainsWritten is how the writer stored the zero-centred gains ("w" or "1+w"), GainsRead how
	// strata reads them (Inspect's finding); goldens.py checks both against the stored values.
	GainsWritten string `json:"gains_written"`
	GainsRead    string `json:"gains_read"`
	SHA256       string `json:"sha256"` // of model.safetensors
}

func gains(shifted bool) string {
	if shifted {
		return "1+w"
	}
	return "w"
}

func main() {
	deq := flag.Bool("dequantized", false, "also write DIR/_float32/NAME, the float32 checkpoint of each converted fixture's weights")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: format-fixtures [-dequantized] DIR [NAME...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Args()[1:], *deq); err != nil {
		fmt.Fprintln(os.Stderr, "format-fixtures:", err)
		os.Exit(1)
	}
}

func run(root string, names []string, deq bool) error {
	fixtures := modelgen.FormatFixtures
	if len(names) > 0 {
		fixtures = nil
		for _, n := range names {
			f, ok := modelgen.FormatFixtureNamed(n)
			if !ok {
				return fmt.Errorf("no fixture %q", n)
			}
			fixtures = append(fixtures, f)
		}
	}
	var out []entry
	for _, f := range fixtures {
		dir, sum, err := f.Write(root)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		info, err := strata.Inspect(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		e := entry{Name: f.Name, Source: f.Source, ModelType: info.ModelType, Kind: "hf", Quantization: info.Quantization,
			GainsWritten: gains(f.MLX != nil && !f.MLX.GainsAsW), GainsRead: gains(info.ShiftedGains), SHA256: sum}
		switch {
		case f.MLX != nil:
			e.Kind = "mlx"
		case f.FP8 != nil:
			e.Kind = "fp8"
		}
		for _, q := range info.Quantized {
			e.Formats = append(e.Formats, q.Format)
		}
		if deq && e.Kind != "hf" {
			if err := modelgen.Dequantize(dir, filepath.Join(root, "_float32", f.Name), family.Fused); err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		out = append(out, e)
		fmt.Printf("%-28s %-4s %s\n", f.Name, e.Kind, e.Quantization)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "fixtures.json"), append(b, '\n'), 0o644)
}
