package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/internal/tempfile"
	"github.com/stratakernels/strata/op"
)

// WriteTensor is one tensor to write: its name, extents as Tensor.Dims (the contiguous one
// first), ggml type, and Data, called once when the writer reaches the tensor, which returns its
// bytes (ggml's layout for the type, exactly the size the type and extents give). Producing each
// tensor only when it is written keeps one tensor in memory at a time, whatever the model's size.
type WriteTensor struct {
	Name string
	Dims []uint64
	Type op.GGMLType
	Data func() ([]byte, error)
}

// Bytes is the size of the tensor's data (ggml_nbytes), or an error naming the tensor: an
// unknown type, rows not a whole number of blocks, 0 or more than MaxDims extents, an extent 0,
// a size past 63 bits.
func (t *WriteTensor) Bytes() (int64, error) {
	if t.Name == "" || len(t.Name) > MaxNameLen {
		return 0, fmt.Errorf("tensor name %q is empty or longer than %d bytes", t.Name, MaxNameLen)
	}
	if len(t.Dims) == 0 || len(t.Dims) > MaxDims {
		return 0, fmt.Errorf("tensor %q has %d dimensions (want 1 to %d)", t.Name, len(t.Dims), MaxDims)
	}
	if t.Dims[0] > math.MaxInt32 {
		return 0, fmt.Errorf("tensor %q: rows of %d elements (at most %d)", t.Name, t.Dims[0], math.MaxInt32)
	}
	row, err := t.Type.RowBytes(int(t.Dims[0]))
	if err != nil {
		return 0, fmt.Errorf("tensor %q with extents %v: %w", t.Name, t.Dims, err)
	}
	n := uint64(row)
	for _, d := range t.Dims {
		if d == 0 {
			return 0, fmt.Errorf("tensor %q has an extent 0 in %v", t.Name, t.Dims)
		}
	}
	for _, d := range t.Dims[1:] {
		if d > math.MaxInt64/n {
			return 0, fmt.Errorf("tensor %q: the byte size of %v %v overflows 63 bits", t.Name, t.Type, t.Dims)
		}
		n *= d
	}
	return int64(n), nil
}

// Write writes a GGUF version 3 file at path (the layout of the package doc): kvs in order,
// then the tensor table in the order of tensors, each tensor's data at the next multiple of the
// alignment (general.alignment when kvs hold it, a uint32 power of two of at least 8, else
// DefaultAlignment), zero padding between. The file is written whole through a temporary file
// in path's directory (.BASE.tmp-PID-*, package internal/tempfile: synced to disk) renamed over
// path at the end; on any error the temporary is removed and path is untouched, and a temporary
// of path that a killed process left behind is removed by the next write. Everything is checked before a byte is
// written: keys non-empty and unique, each Value's Type (and Elem) matching its X as Value
// documents, tensor names unique, extents and types as Open accepts them; a tensor's Data
// returning another size than its type and extents give fails the write. Errors name the file
// and the key or tensor.
func Write(path string, kvs []KV, tensors []WriteTensor) (err error) {
	align, err := checkWrite(kvs, tensors)
	if err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := tempfile.Create(dir, base)
	if err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("gguf: write %s: %w", path, err)
		}
	}()
	w := bufio.NewWriterSize(f, 4<<20)
	if err = writeImage(w, kvs, tensors, align); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	tempfile.SyncDir(dir)
	return nil
}

// checkWrite validates what Write is given and returns the alignment.
func checkWrite(kvs []KV, tensors []WriteTensor) (uint64, error) {
	align := uint64(DefaultAlignment)
	seen := map[string]bool{}
	for _, kv := range kvs {
		if kv.Key == "" {
			return 0, fmt.Errorf("a metadata key is empty")
		}
		if seen[kv.Key] {
			return 0, fmt.Errorf("metadata key %q appears twice", kv.Key)
		}
		seen[kv.Key] = true
		if err := checkValue(kv.Value, 0); err != nil {
			return 0, fmt.Errorf("metadata %q: %w", kv.Key, err)
		}
		if kv.Key == "general.alignment" {
			a, ok := kv.X.(uint32)
			if !ok || kv.Type != Uint32 || a < 8 || a&(a-1) != 0 {
				return 0, fmt.Errorf("general.alignment must be a uint32 power of two of at least 8, not %v %v", kv.Type, kv.X)
			}
			align = uint64(a)
		}
	}
	names := map[string]bool{}
	for i := range tensors {
		t := &tensors[i]
		if names[t.Name] {
			return 0, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		names[t.Name] = true
		if _, err := t.Bytes(); err != nil {
			return 0, err
		}
		if t.Data == nil {
			return 0, fmt.Errorf("tensor %q has no Data function", t.Name)
		}
	}
	return align, nil
}

// checkValue checks that v.X is the Go type v.Type (and v.Elem) says.
func checkValue(v Value, depth int) error {
	if v.Type == Array {
		if depth >= maxDepth {
			return fmt.Errorf("arrays nested deeper than %d", maxDepth)
		}
		if v.Elem == Array {
			xs, ok := v.X.([]Value)
			if !ok {
				return fmt.Errorf("array of arrays holds %T, want []Value", v.X)
			}
			for i, e := range xs {
				if e.Type != Array {
					return fmt.Errorf("element %d of an array of arrays is %v", i, e.Type)
				}
				if err := checkValue(e, depth+1); err != nil {
					return fmt.Errorf("element %d: %w", i, err)
				}
			}
			return nil
		}
		if want := arrayGoType(v.Elem); want == "" || fmt.Sprintf("%T", v.X) != want {
			return fmt.Errorf("array of %v holds %T", v.Elem, v.X)
		}
		return nil
	}
	if want := scalarGoType(v.Type); want == "" || fmt.Sprintf("%T", v.X) != want {
		return fmt.Errorf("value of type %v holds %T", v.Type, v.X)
	}
	return nil
}

var goTypes = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "", "uint64", "int64", "float64"}

