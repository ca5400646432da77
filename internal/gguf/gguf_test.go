package gguf

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stratakernels/strata/op"
)

// sample is a valid image: every value type, nested arrays, and F32, BF16 and Q8_0 tensors (a
// 3-D stack among them).
func sample() *image {
	im := newImage()
	nested := []Value{{Type: Array, Elem: Int32, X: []int32{1, -2}}, {Type: Array, Elem: String, X: []string{"a", ""}}}
	im.kvs = []KV{
		kv("general.architecture", "qwen35"),
		kv("u8", uint8(200)), kv("i8", int8(-3)), kv("u16", uint16(60000)), kv("i16", int16(-30000)),
		kv("u32", uint32(4000000000)), kv("i32", int32(-7)), kv("f32", float32(1.5)), kv("b", true),
		kv("u64", uint64(1)<<40), kv("i64", int64(-1)<<40), kv("f64", 2.25),
		kv("tokens", []string{"<s>", "héllo", ""}), kv("types", []int32{1, 2, 3}), kv("flags", []bool{true, false}),
		kv("scores", []float32{0.5, -1}), kv("nested", nested), kv("empty", []uint32{}),
	}
	q8 := make([]byte, 2*2*34) // stack of 2 experts [2, 64]... as [E=2, N=2, K=32] Q8_0
	for i := range q8 {
		q8[i] = byte(i)
	}
	bf := []byte{0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40, 0xa0, 0x40, 0xc0, 0x40} // 1..6
	im.tensors = []wTensor{
		{name: "a.weight", dims: []uint64{3}, typ: op.GGMLF32, data: f32Bytes(1, 2, 3)},
		{name: "b.weight", dims: []uint64{3, 2}, typ: op.GGMLBF16, data: bf},
		{name: "c.weight", dims: []uint64{32, 2, 2}, typ: op.GGMLQ8_0, data: q8},
		{name: "d.weight", dims: []uint64{2, 3}, typ: op.GGMLF32, data: f32Bytes(1, 2, 3, 4, 5, 6)},
	}
	return im
}

