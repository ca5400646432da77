package strata

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
)

// TestComputeOption: LoadOptions.Compute takes the mode names ("" being f32) and says what ran
// (Model.Compute); another name is ErrInvalidArgument naming it, before anything is read; a
// mode other than f32 on the emulator's Metal backend is refused as a CPU option, f32 there
// reports the Metal store's f32; and the Metal store asked for int8 directly (op.WeightOptions)
// says it ignores it.
func TestComputeOption(t *testing.T) {
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"", "f32", "bf16", "int8"} {
		m, err := LoadModel(dev, testdata("qwen3next-tiny"), LoadOptions{Compute: mode})
		if err != nil {
			t.Fatalf("%q: %v", mode, err)
		}
		want := mode
		if want == "" {
			want = "f32"
		}
		if !strings.HasPrefix(m.Compute(), want) {
			t.Errorf("%q: Compute() = %q", mode, m.Compute())
		}
		m.Close()
	}
	for _, bad := range []string{"fp16", "Int8", "bf16 "} {
		_, err := LoadModel(dev, "/nonexistent", LoadOptions{Compute: bad})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("%q: %v, want ErrInvalidArgument naming it", bad, err)
		}
	}
	if testing.Short() {
		return
	}
	emu, err := Open(Options{Backend: "emu"})
	if err != nil {
		t.Skipf("no emulator: %v", err)
	}
	defer emu.Close()
	_, err = LoadModel(emu, testdata("qwen3next-tiny"), LoadOptions{Compute: "int8"})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "CPU option") {
		t.Errorf("int8 on emu: %v, want ErrInvalidArgument (a CPU option)", err)
	}
	m, err := LoadModel(emu, testdata("qwen3next-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Compute() != "f32" {
		t.Errorf("emu f32: Compute() = %q", m.Compute())
	}
	if got := emu.Ops().NewWeights(op.WeightOptions{Compute: op.ComputeInt8}).Compute(); !strings.Contains(got, "int8 ignored") {
		t.Errorf("metal store asked for int8: %q", got)
	}
}
