package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// MaxHeaderSize bounds the JSON header (safetensors' own limit is 100 MB). A header length above
// this, or above the file size, is rejected before anything is allocated.
const MaxHeaderSize = 100 << 20

// File is one opened safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	tensors  map[string]*Tensor
	names    []string // sorted
	data     []byte   // whole file (mapping or heap copy)
	unmap    func() error
}

// Open opens and validates one safetensors file: header length against the file size, JSON
// syntax, dtypes, shapes, offsets (in range, contiguous cover of the data section without
// overlap) and byte sizes (product(shape) * dtype size). Every error names the file and, where
// one is involved, the tensor, and wraps ErrFormat.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%w: %s: file is %d bytes, shorter than the 8-byte header length", ErrFormat, path, size)
	}
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%w: %s: reading header length: %v", ErrFormat, path, err)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > MaxHeaderSize || hlen > uint64(size-8) {
		return nil, fmt.Errorf("%w: %s: header length %d exceeds the file (%d bytes) or the %d-byte limit", ErrFormat, path, hlen, size, MaxHeaderSize)
	}
	data, unmap, err := mapFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	file, err := parse(path, data, hlen)
	if err != nil {
		if unmap != nil {
			unmap()
		}
		return nil, err
	}
	file.unmap = unmap
	return file, nil
}

// ParseHeader validates a whole safetensors image held in memory (header and data section)
// and returns its tensors. It is Open without the file system; used by the fuzz target.
func ParseHeader(path string, image []byte) (*File, error) {
	if len(image) < 8 {
		return nil, fmt.Errorf("%w: %s: file is %d bytes, shorter than the 8-byte header length", ErrFormat, path, len(image))
	}
	hlen := binary.LittleEndian.Uint64(image[:8])
	if hlen > MaxHeaderSize || hlen > uint64(len(image)-8) {
		return nil, fmt.Errorf("%w: %s: header length %d exceeds the file (%d bytes) or the %d-byte limit", ErrFormat, path, hlen, len(image), MaxHeaderSize)
	}
	return parse(path, image, hlen)
}

type rawEntry struct {
	DType   *string  `json:"dtype"`
	Shape   *[]int64 `json:"shape"`
	Offsets *[]int64 `json:"data_offsets"`
}

func parse(path string, data []byte, hlen uint64) (*File, error) {
	header := data[8 : 8+hlen]
	body := data[8+hlen:]
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %s: malformed JSON header: %v", ErrFormat, path, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: %s: JSON header is not an object", ErrFormat, path)
	}
	// Only whitespace (safetensors pads with spaces) may follow the object.
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimRight(rest, " \t\r\n\x00")) != 0 {
		return nil, fmt.Errorf("%w: %s: trailing bytes after the JSON header", ErrFormat, path)
	}
	file := &File{Path: path, tensors: make(map[string]*Tensor, len(raw)), data: data}
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return nil, fmt.Errorf("%w: %s: __metadata__ must map strings to strings: %v", ErrFormat, path, err)
			}
			file.Metadata = md
			continue
		}
		var e rawEntry
		d := json.NewDecoder(bytes.NewReader(msg))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("%w: %s: tensor %q: malformed entry: %v", ErrFormat, path, name, err)
		}
		if e.DType == nil || e.Shape == nil || e.Offsets == nil {
			return nil, fmt.Errorf("%w: %s: tensor %q: entry needs dtype, shape and data_offsets", ErrFormat, path, name)
		}
		dt := DType(*e.DType)
		if dt.Size() == 0 {
			return nil, fmt.Errorf("%w: %s: tensor %q: unknown dtype %q", ErrFormat, path, name, *e.DType)
		}
		if len(*e.Offsets) != 2 {
			return nil, fmt.Errorf("%w: %s: tensor %q: data_offsets must have 2 entries, has %d", ErrFormat, path, name, len(*e.Offsets))
		}
		begin, end := (*e.Offsets)[0], (*e.Offsets)[1]
		if begin < 0 || end < begin || end > int64(len(body)) {
			return nil, fmt.Errorf("%w: %s: tensor %q: data_offsets [%d, %d) out of range of the %d-byte data section", ErrFormat, path, name, begin, end, len(body))
		}
		// Element count with overflow checks: a lying shape must not overflow into a small size.
		n := int64(1)
		for _, s := range *e.Shape {
			if s < 0 {
				return nil, fmt.Errorf("%w: %s: tensor %q: negative dimension in shape %v", ErrFormat, path, name, *e.Shape)
			}
			if s != 0 && n > math.MaxInt64/int64(dt.Size())/s {
				return nil, fmt.Errorf("%w: %s: tensor %q: shape %v overflows", ErrFormat, path, name, *e.Shape)
			}
			n *= s
		}
		if n*int64(dt.Size()) != end-begin {
			return nil, fmt.Errorf("%w: %s: tensor %q: %s shape %v needs %d bytes, data_offsets give %d", ErrFormat, path, name, dt, *e.Shape, n*int64(dt.Size()), end-begin)
		}
		if _, dup := file.tensors[name]; dup {
			// encoding/json keeps the last duplicate key silently; this cannot trigger through
			// the map, so duplicates are found by scanning keys below.
			return nil, fmt.Errorf("%w: %s: duplicate tensor %q", ErrFormat, path, name)
		}
		shape := append([]int64(nil), (*e.Shape)...)
		file.tensors[name] = &Tensor{Name: name, File: path, DType: dt, Shape: shape, Data: body[begin:end:end]}
		spans = append(spans, span{name, begin, end})
	}
	if dup := duplicateKey(header); dup != "" {
		return nil, fmt.Errorf("%w: %s: duplicate tensor %q in header", ErrFormat, path, dup)
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].name < spans[j].name
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].begin < spans[i-1].end {
			return nil, fmt.Errorf("%w: %s: tensors %q and %q overlap ([%d, %d) and [%d, %d))", ErrFormat, path,
				spans[i-1].name, spans[i].name, spans[i-1].begin, spans[i-1].end, spans[i].begin, spans[i].end)
		}
	}
	file.names = make([]string, 0, len(file.tensors))
	for n := range file.tensors {
		file.names = append(file.names, n)
	}
	sort.Strings(file.names)
	return file, nil
}

// duplicateKey returns the first top-level key that occurs twice in a JSON object, or "".
func duplicateKey(header []byte) string {
	dec := json.NewDecoder(bytes.NewReader(header))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, ok := t.(string)
		if !ok {
			return ""
		}
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// Names returns the tensor names of the file, sorted.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Tensor returns the named tensor or an error wrapping ErrNotFound.
func (f *File) Tensor(name string) (*Tensor, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q in %s", ErrNotFound, name, f.Path)
	}
	return t, nil
}

// Close releases the mapping. Tensors of the file must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	f.data = nil
	return u()
}