func TestReadSample(t *testing.T) {
	p := sample().write(t, "m.gguf")
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for key, want := range map[string]int64{"u8": 200, "i8": -3, "u16": 60000, "i16": -30000, "u32": 4000000000, "i32": -7, "u64": 1 << 40, "i64": -1 << 40} {
		if got, err := f.Int(key); err != nil || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	if got, err := f.Float("f32"); err != nil || got != 1.5 {
		t.Errorf("Float(f32) = %v, %v", got, err)
	}
	if got, err := f.Float("f64"); err != nil || got != 2.25 {
		t.Errorf("Float(f64) = %v, %v", got, err)
	}
	if got, err := f.Bool("b"); err != nil || !got {
		t.Errorf("Bool = %v, %v", got, err)
	}
	if got, err := f.String("general.architecture"); err != nil || got != "qwen35" {
		t.Errorf("String = %q, %v", got, err)
	}
	if got, err := f.Strings("tokens"); err != nil || !reflect.DeepEqual(got, []string{"<s>", "héllo", ""}) {
		t.Errorf("Strings = %q, %v", got, err)
	}
	if got, err := f.Ints("types"); err != nil || !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Errorf("Ints = %v, %v", got, err)
	}
	if got, err := f.Ints("u32"); err != nil || !reflect.DeepEqual(got, []int64{4000000000}) {
		t.Errorf("Ints(scalar) = %v, %v", got, err)
	}
	if got, err := f.Bools("flags"); err != nil || !reflect.DeepEqual(got, []bool{true, false}) {
		t.Errorf("Bools = %v, %v", got, err)
	}
	if v, _ := f.Lookup("scores"); !reflect.DeepEqual(v.X, []float32{0.5, -1}) {
		t.Errorf("scores = %v", v.X)
	}
	if v, _ := f.Lookup("nested"); v.Elem != Array || !reflect.DeepEqual(v.X.([]Value)[1].X, []string{"a", ""}) {
		t.Errorf("nested = %+v", v)
	}
	if v, _ := f.Lookup("empty"); v.Elem != Uint32 || len(v.X.([]uint32)) != 0 {
		t.Errorf("empty = %+v", v)
	}
	if len(f.Metadata()) != 18 || f.Metadata()[0].Key != "general.architecture" {
		t.Errorf("metadata order: %v", f.Metadata()[0].Key)
	}
	if got := f.Names(); !reflect.DeepEqual(got, []string{"a.weight", "b.weight", "c.weight", "d.weight"}) {
		t.Errorf("Names = %v", got)
	}
	a := f.Tensor("a.weight")
	if x, err := a.Float32(); err != nil || !reflect.DeepEqual(x, []float32{1, 2, 3}) {
		t.Errorf("a = %v, %v", x, err)
	}
	b := f.Tensor("b.weight")
	if !reflect.DeepEqual(b.Shape(), []int64{2, 3}) || b.Bytes != 12 || b.Elements != 6 {
		t.Errorf("b: shape %v bytes %d", b.Shape(), b.Bytes)
	}
	if x, err := b.Float32(); err != nil || !reflect.DeepEqual(x, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("b = %v, %v", x, err)
	}
	ms, err := b.Matrices()
	if err != nil || len(ms) != 1 || ms[0].N != 2 || ms[0].K != 3 || ms[0].DType != op.BF16 {
		t.Fatalf("b matrices: %+v %v", ms, err)
	}
	if unsafe.Pointer(&ms[0].U16[0]) != unsafe.Pointer(&b.Data[0]) {
		t.Error("BF16 matrix is a copy, want a view of the mapping")
	}
	d, _ := f.Tensor("d.weight").Matrices()
	if d[0].N != 3 || d[0].K != 2 || d[0].F32[3] != 4 || unsafe.Pointer(&d[0].F32[0]) != unsafe.Pointer(&f.Tensor("d.weight").Data[0]) {
		t.Errorf("d matrix: %+v", d[0])
	}
	c := f.Tensor("c.weight")
	if !reflect.DeepEqual(c.Shape(), []int64{2, 2, 32}) {
		t.Errorf("c shape %v", c.Shape())
	}
	cs, err := c.Matrices()
	if err != nil || len(cs) != 2 {
		t.Fatalf("c matrices: %v", err)
	}
	for e, m := range cs {
		if m.DType != op.GGML || m.N != 2 || m.K != 32 || m.GG.Type != op.GGMLQ8_0 || &m.GG.Data[0] != &c.Data[e*68] || len(m.GG.Data) != 68 {
			t.Errorf("expert %d: %+v", e, m)
		}
	}
	if _, err := c.Float32(); !errors.Is(err, op.ErrUnsupported) {
		t.Errorf("Float32 of Q8_0: %v", err)
	}
	if err := f.Close(); err != nil || mapped(t, p) {
		t.Errorf("Close: %v, still mapped %v", err, mapped(t, p))
	}
}

// mapped reports whether path is in this process's memory map (Linux; false elsewhere).
func mapped(t *testing.T, path string) bool {
	m, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	return bytes.Contains(m, []byte(path))
}

func TestKeyTypes(t *testing.T) {
	f, err := Open(sample().write(t, "m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"Int of string", func() error { _, err := f.Int("general.architecture"); return err }, "general.architecture in "},
		{"Int of array", func() error { _, err := f.Int("types"); return err }, "is array of int32, want an integer"},
		{"Float of int", func() error { _, err := f.Float("u32"); return err }, "is uint32, want float32 or float64"},
		{"String of bool", func() error { _, err := f.String("b"); return err }, "is bool, want string"},
		{"Bool of uint8", func() error { _, err := f.Bool("u8"); return err }, "is uint8, want bool"},
		{"Strings of ints", func() error { _, err := f.Strings("types"); return err }, "is array of int32, want array of string"},
		{"Ints of strings", func() error { _, err := f.Ints("tokens"); return err }, "is array of string"},
		{"Ints of floats", func() error { _, err := f.Ints("f32"); return err }, "is float32"},
		{"Bools of ints", func() error { _, err := f.Bools("types"); return err }, "want array of bool"},
		{"absent", func() error { _, err := f.Int("qwen35.block_count"); return err }, "qwen35.block_count is absent from"},
	} {
		err := c.call()
		if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "m.gguf") {
			t.Errorf("%s: %v (want ErrKey with %q and the file)", c.name, err, c.want)
		}
	}
}

