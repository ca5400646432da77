//go:build cgo

package main

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/strata"
)

// Element types of strata_tensor (include/strata.h STRATA_F32 ...).
const (
	dtF32  int32 = 0
	dtF16  int32 = 1
	dtBF16 int32 = 2
	dtI32  int32 = 3
	dtU8   int32 = 4
)

var dtypeNames = map[int32]string{dtF32: "f32", dtF16: "f16", dtBF16: "bf16", dtI32: "i32", dtU8: "u8"}

var dtypeSize = map[int32]uintptr{dtF32: 4, dtF16: 2, dtBF16: 2, dtI32: 4, dtU8: 1}

// maxElems bounds a tensor's element count: kernels (the Metal ones in particular) index with
// 32-bit offsets.
const maxElems = 1<<31 - 1

// tensor is a strata_tensor read into Go values: the caller's memory (data), never copied, and
// copies of its shape and strides. present is false for a NULL descriptor.
type tensor struct {
	name    string
	present bool
	data    unsafe.Pointer
	dtype   int32
	shape   []int64
	strides []int64 // nil: C-contiguous
}

func (t *tensor) elems() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= d
	}
	return n
}

func (t *tensor) bytes() uintptr { return uintptr(t.elems()) * dtypeSize[t.dtype] }

// check validates t against dtype and a shape pattern (-1: any size, taken from the tensor).
// It checks presence, non-NULL data, ndim, positive dims, the element count, contiguity and
// alignment, then returns the shape as ints.
func (t *tensor) check(dtype int32, want ...int64) ([]int, error) {
	if !t.present {
		return nil, fmt.Errorf("%w: %s: NULL tensor descriptor", strata.ErrInvalidArgument, t.name)
	}
	if t.data == nil {
		return nil, fmt.Errorf("%w: %s: NULL data", strata.ErrInvalidArgument, t.name)
	}
	if _, ok := dtypeSize[t.dtype]; !ok {
		return nil, fmt.Errorf("%w: %s: unknown dtype %d", strata.ErrDType, t.name, t.dtype)
	}
	if t.dtype != dtype {
		return nil, fmt.Errorf("%w: %s: dtype %s, want %s", strata.ErrDType, t.name, dtypeNames[t.dtype], dtypeNames[dtype])
	}
	if len(t.shape) != len(want) {
		return nil, fmt.Errorf("%w: %s: ndim %d, want %d", strata.ErrShape, t.name, len(t.shape), len(want))
	}
	n := int64(1)
	for i, d := range t.shape {
		if d < 1 {
			return nil, fmt.Errorf("%w: %s: dim %d is %d, want >= 1", strata.ErrShape, t.name, i, d)
		}
		if want[i] >= 0 && d != want[i] {
			return nil, fmt.Errorf("%w: %s: shape %v, dim %d must be %d", strata.ErrShape, t.name, t.shape, i, want[i])
		}
		if n > maxElems/d {
			return nil, fmt.Errorf("%w: %s: shape %v has more than 2^31-1 elements (32-bit offsets)", strata.ErrShape, t.name, t.shape)
		}
		n *= d
	}
	if t.strides != nil {
		s := int64(1)
		for i := len(t.shape) - 1; i >= 0; i-- {
			if t.shape[i] > 1 && t.strides[i] != s {
				return nil, fmt.Errorf("%w: %s: strides %v are not C-contiguous for shape %v (only contiguous tensors are supported)", strata.ErrInvalidArgument, t.name, t.strides, t.shape)
			}
			s *= t.shape[i]
		}
	}
	if uintptr(t.data)%dtypeSize[t.dtype] != 0 {
		return nil, fmt.Errorf("%w: %s: data %p is not aligned to %d bytes", strata.ErrInvalidArgument, t.name, t.data, dtypeSize[t.dtype])
	}
	out := make([]int, len(t.shape))
	for i, d := range t.shape {
		out[i] = int(d)
	}
	return out, nil
}

// The slices below alias the caller's memory for the duration of one call only.

func (t *tensor) f32() []float32 { return unsafe.Slice((*float32)(t.data), t.elems()) }
func (t *tensor) i32() []int32   { return unsafe.Slice((*int32)(t.data), t.elems()) }
func (t *tensor) u8() []uint8    { return unsafe.Slice((*uint8)(t.data), t.elems()) }

