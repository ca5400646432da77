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
	data     []byte   // whole file (mapping or heap copy); nil when opened by OpenHeader
	unmap    func() error

	headerOnly bool
	dataStart  int64 // file offset of the data section: 8 + header length
	dataSize   int64 // bytes of data section the header describes
	present    int64 // bytes of data section the file holds (== dataSize unless headerOnly)
}

// Open opens and validates one safetensors file: header length against the file size and
// MaxHeaderSize, JSON syntax, duplicate names, dtypes, shapes, offsets (in range; sorted by offset
// the tensors must tile the data section exactly, without overlap, gap or trailing bytes, as the
// reference implementation requires) and byte sizes (product(shape) * dtype size). Every error
// names the file and, where one is involved, the tensor, and wraps ErrFormat; an error of the
// file system is wrapped as well (errors.Is(err, fs.ErrNotExist) holds for a missing file).
func Open(path string) (*File, error) {
	f, size, hlen, err := openHeaderLength(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, unmap, err := mapFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	file, err := parse(path, data[8:8+hlen], data[8+hlen:], int64(len(data))-8-int64(hlen), false)
	if err != nil {
		if unmap != nil {
			unmap()
		}
		return nil, err
	}
	file.data = data
	file.unmap = unmap
	return file, nil
}

// openHeaderLength opens path and reads and checks its 8-byte header length against the file
// size and MaxHeaderSize. The caller closes f. Errors wrap ErrFormat and name the file.
func openHeaderLength(path string) (f *os.File, size int64, hlen uint64, err error) {
	f, err = os.Open(path)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
	}
	fail := func(format string, args ...any) (*os.File, int64, uint64, error) {
		f.Close()
		return nil, 0, 0, fmt.Errorf("%w: %s: "+format, append([]any{ErrFormat, path}, args...)...)
	}
	st, err := f.Stat()
	if err != nil {
		return fail("%v", err)
	}
	size = st.Size()
	if size < 8 {
		return fail("file is %d bytes, shorter than the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return fail("reading header length: %v", err)
	}
	hlen = binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > MaxHeaderSize || hlen > uint64(size-8) {
		return fail("header length %d exceeds the file (%d bytes) or the %d-byte limit", hlen, size, MaxHeaderSize)
	}
	return f, size, hlen, nil
}

// OpenHeader validates one safetensors file as Open does, except that the data section may be
// shorter than the header describes (a truncated or header-only file): the tiling of the data
// section by the tensors is checked against the size the header implies, and trailing bytes
// beyond it are still an error. It reads the 8-byte length and the JSON header only and maps
// nothing, so it costs the same for a 5 GB file as for a 5 kB one. Tensors of the file carry
// no Data; Int64s reads a tensor's bytes from the file on demand. DataPresent tells how much of
// the data section the file holds. Errors wrap ErrFormat and name the file (and tensor).
func OpenHeader(path string) (*File, error) {
	f, size, hlen, err := openHeaderLength(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	header := make([]byte, hlen)
	if _, err := f.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("%w: %s: reading the %d-byte header: %v", ErrFormat, path, hlen, err)
	}
	return parse(path, header, nil, size-8-int64(hlen), true)
}

// ParseHeader validates a whole safetensors image held in memory (8-byte length, JSON header
// and data section) exactly as Open does and returns its tensors, which alias image. path only
// names the image in errors. Errors wrap ErrFormat. Memory use is bounded by a small multiple of
// len(image): the header length is checked against len(image) and MaxHeaderSize before the JSON
// is read, and no allocation depends on a shape before the shape is checked against the bytes
// that back it.
func ParseHeader(path string, image []byte) (*File, error) {
	if len(image) < 8 {
		return nil, fmt.Errorf("%w: %s: file is %d bytes, shorter than the 8-byte header length", ErrFormat, path, len(image))
	}
	hlen := binary.LittleEndian.Uint64(image[:8])
	if hlen > MaxHeaderSize || hlen > uint64(len(image)-8) {
		return nil, fmt.Errorf("%w: %s: header length %d exceeds the file (%d bytes) or the %d-byte limit", ErrFormat, path, hlen, len(image), MaxHeaderSize)
	}
	f, err := parse(path, image[8:8+hlen], image[8+hlen:], int64(len(image))-8-int64(hlen), false)
	if err != nil {
		return nil, err
	}
	f.data = image
	return f, nil
}

type rawEntry struct {
	DType   *string  `json:"dtype"`
	Shape   *[]int64 `json:"shape"`
	Offsets *[]int64 `json:"data_offsets"`
}

// span is the byte range [begin, end) of one tensor inside the data section.
type span struct {
	name       string
	begin, end int64
}

// parse validates the JSON header against a data section of present bytes. With body (full
// mode, len(body) == present) every tensor must lie inside it and its Data aliases body; in
// header-only mode (body nil) the tensors must tile the data section the header describes,
// which may extend past the end of the file.
func parse(path string, header, body []byte, present int64, headerOnly bool) (*File, error) {
	// The header is scanned for duplicate keys first: encoding/json would silently keep the
	// last of two equal keys, hiding a second tensor of the same name.
	dup, err := duplicateKey(header)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: malformed JSON header: %v", ErrFormat, path, err)
	}
	if dup != "" {
		return nil, fmt.Errorf("%w: %s: duplicate tensor %q in header", ErrFormat, path, dup)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %s: malformed JSON header: %v", ErrFormat, path, err)
	}
	// safetensors pads the header with spaces; other whitespace and NULs are tolerated too.
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimRight(rest, " \t\r\n\x00")) != 0 {
		return nil, fmt.Errorf("%w: %s: trailing bytes after the JSON header", ErrFormat, path)
	}
	file := &File{Path: path, tensors: make(map[string]*Tensor, len(raw)), headerOnly: headerOnly,
		dataStart: 8 + int64(len(header)), present: present}
	limit := present
	if headerOnly {
		limit = math.MaxInt64
	}
	spans := make([]span, 0, len(raw))
	// Keys are visited in sorted order so that the first error reported is the same on every run.
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		msg := raw[name]
		if name == "__metadata__" {
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return nil, fmt.Errorf("%w: %s: __metadata__ must map strings to strings: %v", ErrFormat, path, err)
			}
			file.Metadata = md
			continue
		}
		t, sp, err := parseEntry(path, name, msg, limit)
		if err != nil {
			return nil, err
		}
		t.file, t.off = file, sp.begin
		if body != nil {
			t.Data = body[sp.begin:sp.end:sp.end]
		}
		file.tensors[name] = t
		spans = append(spans, sp)
		file.dataSize = max(file.dataSize, sp.end)
	}
	covered := present
	if headerOnly && present < file.dataSize {
		covered = file.dataSize // a truncated file: check the tiling of what the header describes
	}
	if err := checkCover(path, spans, covered); err != nil {
		return nil, err
	}
	if !headerOnly {
		file.dataSize = present
	}
	file.names = make([]string, 0, len(file.tensors))
	for n := range file.tensors {
		file.names = append(file.names, n)
	}
	sort.Strings(file.names)
	return file, nil
}

