package strata

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoryLimitChild is the child of TestMemoryLimitUlimit and TestMemoryLimitCgroup (run
// only with STRATA_OOM_CHILD set): a one-step prefill whose activations need about 8 GiB, under
// the limit its parent set, must be refused with ErrOutOfMemory (never reach Go's fatal "out of
// memory"); it prints the error.
func TestMemoryLimitChild(t *testing.T) {
	if os.Getenv("STRATA_OOM_CHILD") == "" {
		t.Skip("run by TestMemoryLimitUlimit and TestMemoryLimitCgroup")
	}
	m := loadTiny(t, "qwen4exp-tiny")
	T := int((8 << 30) / (m.stepBytes(1024) / 1024))
	s, err := m.NewSession(SessionOptions{MaxContext: T})
	if err != nil {
		fmt.Printf("session: %v\n", err)
		return
	}
	defer s.Close()
	ids := make([]int32, T)
	_, err = s.Prefill(context.Background(), ids, PrefillOptions{Step: T})
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("prefill of %d tokens in one step (%.0f MiB): %v, want ErrOutOfMemory", T, mib(m.stepBytes(T)), err)
	}
	fmt.Printf("prefill: %v\n", err)
}

// runOOMChild runs TestMemoryLimitChild through sh -c "setup; exec TESTBINARY" and returns its
// output.
func runOOMChild(t *testing.T, setup string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", setup+` && exec "$0" -test.run '^TestMemoryLimitChild$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "STRATA_OOM_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed (%v):\n%s", err, out)
	}
	return string(out)
}

// TestMemoryLimitUlimit: under `ulimit -v` (RLIMIT_AS) of 4 GiB, far below MemAvailable here, a
// prefill step that needs about 8 GiB gets ErrOutOfMemory naming RLIMIT_AS.
func TestMemoryLimitUlimit(t *testing.T) {
	if kb, ok := procField("/proc/meminfo", "MemAvailable:"); !ok || kb<<10 < 10<<30 {
		t.Skip("needs MemAvailable above 10 GiB, so that the 4 GiB RLIMIT_AS is the limit that applies")
	}
	out := runOOMChild(t, "ulimit -v 4194304")
	t.Log(out)
	if !strings.Contains(out, "prefill: ") || !strings.Contains(out, "limit: RLIMIT_AS (ulimit -v) of 4096 MiB") {
		t.Fatalf("want the prefill refused naming RLIMIT_AS:\n%s", out)
	}
}

// TestMemoryLimitCgroup: in a memory cgroup of 1 GiB (made below this process's own, v1 or v2),
// the same prefill gets ErrOutOfMemory naming the cgroup's limit. Skipped, saying why, where
// the test cannot make one (no permission, no memory controller).
func TestMemoryLimitCgroup(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	var dir, limitFile, what string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) != 3:
		case strings.Contains(","+parts[1]+",", ",memory,"):
			dir, limitFile, what = filepath.Join(cgroupRoot, "memory", parts[2]), "memory.limit_in_bytes", "cgroup v1 memory.limit_in_bytes of 1024 MiB"
		case parts[0] == "0" && parts[1] == "" && dir == "":
			dir, limitFile, what = filepath.Join(cgroupRoot, parts[2]), "memory.max", "cgroup v2 memory.max of 1024 MiB"
		}
	}
	if dir == "" {
		t.Skip("this process is in no memory cgroup")
	}
	cg := filepath.Join(dir, fmt.Sprintf("strata-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	defer os.Remove(cg)
	if err := os.WriteFile(filepath.Join(cg, limitFile), []byte("1073741824"), 0o644); err != nil {
		t.Skipf("cannot set %s of a new cgroup (no memory controller there?): %v", limitFile, err)
	}
	out := runOOMChild(t, fmt.Sprintf("echo $$ > %s/cgroup.procs", cg))
	t.Log(out)
	if !strings.Contains(out, "prefill: ") || !strings.Contains(out, "limit: "+what+" in "+cg) {
		t.Fatalf("want the prefill refused naming the cgroup's limit:\n%s", out)
	}
}
