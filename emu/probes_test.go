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

// Diagnostics cite the file, line and column the user wrote, through -include files, runs of
// spaces, comments and macros; rule checks and clang's own errors alike.
func TestDiagnosticPositions(t *testing.T) {
	inc := []string{"testdata/include/params.h"}
	if _, ds, err := CompileFile("testdata/include/uses_params.metal", CompileOptions{Includes: inc, CacheDir: testCache(t)}); err != nil {
		t.Fatalf("with -include: %v\n%s", err, formatDiagnostics(ds))
	}
	if _, _, err := CompileFile("testdata/include/uses_params.metal", CompileOptions{CacheDir: testCache(t)}); err == nil {
		t.Error("without -include: ScaleParams accepted undeclared")
	}
	type at struct {
		file      string
		line, col int
		text      string
	}
	check := func(ds []Diagnostic, want []at) {
		t.Helper()
		for _, w := range want {
			found := false
			for _, d := range ds {
				found = found || d.Severity == "error" && d.File == w.file && d.Line == w.line && d.Col == w.col && strings.Contains(d.Msg, w.text)
			}
			if !found {
				t.Errorf("no error at %s:%d:%d containing %q; got:\n%s", w.file, w.line, w.col, w.text, formatDiagnostics(ds))
			}
		}
	}
	// goto: a rule the pre-pass checks.
	_, ds, err := CompileFile("testdata/include/errors.metal", CompileOptions{Includes: inc, CacheDir: testCache(t)})
	if err == nil {
		t.Fatal("errors.metal accepted")
	}
	check(ds, []at{{"testdata/include/errors.metal", 7, 16, "goto"}})
	// With the rule checks lax, clang's address-space error on line 6 remains, at the declared
	// variable (column 62, after runs of spaces, a macro and a comment).
	_, ds, err = CompileFile("testdata/include/errors.metal", CompileOptions{Includes: inc, Lax: true, CacheDir: testCache(t)})
	if err == nil {
		t.Fatal("errors.metal accepted with -lax")
	}
	check(ds, []at{{"testdata/include/errors.metal", 6, 62, "distinct address spaces"}})
	// A rule broken in the prepended header is reported there.
	_, ds, err = CompileFile("testdata/include/uses_params.metal", CompileOptions{Includes: []string{"testdata/include/bad_header.h"}, CacheDir: testCache(t)})
	if err == nil {
		t.Fatal("bad header accepted")
	}
	check(ds, []at{{"testdata/include/bad_header.h", 7, 1, "constant address space"}})
}

// Syntax errors are reported at the user's source as clang sees them: an unterminated string
// (a preprocessor warning must not leak into the kernel's tokens), an error after a raw string
// literal spanning lines at program scope, and an unclosed brace (the generated launchers it
// swallows are not reported).
func TestSyntaxErrorsReported(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, src string
		line      int
		text      string
	}{
		{"unterminated.metal", "kernel void k(device float* a [[buffer(0)]]) {\n  a[0] = \"x\n}\n", 2, "missing terminating '\"' character"},
		{"unterminated_global.metal", "#include <metal_stdlib>\nconstant char* s = \"abc;\nkernel void k(device float* a [[buffer(0)]]) { a[0] = 1; }\n", 2, "missing terminating"},
		{"raw_string.metal", "constant char* s = R\"x(a\nb)x\";\nkernel void k(device float* a [[buffer(0)]]) { a[0] = j; }\n", 3, "undeclared identifier 'j'"},
		{"unterminated_char.metal", "constant char s = 'a;\nkernel void k(device float* a [[buffer(0)]]) { a[0] = 1; }\n", 1, "missing terminating ' character"},
		{"unclosed.metal", "kernel void k(device float* a [[buffer(0)]]) {\n  a[0] = 1.0f;\n  {\n}\n", 1, "expected '}'"},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, ds, err := CompileFile(path, CompileOptions{CacheDir: testCache(t)})
		if err == nil {
			t.Errorf("%s accepted", c.name)
			continue
		}
		found := false
		for _, d := range ds {
			if d.File == launcherFile || strings.Contains(d.Msg, "must return void") {
				t.Errorf("%s: diagnostic %v is not about the user's source", c.name, d)
			}
			found = found || d.Severity == "error" && d.File == path && d.Line == c.line && strings.Contains(d.Msg, c.text)
		}
		if !found {
			t.Errorf("%s: no error at line %d containing %q; got:\n%s", c.name, c.line, c.text, formatDiagnostics(ds))
		}
	}
}
