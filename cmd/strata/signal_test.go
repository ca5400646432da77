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