// noOverlap fails when an output's memory overlaps another output's or an input's.
func noOverlap(outs []*tensor, ins ...*tensor) error {
	overlap := func(a, b *tensor) bool {
		a0, b0 := uintptr(a.data), uintptr(b.data)
		return a0 < b0+b.bytes() && b0 < a0+a.bytes()
	}
	for i, o := range outs {
		if !o.present {
			continue
		}
		for _, x := range append(append([]*tensor{}, outs[i+1:]...), ins...) {
			if x.present && overlap(o, x) {
				return fmt.Errorf("%w: output %s overlaps %s", strata.ErrInvalidArgument, o.name, x.name)
			}
		}
	}
	return nil
}

// attentionParams are strata_attention_params read into Go values.
type attentionParams struct {
	pos0                     int64
	scale                    float32
	selDense, selOff, selTok tensor
}

// attention is strata_attention: checks every descriptor against q's sizes, then runs the
// attention op on the device (in place on the caller's memory on cpu; through device copies on
// metal and emu).
func attention(d *strata.Device, q, k, v, o, lse *tensor, p *attentionParams) error {
	qs, err := q.check(dtF32, -1, -1, -1)
	if err != nil {
		return err
	}
	T, Hq, D := qs[0], qs[1], qs[2]
	ks, err := k.check(dtF32, -1, -1, int64(D))
	if err != nil {
		return err
	}
	N, Hkv := ks[0], ks[1]
	if _, err := v.check(dtF32, int64(N), int64(Hkv), int64(D)); err != nil {
		return err
	}
	if _, err := o.check(dtF32, int64(T), int64(Hq), int64(D)); err != nil {
		return err
	}
	var lseT op.Tensor
	if lse.present {
		if _, err := lse.check(dtF32, int64(T), int64(Hq)); err != nil {
			return err
		}
		lseT = op.HostF32(lse.f32())
	}
	if p.pos0 < 0 || p.pos0+int64(T) > int64(N) {
		return fmt.Errorf("%w: pos0 %d with T %d needs a cache of pos0+T rows, k and v hold %d", strata.ErrShape, p.pos0, T, N)
	}
	if Hq%Hkv != 0 {
		return fmt.Errorf("%w: Hkv %d does not divide Hq %d", strata.ErrInvalidArgument, Hkv, Hq)
	}
	scale := p.scale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(D)))
	}
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("%w: scale %g must be finite and positive (0 for 1/sqrt(D))", strata.ErrInvalidArgument, p.scale)
	}
	sel, err := selection(p, T)
	if err != nil {
		return err
	}
	ins := []*tensor{q, k, v, &p.selDense, &p.selOff, &p.selTok}
	if err := noOverlap([]*tensor{o, lse}, ins...); err != nil {
		return err
	}
	a := op.Attention{O: op.HostF32(o.f32()), LSE: lseT, Q: op.HostF32(q.f32()), K: op.HostF32(k.f32()), V: op.HostF32(v.f32()),
		P: op.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: D, Pos0: int(p.pos0), Scale: scale}}
	if sel != nil {
		a.Sel, a.Tok = sel, op.HostI32(sel.Tokens)
	}
	return d.Attention(a)
}

// selection reads the optional QSA selection; nil when none is given.
func selection(p *attentionParams, T int) (*op.Selection, error) {
	if !p.selOff.present {
		if p.selDense.present || p.selTok.present {
			return nil, fmt.Errorf("%w: sel_dense/sel_tokens given without sel_offsets", strata.ErrInvalidArgument)
		}
		return nil, nil
	}
	if _, err := p.selOff.check(dtI32, int64(T+1)); err != nil {
		return nil, err
	}
	sel := &op.Selection{T: T, Offsets: p.selOff.i32(), Dense: make([]bool, T)}
	if p.selDense.present {
		if _, err := p.selDense.check(dtU8, int64(T)); err != nil {
			return nil, err
		}
		for i, b := range p.selDense.u8() {
			sel.Dense[i] = b != 0
		}
	}
	if p.selTok.present {
		if _, err := p.selTok.check(dtI32, -1); err != nil {
			return nil, err
		}
		sel.Tokens = p.selTok.i32()
	} else {
		sel.Tokens = []int32{} // a present, empty token list: every row must be dense
	}
	return sel, nil
}

// gdnParams are strata_gdn_params read into Go values.
type gdnParams struct {
	headMap, mode int32
	normalizeQK   bool
}

