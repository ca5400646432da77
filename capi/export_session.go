package main

/*
#include "strata.h"
*/
import "C"

import (
	"unsafe"

	"github.com/stratakernels/strata/strata"
)

//export strata_session_default_params
func strata_session_default_params() (p C.strata_session_params) {
	defer guardValue("strata_session_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	return p
}

//export strata_session_new
func strata_session_new(m *C.strata_model, params *C.strata_session_params, out **C.strata_session) (st C.strata_status) {
	defer guard("strata_session_new", &st)
	if out == nil {
		return statusOf(errArg("strata_session_new: out is NULL"))
	}
	var maxContext int64
	if params != nil {
		if err := checkSize("strata_session_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		maxContext = int64(params.max_context)
	}
	h, err := sessionNew(handle(unsafe.Pointer(m)), maxContext)
	if err != nil {
		return statusOf(err)
	}
	putHandle(unsafe.Pointer(out), h)
	return C.STRATA_OK
}

//export strata_session_free
func strata_session_free(s *C.strata_session) (st C.strata_status) {
	defer guard("strata_session_free", &st)
	return statusOf(sessionFree(handle(unsafe.Pointer(s))))
}

//export strata_prefill_default_params
func strata_prefill_default_params() (p C.strata_prefill_params) {
	defer guardValue("strata_prefill_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	p.step = C.STRATA_DEFAULT_STEP
	return p
}

// prefillArgs reads the arguments shared by strata_session_prefill and strata_prefill: the
// tokens (copied), all_logits, step, the stage's hidden_in and hidden_out, and the output buffer.
func prefillArgs(fn string, tokens *C.int32_t, n C.size_t, params *C.strata_prefill_params,
	logits *C.float, logitsCap C.size_t) ([]int32, prefillReq, prefillOut, error) {
	req := prefillReq{step: strata.DefaultStep}
	if tokens == nil || n == 0 {
		return nil, req, prefillOut{}, errArg("%s: tokens is NULL or n_tokens is 0 (empty prompt)", fn)
	}
	if uint64(n) > 1<<24 {
		return nil, req, prefillOut{}, errArg("%s: n_tokens %d exceeds the largest context (%d)", fn, uint64(n), 1<<24)
	}
	if params != nil {
		if err := checkSize("strata_prefill_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return nil, req, prefillOut{}, err
		}
		req.all = params.all_logits != 0
		switch step := int64(params.step); {
		case step < 0:
			return nil, req, prefillOut{}, errArg("%s: step %d is negative (0: one shot; default %d)", fn, step, strata.DefaultStep)
		case step == 0:
			req.step = strata.OneShot
		default:
			req.step = int(min(step, 1<<24))
		}
		if params.hidden_in == nil && params.hidden_in_len != 0 {
			return nil, req, prefillOut{}, errArg("%s: hidden_in is NULL but hidden_in_len is %d", fn, uint64(params.hidden_in_len))
		}
		if params.hidden_in != nil {
			if uint64(params.hidden_in_len) > 1<<40 {
				return nil, req, prefillOut{}, errArg("%s: hidden_in_len %d is implausible", fn, uint64(params.hidden_in_len))
			}
			req.hiddenIn = unsafe.Slice((*float32)(unsafe.Pointer(params.hidden_in)), int(params.hidden_in_len))
		}
		if params.hidden_out == nil && params.hidden_out_cap != 0 {
			return nil, req, prefillOut{}, errArg("%s: hidden_out is NULL but hidden_out_cap is %d", fn, uint64(params.hidden_out_cap))
		}
		hidden := params.hidden_out
		req.hiddenOut = prefillOut{
			have:     hidden != nil,
			capacity: uint64(params.hidden_out_cap),
			buf: func(need int) []float32 {
				return unsafe.Slice((*float32)(unsafe.Pointer(hidden)), need)
			},
		}
	}
	if logits == nil && logitsCap != 0 {
		return nil, req, prefillOut{}, errArg("%s: logits_out is NULL but logits_cap is %d", fn, uint64(logitsCap))
	}
	toks := append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(tokens)), int(n))...)
	out := prefillOut{
		have:     logits != nil,
		capacity: uint64(logitsCap),
		buf: func(need int) []float32 {
			return unsafe.Slice((*float32)(unsafe.Pointer(logits)), need)
		},
	}
	return toks, req, out, nil
}

