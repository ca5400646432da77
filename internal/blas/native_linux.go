package blas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"
)

// openblasSoname is the library Debian's libopenblas0 installs (through the alternatives
// system, pthread or openmp flavour).
const openblasSoname = "libopenblas.so.0"

// openblasState holds OpenBLAS's own entry points, used at load and by the tests.
var openblasState struct {
	setThreads func(int32)
	getThreads func() int32
}

// loadNative opens OpenBLAS, pins its thread count to threads and returns the backend.
func loadNative(threads int) (backend, error) {
	if err := checkUserCoreType(os.Getenv("OPENBLAS_CORETYPE"), cpuHasAVX512(), cpu.X86.HasAVX2 && cpu.X86.HasFMA); err != nil {
		return nil, err
	}
	coreNote := chooseCoreType()
	lib, err := dlopen(openblasSoname)
	if coreNote != "" && coreNote != "OPENBLAS_CORETYPE" {
		// The variable is read once, by the library's constructor; do not leak it to children.
		os.Unsetenv("OPENBLAS_CORETYPE")
	}
	if err != nil {
		return nil, openError(openblasSoname, err, libraryDirs())
	}
	b := &cblasBackend{}
	var getConfig func() string
	var getParallel func() int32
	var getCore func() string
	for _, s := range []struct {
		fp   any
		name string
	}{
		{&b.fn, "cblas_sgemm"},
		{&openblasState.setThreads, "openblas_set_num_threads"},
		{&openblasState.getThreads, "openblas_get_num_threads"},
		{&getConfig, "openblas_get_config"},
		{&getParallel, "openblas_get_parallel"},
		{&getCore, "openblas_get_corename"},
	} {
		if err := symbol(lib, s.fp, s.name); err != nil {
			return nil, fmt.Errorf("%s: %v", openblasSoname, err)
		}
	}
	openblasState.setThreads(int32(threads))
	got := int(openblasState.getThreads())
	b.single = got == 1
	mode := map[int32]string{0: "sequential", 1: "pthread", 2: "openmp"}[getParallel()]
	per := fmt.Sprintf("%d threads/call, serialised", got)
	if got == 1 {
		per = "1 thread/call, concurrent"
	}
	if got != threads {
		per += fmt.Sprintf(" (STRATA_BLAS_THREADS=%d: this OpenBLAS runs at most %d)", threads, got)
	}
	name := getCore()
	core := "core " + name
	switch {
	case coreNote == "OPENBLAS_CORETYPE":
		if v := os.Getenv("OPENBLAS_CORETYPE"); strings.EqualFold(v, name) {
			core += " from OPENBLAS_CORETYPE"
		} else {
			// OpenBLAS did not know the value (it says "Core not found" only with
			// OPENBLAS_VERBOSE) and detected the CPU itself, or it was loaded first by the host.
			core += fmt.Sprintf(", not the OPENBLAS_CORETYPE=%q asked for: OpenBLAS does not know that kernel set or was loaded before strata", v)
		}
	case coreNote == "":
	case !strings.EqualFold(name, chosenCore):
		// The host process (e.g. numpy) loaded and initialised the library first, so the kernel
		// set strata chose could not take effect: say so, and what would select it.
		core += ": loaded before strata, export OPENBLAS_CORETYPE=" + chosenCore
	default:
		core += " from CPU features"
	}
	b.label = fmt.Sprintf("openblas %s (%s, %s, %s)", openblasVersion(getConfig()), core, mode, per)
	return b, nil
}

// openblasVersion extracts "0.3.21" from a config string like "OpenBLAS 0.3.21 DYNAMIC_ARCH ...".
func openblasVersion(config string) string {
	f := strings.Fields(config)
	if len(f) >= 2 && strings.EqualFold(f[0], "OpenBLAS") {
		return f[1]
	}
	return "(version unknown)"
}

// setNativeThreads changes OpenBLAS's thread count; the tests use it to check that results do
// not depend on it. It reports false when OpenBLAS is not the backend in use.
func setNativeThreads(n int) bool {
	b, ok := choose().(*cblasBackend)
	if !ok || openblasState.setThreads == nil {
		return false
	}
	b.mu.Lock()
	openblasState.setThreads(int32(n))
	b.single = openblasState.getThreads() == 1
	b.mu.Unlock()
	return true
}

// nativeThreads is OpenBLAS's current thread count, 0 when OpenBLAS is not in use.
func nativeThreads() int {
	if _, ok := choose().(*cblasBackend); !ok || openblasState.getThreads == nil {
		return 0
	}
	return int(openblasState.getThreads())
}

// chooseCoreType picks OpenBLAS's kernel set before the library loads. OpenBLAS 0.3.21 (Debian
// 12) does not recognise recent Xeons and falls back to its generic "Prescott" kernels, a 3-5x
// slower SGEMM. When the user has not set OPENBLAS_CORETYPE, strata sets it from the CPU's
// features for the library's constructor to read: SkylakeX (AVX-512 F/BW/DQ/VL) or Haswell
// (AVX2 + FMA); otherwise it leaves detection to the library. It returns "OPENBLAS_CORETYPE"
// when the user set it, the features it acted on when it set it, and "" otherwise. The core in
// use is reported by Impl either way.
// chosenCore is the kernel set chooseCoreType asked for ("" when it asked for none).
var chosenCore string

