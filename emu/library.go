package emu

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratakernels/strata/metal/mtl"
)

//go:embed include rt
var sources embed.FS

// cacheVersion changes whenever the generated code or its ABI changes.
const cacheVersion = "emu-3"

// libMeta is what the cache keeps beside a compiled library.
type libMeta struct {
	Kernels   []kernelMeta
	Constants []constMeta
	// CompileSeconds is the time the first compilation took.
	CompileSeconds float64
}

type kernelMeta struct {
	Host string
	// MaxThreads ([[max_total_threads_per_threadgroup]], 1024 without it) and StaticTG (the bytes
	// of the kernel's threadgroup variables) are read from the compiled library; no kernel runs.
	MaxThreads int
	StaticTG   int
}

type constMeta struct {
	Name  string
	Type  string
	Index int // the host's index
	Slot  int // the library's
}

type library struct {
	dev  *Device
	key  string
	path string // .so (in process) or executable (ASan helper)
	prog libMeta
	// Cached reports whether the library came from the cache.
	cached bool
	so     *sharedObject
	// temp reports a library compiled outside the cache (NewLibraryFile), removed on close.
	temp bool
	// refs counts the holders of the loaded library (under dev.mu): the caller until Release,
	// and each live pipeline (a pipeline runs the library's code); the last one unloads it.
	refs     int
	released bool
}

func (l *library) close() error {
	var err error
	if l.so != nil {
		err = l.so.close()
		l.so = nil
	}
	if l.temp {
		os.Remove(l.path)
	}
	return err
}

// Release implements mtl.Library: the library is unloaded once its pipelines are released too.
func (l *library) Release() {
	l.dev.mu.Lock()
	defer l.dev.mu.Unlock()
	if l.released {
		return
	}
	l.released = true
	l.dev.count(libraries, -1)
	l.unref()
}

// unref drops one holder of the library (dev.mu held) and unloads it after the last.
func (l *library) unref() {
	if l.refs--; l.refs == 0 {
		_ = l.close()
	}
}

// register records a new library of the device, held by its caller.
func (d *Device) register(lib *library) {
	d.mu.Lock()
	lib.refs = 1
	d.libs = append(d.libs, lib)
	d.mu.Unlock()
	d.count(libraries, 1)
}

// NewLibrary implements mtl.Device: it compiles (or finds in the cache) the MSL source with opts
// (optionFlags). Errors wrap mtl.ErrCompile with the diagnostics, one a line as
// name:line:col: error: message, each naming the MSL rule it enforces where there is one.
func (d *Device) NewLibrary(name, source string, opts mtl.CompileOptions) (mtl.Library, error) {
	if name == "" || strings.ContainsAny(name, "/\\\x00\"\n") {
		return nil, fmt.Errorf("emu: library name %q must be a plain file name: %w", name, mtl.ErrCompile)
	}
	optFlags, metalVersion, err := optionFlags(opts)
	if err != nil {
		return nil, fmt.Errorf("emu: %s: %w", name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%v %d\n%t\n%s\n", cacheVersion, sourcesHash(), d.tc.clang, optFlags, metalVersion, d.opts.ASan, name)
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
		meta, _, err := d.tc.build(buildInput{name: name, source: source, asan: d.opts.ASan, out: lib.path,
			mathFlags: optFlags, metalVersion: metalVersion})
		if err != nil {
			return nil, err
		}
		lib.prog = *meta
		if err := d.readKernelInfo(lib); err != nil {
			return nil, fmt.Errorf("emu: %s: %v: %w", name, err, mtl.ErrCompile)
		}
		mb, _ := json.Marshal(lib.prog)
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
	d.register(lib)
	return lib, nil
}

// readKernelInfo reads each kernel's thread limit and static threadgroup memory from the compiled
// library (values the compiler computed; no kernel runs).
func (d *Device) readKernelInfo(lib *library) error {
	var info []uint32 // pairs: static threadgroup bytes, max threads
	if d.opts.ASan {
		var err error
		if info, err = d.queryHelper(lib); err != nil {
			return err
		}
	} else {
		so, err := openShared(lib.path, len(lib.prog.Kernels))
		if err != nil {
			return err
		}
		for k := range lib.prog.Kernels {
			info = append(info, so.staticTG(int32(k)), so.maxThreads(int32(k)))
		}
		so.close()
	}
	if len(info) != 2*len(lib.prog.Kernels) {
		return fmt.Errorf("library reports %d kernels, metadata %d", len(info)/2, len(lib.prog.Kernels))
	}
	for k := range lib.prog.Kernels {
		lib.prog.Kernels[k].StaticTG, lib.prog.Kernels[k].MaxThreads = int(info[2*k]), int(info[2*k+1])
	}
	return nil
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
