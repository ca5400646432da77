package main

// C helpers used by the exported functions: per-thread last-error storage, calls through the
// host's function pointers, and the static names of status codes. They live in a file without
// //export directives because cgo allows only declarations in the preamble of such files.

/*
#cgo CFLAGS: -I${SRCDIR}/../include -DSTRATA_TYPES_ONLY
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "strata.h"

typedef struct { char* msg; size_t len; } strata_capi_err;

static pthread_key_t strata_capi_err_key;
static pthread_once_t strata_capi_err_once = PTHREAD_ONCE_INIT;

static void strata_capi_err_destroy(void* p) {
	strata_capi_err* e = (strata_capi_err*)p;
	free(e->msg);
	free(e);
}

static void strata_capi_err_init(void) { pthread_key_create(&strata_capi_err_key, strata_capi_err_destroy); }

static strata_capi_err* strata_capi_err_get(int create) {
	pthread_once(&strata_capi_err_once, strata_capi_err_init);
	strata_capi_err* e = (strata_capi_err*)pthread_getspecific(strata_capi_err_key);
	if (e == NULL && create) {
		e = (strata_capi_err*)calloc(1, sizeof *e);
		if (e != NULL && pthread_setspecific(strata_capi_err_key, e) != 0) {
			free(e);
			e = NULL;
		}
	}
	return e;
}

// Stores a copy of msg[0..n) as the calling thread's last error. A failed allocation keeps
// the previous message: nothing better can be done, and the status code still says what failed.
static void strata_capi_set_error(const char* msg, size_t n) {
	strata_capi_err* e = strata_capi_err_get(1);
	if (e == NULL) return;
	char* m = (char*)malloc(n + 1);
	if (m == NULL) return;
	memcpy(m, msg, n);
	m[n] = 0;
	free(e->msg);
	e->msg = m;
	e->len = n;
}

static size_t strata_capi_last_error(char* buf, size_t cap) {
	strata_capi_err* e = strata_capi_err_get(0);
	size_t n = (e == NULL || e->msg == NULL) ? 0 : e->len;
	if (buf != NULL && cap > 0) {
		size_t k = n < cap - 1 ? n : cap - 1;
		if (k > 0) memcpy(buf, e->msg, k);
		buf[k] = 0;
	}
	return n;
}

static void strata_capi_call_log(strata_log_fn fn, int32_t level, const char* msg, void* ud) { fn(level, msg, ud); }

static void strata_capi_call_progress(strata_progress_fn fn, int64_t done, int64_t total, const char* name, void* ud) {
	fn(done, total, name, ud);
}

static const char* strata_capi_status_name(strata_status s) {
	switch (s) {
	case STRATA_OK: return "STRATA_OK";
	case STRATA_ERR_INVALID_ARGUMENT: return "STRATA_ERR_INVALID_ARGUMENT";
	case STRATA_ERR_INVALID_HANDLE: return "STRATA_ERR_INVALID_HANDLE";
	case STRATA_ERR_SHAPE: return "STRATA_ERR_SHAPE";
	case STRATA_ERR_DTYPE: return "STRATA_ERR_DTYPE";
	case STRATA_ERR_CAPACITY: return "STRATA_ERR_CAPACITY";
	case STRATA_ERR_CHECKPOINT: return "STRATA_ERR_CHECKPOINT";
	case STRATA_ERR_BACKEND: return "STRATA_ERR_BACKEND";
	case STRATA_ERR_OUT_OF_MEMORY: return "STRATA_ERR_OUT_OF_MEMORY";
	case STRATA_ERR_CANCELLED: return "STRATA_ERR_CANCELLED";
	case STRATA_ERR_INTERNAL: return "STRATA_ERR_INTERNAL";
	case STRATA_ERR_BUSY: return "STRATA_ERR_BUSY";
	case STRATA_ERR_UNSUPPORTED: return "STRATA_ERR_UNSUPPORTED";
	}
	return "unknown";
}

static const char* strata_capi_version(void) { return "strata 0.1.0 (abi 5)"; }
*/
import "C"

import (
	"sync/atomic"
	"unsafe"

	"github.com/stratakernels/strata/strata"
)

// setLastError records msg as the calling thread's last error. Exported functions run on the
// caller's thread (cgo locks the goroutine to it for the duration of the call), so the C
// thread-local storage is the caller's.
func setLastError(msg string) {
	if msg == "" {
		msg = "unknown error"
	}
	p := unsafe.Pointer(unsafe.StringData(msg))
	C.strata_capi_set_error((*C.char)(p), C.size_t(len(msg)))
}

func lastError(buf *C.char, cap C.size_t) C.size_t { return C.strata_capi_last_error(buf, cap) }

func statusName(s C.strata_status) *C.char { return C.strata_capi_status_name(s) }

func versionString() *C.char { return C.strata_capi_version() }

// logSink is the process-wide log callback set by strata_set_log_callback.
type logSink struct {
	fn  C.strata_log_fn
	min int32
	ud  unsafe.Pointer // the host's user_data: C memory or an opaque value, never dereferenced here
}

var logger atomic.Pointer[logSink]

// hostLog forwards a library message to the host's callback, if any. Devices call it from any
// goroutine; the callback is documented to accept that.
func hostLog(level strata.LogLevel, msg string) {
	s := logger.Load()
	if s == nil || s.fn == nil || int32(level) < s.min {
		return
	}
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.strata_capi_call_log(s.fn, C.int32_t(level), cs, s.ud)
}

// progressFunc adapts a host progress callback to strata.LoadOptions.Progress; nil when fn is
// NULL.
func progressFunc(fn C.strata_progress_fn, ud unsafe.Pointer) func(done, total int64, name string) {
	if fn == nil {
		return nil
	}
	return func(done, total int64, name string) {
		cs := C.CString(name)
		defer C.free(unsafe.Pointer(cs))
		C.strata_capi_call_progress(fn, C.int64_t(done), C.int64_t(total), cs, ud)
	}
}
