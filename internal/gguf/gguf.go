// Package gguf reads GGUF files (version 3), the format of llama.cpp, ollama and LM Studio:
// the header, the metadata key/values of every value type (arrays included), the tensor table
// and the tensor data, memory-mapped read-only. Single files and the split sets gguf-split
// writes (NAME-0000i-of-0000N.gguf) open as one tensor name space. Written from the format's
// specification (ggml's docs/gguf.md): every length, count and offset is checked against the
// bytes that back it before it is used, and every error names the file and the problem and
// wraps ErrFormat (ErrKey for a metadata key absent or of another type than asked). Write
// writes such files (a tensor's data produced when it is reached) and Quantize encodes float32
// rows into the block types llama.cpp's quantizer writes (write.go, quant.go).
//
// Layout (all little-endian): magic "GGUF", uint32 version, uint64 tensor count, uint64
// metadata count; the metadata key/values (key: uint64 length + UTF-8 bytes; uint32 value
// type; the value, an array being uint32 element type + uint64 count + elements); the tensor
// infos (name, uint32 n_dims, n_dims uint64 extents ne[0..] with ne[0] the contiguous one,
// uint32 ggml type, uint64 offset from the data section); padding to general.alignment (32
// when absent); the data section, each tensor at its offset, a multiple of the alignment.
package gguf

import (
	"errors"
	"fmt"

	"github.com/stratakernels/strata/op"
)

// ErrFormat is wrapped by every error about a malformed or inconsistent file.
var ErrFormat = errors.New("gguf: malformed file")

// ErrKey is wrapped by the metadata accessors for a key absent or stored with another type.
var ErrKey = errors.New("gguf: metadata key")

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// Version is the format version this package reads.
const Version = 3

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is ggml's GGML_MAX_DIMS: a tensor has 1 to 4 extents.
const MaxDims = 4

// MaxNameLen is the longest tensor name ggml takes (GGML_MAX_NAME - 1 bytes).
const MaxNameLen = 63

// MaxKeyLen is the longest metadata key, in bytes: the GGUF specification's 2^16-1.
const MaxKeyLen = 1<<16 - 1

// maxDepth bounds arrays nested in arrays (the format allows them; no writer nests deeply).
const maxDepth = 8

// ValueType is a metadata value's type id (gguf_metadata_value_type).
type ValueType uint32

// The metadata value types.
const (
	Uint8   ValueType = 0
	Int8    ValueType = 1
	Uint16  ValueType = 2
	Int16   ValueType = 3
	Uint32  ValueType = 4
	Int32   ValueType = 5
	Float32 ValueType = 6
	Bool    ValueType = 7
	String  ValueType = 8
	Array   ValueType = 9
	Uint64  ValueType = 10
	Int64   ValueType = 11
	Float64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value type %d", uint32(t))
}

// size is the bytes of one scalar of the type (0 for string and array, whose size varies;
// their smallest encoding is 8 and 12 bytes).
func (t ValueType) size() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one value of the type takes in a file.
func (t ValueType) minSize() int {
	switch t {
	case String:
		return 8
	case Array:
		return 12
	}
	return t.size()
}

// Value is one metadata value. X holds, by Type: uint8, int8, uint16, int16, uint32, int32,
// float32, bool, string, uint64, int64, float64; for an Array, a slice of the element type
// ([]uint8 ... []float64, []bool, []string) or, for an array of arrays, []Value. Elem is the
// element type of an Array.
type Value struct {
	Type ValueType
	Elem ValueType
	X    any
}

// KV is one metadata entry.
type KV struct {
	Key string
	Value
}

// Tensor is one entry of the tensor table. Dims are the extents as GGUF stores them, the
// contiguous one first (ggml's ne[0] is a row's length); Shape gives them row-major.
type Tensor struct {
	Name string
	Dims []uint64
	Type op.GGMLType
	// Offset is the tensor's offset from its file's data section; Elements and Bytes its size.
	Offset   uint64
	Elements int64
	Bytes    int64
	// File is the path of the file (the split part) holding the tensor.
	File string
	// Data is the tensor's bytes, a view of the read-only mapping (nil in a set opened
	// header-only). It must not be written.
	Data []byte
}

// Shape is the tensor's extents row-major (outermost first): a GGUF matrix stored with Dims
// [K, N] is [N, K], a stack of experts [K, N, E] is [E, N, K].
func (t *Tensor) Shape() []int64 {
	s := make([]int64, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int64(d)
	}
	return s
}
