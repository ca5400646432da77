package gguf

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratakernels/strata/op"
)

// A small GGUF writer for the tests, written from the specification: it can also write the
// damaged files the reader must refuse (any field overridden).

type wTensor struct {
	name   string
	dims   []uint64
	typ    op.GGMLType
	data   []byte
	offset *uint64 // overrides the packed offset
}

type image struct {
	version    uint32
	magic      string
	kvs        []KV
	tensors    []wTensor
	alignment  uint64 // padding used (the key is written only when a KV says so)
	nTensors   *uint64
	nKV        *uint64
	headerOnly bool // stop after the header padding
}

func newImage() *image { return &image{version: Version, magic: Magic, alignment: DefaultAlignment} }

func putU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func putU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func putStr(b []byte, s string) []byte { return append(putU64(b, uint64(len(s))), s...) }

func putValue(b []byte, v Value, withType bool) []byte {
	if withType {
		b = putU32(b, uint32(v.Type))
	}
	switch x := v.X.(type) {
	case uint8:
		return append(b, x)
	case int8:
		return append(b, byte(x))
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case uint16:
		return binary.LittleEndian.AppendUint16(b, x)
	case int16:
		return binary.LittleEndian.AppendUint16(b, uint16(x))
	case uint32:
		return putU32(b, x)
	case int32:
		return putU32(b, uint32(x))
	case float32:
		return putU32(b, math.Float32bits(x))
	case uint64:
		return putU64(b, x)
	case int64:
		return putU64(b, uint64(x))
	case float64:
		return putU64(b, math.Float64bits(x))
	case string:
		return putStr(b, x)
	}
	// arrays
	b = putU32(b, uint32(v.Elem))
	each := func(n int, f func(i int) Value) []byte {
		b = putU64(b, uint64(n))
		for i := range n {
			b = putValue(b, f(i), false)
		}
		return b
	}
	switch x := v.X.(type) {
	case []string:
		return each(len(x), func(i int) Value { return Value{Type: String, X: x[i]} })
	case []int32:
		return each(len(x), func(i int) Value { return Value{Type: Int32, X: x[i]} })
	case []uint32:
		return each(len(x), func(i int) Value { return Value{Type: Uint32, X: x[i]} })
	case []float32:
		return each(len(x), func(i int) Value { return Value{Type: Float32, X: x[i]} })
	case []bool:
		return each(len(x), func(i int) Value { return Value{Type: Bool, X: x[i]} })
	case []uint8:
		return each(len(x), func(i int) Value { return Value{Type: Uint8, X: x[i]} })
	case []int64:
		return each(len(x), func(i int) Value { return Value{Type: Int64, X: x[i]} })
	case []Value:
		return each(len(x), func(i int) Value { return x[i] })
	}
	panic("putValue: unsupported test value")
}

func (im *image) bytes() []byte {
	b := []byte(im.magic)
	b = putU32(b, im.version)
	nt, nkv := uint64(len(im.tensors)), uint64(len(im.kvs))
	if im.nTensors != nil {
		nt = *im.nTensors
	}
	if im.nKV != nil {
		nkv = *im.nKV
	}
	b = putU64(b, nt)
	b = putU64(b, nkv)
	for _, kv := range im.kvs {
		b = putStr(b, kv.Key)
		b = putValue(b, kv.Value, true)
	}
	offs := make([]uint64, len(im.tensors))
	var next uint64
	for i, t := range im.tensors {
		offs[i] = next
		if t.offset != nil {
			offs[i] = *t.offset
		}
		next = (offs[i] + uint64(len(t.data)) + im.alignment - 1) / im.alignment * im.alignment
		b = putStr(b, t.name)
		b = putU32(b, uint32(len(t.dims)))
		for _, d := range t.dims {
			b = putU64(b, d)
		}
		b = putU32(b, uint32(t.typ))
		b = putU64(b, offs[i])
	}
	for uint64(len(b))%im.alignment != 0 {
		b = append(b, 0)
	}
	if im.headerOnly {
		return b
	}
	start := len(b)
	for i, t := range im.tensors {
		end := start + int(offs[i]) + len(t.data)
		for len(b) < end {
			b = append(b, 0)
		}
		copy(b[start+int(offs[i]):], t.data)
	}
	return b
}

func (im *image) write(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, im.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func kv(key string, x any) KV {
	v := Value{X: x}
	switch x.(type) {
	case uint8:
		v.Type = Uint8
	case int8:
		v.Type = Int8
	case uint16:
		v.Type = Uint16
	case int16:
		v.Type = Int16
	case uint32:
		v.Type = Uint32
	case int32:
		v.Type = Int32
	case float32:
		v.Type = Float32
	case bool:
		v.Type = Bool
	case string:
		v.Type = String
	case uint64:
		v.Type = Uint64
	case int64:
		v.Type = Int64
	case float64:
		v.Type = Float64
	case []string:
		v.Type, v.Elem = Array, String
	case []int32:
		v.Type, v.Elem = Array, Int32
	case []uint32:
		v.Type, v.Elem = Array, Uint32
	case []float32:
		v.Type, v.Elem = Array, Float32
	case []bool:
		v.Type, v.Elem = Array, Bool
	case []uint8:
		v.Type, v.Elem = Array, Uint8
	case []int64:
		v.Type, v.Elem = Array, Int64
	case []Value:
		v.Type, v.Elem = Array, Array
	default:
		panic("kv: unsupported test value")
	}
	return KV{Key: key, Value: v}
}

// f32Bytes encodes float32 values little-endian.
func f32Bytes(x ...float32) []byte {
	var b []byte
	for _, v := range x {
		b = putU32(b, math.Float32bits(v))
	}
	return b
}
