package strata

import (
	"context"
	"errors"
	"path/filepath"
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

// TestComputeModeKeepsStatesApart: a state file records the compute mode of the model that
// wrote it and loads only into a model of that mode (ErrInvalidArgument naming both, the
// session unchanged); prompt caches of models in different modes sharing a directory never
// serve each other's checkpoints.
func TestComputeModeKeepsStatesApart(t *testing.T) {
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	load := func(mode string) *Model {
		m, err := LoadModel(dev, testdata("qwen3next-tiny"), LoadOptions{Compute: mode})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	f32, i8 := load("f32"), load("int8")
	prompt := testPrompt(f32, 24, 3)
	ctx := context.Background()
	si8 := must(i8.NewSession(SessionOptions{}))
	defer si8.Close()
	if _, err := si8.Prefill(ctx, prompt, PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "int8.safetensors")
	if err := si8.SaveStateFile(path); err != nil {
		t.Fatal(err)
	}
	if in, err := ReadStateInfo(path); err != nil || in.Compute != "int8" {
		t.Fatalf("ReadStateInfo: %+v, %v; want compute int8", in, err)
	}
	sf := must(f32.NewSession(SessionOptions{}))
	defer sf.Close()
	if _, err := sf.Prefill(ctx, prompt[:5], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	before := must(sf.Snapshot())
	err = sf.LoadStateFile(path)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "compute mode int8") || !strings.Contains(err.Error(), "runs f32") {
		t.Fatalf("int8 state into an f32 model: %v, want ErrInvalidArgument naming both modes", err)
	}
	unchanged(t, sf, before, "refused int8 state")
	s2 := must(i8.NewSession(SessionOptions{}))
	defer s2.Close()
	if err := s2.LoadStateFile(path); err != nil || s2.Position() != len(prompt) {
		t.Fatalf("int8 state into an int8 model: %v (position %d)", err, s2.Position())
	}

	dir := t.TempDir()
	for _, c := range []struct {
		m      *Model
		reused int
	}{{i8, 0}, {f32, 0}, {i8, len(prompt)}, {f32, len(prompt)}} {
		pc, err := NewPromptCache(c.m, PromptCacheOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s := must(c.m.NewSession(SessionOptions{}))
		_, res, err := pc.Prefill(ctx, s, prompt, PrefillOptions{})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Reused != c.reused {
			t.Errorf("%s cache over a shared directory: reused %d of %d, want %d", c.m.mode, res.Reused, len(prompt), c.reused)
		}
	}
}
