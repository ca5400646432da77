//go:build unix

package gguf

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNotRegular: a FIFO or a directory given as a GGUF file is refused at once, before it is
// opened (opening a FIFO waits for a writer), by both Open and OpenHeader.
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "m.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, p := range []string{fifo, dir} {
		for name, open := range map[string]func(string) (*File, error){"Open": Open, "OpenHeader": OpenHeader} {
			done := make(chan error, 1)
			go func() { _, err := open(p); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), p) {
					t.Errorf("%s(%s): %v, want ErrFormat naming the file as not a regular file", name, p, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s(%s) still waiting after 10 s", name, p)
			}
		}
	}
}