func TestAlignment(t *testing.T) {
	im := sample()
	im.alignment = 64
	im.kvs = append(im.kvs, kv("general.alignment", uint32(64)))
	f, err := Open(im.write(t, "m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 {
		t.Errorf("alignment %d", f.Alignment)
	}
	if x, _ := f.Tensor("d.weight").Float32(); !reflect.DeepEqual(x, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("d = %v", x)
	}
}

// TestDamaged writes each damaged file the reader must refuse and checks the error names the
// file and the problem, and that nothing stays mapped.
func TestDamaged(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	cases := []struct {
		name  string
		edit  func(im *image)
		bytes func(b []byte) []byte
		want  string
	}{
		{name: "bad magic", edit: func(im *image) { im.magic = "GGML" }, want: `bad magic "GGML"`},
		{name: "version 1", edit: func(im *image) { im.version = 1 }, want: "GGUF version 1 (an early GGUF"},
		{name: "version 2", edit: func(im *image) { im.version = 2 }, want: "GGUF version 2 (an early GGUF"},
		{name: "big-endian", edit: func(im *image) { im.version = 3 << 24 }, want: "big-endian"},
		{name: "empty", bytes: func([]byte) []byte { return nil }, want: "shorter than the magic"},
		{name: "truncated counts", bytes: func(b []byte) []byte { return b[:20] }, want: "truncated header: the metadata count"},
		{name: "truncated metadata", bytes: func(b []byte) []byte { return b[:60] }, want: "truncated header"},
		{name: "truncated tensor infos", bytes: func(b []byte) []byte {
			i := bytes.Index(b, []byte("c.weight"))
			return b[:i+4]
		}, want: "string length 8 runs past the end"},
		{name: "string length past the end", bytes: func(b []byte) []byte {
			i := bytes.Index(b, []byte("general.architecture"))
			putAt(b, i-8, 1<<40)
			return b
		}, want: "string length 1099511627776 runs past the end of the file"},
		{name: "array length past the end", bytes: func(b []byte) []byte {
			i := bytes.Index(b, []byte("types"))
			putAt(b, i+5+4+4, 1<<50) // key, value type, element type, count
			return b
		}, want: `metadata "types": array of 1125899906842624 int32 runs past the end`},
		{name: "metadata count", edit: func(im *image) { im.nKV = u64(1 << 60) }, want: "metadata count 1152921504606846976 cannot fit"},
		{name: "tensor count", edit: func(im *image) { im.nTensors = u64(1 << 60) }, want: "tensor count 1152921504606846976 cannot fit"},
		{name: "unknown value type", edit: func(im *image) { im.kvs[1].Type = 13 }, want: `metadata "u8": unknown value type 13`},
		{name: "bad bool", edit: func(im *image) { im.kvs[8].X = uint8(2); im.kvs[8].Type = Bool }, want: "bool value 2"},
		{name: "duplicate key", edit: func(im *image) { im.kvs[2].Key = "u8" }, want: `metadata key "u8" appears twice`},
		{name: "alignment type", edit: func(im *image) { im.kvs = append(im.kvs, kv("general.alignment", uint64(32))) }, want: "general.alignment is uint64, want uint32"},
		{name: "alignment value", edit: func(im *image) { im.kvs = append(im.kvs, kv("general.alignment", uint32(12))) }, want: "general.alignment 12 is not a power of two"},
		{name: "data out of bounds", bytes: func(b []byte) []byte { return b[:len(b)-1] }, want: `tensor "d.weight" (F32 [2 3], 24 bytes at file offset`},
		{name: "offset past the end", edit: func(im *image) { im.tensors[3].offset = u64(1 << 20) },
			bytes: func(b []byte) []byte { return b[:4096] }, want: `tensor "d.weight" (F32 [2 3], 24 bytes at file offset`},
		{name: "overlap", edit: func(im *image) { im.tensors[1].offset = u64(0) }, want: "overlap"},
		{name: "misaligned", edit: func(im *image) { im.tensors[1].offset = u64(40) }, want: `tensor "b.weight" at data offset 40 is not aligned to 32 bytes`},
		{name: "unknown type id", edit: func(im *image) { im.tensors[0].typ = 31 }, want: `tensor "a.weight" has unknown type id 31`},
		{name: "not whole blocks", edit: func(im *image) { im.tensors[2].dims = []uint64{48, 2, 1} }, want: `tensor "c.weight" of type Q8_0: its rows of 48 elements are not a whole number of blocks of 32`},
		{name: "element overflow", edit: func(im *image) { im.tensors[0].dims = []uint64{1 << 32, 1 << 32} }, want: "element count of [4294967296 4294967296] overflows"},
		{name: "byte overflow", edit: func(im *image) { im.tensors[0].dims = []uint64{1 << 31, 1 << 31} }, want: "byte size of F32"},
		{name: "zero extent", edit: func(im *image) { im.tensors[0].dims = []uint64{3, 0} }, want: "extent 0"},
		{name: "five dims", edit: func(im *image) { im.tensors[0].dims = []uint64{1, 1, 1, 1, 3} }, want: "5 dimensions"},
		{name: "duplicate tensor", edit: func(im *image) { im.tensors[1].name = "a.weight" }, want: `tensor "a.weight" appears twice`},
		{name: "long name", edit: func(im *image) { im.tensors[0].name = strings.Repeat("x", 64) }, want: "longer than 63 bytes"},
		{name: "long tensor name cut in the message", edit: func(im *image) { im.tensors[0].name = strings.Repeat("x", 5000) }, want: `xxxx"... (5000 bytes) is empty or longer`},
		{name: "long key", edit: func(im *image) { im.kvs[1].Key = strings.Repeat("k", 1<<16) }, want: `metadata entry 1: key of 65536 bytes (at most 65535): "kkk`},
		{name: "split part without its name", edit: func(im *image) {
			im.kvs = append(im.kvs, kv(KeySplitNo, uint16(0)), kv(KeySplitCount, uint16(2)), kv(KeySplitTensor, int32(4)))
		}, want: "the file is split part 1 of 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			im := sample()
			if c.edit != nil {
				c.edit(im)
			}
			b := im.bytes()
			if c.bytes != nil {
				b = c.bytes(b)
			}
			p := filepath.Join(t.TempDir(), "bad.gguf")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(p)
			if err == nil {
				f.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant ErrFormat naming %s and %q", err, p, c.want)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("error message of %d bytes", len(err.Error()))
			}
			if mapped(t, p) {
				t.Error("the file stays mapped after the error")
			}
			if c.name == "split part without its name" {
				return // Parse reads one image and does not check split keys
			}
			if _, err := Parse("image", b); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: %v", err)
			}
		})
	}
}

