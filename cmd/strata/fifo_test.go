package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
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

// cliChildEnv holds the arguments (JSON) with which TestCLIChild runs the command.
const cliChildEnv = "STRATA_CLI_CHILD_ARGS"

// TestCLIChild runs the command with the arguments of $STRATA_CLI_CHILD_ARGS, in a process a
// test starts for it; it is skipped otherwise.
func TestCLIChild(t *testing.T) {
	raw := os.Getenv(cliChildEnv)
	if raw == "" {
		t.Skip("runs in a child process of TestTokensFileFIFOSignal")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	if _, err := runMain(t, args...); err != nil {
		t.Fatal(err)
	}
}

// TestTokensFileFIFOSignal: SIGTERM ends a run whose --tokens-file is a FIFO no process writes.
// Opening the FIFO waits for a writer, which only the signal's default action ends: the file is
// read before the run catches SIGINT and SIGTERM.
func TestTokensFileFIFOSignal(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ids")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	raw, _ := json.Marshal([]string{"--model", tinyQ4, "--backend", "cpu", "--tokens-file", fifo})
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCLIChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), cliChildEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the run ended before any signal: %v\n%s", err, out.String())
	case <-time.After(2 * time.Second): // waiting in the FIFO's open by now
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the run succeeded:\n%s", out.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the run still waited on the --tokens-file FIFO 15 s after SIGTERM:\n%s", out.String())
	}
}
