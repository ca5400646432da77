package gguf

import (
	"errors"
	"testing"

	"github.com/stratakernels/strata/op"
)

// FuzzHeader feeds arbitrary images to Parse and to the header-only prefix reader. Neither may
// panic; an accepted image must satisfy what later code relies on: each tensor's bytes inside
// the image with the size its type and extents give, its offset aligned, its matrices
// (2-D and 3-D tensors) built without error or refused as unsupported; a prefix of the image
// either asks for more bytes or gives the header the whole image gives. The corpus is kept in
// testdata/fuzz/FuzzHeader.
func FuzzHeader(f *testing.F) {
	f.Add(sample().bytes())
	h := sample()
	h.headerOnly = true
	f.Add(h.bytes())
	al := sample()
	al.alignment = 64
	al.kvs = append(al.kvs, kv("general.alignment", uint32(64)))
	f.Add(al.bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.gguf", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
		} else {
			for _, tn := range file.Tensors() {
				if int64(len(tn.Data)) != tn.Bytes || tn.Offset%uint64(file.Alignment) != 0 {
					t.Fatalf("%q: %d bytes, want %d; offset %d", tn.Name, len(tn.Data), tn.Bytes, tn.Offset)
				}
				if row, err := tn.Type.RowBytes(int(tn.Dims[0])); err != nil || int64(row)*tn.Elements/int64(tn.Dims[0]) != tn.Bytes {
					t.Fatalf("%q: row bytes %d (%v) for %d bytes", tn.Name, row, err, tn.Bytes)
				}
				if len(tn.Dims) == 2 || len(tn.Dims) == 3 {
					if _, err := tn.Matrices(); err != nil && !errors.Is(err, op.ErrUnsupported) {
						t.Fatalf("%q: %v", tn.Name, err)
					}
				}
			}
			for _, kv := range file.Metadata() {
				file.Int(kv.Key)
				file.Ints(kv.Key)
				file.Strings(kv.Key)
			}
		}
		whole, errWhole := parse(data, uint64(len(data)), false, false)
		for _, n := range []int{len(data) / 3, len(data) / 2} {
			p, err := parse(data[:n], uint64(len(data)), true, false)
			if errors.Is(err, errShort) {
				continue
			}
			if (err == nil) != (errWhole == nil) || err == nil && (len(p.tensors) != len(whole.tensors) || p.dataStart != whole.dataStart) {
				t.Fatalf("prefix of %d bytes: %v; whole image: %v", n, err, errWhole)
			}
		}
	})
}
