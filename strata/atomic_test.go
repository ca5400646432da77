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

// TestWriteFileFIFO: a path that exists and is not a regular file (a FIFO here; a device such as
// /dev/null alike) is written in place, not replaced by a regular file renamed over it; a FIFO
// that no process reads is refused at once instead of waited on.
func TestWriteFileFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out.state")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	isFIFO := func() bool {
		fi, err := os.Lstat(fifo)
		return err == nil && fi.Mode()&os.ModeNamedPipe != 0
	}
	done := make(chan error, 1)
	go func() {
		done <- WriteFile(fifo, func(w io.Writer) error { _, err := w.Write([]byte("unread")); return err })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "a FIFO with no reader") {
			t.Errorf("a FIFO with no reader: err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writing a FIFO with no reader blocked")
	}
	if !isFIFO() {
		t.Fatal("the FIFO was replaced by a file")
	}
	// A reader (this test, which also holds a write end so that opening does not block).
	r, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := "the whole content"
	if err := WriteFile(fifo, func(w io.Writer) error { _, err := w.Write([]byte(want)); return err }); err != nil {
		t.Fatal(err)
	}
	if !isFIFO() {
		t.Fatal("the FIFO was replaced by a file")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".out.state.tmp-*")); len(m) != 0 {
		t.Fatalf("temporaries left: %v", m)
	}
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
		t.Fatalf("the reader got %q, %v; want %q", got, err, want)
	}
}