// TestMissingFile: a path that does not exist is reported as the os error, not as a malformed file.
func TestMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent.gguf")
	for _, headerOnly := range []bool{false, true} {
		open := Open
		if headerOnly {
			open = OpenHeader
		}
		f, err := open(p)
		if err == nil {
			f.Close()
			t.Fatal("accepted")
		}
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), p) {
			t.Errorf("header only %v: %v; want fs.ErrNotExist naming the path, not ErrFormat", headerOnly, err)
		}
	}
}

func TestHeaderOnly(t *testing.T) {
	im := sample()
	im.headerOnly = true
	p := im.write(t, "h.gguf")
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "runs past the end of the file") {
		t.Errorf("Open of a header-only copy: %v", err)
	}
	f, err := OpenHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.HeaderOnly || len(f.Tensors()) != 4 || f.Tensor("c.weight").Data != nil || f.Tensor("c.weight").Bytes != 136 {
		t.Errorf("header-only: %+v", f.Tensor("c.weight"))
	}
	if _, err := f.Tensor("b.weight").Matrices(); err == nil || !strings.Contains(err.Error(), "header-only") {
		t.Errorf("Matrices of header-only: %v", err)
	}
	// A header larger than the first read (1 MiB) is read in growing prefixes.
	im.kvs = append(im.kvs, kv("big", []string{strings.Repeat("t", 3<<20)}))
	f2, err := OpenHeader(im.write(t, "big.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f2.Strings("big"); len(s[0]) != 3<<20 {
		t.Error("big string lost")
	}
	// A truncated header is still an error header-only, and the layout checks still run.
	b := im.bytes()
	p3 := filepath.Join(t.TempDir(), "t.gguf")
	os.WriteFile(p3, b[:2<<20], 0o644)
	if _, err := OpenHeader(p3); err == nil || !strings.Contains(err.Error(), "runs past the end") || !strings.Contains(err.Error(), p3) {
		t.Errorf("truncated header-only: %v", err)
	}
	im = sample()
	im.headerOnly = true
	im.tensors[1].offset = new(uint64)
	if _, err := OpenHeader(im.write(t, "o.gguf")); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlap header-only: %v", err)
	}
}