// gdnScan is strata_gdn_scan.
func gdnScan(d *strata.Device, q, k, v, g, beta, state, o *tensor, p gdnParams) error {
	qs, err := q.check(dtF32, -1, -1, -1)
	if err != nil {
		return err
	}
	T, Hk, Dk := qs[0], qs[1], qs[2]
	if _, err := k.check(dtF32, int64(T), int64(Hk), int64(Dk)); err != nil {
		return err
	}
	vs, err := v.check(dtF32, int64(T), -1, -1)
	if err != nil {
		return err
	}
	Hv, Dv := vs[1], vs[2]
	for _, x := range []*tensor{g, beta} {
		if _, err := x.check(dtF32, int64(T), int64(Hv)); err != nil {
			return err
		}
	}
	if _, err := state.check(dtF32, int64(Hv), int64(Dk), int64(Dv)); err != nil {
		return err
	}
	if _, err := o.check(dtF32, int64(T), int64(Hv), int64(Dv)); err != nil {
		return err
	}
	if Hv%Hk != 0 {
		return fmt.Errorf("%w: Hv %d is not a multiple of Hk %d", strata.ErrInvalidArgument, Hv, Hk)
	}
	var hm op.HeadMap
	switch p.headMap {
	case 0:
		hm = op.Grouped
	case 1:
		hm = op.Tiled
	default:
		return fmt.Errorf("%w: head_map %d (want STRATA_GDN_GROUPED or STRATA_GDN_TILED)", strata.ErrInvalidArgument, p.headMap)
	}
	var mode op.ScanMode
	switch p.mode {
	case 0:
		mode = op.Chunked
	case 1:
		mode = op.Recurrent
	default:
		return fmt.Errorf("%w: mode %d (want STRATA_GDN_CHUNKED or STRATA_GDN_RECURRENT)", strata.ErrInvalidArgument, p.mode)
	}
	// state is read and written: it must not overlap the inputs either.
	if err := noOverlap([]*tensor{o, state}, q, k, v, g, beta); err != nil {
		return err
	}
	h := op.HostF32
	a := op.GDNScan{O: h(o.f32()), State: h(state.f32()), Q: h(q.f32()), K: h(k.f32()), V: h(v.f32()), G: h(g.f32()),
		Beta: h(beta.f32()), P: op.GDNParams{T: T, Hk: Hk, Hv: Hv, Dk: Dk, Dv: Dv, Map: hm}, Mode: mode}
	a.NormQK = p.normalizeQK
	return d.GDNScan(a)
}

// moeCombine is strata_moe_combine.
func moeCombine(d *strata.Device, ye, rk, w, out, shared, beta *tensor) error {
	ys, err := ye.check(dtF32, -1, -1)
	if err != nil {
		return err
	}
	rows, D := ys[0], ys[1]
	rs, err := rk.check(dtI32, -1, -1)
	if err != nil {
		return err
	}
	T, K := rs[0], rs[1]
	if _, err := w.check(dtF32, int64(T), int64(K)); err != nil {
		return err
	}
	var sh op.Tensor
	if shared.present {
		if _, err := shared.check(dtF32, int64(T), int64(D)); err != nil {
			return err
		}
		sh = op.HostF32(shared.f32())
	}
	ins := []*tensor{ye, rk, w, shared, beta}
	for i, r := range rk.i32() {
		if r < -1 || int(r) >= rows {
			return fmt.Errorf("%w: rk[%d, %d] = %d outside [-1, %d)", strata.ErrInvalidArgument, i/K, i%K, r, rows)
		}
	}
	if !beta.present {
		if _, err := out.check(dtF32, int64(T), int64(D)); err != nil {
			return err
		}
		if err := noOverlap([]*tensor{out}, ins...); err != nil {
			return err
		}
		return d.MoECombine(op.MoECombine{Out: op.HostF32(out.f32()), YE: op.HostF32(ye.f32()), RK: op.HostI32(rk.i32()),
			W: op.HostF32(w.f32()), T: T, K: K, D: D}, sh)
	}
	bs, err := beta.check(dtF32, int64(T), -1)
	if err != nil {
		return err
	}
	S := bs[1]
	if _, err := out.check(dtF32, int64(T), int64(S), int64(D)); err != nil {
		return err
	}
	if err := noOverlap([]*tensor{out}, ins...); err != nil {
		return err
	}
	return d.GRApplyMoEC(op.GRApplyMoEC{H: op.HostF32(out.f32()), Beta: op.HostF32(beta.f32()), YE: op.HostF32(ye.f32()),
		RK: op.HostI32(rk.i32()), W: op.HostF32(w.f32()), Shared: sh, T: T, S: S, K: K, D: D})
}
