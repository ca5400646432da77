package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputsToFIFO: --save-state and --save-logits naming an existing FIFO write into it (as
// into /dev/null or /dev/stdout) and leave it a FIFO, not a file renamed over it; with no process
// reading it, the run fails naming it instead of waiting for a reader.
func TestOutputsToFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "out")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	isFIFO := func() bool {
		fi, err := os.Lstat(fifo)
		return err == nil && fi.Mode()&os.ModeNamedPipe != 0
	}
	_, err := runMain(t, "--model", tinyQ4, "--backend", "cpu", "--tokens", "7", "--save-state", fifo)
	if err == nil || !strings.Contains(err.Error(), "a FIFO with no reader") {
		t.Errorf("--save-state to a FIFO with no reader: %v", err)
	}
	if !isFIFO() {
		t.Fatal("--save-state replaced the FIFO")
	}
	for _, c := range []struct{ flag, magic string }{{"--save-state", "strata.session"}, {"--save-logits", "\x93NUMPY"}} {
		// The test reads, holding a write end too so that opening does not wait.
		r, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte)
		go func() { b, _ := io.ReadAll(r); got <- b }()
		_, err = runMain(t, "--model", tinyQ4, "--backend", "cpu", "--tokens", "7", c.flag, fifo)
		r.SetReadDeadline(time.Now().Add(2 * time.Second)) // ends ReadAll once the pipe is drained
		b := <-got
		r.Close()
		if err != nil {
			t.Fatalf("%s to a FIFO: %v", c.flag, err)
		}
		if !isFIFO() {
			t.Fatalf("%s replaced the FIFO", c.flag)
		}
		if !bytes.Contains(b[:min(len(b), 4096)], []byte(c.magic)) {
			t.Errorf("%s: the FIFO's reader got %d bytes without %q", c.flag, len(b), c.magic)
		}
	}
}
