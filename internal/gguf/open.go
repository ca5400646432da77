package gguf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
)

// Split keys: the part's number (0-based), the number of parts and the tensors of all parts.
const (
	KeySplitNo     = "split.no"
	KeySplitCount  = "split.count"
	KeySplitTensor = "split.tensors.count"
)

// splitRe matches a split part's name: NAME-0000i-of-0000N.gguf (i from 1).
var splitRe = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// File is an opened GGUF model: one file, or every part of a split set, seen as one metadata
// table (the first part's) and one tensor name space. Close unmaps it.
type File struct {
	// Path is the path given to Open; Parts are the files read (Path alone, or every part).
	Path  string
	Parts []string
	// Version is the format version (3), Alignment the data alignment of the first part.
	Version, Alignment int
	// HeaderOnly: opened by OpenHeader, the tensors carry no Data.
	HeaderOnly bool
	// DataSize is the bytes of tensor data the tensor tables of all parts describe, DataPresent
	// how many of them the files hold (equal in a set Open accepts; less in a header-only copy
	// or a download cut short, which OpenHeader reads).
	DataSize, DataPresent int64

	kvs     []KV
	byKey   map[string]int
	tensors []*Tensor
	byName  map[string]*Tensor
	unmaps  []func() error
	evicts  []func([]byte) // each mapped part's evict (mapFile)
}

// Open opens a GGUF file, or the split set its name belongs to (NAME-0000i-of-0000N.gguf: every
// part 1..N is opened, whichever part is named), validating every part's header and tensor table
// and mapping each read-only. A split set's parts must each carry split.no (its index, from 0)
// and split.count (N); the first part's split.tensors.count must equal the tensors of all parts;
// a tensor name in two parts is an error. A file whose metadata says it is one of several parts
// but whose name is not a part's is an error. Errors wrap ErrFormat and name the file (a missing
// part: its path, and fs.ErrNotExist); after an error nothing stays mapped.
func Open(path string) (*File, error) { return open(path, false) }

// OpenHeader opens as Open does without reading the data: it reads each part's header only
// (a few megabytes at most, whatever the file's size), and accepts files whose data section is
// shorter than their tensor table says (header-only copies of published files). Tensors carry
// no Data. Errors wrap ErrFormat and name the file.
func OpenHeader(path string) (*File, error) { return open(path, true) }

func open(path string, headerOnly bool) (*File, error) {
	parts := []string{path}
	if m := splitRe.FindStringSubmatch(filepath.Base(path)); m != nil {
		n, _ := strconv.Atoi(m[3])
		i, _ := strconv.Atoi(m[2])
		if n < 1 || i < 1 || i > n {
			return nil, fmt.Errorf("%w: %s: part %d of %d is not a split part's name", ErrFormat, path, i, n)
		}
		parts = parts[:0]
		for k := 1; k <= n; k++ {
			parts = append(parts, filepath.Join(filepath.Dir(path), fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], k, n)))
		}
	}
	f := &File{Path: path, Parts: parts, HeaderOnly: headerOnly, byName: map[string]*Tensor{}}
	fail := func(err error) (*File, error) {
		f.Close()
		return nil, err
	}
	total := int64(0)
	for k, p := range parts {
		h, data, unmap, evict, err := readPart(p, headerOnly)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && len(parts) > 1 {
				return fail(fmt.Errorf("%w: %s: split part %d of %d is missing: %w", ErrFormat, p, k+1, len(parts), err))
			}
			return fail(err)
		}
		if unmap != nil {
			f.unmaps = append(f.unmaps, unmap)
		}
		if evict != nil {
			f.evicts = append(f.evicts, evict)
		}
		f.DataSize += int64(h.dataSize)
		if st, err := os.Stat(p); err == nil && st.Size() > int64(h.dataStart) {
			f.DataPresent += min(st.Size()-int64(h.dataStart), int64(h.dataSize))
		}
		pf := &File{kvs: h.kvs, byKey: h.byKey, Path: p}
		no, count := int64(0), int64(1)
		if _, ok := h.byKey[KeySplitCount]; ok || len(parts) > 1 {
			if count, err = pf.Int(KeySplitCount); err != nil {
				return fail(fmt.Errorf("%w: %s: %w", ErrFormat, p, err))
			}
			if no, err = pf.Int(KeySplitNo); err != nil {
				return fail(fmt.Errorf("%w: %s: %w", ErrFormat, p, err))
			}
		}
		if count != int64(len(parts)) || no != int64(k) {
			if len(parts) == 1 {
				return fail(fmt.Errorf("%w: %s: the file is split part %d of %d (split.no %d, split.count %d) but its name is not NAME-%05d-of-%05d.gguf",
					ErrFormat, p, no+1, count, no, count, no+1, count))
			}
			return fail(fmt.Errorf("%w: %s: split.no %d, split.count %d, but the name says part %d of %d", ErrFormat, p, no, count, k+1, len(parts)))
		}
		if k == 0 {
			f.kvs, f.byKey, f.Version, f.Alignment = h.kvs, h.byKey, Version, int(h.alignment)
			if len(parts) > 1 {
				if total, err = pf.Int(KeySplitTensor); err != nil {
					return fail(fmt.Errorf("%w: %s: %w", ErrFormat, p, err))
				}
			}
		}
		for _, t := range h.tensors {
			if other, dup := f.byName[t.Name]; dup {
				return fail(fmt.Errorf("%w: tensor %q is in both %s and %s", ErrFormat, t.Name, other.File, p))
			}
			t.File = p
			if data != nil {
				s := h.dataStart + t.Offset
				t.Data = data[s : s+uint64(t.Bytes) : s+uint64(t.Bytes)]
			}
			f.byName[t.Name] = t
			f.tensors = append(f.tensors, t)
		}
	}
	if len(parts) > 1 && total != int64(len(f.tensors)) {
		return fail(fmt.Errorf("%w: %s: split.tensors.count is %d, the %d parts hold %d tensors", ErrFormat, parts[0], total, len(parts), len(f.tensors)))
	}
	return f, nil
}

