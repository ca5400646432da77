//go:build linux || darwin

package blas

import (
	"errors"
	"runtime"

	"github.com/ebitengine/purego"
)

// errNoReason stands for a failed dlopen or dlsym whose dlerror text came back empty.
var errNoReason = errors.New("dlerror gave no reason")

// dlopen is purego.Dlopen with the calling goroutine locked to its OS thread. dlerror's message
// is per thread, and purego reads it in a second foreign call after dlopen returned: a
// goroutine that moved to another thread in between (the scheduler hands a goroutine's P to
// another thread during a long foreign call, which a dlopen that searches the disk is) read
// that thread's empty message, and the kernels line said "no native BLAS: libopenblas.so.0: "
// with no reason. TestDlopenReasonUnderLoad shows the unlocked form losing the message.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil && err.Error() == "" {
		err = errNoReason
	}
	return h, err
}

// dlsym is purego.Dlsym locked to one thread, for the reason dlopen is; a missing symbol is an
// error (purego reports a zero address without one when dlerror is empty).
func dlsym(lib uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	addr, err := purego.Dlsym(lib, name)
	if err == nil && addr == 0 {
		err = errors.New("address 0")
	}
	if err != nil && err.Error() == "" {
		err = errNoReason
	}
	return addr, err
}
