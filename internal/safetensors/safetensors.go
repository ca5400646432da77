// Package safetensors reads Hugging Face safetensors files and sharded checkpoints
// (model.safetensors.index.json), validating every header field against the file before any
// tensor is exposed. Files are memory-mapped read-only where the platform allows and read
// whole otherwise; tensor data is exposed as raw little-endian bytes plus widening helpers.
// OpenHeader / OpenDirHeaders validate the headers alone (names, dtypes, shapes, offsets, the
// shard index) without mapping any data, for truncated or header-only files too.
//
// Format: https://github.com/huggingface/safetensors (8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {...}},
// then the data section; offsets are relative to the start of the data section).
package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/x448/float16"
)

// DType is a safetensors element type name as written in the header.
type DType string

// Element types of the safetensors format with a whole-byte element size. Every one is accepted
// by Open (its byte size is checked); Float32 converts F32, F16 and BF16, Int32 converts I32,
// I64, U8 and BOOL. Sub-byte types (F4, F6_*) are rejected as unknown.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	F8E8M0 DType = "F8_E8M0"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	BOOL   DType = "BOOL"
	C64    DType = "C64"
)

// Size returns the size in bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64, C64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case F8E4M3, F8E5M2, F8E8M0, I8, U8, BOOL:
		return 1
	}
	return 0
}

// ErrFormat is wrapped by every error about a malformed or inconsistent file.
var ErrFormat = errors.New("safetensors: invalid file")

// ErrNotFound is wrapped when a tensor name is not present.
var ErrNotFound = errors.New("safetensors: tensor not found")

// ErrDType is wrapped when a conversion is asked of a tensor whose dtype does not allow it.
var ErrDType = errors.New("safetensors: unsupported dtype for conversion")

// Tensor is one tensor of a file: its name, element type, shape and raw little-endian bytes.
// Data aliases the file mapping; it is valid until the owning File is closed and must not be
// written. Tensors of a file opened by OpenHeader have no Data (see Int64s).
type Tensor struct {
	Name  string
	File  string // path of the file holding the tensor
	DType DType
	Shape []int64
	Data  []byte

	file *File // the owning File (nil for a hand-built Tensor)
	off  int64 // offset of the tensor's bytes in the data section
}

// ByteSize is the tensor's size in bytes, NumElements * DType.Size(), also for a tensor of a
// header-only file.
func (t *Tensor) ByteSize() int64 { return t.NumElements() * int64(t.DType.Size()) }

// Int64s returns the elements of an I64 tensor. For a tensor of a file opened by OpenHeader the
// bytes are read from the file (with ReadFloat32, the only tensor data such a file gives out;
// meant for small tensors such as the PLE hash constants). Errors wrap ErrDType (not I64) or
// ErrFormat (the bytes lie past the end of a truncated file, or reading them failed).
func (t *Tensor) Int64s() ([]int64, error) {
	if t.DType != I64 {
		return nil, fmt.Errorf("%w: tensor %q in %s is %s, not I64", ErrDType, t.Name, t.File, t.DType)
	}
	b, err := t.raw()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

// ReadFloat32 is Float32, also for a tensor of a file opened by OpenHeader, whose bytes are then
// read from the file (meant for small tensors, such as the norm gains a layout check weighs).
// Errors wrap ErrDType or ErrFormat (as Int64s).
func (t *Tensor) ReadFloat32() ([]float32, error) {
	if f := t.file; f == nil || !f.headerOnly {
		return t.Float32()
	}
	b, err := t.raw()
	if err != nil {
		return nil, err
	}
	c := *t
	c.Data, c.file = b, nil
	return c.Float32()
}

// raw is the tensor's bytes: Data, or for a file opened by OpenHeader the bytes read from it.
func (t *Tensor) raw() ([]byte, error) {
	f := t.file
	if f == nil || !f.headerOnly {
		if err := t.checkData(); err != nil {
			return nil, err
		}
		return t.Data, nil
	}
	size := t.ByteSize()
	if t.off+size > f.present {
		return nil, fmt.Errorf("%w: tensor %q in %s: its bytes [%d, %d) of the data section are past the end of the file, which holds %d of the %d bytes its header describes (truncated)",
			ErrFormat, t.Name, t.File, t.off, t.off+size, f.present, f.dataSize)
	}
	b := make([]byte, size)
	if err := readAt(t.File, b, f.dataStart+t.off); err != nil {
		return nil, fmt.Errorf("%w: tensor %q in %s: %v", ErrFormat, t.Name, t.File, err)
	}
	return b, nil
}

// Bytes returns the raw bytes of a tensor of one-byte elements (U8, F8_E4M3, F8_E5M2, F8_E8M0,
// I8): a view of the file mapping, which must not be written. Errors wrap ErrDType (another dtype)
// or ErrFormat (a header-only file, or Data inconsistent with the shape).
func (t *Tensor) Bytes() ([]byte, error) {
	if t.DType.Size() != 1 || t.DType == BOOL {
		return nil, fmt.Errorf("%w: tensor %q in %s is %s, not a one-byte element type", ErrDType, t.Name, t.File, t.DType)
	}
	if err := t.checkData(); err != nil {
		return nil, err
	}
	return t.Data, nil
}

func readAt(path string, b []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(b, off)
	return err
}

// NumElements is the product of Shape (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, s := range t.Shape {
		n *= s
	}
	return n
}