// splitSet writes the sample's tensors over n parts as gguf-split does: metadata in part 1, the
// split keys in every part.
func splitSet(t *testing.T, n int, edit func(k int, im *image)) (dir string, parts []string) {
	dir = t.TempDir()
	all := sample()
	for k := range n {
		im := newImage()
		if k == 0 {
			im.kvs = all.kvs
		}
		im.kvs = append(im.kvs, kv(KeySplitNo, uint16(k)), kv(KeySplitCount, uint16(n)), kv(KeySplitTensor, int32(len(all.tensors))))
		for i, tn := range all.tensors {
			if i%n == k {
				im.tensors = append(im.tensors, tn)
			}
		}
		if edit != nil {
			edit(k, im)
		}
		p := filepath.Join(dir, "model-"+pad5(k+1)+"-of-"+pad5(n)+".gguf")
		if err := os.WriteFile(p, im.bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	return dir, parts
}

func pad5(i int) string { s := "0000" + string(rune('0'+i)); return s[len(s)-5:] }

func TestSplits(t *testing.T) {
	_, parts := splitSet(t, 3, nil)
	for _, p := range parts {
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Parts) != 3 || len(f.Tensors()) != 4 || f.Tensor("c.weight").File != parts[2] {
			t.Errorf("split set from %s: %d parts, %d tensors", p, len(f.Parts), len(f.Tensors()))
		}
		if x, _ := f.Tensor("d.weight").Float32(); !reflect.DeepEqual(x, []float32{1, 2, 3, 4, 5, 6}) {
			t.Errorf("d = %v", x)
		}
		if a, _ := f.String("general.architecture"); a != "qwen35" {
			t.Error("metadata of part 1 not read")
		}
		f.Close()
		for _, q := range parts {
			if mapped(t, q) {
				t.Errorf("%s mapped after Close", q)
			}
		}
	}

	_, parts = splitSet(t, 3, nil)
	os.Remove(parts[1])
	_, err := Open(parts[0])
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), parts[1]) || !strings.Contains(err.Error(), "split part 2 of 3 is missing") {
		t.Errorf("missing part: %v", err)
	}
	if mapped(t, parts[0]) {
		t.Error("part 1 stays mapped after the error")
	}

	for _, c := range []struct {
		name string
		edit func(k int, im *image)
		want string
	}{
		{"wrong split.no", func(k int, im *image) {
			if k == 1 {
				im.kvs[0] = kv(KeySplitNo, uint16(0))
			}
		}, "split.no 0, split.count 2, but the name says part 2 of 2"},
		{"tensor count", func(k int, im *image) {
			if k == 0 {
				im.kvs[len(im.kvs)-1] = kv(KeySplitTensor, int32(5))
			}
		}, "split.tensors.count is 5, the 2 parts hold 4 tensors"},
		{"split.count type", func(k int, im *image) {
			if k == 1 {
				im.kvs[1] = kv(KeySplitCount, "2")
			}
		}, "split.count in"},
		{"tensor in two parts", func(k int, im *image) {
			if k == 1 {
				im.tensors[0].name = "a.weight"
			}
		}, `tensor "a.weight" is in both`},
	} {
		_, parts := splitSet(t, 2, c.edit)
		_, err := Open(parts[0])
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (want %q)", c.name, err, c.want)
		}
		for _, p := range parts {
			if mapped(t, p) {
				t.Errorf("%s: %s stays mapped", c.name, p)
			}
		}
	}
}

// putAt overwrites a uint64 in place.
func putAt(b []byte, i int, v uint64) {
	for k := range 8 {
		b[i+k] = byte(v >> (8 * k))
	}
}
