package tempfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// TestTemporaries: Create names its file .BASE.tmp-PID-*; RemoveStale removes a temporary of a
// process that has ended and keeps this process's and another base's; RemoveOwn removes this
// process's temporaries of every base and keeps the ended process's of another directory.
func TestTemporaries(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("liveness is told on unix systems only")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true command:", err)
	}
	dead := strconv.Itoa(cmd.ProcessState.Pid()) // ended and reaped
	dir, other := t.TempDir(), t.TempDir()
	f, err := Create(dir, "out.gguf")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	own := f.Name()
	if want := filepath.Join(dir, ".out.gguf.tmp-"+strconv.Itoa(os.Getpid())+"-"); len(own) <= len(want) || own[:len(want)] != want {
		t.Fatalf("Create named %s, want %s*", own, want)
	}
	stale := filepath.Join(dir, ".out.gguf.tmp-"+dead+"-1")
	otherBase := filepath.Join(dir, ".other.gguf.tmp-"+dead+"-1")
	otherDir := filepath.Join(other, ".out.gguf.tmp-"+dead+"-1")
	for _, p := range []string{stale, otherBase, otherDir} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	RemoveStale(dir, "out.gguf")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(stale) || !exists(own) || !exists(otherBase) {
		t.Fatalf("after RemoveStale: stale %v (want gone), own %v, other base %v (want kept)", exists(stale), exists(own), exists(otherBase))
	}
	RemoveOwn(dir)
	RemoveOwn(other)
	if exists(own) || !exists(otherBase) || !exists(otherDir) {
		t.Fatalf("after RemoveOwn: own %v (want gone), the ended process's %v, %v (want kept)", exists(own), exists(otherBase), exists(otherDir))
	}
}