// parseEntry validates one header entry against a data section of limit bytes.
func parseEntry(path, name string, msg json.RawMessage, limit int64) (*Tensor, span, error) {
	fail := func(format string, args ...any) (*Tensor, span, error) {
		return nil, span{}, fmt.Errorf("%w: %s: tensor %q: %s", ErrFormat, path, name, fmt.Sprintf(format, args...))
	}
	var e rawEntry
	d := json.NewDecoder(bytes.NewReader(msg))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return fail("malformed entry: %v", err)
	}
	if e.DType == nil || e.Shape == nil || e.Offsets == nil {
		return fail("entry needs dtype, shape and data_offsets")
	}
	dt := DType(*e.DType)
	if dt.Size() == 0 {
		return fail("unknown dtype %q", *e.DType)
	}
	if len(*e.Offsets) != 2 {
		return fail("data_offsets must have 2 entries, has %d", len(*e.Offsets))
	}
	begin, end := (*e.Offsets)[0], (*e.Offsets)[1]
	switch {
	case begin < 0 || end < 0:
		return fail("data_offsets [%d, %d) are negative", begin, end)
	case end < begin:
		return fail("data_offsets [%d, %d) end before they begin", begin, end)
	case end > limit:
		return fail("data_offsets [%d, %d) out of range of the %d-byte data section", begin, end, limit)
	}
	// Element count with overflow checks: a lying shape must not wrap around to a small size.
	n := int64(1)
	for _, s := range *e.Shape {
		if s < 0 {
			return fail("negative dimension in shape %v", *e.Shape)
		}
		if s != 0 && n > math.MaxInt64/int64(dt.Size())/s {
			return fail("shape %v overflows", *e.Shape)
		}
		n *= s
	}
	if n*int64(dt.Size()) != end-begin {
		return fail("%s shape %v needs %d bytes, data_offsets [%d, %d) give %d", dt, *e.Shape, n*int64(dt.Size()), begin, end, end-begin)
	}
	shape := append([]int64(nil), (*e.Shape)...)
	t := &Tensor{Name: name, File: path, DType: dt, Shape: shape}
	return t, span{name, begin, end}, nil
}

