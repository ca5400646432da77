package emu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
)

// MSLVersion is the __METAL_VERSION__ the emulator compiles for: MSL 4.0 (Metal 4, with tensors).
const MSLVersion = 400

// Kernel translation units: C++ for OpenCL 2021 (address spaces as types) without double, at -O1
// (compile time near a second per file); half rounds after every operation.
var kernelFlags = []string{"-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-Xclang", "-cl-ext=-cl_khr_fp64,-__opencl_c_fp64",
	"-Xclang", "-ffloat16-excess-precision=none", "-fPIC", "-w", "-ferror-limit=50", "-fno-caret-diagnostics"}

// The runtime is C++17, compiled once per cache.
var runtimeFlags = []string{"-std=c++17", "-O1", "-fPIC", "-fno-exceptions", "-w"}

var asanFlags = []string{"-fsanitize=address,alignment", "-fno-sanitize-recover=alignment", "-fno-omit-frame-pointer", "-g"}

// stubHeaders are the metal headers MSL sources include; the first (preprocessing) pass sees them
// empty, so that only the source's own macros expand.
var stubHeaders = []string{"metal_stdlib", "metal_simdgroup_matrix", "metal_simdgroup", "metal_atomic",
	"metal_math", "metal_compute", "metal_integer", "metal_common", "metal_tensor", "metal_logging",
	"metal_types", "metal_type_traits", "metal_geometric", "metal_relational", "metal_pack", "metal_limits",
	"metal_matrix", "metal_numeric", "metal_texture", "metal_uniform", "metal_array", "metal_extended_vector",
	"metal_graphics", "metal_quadgroup", "metal_raytracing", "metal_config",
	"MetalPerformancePrimitives/MetalPerformancePrimitives.h"}

// buildInput is one compilation.
type buildInput struct {
	name   string // the main file, as diagnostics cite it
	source string // its text; empty: read name (relative to dir)
	dir    string // directory the names are relative to; empty: the build directory
	// includes are files prepended to the main file (clang's -include), includeDirs its include
	// search path, defines NAME or NAME=VALUE macros.
	includes, includeDirs, defines []string
	syntaxOnly                     bool
	asan                           bool
	lax                            bool   // MSL rule violations are warnings
	out                            string // the library (or ASan helper) to write
	// mathFlags are the floating-point flags of the library's compile options (optionFlags),
	// metalVersion its __METAL_VERSION__ (0: MSLVersion).
	mathFlags    []string
	metalVersion int
}

// toolchain compiles MSL with one clang and keeps the stand-in headers and the compiled runtime
// under a cache directory.
type toolchain struct {
	clang, cache string
	once         sync.Once
	srcDir       string // extracted include/ and rt/
	err          error
	mu           sync.Mutex
}

// sources extracts the stand-in headers and runtime once per content hash.
func (tc *toolchain) sources() (string, error) {
	tc.once.Do(func() {
		dir := filepath.Join(tc.cache, "src-"+sourcesHash()[:16])
		if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
			tc.srcDir = dir
			return
		}
		tmp, err := os.MkdirTemp(tc.cache, ".src-")
		if err != nil {
			tc.err = err
			return
		}
		if err := os.CopyFS(tmp, sources); err != nil {
			tc.err = err
			return
		}
		for _, h := range stubHeaders {
			p := filepath.Join(tmp, "stub", h)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tc.err = err
				return
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				tc.err = err
				return
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
			tc.err = err
			return
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.RemoveAll(tmp)
			if _, serr := os.Stat(filepath.Join(dir, ".complete")); serr != nil {
				tc.err = err
				return
			}
		}
		tc.srcDir = dir
	})
	return tc.srcDir, tc.err
}