func scalarGoType(t ValueType) string {
	if int(t) < len(goTypes) {
		return goTypes[t]
	}
	return ""
}

func arrayGoType(t ValueType) string {
	if s := scalarGoType(t); s != "" {
		return "[]" + s
	}
	return ""
}

// ValueOf wraps a Go value as a metadata Value: uint8, int8, uint16, int16, uint32, int32,
// float32, bool, string, uint64, int64, float64, a slice of one of them, or []Value (an array of
// arrays). Any other type gives a Value that Write refuses, naming its key.
func ValueOf(x any) Value {
	name := fmt.Sprintf("%T", x)
	for t, s := range goTypes {
		switch name {
		case s:
			return Value{Type: ValueType(t), X: x}
		case "[]" + s:
			if s != "" {
				return Value{Type: Array, Elem: ValueType(t), X: x}
			}
		}
	}
	if _, ok := x.([]Value); ok {
		return Value{Type: Array, Elem: Array, X: x}
	}
	return Value{Type: ValueType(math.MaxUint32), X: x}
}

// writeImage writes header, tensor table, padding and data to w.
func writeImage(w io.Writer, kvs []KV, tensors []WriteTensor, align uint64) error {
	var b []byte
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(tensors)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kvs)))
	for _, kv := range kvs {
		b = appendString(b, kv.Key)
		b = binary.LittleEndian.AppendUint32(b, uint32(kv.Type))
		b = appendValue(b, kv.Value)
	}
	sizes := make([]uint64, len(tensors))
	var off uint64
	for i, t := range tensors {
		n, _ := t.Bytes()
		sizes[i] = uint64(n)
		b = appendString(b, t.Name)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			b = binary.LittleEndian.AppendUint64(b, d)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(t.Type))
		b = binary.LittleEndian.AppendUint64(b, off)
		off = (off + sizes[i] + align - 1) / align * align
	}
	b = append(b, make([]byte, (align-uint64(len(b))%align)%align)...)
	if _, err := w.Write(b); err != nil {
		return err
	}
	pad := make([]byte, align)
	for i := range tensors {
		t := &tensors[i]
		data, err := t.Data()
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if uint64(len(data)) != sizes[i] {
			return fmt.Errorf("tensor %q (%v %v): its data is %d bytes, want %d", t.Name, t.Type, t.Dims, len(data), sizes[i])
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if i+1 < len(tensors) {
			if _, err := w.Write(pad[:(align-sizes[i]%align)%align]); err != nil {
				return err
			}
		}
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}

// appendValue encodes v (checked by checkValue) without its type id.
func appendValue(b []byte, v Value) []byte {
	le := binary.LittleEndian
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
		return le.AppendUint16(b, x)
	case int16:
		return le.AppendUint16(b, uint16(x))
	case uint32:
		return le.AppendUint32(b, x)
	case int32:
		return le.AppendUint32(b, uint32(x))
	case float32:
		return le.AppendUint32(b, math.Float32bits(x))
	case uint64:
		return le.AppendUint64(b, x)
	case int64:
		return le.AppendUint64(b, uint64(x))
	case float64:
		return le.AppendUint64(b, math.Float64bits(x))
	case string:
		return appendString(b, x)
	}
	return appendArrayBody(le.AppendUint32(b, uint32(v.Elem)), v)
}

// appendArrayBody encodes an array's count and elements (its element type already written).
func appendArrayBody(b []byte, v Value) []byte {
	le := binary.LittleEndian
	each := func(n int, f func(i int) any) []byte {
		b = le.AppendUint64(b, uint64(n))
		for i := range n {
			b = appendValue(b, Value{X: f(i)})
		}
		return b
	}
	switch x := v.X.(type) {
	case []Value:
		b = le.AppendUint64(b, uint64(len(x)))
		for _, e := range x {
			b = le.AppendUint32(b, uint32(e.Elem))
			b = appendArrayBody(b, e)
		}
		return b
	case []uint8:
		return append(le.AppendUint64(b, uint64(len(x))), x...)
	case []int8:
		return each(len(x), func(i int) any { return x[i] })
	case []bool:
		return each(len(x), func(i int) any { return x[i] })
	case []uint16:
		return each(len(x), func(i int) any { return x[i] })
	case []int16:
		return each(len(x), func(i int) any { return x[i] })
	case []uint32:
		return each(len(x), func(i int) any { return x[i] })
	case []int32:
		return each(len(x), func(i int) any { return x[i] })
	case []float32:
		return each(len(x), func(i int) any { return x[i] })
	case []uint64:
		return each(len(x), func(i int) any { return x[i] })
	case []int64:
		return each(len(x), func(i int) any { return x[i] })
	case []float64:
		return each(len(x), func(i int) any { return x[i] })
	case []string:
		return each(len(x), func(i int) any { return x[i] })
	}
	return b
}
