package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// WriteTensor is one tensor to write: name, dtype, shape and raw little-endian bytes.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// WriteFile writes tensors to path as one safetensors file (tensors in name order, header padded
// with spaces to a multiple of 8 bytes). Sizes are checked against shapes and dtypes.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	ts := append([]WriteTensor(nil), tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return fmt.Errorf("safetensors: write %s: duplicate tensor %q", path, t.Name)
		}
		n := int64(1)
		for _, s := range t.Shape {
			if s < 0 {
				return fmt.Errorf("safetensors: write %s: tensor %q: negative dimension in shape %v", path, t.Name, t.Shape)
			}
			n *= s
		}
		if t.DType.Size() == 0 || n*int64(t.DType.Size()) != int64(len(t.Data)) {
			return fmt.Errorf("safetensors: write %s: tensor %q: %s %v does not match %d bytes", path, t.Name, t.DType, t.Shape, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		header[t.Name] = map[string]any{"dtype": string(t.DType), "shape": shape, "data_offsets": []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hj)))
	w.Write(lenBuf[:])
	w.Write(hj)
	for _, t := range ts {
		w.Write(t.Data)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
