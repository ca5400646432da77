package blas

import (
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
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
	lib, err := purego.Dlopen(openblasSoname, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", openblasSoname, err)
	}
	b := &cblasBackend{}
	var getConfig func() string
	var getParallel func() int32
	for _, s := range []struct {
		fp   any
		name string
	}{
		{&b.fn, "cblas_sgemm"},
		{&openblasState.setThreads, "openblas_set_num_threads"},
		{&openblasState.getThreads, "openblas_get_num_threads"},
		{&getConfig, "openblas_get_config"},
		{&getParallel, "openblas_get_parallel"},
	} {
		if err := symbol(lib, s.fp, s.name); err != nil {
			return nil, fmt.Errorf("%s: %v", openblasSoname, err)
		}
	}
	openblasState.setThreads(int32(threads))
	got := int(openblasState.getThreads())
	b.single = got == 1
	mode := map[int32]string{0: "sequential", 1: "pthread", 2: "openmp"}[getParallel()]
	per := fmt.Sprintf("%d threads per call, calls serialised", got)
	if got == 1 {
		per = "1 thread per call, calls concurrent"
	}
	b.label = fmt.Sprintf("openblas %s (%s, %s)", openblasVersion(getConfig()), mode, per)
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