// readPart opens one file: mapped and checked whole, or (headerOnly) its header read by growing
// prefixes. Errors name the file. evict, for a mapped file, drops the process's pages of a
// view into it (mapFile).
func readPart(path string, headerOnly bool) (*header, []byte, func() error, func([]byte), error) {
	// Checked before opening: opening a FIFO waits for a writer.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: not a regular file (%v)", ErrFormat, path, st.Mode())
	}
	// A file that cannot be opened is not a malformed one: the os error (which names the path)
	// is returned as it is, so that errors.Is(err, fs.ErrNotExist) holds.
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: not a regular file", ErrFormat, path)
	}
	if size > math.MaxInt {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: %d bytes do not fit this machine's address space", ErrFormat, path, size)
	}
	if headerOnly {
		for n := min(size, 1<<20); ; n = min(size, 4*n) {
			b := make([]byte, n)
			if _, err := io.ReadFull(io.NewSectionReader(fh, 0, n), b); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
			}
			h, err := parse(b, uint64(size), n < size, false)
			if errors.Is(err, errShort) {
				continue // n < size: read more
			}
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
			}
			return h, nil, nil, nil, nil
		}
	}
	var data []byte
	var evict func([]byte)
	unmap := func() error { return nil }
	if size < 24 { // shorter than any GGUF header, and a 0-byte file cannot be mapped
		data = make([]byte, size)
		if _, err := io.ReadFull(fh, data); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
		}
	} else if data, unmap, evict, err = mapFile(fh, size); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: mapping %d bytes: %w", ErrFormat, path, size, err)
	}
	h, err := parse(data, uint64(size), false, true)
	if err != nil {
		unmap()
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
	}
	return h, data, unmap, evict, nil
}

// Close unmaps every part. Using the tensors' Data after Close faults. Closing twice is a no-op.
func (f *File) Close() error {
	if f == nil {
		return nil
	}
	var first error
	for _, u := range f.unmaps {
		if err := u(); err != nil && first == nil {
			first = err
		}
	}
	f.unmaps = nil
	return first
}

// Evict drops this process's pages that lie wholly inside data, a view into a mapped part (a
// tensor's Data), with madvise MADV_DONTNEED where the system has it: they stay in the page
// cache, and data read later is read back from there (or from the file). A loader calls it
// once a tensor it packed into memory of its own no longer needs the file's pages, so that they
// do not count twice in the process's resident memory, while the tensors it still reads keep
// theirs. A no-op for data outside the mapped parts, for parts read into memory (no mmap) and
// after Close.
func (f *File) Evict(data []byte) {
	if f == nil || f.unmaps == nil {
		return
	}
	for _, e := range f.evicts {
		e(data)
	}
}

// Metadata returns the metadata entries in file order.
func (f *File) Metadata() []KV { return append([]KV(nil), f.kvs...) }

// Lookup returns the value of key and whether it is present.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.byKey[key]
	if !ok {
		return Value{}, false
	}
	return f.kvs[i].Value, true
}

// Tensors returns the tensor table in file order (part by part).
func (f *File) Tensors() []*Tensor { return append([]*Tensor(nil), f.tensors...) }

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.tensors))
	for _, t := range f.tensors {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

// Tensor returns the tensor called name, or nil.
func (f *File) Tensor(name string) *Tensor { return f.byName[name] }

// Parse validates a whole GGUF image held in memory as Open validates one file (split keys are
// not checked) and returns it with its tensors viewing image. name only names the image in
// errors. Errors wrap ErrFormat. Memory use is bounded by a small multiple of len(image): every
// count and length is checked against the bytes left before anything is allocated for it.
func Parse(name string, image []byte) (*File, error) {
	h, err := parse(image, uint64(len(image)), false, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, name, err)
	}
	f := &File{Path: name, Parts: []string{name}, Version: Version, Alignment: int(h.alignment), kvs: h.kvs, byKey: h.byKey, byName: map[string]*Tensor{}}
	for _, t := range h.tensors {
		t.File = name
		s := h.dataStart + t.Offset
		t.Data = image[s : s+uint64(t.Bytes) : s+uint64(t.Bytes)]
		f.byName[t.Name] = t
		f.tensors = append(f.tensors, t)
	}
	return f, nil
}
