package emu

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakernels/strata/metal/mtl"
)

const optionsProbe = `#include <metal_stdlib>
using namespace metal;
kernel void probe(device uint* y [[buffer(0)]],
                  const device float* x [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
    if (i == 0) {
        y[0] = __METAL_VERSION__;
    }
    y[1 + i] = isnan(x[i]) ? 1u : 0u;
}
`

// TestCompileOptions: a library's compile options reach the compiler. __METAL_VERSION__ follows
// the language version; a tensor-op source needs 4.0; the math mode decides whether isnan
// survives (safe and relaxed keep NaN semantics, fast lets clang fold isnan to false, as Metal's
// fast mode may); options outside mtl's list are refused.
func TestCompileOptions(t *testing.T) {
	dev := openDev(t, Options{Threads: 1})
	x := []float32{float32(math.NaN()), 1, float32(math.Inf(-1))}
	for _, c := range []struct {
		opts    mtl.CompileOptions
		version uint32
		isnan   []uint32
	}{
		{mtl.CompileOptions{LanguageVersion: mtl.Language3_2, MathMode: mtl.MathSafe}, 320, []uint32{1, 0, 0}},
		{mtl.CompileOptions{LanguageVersion: mtl.Language3_1, MathMode: mtl.MathRelaxed}, 310, []uint32{1, 0, 0}},
		{mtl.CompileOptions{LanguageVersion: mtl.Language4_0, MathMode: mtl.MathFast}, 400, []uint32{0, 0, 0}},
	} {
		t.Run(c.opts.String(), func(t *testing.T) {
			lib, err := dev.NewLibrary("probe.metal", optionsProbe, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			y := newBuf(t, dev, 16)
			if err := dispatch(t, dev, pipe(t, lib, "probe"), []arg{{buf: y}, {buf: f32Buf(t, dev, x)}}, nil, [3]int{1, 1, 1}, [3]int{3, 1, 1}); err != nil {
				t.Fatal(err)
			}
			got := u32s(y)
			if got[0] != c.version {
				t.Errorf("__METAL_VERSION__ = %d, want %d", got[0], c.version)
			}
			for i, w := range c.isnan {
				if got[1+i] != w {
					t.Errorf("isnan(%v) = %d, want %d", x[i], got[1+i], w)
				}
			}
		})
	}
	tensorSrc := "#include <metal_stdlib>\n#include <metal_tensor>\nusing namespace metal;\nkernel void k(device float* y [[buffer(0)]]) { y[0] = 1.0f; }\n"
	_, err := dev.NewLibrary("tensor32.metal", tensorSrc, mtl.CompileOptions{LanguageVersion: mtl.Language3_2, MathMode: mtl.MathSafe})
	if !errors.Is(err, mtl.ErrCompile) || !strings.Contains(err.Error(), "language version 4.0") {
		t.Errorf("tensor ops under MSL 3.2: %v", err)
	}
	for _, bad := range []mtl.CompileOptions{{}, {LanguageVersion: 2 << 16, MathMode: mtl.MathSafe}, {LanguageVersion: mtl.Language3_2, MathMode: 7}} {
		if _, err := dev.NewLibrary("probe.metal", optionsProbe, bad); !errors.Is(err, mtl.ErrCompile) {
			t.Errorf("options %+v: %v, want ErrCompile", bad, err)
		}
	}
}

// A clang the caller names must exist (no fallback to another compiler), and an unusable cache
// directory is named as such.
func TestNamedClangAndCache(t *testing.T) {
	if _, err := findClang("/nonexistent/clang++"); err == nil || !strings.Contains(err.Error(), `Options.Clang="/nonexistent/clang++"`) {
		t.Errorf("missing Options.Clang: %v", err)
	}
	t.Setenv("STRATA_CLANG", "/nonexistent/clang++")
	if _, err := findClang(""); err == nil || !strings.Contains(err.Error(), "STRATA_CLANG") {
		t.Errorf("missing $STRATA_CLANG: %v", err)
	}
	if sh, err := exec.LookPath("true"); err == nil {
		t.Setenv("STRATA_CLANG", sh)
		if _, err := findClang(""); err == nil || !strings.Contains(err.Error(), "is not clang") {
			t.Errorf("$STRATA_CLANG naming a program that is not clang: %v", err)
		}
	}
	t.Setenv("STRATA_CLANG", "")
	if _, err := findClang(""); err != nil {
		t.Skipf("no clang here: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{CacheDir: filepath.Join(file, "sub")}); !errors.Is(err, ErrCache) {
		t.Errorf("cache under a file: %v, want ErrCache", err)
	}
}

// moveFile copies across file systems where a rename cannot (mslc -o to another mount).
func TestMoveFileAcrossFileSystems(t *testing.T) {
	other, err := os.MkdirTemp("/dev/shm", "strata-move-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(other)
	from := filepath.Join(t.TempDir(), "lib.out")
	if err := os.WriteFile(from, []byte("library bytes"), 0o755); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(other, "x.so")
	if err := moveFile(from, to); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(to)
	st, _ := os.Stat(to)
	if err != nil || string(b) != "library bytes" || st.Mode().Perm() != 0o755 {
		t.Errorf("moved file: %q, %v, mode %v", b, err, st.Mode())
	}
	if _, err := os.Stat(from); !os.IsNotExist(err) {
		t.Errorf("source left behind: %v", err)
	}
}
