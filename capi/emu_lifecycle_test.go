//go:build cgo

package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/strata"
)

// TestEmuCyclesReleaseAll opens the emu backend (STRATA_BACKEND_EMU, an emulator of its own),
// loads the tiny model, prefills and frees everything through the C ABI's functions 20 times:
// the emulator then counts no live library, pipeline, buffer or command buffer (each would keep
// a Metal device alive), and no goroutine is left behind.
func TestEmuCyclesReleaseAll(t *testing.T) {
	if testing.Short() {
		t.Skip("20 emulated prefills; skipped with -short")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	before := emu.LiveObjects()
	if before.Total() != 0 {
		t.Fatalf("live emulator objects before the test: %v", before)
	}
	for i := range 20 {
		dev, err := deviceOpen(3)
		if err != nil {
			t.Fatal(err)
		}
		model, err := modelLoad(dev, testdata(tinyQ4), strata.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := newSession(t, model, 8)
		prefill(t, s, []int32{3, 1, 4, 1}, false, 512)
		if l := emu.LiveObjects(); l.Libraries == 0 || l.Pipelines == 0 || l.Buffers == 0 {
			t.Fatalf("cycle %d: the prefill left no library, pipeline or buffer alive while the model is open (%v): the count sees nothing", i, l)
		}
		for _, err := range []error{sessionFree(s), modelFree(model), deviceFree(dev)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		if l := emu.LiveObjects(); l.Total() != 0 {
			t.Fatalf("cycle %d: after Close: %v still live", i, l)
		}
	}
}