// Float32 returns the tensor widened to float32 (F32 copied; BF16 and F16 widened exactly:
// every BF16 and F16 value, subnormals, infinities and NaN included, is a float32 value).
// Other dtypes return an error wrapping ErrDType.
func (t *Tensor) Float32() ([]float32, error) {
	if err := t.checkData(); err != nil {
		return nil, err
	}
	n := int(t.NumElements())
	out := make([]float32, n)
	if err := t.Float32Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkData guards tensors built by hand (the fields are exported): Data must hold exactly
// NumElements elements of DType. Tensors from Open always pass.
func (t *Tensor) checkData() error {
	if t.file != nil && t.file.headerOnly {
		return fmt.Errorf("%w: tensor %q in %s: the file was opened header-only (OpenHeader); its data is not mapped", ErrFormat, t.Name, t.File)
	}
	n := t.NumElements()
	if sz := int64(t.DType.Size()); sz == 0 || int64(len(t.Data)) != n*sz {
		return fmt.Errorf("%w: tensor %q in %s: %d data bytes for %s shape %v", ErrFormat, t.Name, t.File, len(t.Data), t.DType, t.Shape)
	}
	return nil
}

// Float32Into widens the tensor into dst, which must hold exactly NumElements values.
// Errors wrap ErrDType (wrong dtype or destination length) or ErrFormat (Data inconsistent
// with Shape, possible only for a hand-built Tensor).
func (t *Tensor) Float32Into(dst []float32) error {
	if err := t.checkData(); err != nil {
		return err
	}
	n := int(t.NumElements())
	if len(dst) != n {
		return fmt.Errorf("%w: tensor %q has %d elements, destination %d", ErrDType, t.Name, n, len(dst))
	}
	b := t.Data
	switch t.DType {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = float16.Frombits(binary.LittleEndian.Uint16(b[2*i:])).Float32()
		}
	default:
		return fmt.Errorf("%w: tensor %q in %s is %s, not a float type", ErrDType, t.Name, t.File, t.DType)
	}
	return nil
}

// Uint16s returns the raw 16-bit elements of a BF16 or F16 tensor (little-endian hosts only;
// strata supports no big-endian host). The result aliases the file mapping when the tensor's
// bytes are 2-byte aligned (always the case for files written by safetensors, whose header is
// padded to 8 bytes) and is a copy otherwise; it must not be written either way.
func (t *Tensor) Uint16s() ([]uint16, error) {
	if t.DType != BF16 && t.DType != F16 {
		return nil, fmt.Errorf("%w: tensor %q is %s, not BF16/F16", ErrDType, t.Name, t.DType)
	}
	if err := t.checkData(); err != nil {
		return nil, err
	}
	if len(t.Data) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%2 != 0 {
		out := make([]uint16, len(t.Data)/2)
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(t.Data[2*i:])
		}
		return out, nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&t.Data[0])), len(t.Data)/2), nil
}

// Uint32s returns the raw elements of a U32 tensor (little-endian hosts only), such as the
// packed codes of an MLX quantized weight. The result aliases the file mapping when the tensor's
// bytes are 4-byte aligned and is a copy otherwise (a tensor after an odd number of 16-bit
// elements); it must not be written either way. Errors wrap ErrDType or ErrFormat.
func (t *Tensor) Uint32s() ([]uint32, error) {
	if t.DType != U32 {
		return nil, fmt.Errorf("%w: tensor %q is %s, not U32", ErrDType, t.Name, t.DType)
	}
	if err := t.checkData(); err != nil {
		return nil, err
	}
	if len(t.Data) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%4 != 0 {
		out := make([]uint32, len(t.Data)/4)
		for i := range out {
			out[i] = binary.LittleEndian.Uint32(t.Data[4*i:])
		}
		return out, nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&t.Data[0])), len(t.Data)/4), nil
}

// Int32 returns the tensor as int32: I32 copied, I64 narrowed with a range check, U8/BOOL widened.
// Other dtypes and out-of-range I64 values return an error wrapping ErrDType.
func (t *Tensor) Int32() ([]int32, error) {
	if err := t.checkData(); err != nil {
		return nil, err
	}
	n := int(t.NumElements())
	out := make([]int32, n)
	b := t.Data
	switch t.DType {
	case I32:
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case I64:
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(b[8*i:]))
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("%w: tensor %q element %d = %d overflows int32", ErrDType, t.Name, i, v)
			}
			out[i] = int32(v)
		}
	case U8, BOOL:
		for i := range out {
			out[i] = int32(b[i])
		}
	default:
		return nil, fmt.Errorf("%w: tensor %q in %s is %s, not an integer type", ErrDType, t.Name, t.File, t.DType)
	}
	return out, nil
}
