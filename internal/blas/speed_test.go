package blas

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakernels/strata/internal/panel"
)

// fakeTimes is a measurement that returns fixed times and counts its calls.
type fakeTimes struct {
	native, own time.Duration
	calls       int
}

func (f *fakeTimes) measure(native, own backend) (time.Duration, time.Duration) {
	f.calls++
	return f.native, f.own
}

// readCache parses the cache file at path.
func readCache(t *testing.T, path string) speedCache {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c speedCache
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("cache %s: %v", path, err)
	}
	return c
}

// TestBySpeedCache: the choice is measured once per key and then read from the cache; a key
// the cache does not hold is measured and added beside the others; the native library is
// replaced only when strata's GEMM is faster by more than speedMargin; a corrupt file, an
// entry with an unknown choice, an unwritable cache and no cache directory are measured around
// and said.
func TestBySpeedCache(t *testing.T) {
	native, own := fakeNative{}, strataBackend{panel.Best()}
	dir := t.TempDir()
	path := filepath.Join(dir, "strata", "blas-speed.json")
	check := func(what string, f *fakeTimes, key, path string, pathErr error, want backend, calls int, notes ...string) {
		t.Helper()
		b, note := bySpeed(native, own, key, path, pathErr, f.measure)
		if b != want || f.calls != calls {
			t.Errorf("%s: picked %s after %d measurements, want %s after %d (%s)", what, b.name(), f.calls, want.name(), calls, note)
		}
		for _, n := range notes {
			if !strings.Contains(note, n) {
				t.Errorf("%s: note %q does not say %q", what, note, n)
			}
		}
		t.Logf("%s: %s", what, note)
	}

	tie := &fakeTimes{native: 101 * time.Millisecond, own: 100 * time.Millisecond}
	check("first use", tie, "A", path, nil, native, 1, "0.99x the speed of strata", "within the 2%", "measured now", "cached in "+path)
	if e := readCache(t, path).Entries["A"]; e.Choice != "native" || e.NativeMs != 101 || e.StrataMs != 100 || e.Strata != own.name() {
		t.Fatalf("cached entry %+v", e)
	}
	faster := &fakeTimes{native: 110 * time.Millisecond, own: 100 * time.Millisecond}
	check("second use", faster, "A", path, nil, native, 0, "cached in "+path)
	check("another key", faster, "B", path, nil, own, 1, "picked by speed: 1.10x the speed of fake native 1.0", "measured now")
	if c := readCache(t, path); len(c.Entries) != 2 || c.Entries["A"].Choice != "native" || c.Entries["B"].Choice != "strata" {
		t.Fatalf("cache after two keys: %+v", c)
	}
	check("second use of B", tie, "B", path, nil, own, 1, "cached in")

	if err := os.WriteFile(path, []byte(`{"entries": {"A": `), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fakeTimes{native: 90 * time.Millisecond, own: 100 * time.Millisecond}
	check("corrupt cache", f, "A", path, nil, native, 1, "unreadable", "measured again", "cached in")
	if c := readCache(t, path); len(c.Entries) != 1 || c.Entries["A"].Choice != "native" {
		t.Fatalf("cache rewritten after corruption: %+v", c)
	}

	c := readCache(t, path)
	e := c.Entries["A"]
	e.Choice = "gonum"
	c.Entries["A"] = e
	if err := writeCache(path, c); err != nil {
		t.Fatal(err)
	}
	f = &fakeTimes{native: 200 * time.Millisecond, own: 100 * time.Millisecond}
	check("unknown choice", f, "A", path, nil, own, 1, `choice "gonum"`, "measured again")

	// A regular file where the cache directory should be: nothing can be written.
	blocked := filepath.Join(dir, "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f = &fakeTimes{native: 100 * time.Millisecond, own: 100 * time.Millisecond}
	bad := filepath.Join(blocked, "blas-speed.json")
	check("unwritable", f, "A", bad, nil, native, 1, "measured now, not cached:")
	check("unwritable again", f, "A", bad, nil, native, 2, "not cached:")

	// A directory where the file should be: unreadable and unwritable.
	asDir := filepath.Join(dir, "asdir")
	if err := os.Mkdir(asDir, 0o755); err != nil {
		t.Fatal(err)
	}
	check("directory", f, "A", asDir, nil, native, 3, "unreadable", "not cached:")

	check("no cache directory", f, "A", "", errors.New("$HOME is not defined"), native, 4,
		"not cached: no user cache directory: $HOME is not defined")
}

// countingBackend counts its products and does nothing else.
type countingBackend struct{ n *atomic.Int64 }

func (c countingBackend) name() string     { return "counting" }
func (c countingBackend) concurrent() bool { return true }
func (c countingBackend) sgemm(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int) {
	c.n.Add(1)
}

// measureSpeed times both implementations on every shape, in rounds after a warm-up.
func TestMeasureSpeedRunsEveryShape(t *testing.T) {
	var a, b atomic.Int64
	tn, ts := measureSpeed(countingBackend{&a}, countingBackend{&b})
	if tn < 0 || ts < 0 {
		t.Fatalf("times %v, %v", tn, ts)
	}
	if a.Load() != b.Load() || a.Load() < int64(4*len(speedShapes)) {
		t.Fatalf("%d and %d products for %d shapes", a.Load(), b.Load(), len(speedShapes))
	}
}

// The cache key names the CPU, both implementations and strata's kernel version, and changes
// with the native library.
func TestSpeedKey(t *testing.T) {
	own := strataBackend{panel.Best()}
	k := speedKey(fakeNative{}, own)
	for _, want := range []string{"fake native 1.0", own.name(), ownKernelVersion} {
		if !strings.Contains(k, want) {
			t.Errorf("key %q does not name %q", k, want)
		}
	}
	if speedKey(fakeNative{serial: true}, own) == k {
		t.Errorf("key %q does not change with the native library", k)
	}
	t.Logf("key: %s", k)
}
