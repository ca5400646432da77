package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// Matrices returns a tensor of 2 or 3 extents as op matrices viewing its data: a matrix
// [N, K] (Dims [K, N]) as one, a stack [E, N, K] (Dims [K, N, E], stacked experts) as E, each
// [N, K]. F32 loads as an op.F32 matrix, F16 and BF16 as op.F16 / op.BF16 (views of the
// mapping where 4- and 2-byte aligned, as the format's alignment makes them; else copies), the
// block types of op.GGMLBlockTypes as op.GGML matrices (views). Other types are refused naming
// the tensor and its type. Errors wrap ErrFormat (no data: opened header-only; another
// rank) or op.ErrUnsupported (a type strata does not run).
func (t *Tensor) Matrices() ([]*op.Matrix, error) {
	if t.Data == nil {
		return nil, fmt.Errorf("%w: tensor %q in %s: no data (opened header-only)", ErrFormat, t.Name, t.File)
	}
	e := 1
	switch len(t.Dims) {
	case 2:
	case 3:
		e = int(t.Dims[2])
	default:
		return nil, fmt.Errorf("%w: tensor %q in %s has dims %v, not a matrix or a stack of matrices", ErrFormat, t.Name, t.File, t.Dims)
	}
	n, k := int(t.Dims[1]), int(t.Dims[0])
	row, err := t.Type.RowBytes(k)
	if err != nil {
		return nil, fmt.Errorf("tensor %q in %s: %w", t.Name, t.File, err)
	}
	out := make([]*op.Matrix, e)
	for i := range out {
		b := t.Data[i*n*row : (i+1)*n*row]
		var m *op.Matrix
		switch t.Type {
		case op.GGMLF32:
			m, err = op.NewMatrixF32(n, k, float32s(b))
		case op.GGMLF16:
			m, err = op.NewMatrixU16(n, k, op.F16, uint16s(b))
		case op.GGMLBF16:
			m, err = op.NewMatrixU16(n, k, op.BF16, uint16s(b))
		default:
			m, err = op.NewMatrixGGML(n, k, &op.GGMLBlocks{Type: t.Type, Data: b})
		}
		if err != nil {
			return nil, fmt.Errorf("tensor %q in %s: %w", t.Name, t.File, err)
		}
		out[i] = m
	}
	return out, nil
}

// Float32 returns an F32, F16 or BF16 tensor's values widened to float32 (a copy; F16 and BF16
// exactly). Errors wrap ErrFormat (no data) or op.ErrUnsupported (another type).
func (t *Tensor) Float32() ([]float32, error) {
	if t.Data == nil {
		return nil, fmt.Errorf("%w: tensor %q in %s: no data (opened header-only)", ErrFormat, t.Name, t.File)
	}
	out := make([]float32, t.Elements)
	b := t.Data
	switch t.Type {
	case op.GGMLF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case op.GGMLF16:
		for i := range out {
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(b[2*i:])).Float32()
		}
	case op.GGMLBF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("%w: tensor %q in %s is %v, read as a float vector (want F32, F16 or BF16)", op.ErrUnsupported, t.Name, t.File, t.Type)
	}
	return out, nil
}

// float32s views b as float32s when 4-byte aligned (little-endian hosts only), else copies.
func float32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// uint16s views b as uint16s when 2-byte aligned (little-endian hosts only), else copies.
func uint16s(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}
