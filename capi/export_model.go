package main

/*
#include "strata.h"
*/
import "C"

import (
	"math"
	"slices"
	"unsafe"

	"github.com/stratakernels/strata/strata"
)

//export strata_device_default_params
func strata_device_default_params() (p C.strata_device_params) {
	defer guardValue("strata_device_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	p.backend = C.STRATA_BACKEND_AUTO
	return p
}

//export strata_device_open
func strata_device_open(params *C.strata_device_params, out **C.strata_device) (st C.strata_status) {
	defer guard("strata_device_open", &st)
	if out == nil {
		return statusOf(errArg("strata_device_open: out is NULL"))
	}
	backend := int32(C.STRATA_BACKEND_AUTO)
	if params != nil {
		if err := checkSize("strata_device_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		backend = int32(params.backend)
	}
	h, err := deviceOpen(backend)
	if err != nil {
		return statusOf(err)
	}
	putHandle(unsafe.Pointer(out), h)
	return C.STRATA_OK
}

//export strata_device_free
func strata_device_free(d *C.strata_device) (st C.strata_status) {
	defer guard("strata_device_free", &st)
	return statusOf(deviceFree(handle(unsafe.Pointer(d))))
}

//export strata_device_info
func strata_device_info(d *C.strata_device, info *C.strata_device_props) (st C.strata_status) {
	defer guard("strata_device_info", &st)
	if info == nil {
		return statusOf(errArg("strata_device_info: info is NULL"))
	}
	if err := checkSize("strata_device_props", info.struct_size, unsafe.Sizeof(*info)); err != nil {
		return statusOf(err)
	}
	backend, kernels, err := deviceInfo(handle(unsafe.Pointer(d)))
	if err != nil {
		return statusOf(err)
	}
	copyCString(backend, &info.backend[0], C.size_t(len(info.backend)))
	copyCString(kernels, &info.kernels[0], C.size_t(len(info.kernels)))
	return C.STRATA_OK
}

//export strata_model_default_params
func strata_model_default_params() (p C.strata_model_params) {
	defer guardValue("strata_model_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	return p
}

//export strata_model_load
func strata_model_load(d *C.strata_device, dir *C.char, params *C.strata_model_params, out **C.strata_model) (st C.strata_status) {
	defer guard("strata_model_load", &st)
	if dir == nil || out == nil {
		return statusOf(errArg("strata_model_load: checkpoint_dir or out is NULL"))
	}
	var opts strata.LoadOptions
	if params != nil {
		if err := checkSize("strata_model_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		opts.Progress = progressFunc(params.progress, params.progress_user_data)
		lo, hi := int64(params.layer_lo), int64(params.layer_hi)
		if lo < 0 || hi < 0 || lo > math.MaxInt32 || hi > math.MaxInt32 {
			return statusOf(errArg("strata_model_load: layers [%d, %d) out of range", lo, hi))
		}
		opts.Layers = [2]int{int(lo), int(hi)}
		if params.compute != nil {
			opts.Compute = C.GoString(params.compute)
			if !slices.Contains(strata.ComputeModes, opts.Compute) {
				return statusOf(errArg("strata_model_load: compute mode %q (want f32, bf16 or int8)", opts.Compute))
			}
		}
	}
	h, err := modelLoad(handle(unsafe.Pointer(d)), C.GoString(dir), opts)
	if err != nil {
		return statusOf(err)
	}
	putHandle(unsafe.Pointer(out), h)
	return C.STRATA_OK
}

//export strata_model_free
func strata_model_free(m *C.strata_model) (st C.strata_status) {
	defer guard("strata_model_free", &st)
	return statusOf(modelFree(handle(unsafe.Pointer(m))))
}

//export strata_model_info
func strata_model_info(m *C.strata_model, info *C.strata_model_props) (st C.strata_status) {
	defer guard("strata_model_info", &st)
	if info == nil {
		return statusOf(errArg("strata_model_info: info is NULL"))
	}
	if err := checkSize("strata_model_props", info.struct_size, unsafe.Sizeof(*info)); err != nil {
		return statusOf(err)
	}
	var arch string
	var vocab, layers, lo, hi, hidden int
	err := withModel(handle(unsafe.Pointer(m)), func(md *strata.Model) error {
		arch, vocab, layers, hidden = md.Arch(), md.Vocab(), md.Layers(), md.HiddenSize()
		lo, hi = md.LayerRange()
		return nil
	})
	if err != nil {
		return statusOf(err)
	}
	copyCString(arch, &info.arch[0], C.size_t(len(info.arch)))
	info.vocab = C.int64_t(vocab)
	info.layers = C.int64_t(layers)
	info.layer_lo, info.layer_hi = C.int64_t(lo), C.int64_t(hi)
	info.hidden_size = C.int64_t(hidden)
	return C.STRATA_OK
}

//export strata_device_kernels
func strata_device_kernels(d *C.strata_device, buf *C.char, cap C.size_t, n *C.size_t) (st C.strata_status) {
	defer guard("strata_device_kernels", &st)
	if buf == nil && cap > 0 {
		return statusOf(errArg("strata_device_kernels: buf is NULL with cap %d", uint64(cap)))
	}
	_, kernels, err := deviceInfo(handle(unsafe.Pointer(d)))
	if err != nil {
		return statusOf(err)
	}
	full := copyCString(kernels, buf, cap)
	if n != nil {
		*n = full
	}
	return C.STRATA_OK
}

//export strata_model_compute
func strata_model_compute(m *C.strata_model, buf *C.char, cap C.size_t, n *C.size_t) (st C.strata_status) {
	defer guard("strata_model_compute", &st)
	if buf == nil && cap > 0 {
		return statusOf(errArg("strata_model_compute: buf is NULL with cap %d", uint64(cap)))
	}
	var rep string
	if err := withModel(handle(unsafe.Pointer(m)), func(md *strata.Model) error { rep = md.Compute(); return nil }); err != nil {
		return statusOf(err)
	}
	full := copyCString(rep, buf, cap)
	if n != nil {
		*n = full
	}
	return C.STRATA_OK
}

//export strata_model_describe
func strata_model_describe(m *C.strata_model, buf *C.char, cap C.size_t, n *C.size_t) (st C.strata_status) {
	defer guard("strata_model_describe", &st)
	if buf == nil && cap > 0 {
		return statusOf(errArg("strata_model_describe: buf is NULL with cap %d", uint64(cap)))
	}
	var desc string
	if err := withModel(handle(unsafe.Pointer(m)), func(md *strata.Model) error { desc = md.Describe(); return nil }); err != nil {
		return statusOf(err)
	}
	full := copyCString(desc, buf, cap)
	if n != nil {
		*n = full
	}
	return C.STRATA_OK
}
