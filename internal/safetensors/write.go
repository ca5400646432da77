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
	hj, _, err := encodeHeader(path, ts, metadata, false)
	if err != nil {
		return err
	}
	return writeImage(path, hj, ts, -1)
}

// WriteSparseFile writes a file with the structure of a large checkpoint shard without its
// weights: tensors with nil Data (and a non-zero size) are described in the header but not
// written. Tensors with Data come first in the data section (in name order), then the others
// (in name order). With truncate false the file is extended to its full size with a hole
// (sparse on file systems that support it: Open accepts it and reads zeros); with truncate the
// file ends after the last written tensor (only OpenHeader accepts it).
func WriteSparseFile(path string, tensors []WriteTensor, metadata map[string]string, truncate bool) error {
	ts := append([]WriteTensor(nil), tensors...)
	sort.SliceStable(ts, func(i, j int) bool {
		if wi, wj := ts[i].Data != nil, ts[j].Data != nil; wi != wj {
			return wi
		}
		return ts[i].Name < ts[j].Name
	})
	hj, total, err := encodeHeader(path, ts, metadata, true)
	if err != nil {
		return err
	}
	if truncate {
		total = -1
	}
	return writeImage(path, hj, ts, total)
}

// encodeHeader lays ts out back to back in order and returns the padded JSON header and the
// size of the data section. With holes, a tensor may have nil Data.
func encodeHeader(path string, ts []WriteTensor, metadata map[string]string, holes bool) ([]byte, int64, error) {
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	seen := make(map[string]bool, len(ts))
	var off int64
	for _, t := range ts {
		if seen[t.Name] {
			return nil, 0, fmt.Errorf("safetensors: write %s: duplicate tensor %q", path, t.Name)
		}
		seen[t.Name] = true
		n := int64(1)
		for _, s := range t.Shape {
			if s < 0 {
				return nil, 0, fmt.Errorf("safetensors: write %s: tensor %q: negative dimension in shape %v", path, t.Name, t.Shape)
			}
			n *= s
		}
		size := n * int64(t.DType.Size())
		if t.DType.Size() == 0 || (size != int64(len(t.Data)) && !(holes && t.Data == nil)) {
			return nil, 0, fmt.Errorf("safetensors: write %s: tensor %q: %s %v does not match %d bytes", path, t.Name, t.DType, t.Shape, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		header[t.Name] = map[string]any{"dtype": string(t.DType), "shape": shape, "data_offsets": []int64{off, off + size}}
		off += size
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return nil, 0, err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	return hj, off, nil
}

// writeImage writes the header and the tensors' Data in order; total >= 0 extends the file to
// 8 + len(hj) + total bytes.
func writeImage(path string, hj []byte, ts []WriteTensor, total int64) error {
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
	if total >= 0 {
		if err := f.Truncate(8 + int64(len(hj)) + total); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
