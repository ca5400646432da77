// Command capi is libstrata, strata's C ABI (include/strata.h), built with
//
//	go build -buildmode=c-shared -o libstrata.so ./capi
//
// Every exported function recovers panics (STRATA_ERR_INTERNAL), records its error message
// per calling thread, and maps strata's sentinel errors onto the header's status codes. Hosts
// see opaque handles from a handle table; no Go pointer crosses the boundary, and C memory is
// only read or written during the call that received it.
package main

/*
#include "strata.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"unsafe"

	"github.com/stratakernels/strata/strata"
)

func main() {}

// statusOf maps an error onto a strata_status and records its message as the calling thread's
// last error. Every error wraps one sentinel (the capi's own or strata's); they are tested in a
// fixed order.
func statusOf(err error) C.strata_status {
	if err == nil {
		return C.STRATA_OK
	}
	setLastError(err.Error())
	return codeOf(err)
}

func codeOf(err error) C.strata_status {
	table := []struct {
		sentinel error
		code     C.strata_status
	}{
		{errInvalidHandle, C.STRATA_ERR_INVALID_HANDLE},
		{strata.ErrClosed, C.STRATA_ERR_INVALID_HANDLE},
		{strata.ErrBusy, C.STRATA_ERR_BUSY},
		{strata.ErrCancelled, C.STRATA_ERR_CANCELLED},
		{strata.ErrCapacity, C.STRATA_ERR_CAPACITY},
		{strata.ErrOutOfMemory, C.STRATA_ERR_OUT_OF_MEMORY},
		{strata.ErrShape, C.STRATA_ERR_SHAPE},
		{strata.ErrDType, C.STRATA_ERR_DTYPE},
		{strata.ErrUnsupported, C.STRATA_ERR_UNSUPPORTED},
		{strata.ErrCheckpoint, C.STRATA_ERR_CHECKPOINT},
		{strata.ErrBackend, C.STRATA_ERR_BACKEND},
		{strata.ErrInvalidArgument, C.STRATA_ERR_INVALID_ARGUMENT},
	}
	for _, e := range table {
		if errors.Is(err, e.sentinel) {
			return e.code
		}
	}
	return C.STRATA_ERR_INTERNAL
}

// guard is deferred first in every export: it turns a panic into STRATA_ERR_INTERNAL with a
// message naming the function and the panic site.
func guard(fn string, st *C.strata_status) {
	if r := recover(); r != nil {
		reportPanic(fn, r)
		*st = C.STRATA_ERR_INTERNAL
	}
}

// guardValue is guard for the exports that return a value instead of a status: a panic is
// recorded as the last error and the zero value is returned. (recover works only when called
// by the deferred function itself, hence the two.)
func guardValue(fn string) {
	if r := recover(); r != nil {
		reportPanic(fn, r)
	}
}

func reportPanic(fn string, r any) {
	stack := string(debug.Stack())
	// Keep the message short enough to read: the panic, then the frames below it.
	if i := strings.Index(stack, "panic("); i >= 0 {
		stack = stack[i:]
	}
	if len(stack) > 4000 {
		stack = stack[:4000]
	}
	setLastError(fmt.Sprintf("strata: internal error in %s: panic: %v\n%s", fn, r, stack))
}

func errArg(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{strata.ErrInvalidArgument}, args...)...)
}

// checkSize rejects a params struct whose struct_size is smaller than this version's struct
// (a caller that did not start from *_default_params()). Larger sizes come from newer headers;
// the fields this version knows are read and the rest ignored.
func checkSize(name string, got C.size_t, want uintptr) error {
	if uintptr(got) < want {
		return errArg("%s.struct_size is %d, want at least %d (start from the *_default_params() function)", name, uint64(got), want)
	}
	return nil
}

// handle converts an opaque handle to its table key.
func handle(p unsafe.Pointer) uintptr { return uintptr(p) }

// putHandle stores handle h through the caller's out pointer. The handle is written as an
// integer so that no Go pointer-typed value ever holds it.
// out points to the caller's handle variable (strata_device** and the like).
func putHandle(out unsafe.Pointer, h uintptr) {
	*(*uintptr)(out) = h
}

// copyCString writes s into buf[0..cap) NUL-terminated and truncated, and returns len(s).
func copyCString(s string, buf *C.char, cap C.size_t) C.size_t {
	if buf != nil && cap > 0 {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(cap))
		n := copy(dst[:len(dst)-1], s)
		dst[n] = 0
	}
	return C.size_t(len(s))
}

//export strata_abi_version
func strata_abi_version() (v C.int32_t) {
	defer guardValue("strata_abi_version")
	return C.STRATA_ABI_VERSION
}

//export strata_version_string
func strata_version_string() (s *C.char) {
	defer guardValue("strata_version_string")
	return versionString()
}

//export strata_last_error
func strata_last_error(buf *C.char, cap C.size_t) (n C.size_t) {
	defer guardValue("strata_last_error")
	return lastError(buf, cap)
}

//export strata_status_name
func strata_status_name(s C.strata_status) (name *C.char) {
	defer guardValue("strata_status_name")
	return statusName(s)
}

//export strata_set_log_callback
func strata_set_log_callback(fn C.strata_log_fn, minLevel C.int32_t, ud unsafe.Pointer) (st C.strata_status) {
	defer guard("strata_set_log_callback", &st)
	if fn == nil {
		logger.Store(nil)
		return C.STRATA_OK
	}
	logger.Store(&logSink{fn: fn, min: int32(minLevel), ud: ud})
	return C.STRATA_OK
}
