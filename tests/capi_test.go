// Package tests holds strata's cross-language tests: libstrata is built into a temporary
// directory, and C programs (examples/c and tests/c) are compiled against include/strata.h and
// run against the tiny checkpoints and the transformers goldens.
package tests

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
)

const (
	header   = "../include/strata.h"
	tinyQ4   = "../testdata/qwen4exp-tiny"
	goldenQ4 = "../testdata/goldens/q4_model_goldens.safetensors"
)

var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cc returns the C compiler, skipping the test when there is none.
func cc(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no C compiler (cc, gcc or clang) on PATH: the C ABI tests need one")
	return ""
}

var lib struct {
	once sync.Once
	dir  string
	err  error
}

// library builds libstrata.so once into the test's temporary directory and returns it.
func library(t *testing.T) string {
	t.Helper()
	cc(t)
	if runtime.GOOS != "linux" {
		t.Skip("the C ABI tests build libstrata.so and run on Linux")
	}
	b := &lib
	b.once.Do(func() {
		b.dir = workDir
		args := []string{"build", "-buildmode=c-shared", "-o", filepath.Join(b.dir, "libstrata.so")}
		cmd := exec.Command("go", append(args, "../capi")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// compile builds a C11 program against include/strata.h and the library in libDir.
func compile(t *testing.T, libDir, src, name string) string {
	t.Helper()
	exe := filepath.Join(libDir, name)
	cmd := exec.Command(cc(t), "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I", "../include", src,
		"-L", libDir, "-lstrata", "-lpthread", "-lm", "-Wl,-rpath,"+libDir, "-o", exe)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return exe
}

// declaredFunctions lists the functions include/strata.h declares (comments removed).
func declaredFunctions(t *testing.T) []string {
	b, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	src := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(string(b), "")
	src = regexp.MustCompile(`//[^\n]*`).ReplaceAllString(src, "")
	var names []string
	// A declaration: a return type, the name, an argument list, a semicolon; typedefs of
	// function pointers ("(*name)") do not match.
	for _, m := range regexp.MustCompile(`(?m)^[A-Za-z_][\w \t\*]*?\b(strata_\w+)\s*\([^;{]*\)\s*;`).FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	return names
}

// TestHeaderMatchesExports: every function the header declares is exported by the library,
// and the library exports no other strata_ symbol.
func TestHeaderMatchesExports(t *testing.T) {
	dir := library(t)
	f, err := elf.Open(filepath.Join(dir, "libstrata.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC && strings.HasPrefix(s.Name, "strata") {
			exported[s.Name] = true
		}
	}
	declared := declaredFunctions(t)
	if len(declared) < 30 {
		t.Fatalf("parsed only %d declarations from %s: %v", len(declared), header, declared)
	}
	for _, name := range declared {
		if !exported[name] {
			t.Errorf("%s is declared in strata.h but not exported", name)
		}
		delete(exported, name)
	}
	for name := range exported {
		t.Errorf("%s is exported but not declared in strata.h", name)
	}
	t.Logf("%d functions declared and exported", len(declared))
}

func goldenPrompt(t *testing.T) ([]int32, []float32) {
	f, err := safetensors.Open(goldenQ4)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	it, err := f.Tensor("a.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := it.Int32()
	if err != nil {
		t.Fatal(err)
	}
	lt, err := f.Tensor("a.logits")
	if err != nil {
		t.Fatal(err)
	}
	logits, err := lt.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return ids, logits
}

func readF32(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestCExampleGoldens compiles examples/c/prefill.c, prefills prompt a of qwen4exp-tiny one-shot
// and in chunks of 37 through libstrata, and compares all logits with the transformers goldens.
func TestCExampleGoldens(t *testing.T) {
	dir := library(t)
	exe := compile(t, dir, "../examples/c/prefill.c", "strata-prefill")
	ids, want := goldenPrompt(t)
	var list []string
	for _, id := range ids {
		list = append(list, fmt.Sprint(id))
	}
	tokFile := filepath.Join(t.TempDir(), "ids.txt")
	if err := os.WriteFile(tokFile, []byte(strings.Join(list, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"one-shot", nil},
		{"chunks of 37", []string{"--chunk", "37"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "logits.f32")
			args := append(append([]string{"--all-logits", "--out", out}, c.args...), tinyQ4, "@"+tokFile)
			res, err := exec.Command(exe, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, res)
			}
			if !strings.Contains(string(res), "backend   cpu") || !strings.Contains(string(res), "prompt    96 tokens") {
				t.Fatalf("unexpected report:\n%s", res)
			}
			got := readF32(t, out)
			if len(got) != len(want) {
				t.Fatalf("%d logits, want %d", len(got), len(want))
			}
			var d float64
			for i := range got {
				d = math.Max(d, math.Abs(float64(got[i])-float64(want[i])))
			}
			t.Logf("max |diff| vs goldens %.3g\n%s", d, res)
			if d > 2e-3 {
				t.Fatalf("logits differ from the goldens: max |diff| %.3g > 2e-3", d)
			}
		})
	}
}

// TestCABIChecks runs tests/c/abi_checks.c: NULL pointers, wrong dtypes and shapes, freed,
// double-freed and forged handles, buffers too small, one session from two threads, many
// threads on one model, snapshots, state files and the prompt cache, the op descriptors. (The
// race detector does not run in a C host: its runtime cannot map its shadow memory when
// libstrata is loaded by a C program, so data races are checked by go test -race ./capi, which
// drives the same code from goroutines.)
func TestCABIChecks(t *testing.T) {
	dir := library(t)
	exe := compile(t, dir, "c/abi_checks.c", "abi_checks")
	out, err := exec.Command(exe, tinyQ4, t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS: 0 failure(s)") {
		t.Fatalf("abi_checks:\n%s", out)
	}
	t.Logf("%d checks passed", strings.Count(string(out), "\nok "))
}

// TestCOps compiles examples/c/ops.c and runs the three op entry points on a cpu and an emu
// device (the Metal kernels on the MSL emulator), each against the cpu device's results; on emu
// the device's kernel report must name the Metal kernel variants that ran.
func TestCOps(t *testing.T) {
	dir := library(t)
	exe := compile(t, dir, "../examples/c/ops.c", "strata-ops")
	for _, c := range []struct {
		backend string
		kernels []string
	}{
		{"cpu", []string{"cpu (GOMAXPROCS="}},
		{"emu", []string{"qsa_flash_f32_hpg2", "_sparse", "gdn_scan_f32", "moe_comb", "gr_apply_moec_f32", "ew_add_f32"}},
	} {
		t.Run(c.backend, func(t *testing.T) {
			if c.backend == "emu" {
				if _, err := exec.LookPath("clang++-16"); err != nil && os.Getenv("STRATA_CLANG") == "" {
					if _, err := exec.LookPath("clang++"); err != nil {
						t.Skip("the emu backend needs clang++ (Debian clang-16)")
					}
				}
			}
			out, err := exec.Command(exe, c.backend).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			s := string(out)
			if !strings.Contains(s, "backend   "+c.backend) || !strings.HasSuffix(strings.TrimSpace(s), "PASS") {
				t.Fatalf("unexpected report:\n%s", s)
			}
			for _, k := range c.kernels {
				if !strings.Contains(s, k) {
					t.Errorf("kernel report lacks %q:\n%s", k, s)
				}
			}
			t.Logf("\n%s", s)
		})
	}
}