// runtimeObjects returns the compiled runtime (and, for ASan, the helper's driver), building them
// once per flavour.
func (tc *toolchain) runtimeObjects(asan bool) ([]string, error) {
	src, err := tc.sources()
	if err != nil {
		return nil, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	flavour := "rt"
	if asan {
		flavour = "rt-asan"
	}
	units := []string{"rt/runtime.cpp", "rt/switch.S"}
	if asan {
		units = append(units, "rt/driver.cpp")
	}
	var objs []string
	for _, u := range units {
		obj := filepath.Join(src, flavour+"-"+strings.TrimSuffix(filepath.Base(u), filepath.Ext(u))+".o")
		objs = append(objs, obj)
		if _, err := os.Stat(obj); err == nil {
			continue
		}
		args := append([]string{}, runtimeFlags...)
		if asan {
			args = append(args, asanFlags...)
		}
		tmp := obj + fmt.Sprintf(".%d.tmp", os.Getpid())
		args = append(args, "-Iinclude", "-c", u, "-o", tmp)
		if msg, err := tc.run(context.Background(), src, args...); err != nil {
			return nil, fmt.Errorf("emu: runtime: %v\n%s: %w", err, msg, mtl.ErrCompile)
		}
		if err := os.Rename(tmp, obj); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func (tc *toolchain) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, tc.clang, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.Bytes(), err
}

// runSplit runs clang as run does, keeping its standard output (the preprocessed text of -E)
// apart from its diagnostics.
func (tc *toolchain) runSplit(ctx context.Context, dir string, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, tc.clang, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// compileError wraps diagnostics as an mtl.ErrCompile error.
type compileError struct {
	name  string
	diags []Diagnostic
}

func (e *compileError) Error() string {
	return fmt.Sprintf("emu: %s: %s", e.name, formatDiagnostics(e.diags))
}
func (e *compileError) Unwrap() error { return mtl.ErrCompile }

// build preprocesses, checks, rewrites and compiles one MSL source. On MSL rule violations or
// clang errors it returns the diagnostics and a *compileError.
func (tc *toolchain) build(in buildInput) (*libMeta, []Diagnostic, error) {
	t0 := time.Now()
	src, err := tc.sources()
	if err != nil {
		return nil, nil, fmt.Errorf("emu: %w", err)
	}
	dir, err := os.MkdirTemp(tc.cache, "build-")
	if err != nil {
		return nil, nil, fmt.Errorf("emu: %w", err)
	}
	defer os.RemoveAll(dir)
	cwd := in.dir
	mainPath := in.name
	if in.source != "" || cwd == "" {
		if cwd == "" {
			cwd = dir
		}
		if in.source != "" {
			mainPath = filepath.Join(dir, "src", in.name)
			if err := os.MkdirAll(filepath.Dir(mainPath), 0o755); err != nil {
				return nil, nil, fmt.Errorf("emu: %w", err)
			}
			if err := os.WriteFile(mainPath, []byte(in.source), 0o644); err != nil {
				return nil, nil, fmt.Errorf("emu: %w", err)
			}
		}
	}
	version := in.metalVersion
	if version == 0 {
		version = MSLVersion
	}
	args := []string{"-E", "-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", "-I" + filepath.Join(src, "stub"),
		fmt.Sprintf("-D__METAL_VERSION__=%d", version), "-D__METAL__=1", "-D__HAVE_BFLOAT__=1", "-D__METAL_MACOS__=1"}
	if version >= 400 {
		args = append(args, "-D__HAVE_TENSOR__=1")
	}
	for _, d := range in.defines {
		args = append(args, "-D"+d)
	}
	for _, inc := range in.includes {
		args = append(args, "-include", inc)
	}
	for _, d := range in.includeDirs {
		args = append(args, "-I"+d)
	}
	if in.source != "" {
		// The main file keeps its name in diagnostics.
		args = append(args, "-iquote", filepath.Dir(mainPath))
	}
	args = append(args, mainPath)
	ctx := context.Background()
	// Only standard output is the preprocessed text: a warning of the preprocessor (an
	// unterminated string literal, say) must not become tokens of the kernel file. The compile
	// that follows reports such problems at their position.
	pre, preDiag, err := tc.runSplit(ctx, cwd, args...)
	if err != nil {
		ds := preprocessDiagnostics(string(preDiag), mainPath, in.name)
		return nil, ds, &compileError{in.name, ds}
	}
	// An unterminated character or string literal is only a warning of the preprocessor, and
	// the rest of its line would reach the pre-pass as tokens: report it where it is, as the
	// error it is in MSL.
	if ds := unterminatedLiterals(string(preDiag), mainPath, in.name); len(ds) > 0 {
		return nil, ds, &compileError{in.name, ds}
	}
	toks := tokenize(string(pre))
	clean := map[string]string{}
	for i := range toks {
		f := toks[i].pos.file
		c, ok := clean[f]
		if !ok {
			c = f
			if f != "" && !strings.HasPrefix(f, "<") {
				c = filepath.Clean(f)
			}
			clean[f] = c
		}
		toks[i].pos.file = c
		if toks[i].pos.file == mainPath {
			toks[i].pos.file = in.name
		}
		if strings.HasPrefix(toks[i].pos.file, filepath.Join(src, "stub")) {
			toks[i].pos.file = "stub/" + strings.TrimPrefix(toks[i].pos.file, filepath.Join(src, "stub")+"/")
		}
	}
	alignColumns(toks, func(f string) (string, bool) {
		if f == in.name && in.source != "" {
			return lineDirectiveText(in.source, in.name), true
		}
		p := f
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, f)
		}
		b, err := os.ReadFile(p)
		return string(b), err == nil
	})
	prog, err := prepassTokens(toks, usesTensors(string(pre)))
	if err != nil {
		ds := []Diagnostic{{File: in.name, Severity: "error", Msg: err.Error()}}
		return nil, ds, &compileError{in.name, ds}
	}
	if in.lax {
		for i := range prog.diags {
			if prog.diags[i].Severity == "error" {
				prog.diags[i].Severity = "warning"
			}
		}
	}
	if prog.tensor && version < 400 {
		prog.diags = append(prog.diags, Diagnostic{File: in.name, Severity: "error",
			Msg: fmt.Sprintf("Metal 4 tensor ops need language version 4.0, compiling for %d", version)})
	}
	if hasErrors(prog.diags) {
		return nil, prog.diags, &compileError{in.name, prog.diags}
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cpp"), []byte(prog.cpp), 0o644); err != nil {
		return nil, nil, fmt.Errorf("emu: %w", err)
	}
	if err := os.Symlink(filepath.Join(src, "include"), filepath.Join(dir, "include")); err != nil {
		return nil, nil, fmt.Errorf("emu: %w", err)
	}
	kargs := append(append([]string{}, kernelFlags...), in.mathFlags...)
	if in.syntaxOnly {
		kargs = append(kargs, "-fsyntax-only")
	} else {
		kargs = append(kargs, "-O1", "-c", "-o", "kernels.o")
		if in.asan {
			kargs = append(kargs, asanFlags...)
		}
	}
	kargs = append(kargs, "-Iinclude", "kernels.cpp")
	if msg, err := tc.run(ctx, dir, kargs...); err != nil {
		ds := append(prog.diags, prog.clangDiagnostics(string(msg))...)
		if !hasErrors(ds) {
			ds = append(ds, Diagnostic{Severity: "error", Msg: fmt.Sprintf("clang: %v\n%s", err, msg)})
		}
		return nil, ds, &compileError{in.name, ds}
	}
	meta := &libMeta{}
	for _, k := range prog.kernels {
		meta.Kernels = append(meta.Kernels, kernelMeta{Host: k.host})
	}
	for _, c := range prog.constants {
		meta.Constants = append(meta.Constants, constMeta{Name: c.name, Type: c.typ, Index: c.index, Slot: c.slot})
	}
	if in.syntaxOnly {
		return meta, prog.diags, nil
	}
	objs, err := tc.runtimeObjects(in.asan)
	if err != nil {
		return nil, nil, err
	}
	largs := []string{"kernels.o"}
	largs = append(largs, objs...)
	largs = append(largs, "-lpthread", "-o", "lib.out")
	if in.asan {
		largs = append(largs, asanFlags...)
	} else {
		largs = append(largs, "-shared")
	}
	// clang++ links the C++ runtime the runtime objects need.
	if msg, err := tc.run(ctx, dir, append([]string{"-x", "none"}, largs...)...); err != nil {
		ds := []Diagnostic{{Severity: "error", Msg: fmt.Sprintf("linking: %v\n%s", err, msg)}}
		return nil, ds, &compileError{in.name, ds}
	}
	if err := moveFile(filepath.Join(dir, "lib.out"), in.out); err != nil {
		return nil, nil, fmt.Errorf("emu: writing the library %s: %w", in.out, err)
	}
	meta.CompileSeconds = time.Since(t0).Seconds()
	return meta, prog.diags, nil
}

// moveFile renames from to to, copying (to a temporary file next to to, then renamed) when they
// lie on different file systems.
func moveFile(from, to string) error {
	err := os.Rename(from, to)
	if err == nil || !errors.Is(err, syscall.EXDEV) {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), to); err != nil {
		return err
	}
	return os.Remove(from)
}