// checkCover enforces what the reference safetensors implementation enforces: sorted by
// offset, the tensors tile the data section exactly, from byte 0 to its end, with neither
// overlap nor gap. Unreferenced bytes would be data no tensor owns; strata treats them as a
// damaged or hand-made file rather than guessing.
func checkCover(path string, spans []span, bodyLen int64) error {
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		if spans[i].end != spans[j].end {
			return spans[i].end < spans[j].end
		}
		return spans[i].name < spans[j].name
	})
	pos := int64(0)
	prev := ""
	for _, s := range spans {
		switch {
		case s.begin < pos:
			return fmt.Errorf("%w: %s: tensors %q and %q overlap: [%d, %d) starts before %d", ErrFormat, path, prev, s.name, s.begin, s.end, pos)
		case s.begin > pos && prev == "":
			return fmt.Errorf("%w: %s: gap [%d, %d) in the data section before tensor %q", ErrFormat, path, pos, s.begin, s.name)
		case s.begin > pos:
			return fmt.Errorf("%w: %s: gap [%d, %d) in the data section between tensors %q and %q", ErrFormat, path, pos, s.begin, prev, s.name)
		}
		pos = s.end
		prev = s.name
	}
	if pos != bodyLen {
		if prev == "" {
			return fmt.Errorf("%w: %s: %d-byte data section but no tensors", ErrFormat, path, bodyLen)
		}
		return fmt.Errorf("%w: %s: %d unreferenced bytes after the last tensor %q at the end of the data section", ErrFormat, path, bodyLen-pos, prev)
	}
	return nil
}

// duplicateKey returns the first top-level key that occurs twice in the JSON object obj, or "".
// It reports an error when obj is not one well-formed JSON object.
func duplicateKey(obj []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	if t != json.Delim('{') {
		return "", fmt.Errorf("expected a JSON object, found %v", t)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		k, ok := t.(string)
		if !ok {
			return "", fmt.Errorf("object key is %v, not a string", t)
		}
		if seen[k] {
			return k, nil
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	if _, err := dec.Token(); err != nil {
		return "", err
	}
	return "", nil
}

// Names returns the tensor names of the file, sorted.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// DataSize is the size in bytes of the data section the header describes (the sum of the
// tensor sizes).
func (f *File) DataSize() int64 { return f.dataSize }

// DataPresent is how many bytes of the data section the file holds: DataSize, except for a
// truncated file opened by OpenHeader.
func (f *File) DataPresent() int64 { return min(f.present, f.dataSize) }

// HeaderOnly reports whether the file was opened by OpenHeader (tensors carry no Data).
func (f *File) HeaderOnly() bool { return f.headerOnly }

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
