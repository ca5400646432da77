package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMKeepsOutputs: SIGTERM during the prefill ends the run with the cancellation (as
// SIGINT does), and the existing --save-state and --save-logits files are left as they were,
// with no temporary file beside them.
func TestSIGTERMKeepsOutputs(t *testing.T) {
	// This test's own handler: a SIGTERM that arrives outside the run's must not end the test.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGTERM)
	defer signal.Stop(guard)
	dir := t.TempDir()
	state, logits := filepath.Join(dir, "s.state"), filepath.Join(dir, "l.npy")
	for _, p := range []string{state, logits} {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	_, err := runMain(t, "--model", tinyQ4, "--backend", "cpu", "--random-tokens", "60000", "--step", "64",
		"--max-context", "60000", "--save-state", state, "--save-logits", logits)
	if err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("a run sent SIGTERM: %v, want it cancelled", err)
	}
	for _, p := range []string{state, logits} {
		if b, _ := os.ReadFile(p); string(b) != "old" {
			t.Errorf("%s holds %q after the cancelled run", p, b)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d entries in the output directory, want the two files: %v", len(ents), ents)
	}
}

// TestSIGTERMStopsGeneration: SIGTERM while a generated model is first written (--inspect of
// the qwen3next slice, 2 GB, into an empty cache) ends the run with the cancellation within
// seconds, and the cache holds no model folder and no partial one.
func TestSIGTERMStopsGeneration(t *testing.T) {
	if testing.Short() {
		t.Skip("writes part of a 2 GB model")
	}
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGTERM)
	defer signal.Stop(guard)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	t0 := time.Now()
	_, err := runMain(t, "--inspect", "--preset", "qwen3next-slice")
	if err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("a first write sent SIGTERM: %v, want it cancelled", err)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("the cancelled write took %v", d)
	}
	ents, _ := os.ReadDir(filepath.Join(cache, "strata", "models"))
	if len(ents) != 0 {
		t.Errorf("the cache holds %v after the cancelled write, want nothing", ents)
	}
}
