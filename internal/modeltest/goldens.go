package modeltest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
)

// formatGoldens is the folder of the format fixture set's transformers goldens, beside the
// command and script that made them (its README says how).
var formatGoldens = filepath.Join("internal", "modelgen", "cmd", "format-fixtures", "testdata")

// GoldenTol is the largest |logit - golden| a golden case allows: float32 kernels against a
// float64 reference over a few hundred tokens.
const GoldenTol = 1e-4

// FormatGoldens are transformers' float64 logits of the format fixtures (modelgen.FormatFixtures)
// on the values each file holds, rounded to float32 (NAME.a.logits [35, vocab] and NAME.b.logits
// [61, vocab]: the rows a.rows and b.rows of prompts a and b, GoldenRows), with the sha256 of the
// model.safetensors each was computed from (fixtures.json).
type FormatGoldens struct {
	f    *safetensors.File
	sums map[string]string
}

// OpenFormatGoldens opens the goldens and their manifest, closed with the test.
func OpenFormatGoldens(t testing.TB) *FormatGoldens {
	t.Helper()
	dir := filepath.Join(Root(), formatGoldens)
	raw, err := os.ReadFile(filepath.Join(dir, "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []struct{ Name, SHA256 string }
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatalf("%s/fixtures.json: %v", formatGoldens, err)
	}
	g := &FormatGoldens{sums: map[string]string{}}
	for _, e := range manifest {
		g.sums[e.Name] = e.SHA256
	}
	if g.f, err = safetensors.Open(filepath.Join(dir, "goldens.safetensors")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.f.Close() })
	return g
}

// CheckSum fails the test unless sum (FormatFixture.Write's, hex) is the sha256 of the file the
// goldens of fixture name were computed from: a changed generator needs new goldens.
func (g *FormatGoldens) CheckSum(t testing.TB, name, sum string) {
	t.Helper()
	want, ok := g.sums[name]
	if !ok {
		t.Fatalf("%s: no goldens for this fixture (%s/fixtures.json)", name, formatGoldens)
	}
	if sum != want {
		t.Fatalf("%s: the written model.safetensors has sha256 %s, the goldens were made from %s: regenerate them (%s/README.md)", name, sum, want, formatGoldens)
	}
}

// Logits is the golden NAME.PROMPT.logits, [rows, vocab] row-major: the rows Rows(prompt) of
// the prompt's logits.
func (g *FormatGoldens) Logits(t testing.TB, name, prompt string) []float32 {
	t.Helper()
	return tensorF32(t, g.f, name+"."+prompt+".logits")
}

// Rows is GoldenRows of the format goldens.
func (g *FormatGoldens) Rows(t testing.TB, prompt string) []int {
	t.Helper()
	return GoldenRows(t, g.f, prompt)
}

// GoldenRows are the positions of the rows a goldens file of prompts a and b keeps of a prompt's
// logits: its tensor PROMPT.rows (int32) where it has one, nil (every row) otherwise. The logit
// goldens of the generated checkpoints keep, of prompt b (300 tokens), every fifth row and the
// last (b.rows: 0, 5, ..., 295, 299); those of the format fixtures and the MLX conversions keep,
// of prompt a (96 tokens), every third row, the rows where the chunked cases split and the last
// (a.rows: 0, 3, ..., 93, 37, 38, 95; Qwen3.5's keep every row of prompt a, which the Python
// tests of the mlx-lm reference read whole).
func GoldenRows(t testing.TB, f *safetensors.File, prompt string) []int {
	t.Helper()
	tn, err := f.Tensor(prompt + ".rows")
	if err != nil {
		return nil
	}
	v, err := tn.Int32()
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int, len(v))
	for i, r := range v {
		rows[i] = int(r)
	}
	return rows
}

// SelectRows returns rows (nil: all) of x [T, vocab] row-major, in that order; a row past the end
// of x fails t.
func SelectRows(t testing.TB, x []float32, rows []int, vocab int) []float32 {
	t.Helper()
	if rows == nil {
		return x
	}
	out := make([]float32, 0, len(rows)*vocab)
	for _, r := range rows {
		if r < 0 || (r+1)*vocab > len(x) {
			t.Fatalf("golden row %d outside the %d rows of the logits", r, len(x)/vocab)
		}
		out = append(out, x[r*vocab:(r+1)*vocab]...)
	}
	return out
}

// tensorF32 reads tensor name of a goldens file as float32, failing t when it cannot.
func tensorF32(t testing.TB, f *safetensors.File, name string) []float32 {
	t.Helper()
	tn, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Compare runs format fixture name (written in dir, its sum checked) on the CPU and, unless
// -short, on the emulator, and fails the test where a case's logits (the rows the goldens keep)
// are more than GoldenTol from the goldens: prompt a one-shot, prompt a in calls of 37 + 1 + rest,
// prompt b one-shot. It logs every case's max|diff| and returns the CPU logits of prompt a
// one-shot at the rows the goldens keep (those of Logits(name, "a")).
func (g *FormatGoldens) Compare(t *testing.T, name, dir string) []float32 {
	t.Helper()
	a, b := PromptIDs(t, "a"), PromptIDs(t, "b")
	cases := []struct {
		what, prompt string
		ids          []int32
		splits       []int
	}{{"a one-shot", "a", a, nil}, {"a in calls of 37 + 1 + rest", "a", a, []int{37, 1}}, {"b one-shot", "b", b, nil}}
	var out []float32
	for _, backend := range []string{"cpu", "emu"} {
		if backend == "emu" && testing.Short() {
			continue
		}
		m := Load(t, backend, dir)
		for _, c := range cases {
			got := SelectRows(t, Prefill(t, m, c.ids, c.splits...), g.Rows(t, c.prompt), m.Vocab())
			d := MaxAbsDiff(got, g.Logits(t, name, c.prompt))
			t.Logf("%s on %s, prompt %s: max|diff| %.3g against transformers float64", name, backend, c.what, d)
			if d > GoldenTol {
				t.Errorf("%s on %s, prompt %s: max|diff| %.3g > %g", name, backend, c.what, d, GoldenTol)
			}
			if backend == "cpu" && out == nil {
				out = got
			}
		}
	}
	return out
}
