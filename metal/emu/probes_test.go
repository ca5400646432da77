package emu

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var probeMark = regexp.MustCompile(`// error: (.*)$`)

// TestProbes compiles each kernel of testdata/probes as mslc does. A probe that breaks an MSL rule
// marks the offending line with `// error: TEXT`: it must fail with an error at that line whose
// message contains TEXT (the rule). A probe without marks (ok_*.metal: recursion, function
// pointers, device atomics, address-space overloads, ...) must compile.
func TestProbes(t *testing.T) {
	files, err := filepath.Glob("testdata/probes/*.metal")
	if err != nil || len(files) == 0 {
		t.Fatalf("no probes: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".metal"), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int]string{}
			for i, line := range strings.Split(string(src), "\n") {
				if m := probeMark.FindStringSubmatch(line); m != nil {
					want[i+1] = strings.TrimSpace(m[1])
				}
			}
			legal := strings.HasPrefix(filepath.Base(f), "ok_")
			if legal != (len(want) == 0) {
				t.Fatalf("ok_ probes have no error marks, other probes at least one")
			}
			_, ds, err := CompileFile(f, CompileOptions{CacheDir: testCache(t)})
			if legal {
				if err != nil {
					t.Fatalf("legal probe refused:\n%s", formatDiagnostics(ds))
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want errors %v", want)
			}
			for line, text := range want {
				found := false
				for _, d := range ds {
					found = found || d.Severity == "error" && d.File == f && d.Line == line && strings.Contains(d.Msg, text)
				}
				if !found {
					t.Errorf("no error at line %d containing %q; got:\n%s", line, text, formatDiagnostics(ds))
				}
			}
		})
	}
}