//export strata_session_prefill
func strata_session_prefill(s *C.strata_session, tokens *C.int32_t, n C.size_t, params *C.strata_prefill_params,
	logits *C.float, logitsCap C.size_t, written *C.size_t) (st C.strata_status) {
	defer guard("strata_session_prefill", &st)
	toks, req, out, err := prefillArgs("strata_session_prefill", tokens, n, params, logits, logitsCap)
	if err != nil {
		return statusOf(err)
	}
	w, err := sessionPrefill(handle(unsafe.Pointer(s)), toks, req, out)
	if err != nil {
		return statusOf(err)
	}
	if written != nil {
		*written = C.size_t(w)
	}
	return C.STRATA_OK
}

//export strata_session_cancel
func strata_session_cancel(s *C.strata_session) (st C.strata_status) {
	defer guard("strata_session_cancel", &st)
	return statusOf(sessionCancel(handle(unsafe.Pointer(s))))
}

//export strata_session_position
func strata_session_position(s *C.strata_session, out *C.int64_t) (st C.strata_status) {
	defer guard("strata_session_position", &st)
	if out == nil {
		return statusOf(errArg("strata_session_position: out is NULL"))
	}
	pos, err := sessionPosition(handle(unsafe.Pointer(s)))
	if err != nil {
		return statusOf(err)
	}
	*out = C.int64_t(pos)
	return C.STRATA_OK
}

//export strata_session_reset
func strata_session_reset(s *C.strata_session) (st C.strata_status) {
	defer guard("strata_session_reset", &st)
	return statusOf(sessionReset(handle(unsafe.Pointer(s))))
}

//export strata_session_snapshot
func strata_session_snapshot(s *C.strata_session, out **C.strata_snapshot) (st C.strata_status) {
	defer guard("strata_session_snapshot", &st)
	if out == nil {
		return statusOf(errArg("strata_session_snapshot: out is NULL"))
	}
	h, err := sessionSnapshot(handle(unsafe.Pointer(s)))
	if err != nil {
		return statusOf(err)
	}
	putHandle(unsafe.Pointer(out), h)
	return C.STRATA_OK
}

//export strata_session_restore
func strata_session_restore(s *C.strata_session, snap *C.strata_snapshot) (st C.strata_status) {
	defer guard("strata_session_restore", &st)
	return statusOf(sessionRestore(handle(unsafe.Pointer(s)), handle(unsafe.Pointer(snap))))
}

//export strata_snapshot_position
func strata_snapshot_position(snap *C.strata_snapshot, out *C.int64_t) (st C.strata_status) {
	defer guard("strata_snapshot_position", &st)
	if out == nil {
		return statusOf(errArg("strata_snapshot_position: out is NULL"))
	}
	pos, err := snapshotPosition(handle(unsafe.Pointer(snap)))
	if err != nil {
		return statusOf(err)
	}
	*out = C.int64_t(pos)
	return C.STRATA_OK
}

//export strata_snapshot_free
func strata_snapshot_free(snap *C.strata_snapshot) (st C.strata_status) {
	defer guard("strata_snapshot_free", &st)
	return statusOf(snapshotFree(handle(unsafe.Pointer(snap))))
}

//export strata_prefill
func strata_prefill(dir *C.char, tokens *C.int32_t, n C.size_t, params *C.strata_prefill_params,
	logits *C.float, logitsCap C.size_t, written *C.size_t) (st C.strata_status) {
	defer guard("strata_prefill", &st)
	if dir == nil {
		return statusOf(errArg("strata_prefill: checkpoint_dir is NULL"))
	}
	toks, req, out, err := prefillArgs("strata_prefill", tokens, n, params, logits, logitsCap)
	if err != nil {
		return statusOf(err)
	}
	w, err := prefillOnce(C.GoString(dir), toks, req, out)
	if err != nil {
		return statusOf(err)
	}
	if written != nil {
		*written = C.size_t(w)
	}
	return C.STRATA_OK
}
