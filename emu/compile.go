package emu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratakernels/strata/metal/mtl"
)

// CompileOptions configure CompileFile.
type CompileOptions struct {
	// Includes are files prepended to the source, in order (clang's -include); IncludeDirs the
	// search path of #include "..."; Defines macros as NAME or NAME=VALUE.
	Includes, IncludeDirs, Defines []string
	// Lax reports violations of the MSL rules the emulator checks itself as warnings and compiles
	// on; clang's own errors (address-space conversions among them) remain errors.
	Lax bool
	// Library, when set, is the path of the compiled library to write (a shared object the
	// emulator loads, or with ASan its helper executable); empty: check only (no code generation).
	Library string
	ASan    bool
	// Clang and CacheDir as in Options.
	Clang, CacheDir string
}

// CompileResult describes a compiled file.
type CompileResult struct {
	Kernels   []string // host names
	Constants []string // function constants as "name (index N, type T)"
}

// CompileFile compiles the MSL file at path (relative to the working directory) as the emulator
// does: preprocessing, the MSL rule checks, the rewrite to C++ for OpenCL and clang. It returns the
// diagnostics (file:line:col citing the sources) and, when any is an error, an error wrapping
// mtl.ErrCompile.
func CompileFile(path string, o CompileOptions) (*CompileResult, []Diagnostic, error) {
	clang, err := findClang(o.Clang)
	if err != nil {
		return nil, nil, err
	}
	cache := o.CacheDir
	if cache == "" {
		if cache, err = defaultCache(); err != nil {
			return nil, nil, err
		}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, nil, fmt.Errorf("emu: cache: %w", err)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("emu: %w: %w", err, mtl.ErrCompile)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, nil, err
	}
	out := o.Library
	if out != "" {
		if out, err = filepath.Abs(out); err != nil {
			return nil, nil, err
		}
	}
	tc := &toolchain{clang: clang, cache: cache}
	meta, ds, err := tc.build(buildInput{name: filepath.Clean(path), dir: cwd, includes: o.Includes, includeDirs: o.IncludeDirs,
		defines: o.Defines, syntaxOnly: out == "", asan: o.ASan, out: out, lax: o.Lax})
	if err != nil {
		return nil, ds, err
	}
	res := &CompileResult{}
	for _, k := range meta.Kernels {
		res.Kernels = append(res.Kernels, k.Host)
	}
	for _, c := range meta.Constants {
		res.Constants = append(res.Constants, fmt.Sprintf("%s (index %d, %s)", c.Name, c.Index, c.Type))
	}
	return res, ds, nil
}

// FormatDiagnostics renders diagnostics as clang does: one a line, each followed by its source
// line and a caret under the column when the source is readable.
func FormatDiagnostics(ds []Diagnostic) string {
	files := map[string][]string{}
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
		if d.Line <= 0 || d.Severity == "note" {
			continue
		}
		lines, ok := files[d.File]
		if !ok {
			if data, err := os.ReadFile(d.File); err == nil {
				lines = strings.Split(string(data), "\n")
			}
			files[d.File] = lines
		}
		if d.Line > len(lines) {
			continue
		}
		src := strings.TrimRight(lines[d.Line-1], "\r")
		b.WriteString(src)
		b.WriteByte('\n')
		pad := []byte{}
		for i := 0; i < d.Col-1 && i < len(src); i++ {
			if src[i] == '\t' {
				pad = append(pad, '\t')
			} else {
				pad = append(pad, ' ')
			}
		}
		b.Write(pad)
		b.WriteString("^\n")
	}
	return b.String()
}

// NewLibraryFile compiles the MSL file at path (relative to the working directory; #include
// "..." resolves against o.IncludeDirs) for this device, as NewLibrary compiles a source string;
// o.Library, o.ASan, o.Clang and o.CacheDir are the device's. The library is compiled each time
// (its includes are not hashed). Errors wrap mtl.ErrCompile with the diagnostics.
func (d *Device) NewLibraryFile(path string, o CompileOptions) (mtl.Library, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	out, err := os.CreateTemp(d.cache, "file-*.lib")
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	out.Close()
	lib := &library{dev: d, key: "file:" + filepath.Base(out.Name()), path: out.Name(), temp: true}
	meta, _, err := d.tc.build(buildInput{name: filepath.Clean(path), dir: cwd, includes: o.Includes, includeDirs: o.IncludeDirs,
		defines: o.Defines, asan: d.opts.ASan, lax: o.Lax, out: lib.path})
	if err != nil {
		os.Remove(lib.path)
		return nil, err
	}
	lib.prog = *meta
	if err := d.readKernelInfo(lib); err != nil {
		return nil, fmt.Errorf("emu: %s: %v: %w", path, err, mtl.ErrCompile)
	}
	if !d.opts.ASan {
		so, err := openShared(lib.path, len(lib.prog.Kernels))
		if err != nil {
			return nil, fmt.Errorf("emu: %s: %v: %w", path, err, mtl.ErrCompile)
		}
		lib.so = so
	}
	d.register(lib)
	return lib, nil
}
