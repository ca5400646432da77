package strata

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/metal/mtl"
)

var (
	emuOnce sync.Once
	emuDev  mtl.Device
	emuErr  error
)

// emuDevice returns the MSL emulator (default options), skipping the test when no clang++ is
// installed to compile the kernels, and with -short (`make check`: the emulator runs the Metal
// kernels thread by thread, minutes for these tests; `make test` runs them).
func emuDevice(t testing.TB) mtl.Device {
	t.Helper()
	if testing.Short() {
		t.Skip("the Metal kernels on the MSL emulator: skipped with -short")
	}
	emuOnce.Do(func() { emuDev, emuErr = emu.Open(emu.Options{}) })
	if errors.Is(emuErr, mtl.ErrCompile) {
		t.Skipf("metal backend on the MSL emulator needs clang++ (Debian clang-16): %v", emuErr)
	}
	if emuErr != nil {
		t.Fatalf("emulator: %v", emuErr)
	}
	return emuDev
}

// loadTinyMetal opens the metal backend on the emulator and loads a tiny checkpoint.
func loadTinyMetal(t testing.TB, dir string) (*Device, *Model) {
	t.Helper()
	dev, err := Open(Options{Backend: "emu", MetalDevice: emuDevice(t)})
	if err != nil {
		t.Fatal(err)
	}
	if dev.Backend() != "emu" {
		t.Fatalf("backend %q, want emu", dev.Backend())
	}
	m, err := LoadModel(dev, testdata(dir), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return dev, m
}

// TestMetalGoldens prefills prompt a (96 tokens) of both tiny checkpoints on the metal backend
// (MSL emulator): all logits within 2e-3 of the transformers goldens and within 1e-4 of the cpu
// backend, every layer's residual stream within 2e-3 relative of the goldens, the qwen3next
// conv states and layer-3 K/V cache within 2e-3 relative, the qwen4exp layer-3 QSA selection
// equal to the goldens' mask; then the same prompt
// in two chunks (37 + 59 tokens) on metal equals the one-shot logits of its last 59 rows within
// 1e-4.
func TestMetalGoldens(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			dev, m := loadTinyMetal(t, tm.dir)
			cpu := loadTiny(t, tm.dir)
			g := openGoldens(t, tm.goldens)
			ids := g.i32("a.input_ids")
			ctx := context.Background()
			s, err := m.NewSession(SessionOptions{MaxContext: 128})
			if err != nil {
				t.Fatal(err)
			}
			got := goldenRun(t, tm.name, m, s, g, "a")
			cs, _ := cpu.NewSession(SessionOptions{MaxContext: 128})
			want, err := cs.Prefill(ctx, ids, PrefillOptions{AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := maxAbsDiff(got.Data, want.Data)
			t.Logf("metal prompt a: logits max|diff| vs cpu backend %.3g", d)
			if d > 1e-4 {
				t.Errorf("logits max|diff| vs cpu %.3g > 1e-4", d)
			}
			// Chunked: 37 then 59 tokens.
			c, _ := m.NewSession(SessionOptions{MaxContext: 128})
			if _, err := c.Prefill(ctx, ids[:37], PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			tail, err := c.Prefill(ctx, ids[37:], PrefillOptions{AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			d, _ = maxAbsDiff(tail.Data, got.Data[37*m.Vocab():])
			t.Logf("metal chunked 37+59 vs one-shot: logits max|diff| %.3g", d)
			if d > 1e-4 {
				t.Errorf("chunked logits max|diff| %.3g > 1e-4", d)
			}
			k := dev.Kernels()
			for _, v := range []string{"gemm_w16_BF16", "gdn_scan", "qsa_flash", "qsa_prep", "moe_route", "gr_norm_h_moec"} {
				if tm.name == "qwen3next" && strings.HasPrefix(v, "gr_") {
					continue
				}
				if !strings.Contains(k, v) {
					t.Errorf("Kernels() does not list %s: %s", v, k)
				}
			}
			if tm.name == "qwen4exp" {
				for _, v := range []string{"qsa_select", "ple_conv", "gr_stream_mean"} {
					if !strings.Contains(k, v) {
						t.Errorf("Kernels() does not list %s: %s", v, k)
					}
				}
			}
			t.Log(k)
		})
	}
}

// TestMetalSessionState: on the metal backend a failed (cancelled mid-prefill) call leaves the
// session bitwise unchanged, and a restored snapshot continues exactly as a fresh session.
func TestMetalSessionState(t *testing.T) {
	_, m := loadTinyMetal(t, "qwen4exp-tiny")
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("a.input_ids")
	ctx := context.Background()
	s, _ := m.NewSession(SessionOptions{MaxContext: 64})
	if _, err := s.Prefill(ctx, ids[:20], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Snapshot()
	mid, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err := s.Prefill(mid, ids[20:30], PrefillOptions{Progress: func(done, total int) {
		if done == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled prefill: %v, want ErrCancelled", err)
	}
	after, _ := s.Snapshot()
	if s.Position() != 20 || !before.Equal(after) {
		t.Fatalf("session changed by a failed prefill (position %d)", s.Position())
	}
	if _, err := s.Prefill(ctx, ids[30:40], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(before); err != nil {
		t.Fatal(err)
	}
	got, err := s.Prefill(ctx, ids[20:30], PrefillOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := m.NewSession(SessionOptions{MaxContext: 64})
	if _, err := fresh.Prefill(ctx, ids[:20], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Prefill(ctx, ids[20:30], PrefillOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("logit %d after restore %v != fresh %v (want bitwise equal)", i, got.Data[i], want.Data[i])
		}
	}
}

// TestOpenMetal: the metal backend needs a device: without one (no Metal on this platform) Open
// fails with ErrBackend; an injected emulator serves "metal", "emu" and "auto", and the backend
// names itself emu on it; "emu" alone opens an emulator of its own.
func TestOpenMetal(t *testing.T) {
	if runtime.GOOS != "darwin" {
		if _, err := Open(Options{Backend: "metal"}); !errors.Is(err, ErrBackend) {
			t.Errorf("metal without a device: %v, want ErrBackend", err)
		}
		d, err := Open(Options{Backend: "auto"})
		if err != nil || d.Backend() != "cpu" {
			t.Errorf("auto without a device: %v, %v; want cpu", d, err)
		}
	}
	var logs []string
	d, err := Open(Options{Backend: "auto", MetalDevice: emuDevice(t), Log: func(_ LogLevel, msg string) { logs = append(logs, msg) }})
	if err != nil || d.Backend() != "emu" {
		t.Fatalf("auto with an injected emulator: %v; want emu", err)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "auto -> emu") {
		t.Errorf("the choice is not logged: %q", logs)
	}
	for _, name := range []string{"metal", "emu"} {
		if d, err := Open(Options{Backend: name, MetalDevice: emuDevice(t)}); err != nil || d.Backend() != "emu" {
			t.Errorf("%s with an injected emulator: %v, %v; want emu", name, d.Backend(), err)
		}
	}
	own, err := Open(Options{Backend: "emu"})
	if err != nil || own.Backend() != "emu" {
		t.Fatalf("emu: %v", err)
	}
	if err := own.Close(); err != nil {
		t.Errorf("closing the emulator Open made: %v", err)
	}
}
