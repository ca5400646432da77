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

// cTensor reads a strata_tensor descriptor (NULL gives a tensor with present false). Shape and
// strides are copied; data stays the caller's.
func cTensor(name string, p *C.strata_tensor) (tensor, error) {
	t := tensor{name: name}
	if p == nil {
		return t, nil
	}
	t.present = true
	t.data = p.data
	t.dtype = int32(p.dtype)
	nd := int(p.ndim)
	if nd < 1 || nd > 8 {
		return t, fmt.Errorf("%w: %s: ndim %d outside 1..8", strata.ErrShape, name, nd)
	}
	if p.shape == nil {
		return t, fmt.Errorf("%w: %s: NULL shape", strata.ErrInvalidArgument, name)
	}
	t.shape = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(p.shape)), nd)...)
	if p.strides != nil {
		t.strides = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(p.strides)), nd)...)
	}
	return t, nil
}

// cTensors reads several descriptors, stopping at the first malformed one.
func cTensors(names []string, ps ...*C.strata_tensor) ([]tensor, error) {
	out := make([]tensor, len(ps))
	for i, p := range ps {
		var err error
		if out[i], err = cTensor(names[i], p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

//export strata_attention_default_params
func strata_attention_default_params() (p C.strata_attention_params) {
	defer guardValue("strata_attention_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	return p
}

//export strata_attention
func strata_attention(dev *C.strata_device, q, k, v, o, lse *C.strata_tensor, params *C.strata_attention_params) (st C.strata_status) {
	defer guard("strata_attention", &st)
	ts, err := cTensors([]string{"q", "k", "v", "o", "lse"}, q, k, v, o, lse)
	if err != nil {
		return statusOf(err)
	}
	p := attentionParams{selDense: tensor{name: "sel_dense"}, selOff: tensor{name: "sel_offsets"}, selTok: tensor{name: "sel_tokens"}}
	if params != nil {
		if err := checkSize("strata_attention_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		p.pos0 = int64(params.pos0)
		p.scale = float32(params.scale)
		sel, err := cTensors([]string{"sel_dense", "sel_offsets", "sel_tokens"}, params.sel_dense, params.sel_offsets, params.sel_tokens)
		if err != nil {
			return statusOf(err)
		}
		p.selDense, p.selOff, p.selTok = sel[0], sel[1], sel[2]
	}
	return statusOf(withDevice(handle(unsafe.Pointer(dev)), func(d *strata.Device) error {
		return attention(d, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &p)
	}))
}

//export strata_gdn_default_params
func strata_gdn_default_params() (p C.strata_gdn_params) {
	defer guardValue("strata_gdn_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	p.head_map = C.STRATA_GDN_GROUPED
	p.mode = C.STRATA_GDN_CHUNKED
	return p
}

//export strata_gdn_scan
func strata_gdn_scan(dev *C.strata_device, q, k, v, g, beta, state, o *C.strata_tensor, params *C.strata_gdn_params) (st C.strata_status) {
	defer guard("strata_gdn_scan", &st)
	ts, err := cTensors([]string{"q", "k", "v", "g", "beta", "state", "o"}, q, k, v, g, beta, state, o)
	if err != nil {
		return statusOf(err)
	}
	var p gdnParams
	if params != nil {
		if err := checkSize("strata_gdn_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		p = gdnParams{headMap: int32(params.head_map), mode: int32(params.mode), normalizeQK: params.normalize_qk != 0}
	}
	return statusOf(withDevice(handle(unsafe.Pointer(dev)), func(d *strata.Device) error {
		return gdnScan(d, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &ts[5], &ts[6], p)
	}))
}

//export strata_moe_default_params
func strata_moe_default_params() (p C.strata_moe_params) {
	defer guardValue("strata_moe_default_params")
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	return p
}

//export strata_moe_combine
func strata_moe_combine(dev *C.strata_device, ye, rk, w, out *C.strata_tensor, params *C.strata_moe_params) (st C.strata_status) {
	defer guard("strata_moe_combine", &st)
	var shared, beta *C.strata_tensor
	if params != nil {
		if err := checkSize("strata_moe_params", params.struct_size, unsafe.Sizeof(*params)); err != nil {
			return statusOf(err)
		}
		shared, beta = params.shared, params.beta
	}
	ts, err := cTensors([]string{"ye", "rk", "w", "out", "shared", "beta"}, ye, rk, w, out, shared, beta)
	if err != nil {
		return statusOf(err)
	}
	return statusOf(withDevice(handle(unsafe.Pointer(dev)), func(d *strata.Device) error {
		return moeCombine(d, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &ts[5])
	}))
}