// cpuHasAVX512 reports the AVX-512 subsets OpenBLAS's SkylakeX kernels use.
func cpuHasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL
}

// checkUserCoreType refuses a user's OPENBLAS_CORETYPE that names a kernel set the CPU cannot
// run (OpenBLAS takes the value on trust and the process dies of SIGILL in its first call): an
// AVX-512 core (SkylakeX, Cooperlake, SapphireRapids) without AVX-512 F/BW/DQ/VL, or an AVX2
// core (Haswell, Zen) without AVX2 and FMA. Then no native library
// is loaded and strata's GEMM runs, with this error as the reason Impl gives. Other values,
// and every value on CPUs other than amd64, are left to the library.
func checkUserCoreType(v string, avx512, avx2fma bool) error {
	if v == "" || runtime.GOARCH != "amd64" {
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "skylakex", "cooperlake", "sapphirerapids":
		if !avx512 {
			return fmt.Errorf("OPENBLAS_CORETYPE=%s needs AVX-512 F/BW/DQ/VL, which this CPU lacks (OpenBLAS would stop the process with SIGILL); unset it to let strata choose", v)
		}
	case "haswell", "zen":
		if !avx2fma {
			return fmt.Errorf("OPENBLAS_CORETYPE=%s needs AVX2 and FMA, which this CPU lacks (OpenBLAS would stop the process with SIGILL); unset it to let strata choose", v)
		}
	}
	return nil
}

func chooseCoreType() string {
	if v := os.Getenv("OPENBLAS_CORETYPE"); v != "" {
		return "OPENBLAS_CORETYPE"
	}
	if runtime.GOARCH != "amd64" {
		return ""
	}
	switch {
	case cpuHasAVX512():
		os.Setenv("OPENBLAS_CORETYPE", "SkylakeX")
		chosenCore = "SkylakeX"
		return "avx512f/bw/dq/vl"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		os.Setenv("OPENBLAS_CORETYPE", "Haswell")
		chosenCore = "Haswell"
		return "avx2+fma"
	}
	return ""
}

// openError is the reason a dlopen of soname failed with err, naming the library once: dlerror's
// text when it gave one ("libopenblas.so.0: cannot open shared object file: ..."), else the
// result of looking for soname in dirs (the dynamic loader's search path, libraryDirs): "not
// found on the library path", or the file found there and what a dlopen of that path says.
func openError(soname string, err error, dirs []string) error {
	if !errors.Is(err, errNoReason) {
		if msg := err.Error(); strings.HasPrefix(msg, soname+":") {
			return errors.New(msg) // dlerror already names the library
		}
		return fmt.Errorf("%s: %v", soname, err)
	}
	for _, d := range dirs {
		p := filepath.Join(d, soname)
		if _, statErr := os.Stat(p); statErr != nil {
			continue
		}
		if _, err := dlopen(p); err != nil && !errors.Is(err, errNoReason) {
			if msg := err.Error(); strings.HasPrefix(msg, p+":") {
				return errors.New(msg)
			}
			return fmt.Errorf("%s: %v", p, err)
		}
		return fmt.Errorf("%s: found at %s, but dlopen failed and dlerror gave no reason", soname, p)
	}
	return fmt.Errorf("%s: not found on the library path (LD_LIBRARY_PATH, the directories of /etc/ld.so.conf, /lib, /usr/lib)", soname)
}

// libraryDirs approximates the dynamic loader's search path for a bare soname: the directories
// of LD_LIBRARY_PATH, those /etc/ld.so.conf names (following its include lines, which is where
// Debian lists the multiarch directories such as /usr/lib/x86_64-linux-gnu), then the defaults.
// It is only consulted to explain a dlopen that failed without a message.
func libraryDirs() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, ldConfDirs("/etc/ld.so.conf", 0)...)
	return append(dirs, "/lib", "/usr/lib", "/lib64", "/usr/lib64")
}

// ldConfDirs reads the directories of an ld.so.conf file: one per line, "#" comments, and
// "include GLOB" lines read in turn (to a depth of 8, against include loops).
func ldConfDirs(path string, depth int) []string {
	data, err := os.ReadFile(path)
	if err != nil || depth > 8 {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "include"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			pat := strings.TrimSpace(rest)
			if !filepath.IsAbs(pat) {
				pat = filepath.Join(filepath.Dir(path), pat)
			}
			matches, _ := filepath.Glob(pat)
			for _, m := range matches {
				dirs = append(dirs, ldConfDirs(m, depth+1)...)
			}
			continue
		}
		if line != "" {
			dirs = append(dirs, line)
		}
	}
	return dirs
}
