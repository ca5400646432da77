package strata

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteFileTemporaries: a failed write leaves the old file and no temporary; a killed run's
// temporary (its PID gone) is removed by the next write to that path, a live process's is not.
func TestWriteFileTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.state")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFile(path, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("a failed write changed the file: %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".out.state.tmp-*")); len(m) != 0 {
		t.Fatalf("temporaries left: %v", m)
	}
	// A process that has ended: its PID is free (the kernel may reuse it, but not within this test
	// on any sane system).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true to get a dead PID: %v", err)
	}
	dead := filepath.Join(dir, ".out.state.tmp-"+strconv.Itoa(cmd.Process.Pid)+"-123")
	live := filepath.Join(dir, ".out.state.tmp-"+strconv.Itoa(os.Getppid())+"-456")
	other := filepath.Join(dir, ".other.state.tmp-"+strconv.Itoa(cmd.Process.Pid)+"-789")
	for _, p := range []string{dead, live, other} {
		os.WriteFile(p, []byte("left by a run"), 0o644)
	}
	if err := WriteFile(path, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("file holds %q", b)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Error("the temporary of a process that has ended was not removed")
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: a live process's temporary, or another file's", filepath.Base(p))
		}
	}
}

// TestStateFileNotRegular: a directory or a FIFO given as a state file is refused as such, not
// read as a file of 0 bytes or waited on (a FIFO blocks its opener until a writer comes).
func TestStateFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadStateInfo(dir)
	if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "state file "+dir+": is a directory, not a state file") {
		t.Fatalf("err = %v", err)
	}
	// A FIFO: refused without opening it (which would wait for a writer).
	fifo := filepath.Join(dir, "fifo.state")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadStateInfo(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "is not a regular file") {
			t.Fatalf("a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO as a state file blocked")
	}
}
