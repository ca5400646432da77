//go:build linux || darwin

package blas

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/ebitengine/purego"
)

// CBLAS enum values (cblas.h), shared by OpenBLAS and Accelerate.
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// cblasSgemmFn is cblas_sgemm with 32-bit integers (OpenBLAS's default blasint, Accelerate's
// classic interface).
type cblasSgemmFn func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32,
	b *float32, ldb int32, beta float32, c *float32, ldc int32)

// cblasBackend calls a dynamically loaded cblas_sgemm.
type cblasBackend struct {
	label string
	// mu is held shared by calls when the library runs each call on its caller's thread
	// (single), exclusively otherwise and while the thread count changes.
	mu     sync.RWMutex
	single bool
	fn     cblasSgemmFn
}

func (c *cblasBackend) concurrent() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.single
}

func (c *cblasBackend) name() string { return c.label }

func (c *cblasBackend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, cm []float32, ldc int) {
	ta, tb := int32(cblasNoTrans), int32(cblasNoTrans)
	if transA {
		ta = cblasTrans
	}
	if transB {
		tb = cblasTrans
	}
	c.mu.RLock()
	if !c.single {
		// Entries into one OpenBLAS thread pool are not relied on to be re-entrant: upgrade to
		// the exclusive lock.
		c.mu.RUnlock()
		c.mu.Lock()
		defer c.mu.Unlock()
	} else {
		defer c.mu.RUnlock()
	}
	c.fn(cblasRowMajor, ta, tb, int32(m), int32(n), int32(k), alpha, first(a), int32(lda),
		first(b), int32(ldb), beta, first(cm), int32(ldc))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(cm)
}

// first is the address of x[0], nil for an empty slice (only passed when k == 0, where the
// library reads nothing).
func first(x []float32) *float32 {
	if len(x) == 0 {
		return nil
	}
	return &x[0]
}

// symbol binds the C function name in lib to fptr, returning an error instead of purego's
// panic when the symbol is missing.
func symbol(lib uintptr, fptr any, name string) error {
	addr, err := dlsym(lib, name)
	if err != nil {
		return fmt.Errorf("symbol %s: %v", name, err)
	}
	purego.RegisterFunc(fptr, addr)
	return nil
}

func numCPU() int { return runtime.NumCPU() }
