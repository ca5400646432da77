package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func i64Bytes(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// TestOpenHeaderMatchesOpen: on a complete file OpenHeader sees what Open sees (names, dtypes,
// shapes, metadata), maps nothing, and Int64s reads the same values from the file.
func TestOpenHeaderMatchesOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.safetensors")
	ts := []WriteTensor{
		{Name: "ids", DType: I64, Shape: []int64{3}, Data: i64Bytes(-5, 1<<40, 7)},
		{Name: "w", DType: BF16, Shape: []int64{2, 2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
	}
	if err := WriteFile(p, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	full, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	hdr, err := OpenHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(hdr.Names(), full.Names()) || !reflect.DeepEqual(hdr.Metadata, full.Metadata) || !hdr.HeaderOnly() || full.HeaderOnly() {
		t.Fatalf("names %v / %v, metadata %v / %v", hdr.Names(), full.Names(), hdr.Metadata, full.Metadata)
	}
	if hdr.DataSize() != 32 || hdr.DataPresent() != 32 || full.DataSize() != 32 || full.DataPresent() != 32 {
		t.Fatalf("sizes %d %d %d %d", hdr.DataSize(), hdr.DataPresent(), full.DataSize(), full.DataPresent())
	}
	for _, n := range full.Names() {
		a, _ := full.Tensor(n)
		b, _ := hdr.Tensor(n)
		if a.DType != b.DType || !reflect.DeepEqual(a.Shape, b.Shape) || a.ByteSize() != b.ByteSize() || b.Data != nil {
			t.Fatalf("%s: %+v vs %+v", n, a, b)
		}
	}
	for _, f := range []*File{full, hdr} {
		ids, _ := f.Tensor("ids")
		if v, err := ids.Int64s(); err != nil || !reflect.DeepEqual(v, []int64{-5, 1 << 40, 7}) {
			t.Fatalf("Int64s: %v %v", v, err)
		}
		w, _ := f.Tensor("w")
		if _, err := w.Int64s(); err == nil || !strings.Contains(err.Error(), "not I64") {
			t.Fatalf("Int64s of BF16: %v", err)
		}
	}
	w, _ := hdr.Tensor("w")
	_, err = w.Float32()
	checkErr(t, err, ErrFormat, "header-only")
}

// TestOpenHeaderTruncated: a file cut inside its data section is accepted by OpenHeader (and
// refused by Open); tensors whose bytes are present can be read, the others say truncated.
func TestOpenHeaderTruncated(t *testing.T) {
	h, n := validHeader([]entry{{"a", I64, []int64{2}}, {"b", I64, []int64{4}}})
	img := image(h, i64Bytes(11, 22, 1, 2, 3, 4))
	p := writeFile(t, t.TempDir(), "cut.safetensors", img[:len(img)-8])
	_, err := Open(p)
	checkErr(t, err, ErrFormat, p, `"b"`, "out of range")
	f, err := OpenHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataSize() != n || f.DataPresent() != n-8 {
		t.Fatalf("data %d of %d, want %d of %d", f.DataPresent(), f.DataSize(), n-8, n)
	}
	a, _ := f.Tensor("a")
	if v, err := a.Int64s(); err != nil || !reflect.DeepEqual(v, []int64{11, 22}) {
		t.Fatalf("a: %v %v", v, err)
	}
	b, _ := f.Tensor("b")
	_, err = b.Int64s()
	checkErr(t, err, ErrFormat, `"b"`, "past the end of the file", "holds 40 of the 48 bytes", "truncated")
	// Cut inside the header itself: refused by both.
	p2 := writeFile(t, t.TempDir(), "cut-header.safetensors", img[:8+len(h)/2])
	_, err = OpenHeader(p2)
	checkErr(t, err, ErrFormat, p2, "header length")
}

// TestWriteSparseFile: holes take no data blocks, the full-size file opens (zeros), the
// truncated one opens header-only, and both describe the same tensors.
func TestWriteSparseFile(t *testing.T) {
	dir := t.TempDir()
	ts := []WriteTensor{
		{Name: "big", DType: BF16, Shape: []int64{1 << 14, 1 << 12}}, // 128 MiB, never written
		{Name: "ids", DType: I64, Shape: []int64{2}, Data: i64Bytes(3, 4)},
	}
	sparse, cut := filepath.Join(dir, "sparse.safetensors"), filepath.Join(dir, "cut.safetensors")
	if err := WriteSparseFile(sparse, ts, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteSparseFile(cut, ts, nil, true); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 128<<20 {
		t.Fatalf("sparse file is %d bytes", st.Size())
	}
	if used, ok := diskBytes(st); ok && used > 1<<20 {
		t.Errorf("sparse file uses %d bytes of disk", used)
	}
	f, err := Open(sparse)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	big, _ := f.Tensor("big")
	if u, err := big.Uint16s(); err != nil || len(u) != 1<<26 || u[12345] != 0 {
		t.Fatalf("hole: %v", err)
	}
	g, err := OpenHeader(cut)
	if err != nil {
		t.Fatal(err)
	}
	if g.DataPresent() != 16 || g.DataSize() != 16+(128<<20) {
		t.Fatalf("cut file: %d of %d", g.DataPresent(), g.DataSize())
	}
	for _, file := range []*File{f, g} {
		ids, _ := file.Tensor("ids")
		if v, err := ids.Int64s(); err != nil || !reflect.DeepEqual(v, []int64{3, 4}) {
			t.Fatalf("ids: %v %v", v, err)
		}
	}
	if _, err := Open(cut); err == nil {
		t.Fatal("Open accepted a truncated file")
	}
	if err := WriteSparseFile(cut, []WriteTensor{{Name: "x", DType: I64, Shape: []int64{2}, Data: make([]byte, 8)}}, nil, true); err == nil {
		t.Fatal("WriteSparseFile accepted data of the wrong size")
	}
}

// TestOpenDirHeaders: a sharded checkpoint with one truncated shard opens header-only, with the
// index checked as OpenDir checks it, and is refused by OpenDir.
func TestOpenDirHeaders(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, dir, "s1.safetensors", "a", "b")
	h, _ := validHeader([]entry{{"c", F32, []int64{2}}})
	writeFile(t, dir, "s2.safetensors", image(h, make([]byte, 4)))
	writeIndex(t, dir, `{"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}`)
	if _, err := OpenDir(dir); err == nil {
		t.Fatal("OpenDir accepted a truncated shard")
	}
	ck, err := OpenDirHeaders(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	files := ck.Files()
	if len(files) != 2 || files[0].DataPresent() != 16 || files[1].DataPresent() != 4 || files[1].DataSize() != 8 {
		t.Fatalf("files %+v", files)
	}
	if got := ck.Names(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("names %v", got)
	}
	writeIndex(t, dir, `{"a": "s1.safetensors", "b": "s1.safetensors", "c": "s1.safetensors"}`)
	_, err = OpenDirHeaders(dir)
	checkErr(t, err, ErrNotFound, `"c"`)
}
