package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/stratakernels/strata/op"
)

// errShort marks a header that runs past the bytes given; OpenHeader reads more and tries
// again, every other caller reports it as a truncated header.
var errShort = errors.New("the header runs past the end of the file")

// header is one parsed file: metadata, tensor table and where its data section begins.
type header struct {
	kvs       []KV
	byKey     map[string]int
	tensors   []*Tensor
	alignment uint64
	dataStart uint64 // file offset of the data section
	dataSize  uint64 // bytes the tensor table spans from dataStart (end of the last tensor)
}

// cursor reads the header fields in order, checking each length against the bytes left.
type cursor struct {
	b      []byte
	off    uint64
	prefix bool // b is a prefix of the file: running past its end is errShort, not an error
}

func (c *cursor) take(n uint64) ([]byte, error) {
	if n > uint64(len(c.b))-c.off {
		return nil, errShort
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	return s, nil
}

func (c *cursor) u32() (uint32, error) {
	s, err := c.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (c *cursor) u64() (uint64, error) {
	s, err := c.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

// left is the number of bytes not yet read.
func (c *cursor) left() uint64 { return uint64(len(c.b)) - c.off }

func (c *cursor) str(what string) (string, error) {
	n, err := c.u64()
	if err != nil {
		return "", err
	}
	if n > c.left() {
		return "", c.past(fmt.Errorf("%s: string length %d runs past the end of the file (%d bytes left)", what, n, c.left()))
	}
	s, _ := c.take(n)
	return string(s), nil
}

// past reports a length that runs past the bytes given: errShort when they are a prefix of the
// file (OpenHeader reads more), else err.
func (c *cursor) past(err error) error {
	if c.prefix {
		return errShort
	}
	return err
}

// parse reads a GGUF header from b, the file's first len(b) of fileSize bytes. With prefix set
// (len(b) < fileSize), reading past the end of b returns errShort, for OpenHeader to read more;
// else it is a truncated header. present says the data section is in the file: every tensor
// must then lie inside fileSize.
func parse(b []byte, fileSize uint64, prefix, present bool) (*header, error) {
	c := &cursor{b: b, prefix: prefix}
	magic, err := c.take(4)
	if err != nil {
		return nil, fmt.Errorf("truncated header: %d bytes, shorter than the magic", len(b))
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("bad magic %q (want %q): not a GGUF file", magic, Magic)
	}
	v, err := c.u32()
	if err != nil {
		return nil, truncated(c, "the version", err)
	}
	if v != Version {
		what := ""
		switch {
		case v == 1 || v == 2:
			what = " (an early GGUF; convert it again with a current llama.cpp)"
		case bits.ReverseBytes32(v) == Version:
			what = " (a big-endian GGUF, which strata does not read)"
		}
		return nil, fmt.Errorf("GGUF version %d%s: strata reads version %d", v, what, Version)
	}
	nt, err := c.u64()
	if err != nil {
		return nil, truncated(c, "the tensor count", err)
	}
	nkv, err := c.u64()
	if err != nil {
		return nil, truncated(c, "the metadata count", err)
	}
	// Each entry takes at least: key length 8 + type 4 + a 1-byte value; tensor info: name
	// length 8 + n_dims 4 + one extent 8 + type 4 + offset 8.
	if nkv > (fileSize-c.off)/13 {
		return nil, fmt.Errorf("truncated header or corrupt count: metadata count %d cannot fit in the file (%d bytes)", nkv, fileSize)
	}
	if nt > (fileSize-c.off)/32 {
		return nil, fmt.Errorf("truncated header or corrupt count: tensor count %d cannot fit in the file (%d bytes)", nt, fileSize)
	}
	h := &header{byKey: map[string]int{}, alignment: DefaultAlignment}
	for i := uint64(0); i < nkv; i++ {
		key, err := c.str(fmt.Sprintf("metadata entry %d key", i))
		if err != nil {
			return nil, truncated(c, fmt.Sprintf("metadata entry %d", i), err)
		}
		if len(key) > MaxKeyLen {
			return nil, fmt.Errorf("metadata entry %d: key of %d bytes (at most %d): %s", i, len(key), MaxKeyLen, quoteShort(key))
		}
		if _, dup := h.byKey[key]; dup {
			return nil, fmt.Errorf("metadata key %s appears twice", quoteShort(key))
		}
		t, err := c.u32()
		if err != nil {
			return nil, truncated(c, "metadata "+quoteShort(key), err)
		}
		val, err := c.value(ValueType(t), 0)
		if err != nil {
			return nil, truncated(c, "metadata "+quoteShort(key), err)
		}
		h.byKey[key] = len(h.kvs)
		h.kvs = append(h.kvs, KV{Key: key, Value: val})
	}
	if i, ok := h.byKey["general.alignment"]; ok {
		a := h.kvs[i].Value
		if a.Type != Uint32 {
			return nil, fmt.Errorf("general.alignment is %v, want uint32", a.Type)
		}
		al := a.X.(uint32)
		if al < 8 || al&(al-1) != 0 {
			return nil, fmt.Errorf("general.alignment %d is not a power of two of at least 8", al)
		}
		h.alignment = uint64(al)
	}
	names := map[string]bool{}
	for i := uint64(0); i < nt; i++ {
		t, err := c.tensorInfo(i)
		if err != nil {
			return nil, truncated(c, fmt.Sprintf("tensor info %d", i), err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		names[t.Name] = true
		h.tensors = append(h.tensors, t)
	}
	h.dataStart = (c.off + h.alignment - 1) / h.alignment * h.alignment
	if err := h.checkData(fileSize, present); err != nil {
		return nil, err
	}
	return h, nil
}

// truncated turns errShort into the message naming what was being read; other errors pass.
func truncated(c *cursor, what string, err error) error {
	if errors.Is(err, errShort) && !c.prefix {
		return fmt.Errorf("truncated header: %s runs past the end of the file (%d bytes)", what, len(c.b))
	}
	if errors.Is(err, errShort) {
		return errShort
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c *cursor) value(t ValueType, depth int) (Value, error) {
	v := Value{Type: t}
	if t == Array {
		if depth >= maxDepth {
			return v, fmt.Errorf("arrays nested deeper than %d", maxDepth)
		}
		et, err := c.u32()
		if err != nil {
			return v, err
		}
		n, err := c.u64()
		if err != nil {
			return v, err
		}
		v.Elem = ValueType(et)
		if v.Elem > Float64 {
			return v, fmt.Errorf("array of unknown value type %d", et)
		}
		if n > c.left()/uint64(v.Elem.minSize()) {
			return v, c.past(fmt.Errorf("array of %d %v runs past the end of the file (%d bytes left)", n, v.Elem, c.left()))
		}
		v.X, err = c.array(v.Elem, int(n), depth)
		return v, err
	}
	if t > Float64 {
		return v, fmt.Errorf("unknown value type %d", uint32(t))
	}
	if t == String {
		s, err := c.str("string value")
		v.X = s
		return v, err
	}
	s, err := c.take(uint64(t.size()))
	if err != nil {
		return v, err
	}
	v.X, err = scalar(t, s)
	return v, err
}

func scalar(t ValueType, s []byte) (any, error) {
	le := binary.LittleEndian
	switch t {
	case Uint8:
		return s[0], nil
	case Int8:
		return int8(s[0]), nil
	case Bool:
		if s[0] > 1 {
			return nil, fmt.Errorf("bool value %d (want 0 or 1)", s[0])
		}
		return s[0] == 1, nil
	case Uint16:
		return le.Uint16(s), nil
	case Int16:
		return int16(le.Uint16(s)), nil
	case Uint32:
		return le.Uint32(s), nil
	case Int32:
		return int32(le.Uint32(s)), nil
	case Float32:
		return math.Float32frombits(le.Uint32(s)), nil
	case Uint64:
		return le.Uint64(s), nil
	case Int64:
		return int64(le.Uint64(s)), nil
	}
	return math.Float64frombits(le.Uint64(s)), nil
}

// array reads n elements of type t (n already checked against the bytes left).
func (c *cursor) array(t ValueType, n, depth int) (any, error) {
	switch t {
	case String:
		out := make([]string, n)
		for i := range out {
			s, err := c.str(fmt.Sprintf("array element %d", i))
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case Array:
		out := make([]Value, n)
		for i := range out {
			v, err := c.value(Array, depth+1)
			if err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	}
	raw, err := c.take(uint64(n * t.size()))
	if err != nil {
		return nil, err
	}
	switch t {
	case Uint8:
		return append([]uint8(nil), raw...), nil
	case Int8:
		return fill(n, 1, raw, func(s []byte) int8 { return int8(s[0]) }), nil
	case Bool:
		out := make([]bool, n)
		for i, b := range raw {
			if b > 1 {
				return nil, fmt.Errorf("array element %d: bool value %d (want 0 or 1)", i, b)
			}
			out[i] = b == 1
		}
		return out, nil
	case Uint16:
		return fill(n, 2, raw, binary.LittleEndian.Uint16), nil
	case Int16:
		return fill(n, 2, raw, func(s []byte) int16 { return int16(binary.LittleEndian.Uint16(s)) }), nil
	case Uint32:
		return fill(n, 4, raw, binary.LittleEndian.Uint32), nil
	case Int32:
		return fill(n, 4, raw, func(s []byte) int32 { return int32(binary.LittleEndian.Uint32(s)) }), nil
	case Float32:
		return fill(n, 4, raw, func(s []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(s)) }), nil
	case Uint64:
		return fill(n, 8, raw, binary.LittleEndian.Uint64), nil
	case Int64:
		return fill(n, 8, raw, func(s []byte) int64 { return int64(binary.LittleEndian.Uint64(s)) }), nil
	}
	return fill(n, 8, raw, func(s []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(s)) }), nil
}

func fill[T any](n, size int, raw []byte, get func([]byte) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = get(raw[i*size:])
	}
	return out
}

func (c *cursor) tensorInfo(i uint64) (*Tensor, error) {
	name, err := c.str("name")
	if err != nil {
		return nil, err
	}
	if name == "" || len(name) > MaxNameLen {
		return nil, fmt.Errorf("tensor name %s is empty or longer than %d bytes", quoteShort(name), MaxNameLen)
	}
	t := &Tensor{Name: name}
	nd, err := c.u32()
	if err != nil {
		return nil, err
	}
	if nd == 0 || nd > MaxDims {
		return nil, fmt.Errorf("tensor %q has %d dimensions (want 1 to %d)", name, nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	elems := uint64(1)
	overflow := false
	for d := range t.Dims {
		if t.Dims[d], err = c.u64(); err != nil {
			return nil, err
		}
		if t.Dims[d] == 0 {
			return nil, fmt.Errorf("tensor %q has an extent 0 in %v", name, t.Dims)
		}
		hi, lo := bits.Mul64(elems, t.Dims[d])
		overflow = overflow || hi != 0 || lo > math.MaxInt64
		elems = lo
	}
	ty, err := c.u32()
	if err != nil {
		return nil, err
	}
	if t.Offset, err = c.u64(); err != nil {
		return nil, err
	}
	t.Type = op.GGMLType(ty)
	if overflow {
		return nil, fmt.Errorf("tensor %q: the element count of %v overflows 63 bits", name, t.Dims)
	}
	if !t.Type.Known() {
		return nil, fmt.Errorf("tensor %q has unknown type id %d", name, ty)
	}
	bs, ts := uint64(t.Type.BlockSize()), uint64(t.Type.TypeSize())
	if t.Dims[0]%bs != 0 {
		return nil, fmt.Errorf("tensor %q of type %v: its rows of %d elements are not a whole number of blocks of %d", name, t.Type, t.Dims[0], bs)
	}
	hi, size := bits.Mul64(elems/bs, ts)
	if hi != 0 || size > math.MaxInt64 {
		return nil, fmt.Errorf("tensor %q: the byte size of %v %v overflows 63 bits", name, t.Type, t.Dims)
	}
	t.Elements, t.Bytes = int64(elems), int64(size)
	return t, nil
}

// checkData checks the tensors against the alignment, each other and the file: offsets
// multiples of the alignment, no two tensors sharing a byte, and (present) every byte inside
// the file.
func (h *header) checkData(fileSize uint64, present bool) error {
	order := append([]*Tensor(nil), h.tensors...)
	sort.Slice(order, func(i, j int) bool { return order[i].Offset < order[j].Offset })
	var end uint64
	for i, t := range order {
		if t.Offset%h.alignment != 0 {
			return fmt.Errorf("tensor %q at data offset %d is not aligned to %d bytes", t.Name, t.Offset, h.alignment)
		}
		tEnd, carry := bits.Add64(t.Offset, uint64(t.Bytes), 0)
		if carry != 0 || tEnd > math.MaxInt64-h.dataStart {
			return fmt.Errorf("tensor %q: data offset %d + %d bytes overflows", t.Name, t.Offset, t.Bytes)
		}
		if i > 0 && t.Offset < end {
			p := order[i-1]
			return fmt.Errorf("tensors %q (bytes %d..%d) and %q (from %d) overlap", p.Name, p.Offset, end, t.Name, t.Offset)
		}
		end = tEnd
	}
	h.dataSize = end
	if present && h.dataStart+end > fileSize {
		for _, t := range order {
			if h.dataStart+t.Offset+uint64(t.Bytes) > fileSize {
				return fmt.Errorf("tensor %q (%v %v, %d bytes at file offset %d) runs past the end of the file (%d bytes)",
					t.Name, t.Type, t.Dims, t.Bytes, h.dataStart+t.Offset, fileSize)
			}
		}
	}
	return nil
}

// quoteShort quotes s for an error message, cut to its first 64 bytes with its length said
// when longer (a damaged length can make a name megabytes long).
func quoteShort(s string) string {
	const n = 64
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:n], len(s))
}