// lineDirectiveText is the text of src that the preprocessor attributes to name when src
// continues after a `#line N "name"` line (metal.CompileSource puts the parameter header first,
// under its own name): N-1 empty lines, then what follows the last such directive, so that line
// numbers index it as the diagnostics cite them. Without one it is src.
func lineDirectiveText(src, name string) string {
	lines := strings.SplitAfter(src, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(strings.TrimSpace(lines[i]))
		if len(f) != 3 || f[0] != "#line" || f[2] != strconv.Quote(name) {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 {
			break
		}
		return strings.Repeat("\n", n-1) + strings.Join(lines[i+1:], "")
	}
	return src
}

// preprocessDiagnostics reads clang's preprocessor errors (a missing include, a bad #if).
// unterminatedLiterals picks the preprocessor's "missing terminating" warnings out of its
// diagnostics, as errors.
func unterminatedLiterals(out, mainPath, name string) []Diagnostic {
	var ds []Diagnostic
	for _, d := range preprocessDiagnostics(out, mainPath, name) {
		if d.Line > 0 && strings.Contains(d.Msg, "missing terminating") {
			d.Severity = "error"
			d.Msg = strings.TrimSuffix(d.Msg, " [-Winvalid-pp-token]")
			ds = append(ds, d)
		}
	}
	return ds
}

func preprocessDiagnostics(out, mainPath, name string) []Diagnostic {
	var ds []Diagnostic
	for _, line := range strings.Split(out, "\n") {
		m := clangDiagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d := Diagnostic{Severity: m[4], Msg: m[5]}
		if d.Severity == "fatal error" {
			d.Severity = "error"
		}
		f := m[1]
		if f == mainPath {
			f = name
		}
		fmt.Sscan(m[2], &d.Line)
		fmt.Sscan(m[3], &d.Col)
		d.File = f
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		ds = []Diagnostic{{File: name, Severity: "error", Msg: "preprocessing failed: " + strings.TrimSpace(out)}}
	}
	return ds
}

func sourcesHash() string {
	h := sha256.New()
	_ = fs.WalkDir(sources, ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := sources.ReadFile(p)
			fmt.Fprintf(h, "%s %d\n", p, len(b))
			h.Write(b)
		}
		return nil
	})
	fmt.Fprintf(h, "%v %v %v %v\n", kernelFlags, runtimeFlags, asanFlags, stubHeaders)
	return hex.EncodeToString(h.Sum(nil))
}
