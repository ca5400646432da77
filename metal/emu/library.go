package emu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
)

//go:embed include rt
var sources embed.FS

// cacheVersion changes whenever the generated code or its ABI changes.
const cacheVersion = "emu-1"

// stubHeaders are the metal headers MSL sources include; the first (preprocessing) pass sees them
// empty, so that only the source's own macros expand.
var stubHeaders = []string{"metal_stdlib", "metal_simdgroup_matrix", "metal_simdgroup", "metal_atomic",
	"metal_math", "metal_compute", "metal_integer", "metal_common", "metal_tensor",
	"MetalPerformancePrimitives/MetalPerformancePrimitives.h"}

// Compile flags: -O1 keeps compile time near a second per file; half rounds after every op.
var cxxFlags = []string{"-std=c++17", "-O1", "-fPIC", "-Xclang", "-ffloat16-excess-precision=none",
	"-Wno-unknown-attributes", "-Wno-ignored-attributes", "-Wno-unused-value", "-fno-exceptions", "-ferror-limit=20"}

// libMeta is what the cache keeps beside a compiled library.
type libMeta struct {
	Kernels   []kernelMeta
	Constants []constMeta
	// CompileSeconds is the time the first compilation took.
	CompileSeconds float64
}

type kernelMeta struct {
	Host       string
	MaxThreads int
}

type constMeta struct {
	Name  string
	Type  string
	Index int
}

type library struct {
	dev  *Device
	key  string
	path string // .so (in process) or executable (ASan helper)
	prog libMeta
	// Cached reports whether the library came from the cache.
	cached bool
	so     *sharedObject
}

func (l *library) close() error {
	if l.so != nil {
		return l.so.close()
	}
	return nil
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
	return hex.EncodeToString(h.Sum(nil))
}

// NewLibrary implements mtl.Device: it compiles (or finds in the cache) the MSL source with opts
// (optionFlags). Errors wrap mtl.ErrCompile with clang's diagnostics, which cite name:line.
func (d *Device) NewLibrary(name, source string, opts mtl.CompileOptions) (mtl.Library, error) {
	if name == "" || strings.ContainsAny(name, "/\\\x00\"\n") {
		return nil, fmt.Errorf("emu: library name %q must be a plain file name: %w", name, mtl.ErrCompile)
	}
	optFlags, metalVersion, err := optionFlags(opts)
	if err != nil {
		return nil, fmt.Errorf("emu: %s: %w", name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%v\n%v %d\n%t\n%s\n", cacheVersion, sourcesHash(), d.clang, cxxFlags, optFlags, metalVersion, d.opts.ASan, name)
	h.Write([]byte(source))
	key := hex.EncodeToString(h.Sum(nil))[:32]
	ext := ".so"
	if d.opts.ASan {
		ext = ".asan"
	}
	lib := &library{dev: d, key: key, path: filepath.Join(d.cache, key+ext)}
	metaPath := filepath.Join(d.cache, key+".json")
	if mb, err := os.ReadFile(metaPath); err == nil && json.Unmarshal(mb, &lib.prog) == nil {
		if _, err := os.Stat(lib.path); err == nil {
			lib.cached = true
		}
	}
	if !lib.cached {
		meta, err := d.compile(name, source, lib.path, optFlags, metalVersion)
		if err != nil {
			return nil, err
		}
		lib.prog = *meta
		mb, _ := json.Marshal(meta)
		if err := writeAtomic(metaPath, mb); err != nil {
			return nil, fmt.Errorf("emu: cache: %w", err)
		}
	}
	if !d.opts.ASan {
		so, err := openShared(lib.path, len(lib.prog.Kernels))
		if err != nil {
			return nil, fmt.Errorf("emu: %s: %v: %w", name, err, mtl.ErrCompile)
		}
		lib.so = so
	}
	d.mu.Lock()
	d.libs = append(d.libs, lib)
	d.mu.Unlock()
	return lib, nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (d *Device) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.clang, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.Bytes(), err
}

// compile preprocesses, rewrites and compiles source into out with the flags and
// __METAL_VERSION__ of its compile options.
func (d *Device) compile(name, source, out string, optFlags []string, metalVersion int) (*libMeta, error) {
	t0 := time.Now()
	dir, err := os.MkdirTemp(d.cache, "build-")
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, sources); err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	stub := filepath.Join(dir, "stub")
	if err := os.MkdirAll(stub, 0o755); err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	for _, h := range stubHeaders {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(stub, h)), 0o755); err != nil {
			return nil, fmt.Errorf("emu: %w", err)
		}
		if err := os.WriteFile(filepath.Join(stub, h), nil, 0o644); err != nil {
			return nil, fmt.Errorf("emu: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(source), 0o644); err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	ctx := context.Background()
	pre, err := d.run(ctx, dir, "-E", "-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", "-Istub",
		fmt.Sprintf("-D__METAL_VERSION__=%d", metalVersion), "-D__METAL__=1", name)
	if err != nil {
		return nil, fmt.Errorf("emu: %s: preprocessing: %v\n%s: %w", name, err, pre, mtl.ErrCompile)
	}
	prog, err := prepass(string(pre))
	if err != nil {
		return nil, fmt.Errorf("emu: %s: %v: %w", name, err, mtl.ErrCompile)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cpp"), []byte(prog.cpp), 0o644); err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	if prog.tensor && metalVersion < 400 {
		return nil, fmt.Errorf("emu: %s: Metal 4 tensor ops need language version 4.0, compiling for %d: %w", name, metalVersion, mtl.ErrCompile)
	}
	args := append(append([]string{}, cxxFlags...), optFlags...)
	if prog.tensor {
		// matmul2d takes its descriptor as a class-type template argument.
		args = append(args, "-std=c++20")
	}
	args = append(args, "-Iinclude", "kernels.cpp", "rt/runtime.cpp", "rt/switch.S", "-lpthread", "-o", "lib.out")
	if d.opts.ASan {
		args = append(args, "-fsanitize=address", "-fno-omit-frame-pointer", "-g", "rt/driver.cpp")
	} else {
		args = append(args, "-shared")
	}
	if msg, err := d.run(ctx, dir, args...); err != nil {
		return nil, fmt.Errorf("emu: %s: %v\n%s: %w", name, err, msg, mtl.ErrCompile)
	}
	if err := os.Rename(filepath.Join(dir, "lib.out"), out); err != nil {
		return nil, fmt.Errorf("emu: cache: %w", err)
	}
	meta := &libMeta{CompileSeconds: time.Since(t0).Seconds()}
	for _, k := range prog.kernels {
		meta.Kernels = append(meta.Kernels, kernelMeta{Host: k.host, MaxThreads: k.def.maxThreads})
	}
	for _, c := range prog.constants {
		meta.Constants = append(meta.Constants, constMeta{Name: c.name, Type: c.typ, Index: c.index})
	}
	return meta, nil
}
