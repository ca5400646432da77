package main

/*
#include "strata.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/stratakernels/strata/strata"
)

//export strata_session_save
func strata_session_save(s *C.strata_session, path *C.char) (st C.strata_status) {
	defer guard("strata_session_save", &st)
	if path == nil {
		return statusOf(errArg("strata_session_save: path is NULL"))
	}
	return statusOf(sessionSave(handle(unsafe.Pointer(s)), C.GoString(path)))
}

//export strata_session_load
func strata_session_load(s *C.strata_session, path *C.char) (st C.strata_status) {
	defer guard("strata_session_load", &st)
	if path == nil {
		return statusOf(errArg("strata_session_load: path is NULL"))
	}
	return statusOf(sessionLoad(handle(unsafe.Pointer(s)), C.GoString(path)))
}

//export strata_mlx_lm_default_params
func strata_mlx_lm_default_params() (p C.strata_mlx_lm_params) {
	defer guardValue("strata_mlx_lm_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	return p
}

//export strata_session_save_mlx_lm
func strata_session_save_mlx_lm(s *C.strata_session, path *C.char, params *C.strata_mlx_lm_params) (st C.strata_status) {
	defer guard("strata_session_save_mlx_lm", &st)
	if path == nil {
		return statusOf(errArg("strata_session_save_mlx_lm: path is NULL"))
	}
	var opts strata.MLXLMOptions
	if params != nil {
		if err := checkSize("strata_mlx_lm_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		if params.format != nil {
			opts.Format = C.GoString(params.format)
		}
		if params.dtype != nil {
			opts.DType = C.GoString(params.dtype)
		}
		if params.model != nil {
			opts.Model = C.GoString(params.model)
		}
	}
	return statusOf(sessionSaveMLXLM(handle(unsafe.Pointer(s)), C.GoString(path), opts))
}

//export strata_session_tokens
func strata_session_tokens(s *C.strata_session, ids *C.int32_t, cap C.size_t, n *C.size_t) (st C.strata_status) {
	defer guard("strata_session_tokens", &st)
	switch {
	case n == nil:
		return statusOf(errArg("strata_session_tokens: n_ids is NULL"))
	case ids == nil && cap > 0:
		return statusOf(errArg("strata_session_tokens: ids_out is NULL with cap %d", uint64(cap)))
	}
	got, err := sessionTokens(handle(unsafe.Pointer(s)))
	if err != nil {
		return statusOf(err)
	}
	if ids != nil && uint64(cap) < uint64(len(got)) {
		*n = C.size_t(len(got))
		return statusOf(fmt.Errorf("%w: strata_session_tokens: ids_out holds %d ids, the session has %d", strata.ErrShape, uint64(cap), len(got)))
	}
	if ids != nil {
		copy(unsafe.Slice((*int32)(unsafe.Pointer(ids)), len(got)), got)
	}
	*n = C.size_t(len(got))
	return C.STRATA_OK
}

//export strata_prompt_cache_default_params
func strata_prompt_cache_default_params() (p C.strata_prompt_cache_params) {
	defer guardValue("strata_prompt_cache_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	p.bytes = C.STRATA_DEFAULT_PROMPT_CACHE_BYTES
	p.every = C.STRATA_DEFAULT_CHECKPOINT_EVERY
	return p
}

//export strata_prompt_cache_new
func strata_prompt_cache_new(m *C.strata_model, params *C.strata_prompt_cache_params, out **C.strata_prompt_cache) (st C.strata_status) {
	defer guard("strata_prompt_cache_new", &st)
	if out == nil {
		return statusOf(errArg("strata_prompt_cache_new: out is NULL"))
	}
	var opts strata.PromptCacheOptions
	if params != nil {
		if err := checkSize("strata_prompt_cache_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		if params.dir != nil {
			opts.Dir = C.GoString(params.dir)
		}
		opts.Bytes, opts.DiskBytes = int64(params.bytes), int64(params.disk_bytes)
		if e := int64(params.every); e < 0 || e > 1<<24 {
			return statusOf(errArg("strata_prompt_cache_new: every %d out of range [0, %d]", e, 1<<24))
		}
		opts.Every = int(params.every)
	}
	h, err := promptCacheNew(handle(unsafe.Pointer(m)), opts)
	if err != nil {
		return statusOf(err)
	}
	putHandle(unsafe.Pointer(out), h)
	return C.STRATA_OK
}

//export strata_prompt_cache_free
func strata_prompt_cache_free(c *C.strata_prompt_cache) (st C.strata_status) {
	defer guard("strata_prompt_cache_free", &st)
	return statusOf(promptCacheFree(handle(unsafe.Pointer(c))))
}

//export strata_prompt_cache_prefill
func strata_prompt_cache_prefill(c *C.strata_prompt_cache, s *C.strata_session, tokens *C.int32_t, n C.size_t,
	params *C.strata_prefill_params, logits *C.float, logitsCap C.size_t, written *C.size_t,
	result *C.strata_prompt_cache_result) (st C.strata_status) {
	defer guard("strata_prompt_cache_prefill", &st)
	if result != nil {
		if err := checkSize("strata_prompt_cache_result", result.struct_size, unsafe.Sizeof(*result)); err != nil {
			return statusOf(err)
		}
	}
	toks, req, out, err := prefillArgs("strata_prompt_cache_prefill", tokens, n, params, logits, logitsCap)
	if err != nil {
		return statusOf(err)
	}
	w, res, err := promptCachePrefill(handle(unsafe.Pointer(c)), handle(unsafe.Pointer(s)), toks, req, out)
	if err != nil {
		return statusOf(err)
	}
	if written != nil {
		*written = C.size_t(w)
	}
	if result != nil {
		result.reused = C.int64_t(res.Reused)
		result.tokens = C.int64_t(res.Tokens)
		result.source = map[string]C.int32_t{"": C.STRATA_CACHE_MISS, "session": C.STRATA_CACHE_SESSION,
			"memory": C.STRATA_CACHE_MEMORY, "disk": C.STRATA_CACHE_DISK}[res.From]
		result.checkpoints = C.int64_t(res.Checkpoints)
		result.checkpoint_bytes = C.int64_t(res.CheckpointBytes)
		result.skipped = C.int64_t(res.Skipped)
		result.restore_seconds = C.double(res.Restore.Seconds())
		result.checkpoint_seconds = C.double(res.CheckpointTime.Seconds())
		result.total_seconds = C.double(res.Total.Seconds())
		result.memory_checkpoints = C.int64_t(res.MemoryCheckpoints)
		result.memory_bytes = C.int64_t(res.MemoryBytes)
		result.disk_checkpoints = C.int64_t(res.DiskCheckpoints)
		result.disk_bytes = C.int64_t(res.DiskBytes)
	}
	return C.STRATA_OK
}
