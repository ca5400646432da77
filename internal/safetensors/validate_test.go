package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one tensor of a crafted file.
type entry struct {
	name  string
	dtype DType
	shape []int64
}

func (e entry) bytes() int64 {
	n := int64(e.dtype.Size())
	for _, s := range e.shape {
		n *= s
	}
	return n
}

// image assembles a safetensors image from a literal JSON header and a data section.
func image(header string, body []byte) []byte {
	out := make([]byte, 8, 8+len(header)+len(body))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, body...)
}

// validHeader lays the entries out back to back, in order, and returns the JSON header and the
// size of the data section they cover.
func validHeader(entries []entry) (string, int64) {
	m := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	off := int64(0)
	for _, e := range entries {
		m[e.name] = map[string]any{"dtype": e.dtype, "shape": e.shape, "data_offsets": []int64{off, off + e.bytes()}}
		off += e.bytes()
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b), off
}

// validImage is a small well-formed file with two tensors.
func validImage() []byte {
	h, n := validHeader([]entry{{"w", F32, []int64{2, 3}}, {"b", BF16, []int64{3}}})
	return image(h, make([]byte, n))
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkErr(t *testing.T, err error, sentinel error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one wrapping %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestValidImageOpens(t *testing.T) {
	p := writeFile(t, t.TempDir(), "ok.safetensors", validImage())
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Names(); len(got) != 2 || got[0] != "b" || got[1] != "w" {
		t.Fatalf("names %v", got)
	}
	if f.Metadata["format"] != "pt" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	w, err := f.Tensor("w")
	if err != nil || w.NumElements() != 6 || len(w.Data) != 24 {
		t.Fatalf("w: %v %v", w, err)
	}
	if _, err := f.Tensor("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), p) {
		t.Fatalf("missing tensor: %v", err)
	}
}

// TestFileValidation damages a file in one way per case and checks that Open rejects it with
// an error wrapping ErrFormat that names the file and, where one is involved, the tensor.
func TestFileValidation(t *testing.T) {
	f32 := func(name string, off0, off1 int64, shape ...int64) string {
		b, _ := json.Marshal(map[string]any{"dtype": "F32", "shape": shape, "data_offsets": []int64{off0, off1}})
		return fmt.Sprintf("%q:%s", name, b)
	}
	cases := []struct {
		name   string
		data   func() []byte
		tensor string // tensor the message must name, "" for file-level errors
		want   string
	}{
		{"short file", func() []byte { return []byte{1, 2, 3} }, "", "shorter than the 8-byte"},
		{"header length beyond file", func() []byte {
			b := validImage()
			binary.LittleEndian.PutUint64(b, uint64(len(b)))
			return b
		}, "", "header length"},
		{"malformed JSON", func() []byte { return image(`{"w": {"dtype": "F32",`, nil) }, "", "malformed JSON"},
		{"header not an object", func() []byte { return image(`[1, 2]`, nil) }, "", "malformed JSON"},
		{"header null", func() []byte { return image(`null`, nil) }, "", "JSON object"},
		{"trailing bytes after header", func() []byte { return image(`{} {}`, nil) }, "", "trailing bytes"},
		{"unknown dtype", func() []byte {
			return image(`{"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4))
		}, "w", "unknown dtype"},
		{"missing field", func() []byte { return image(`{"w":{"dtype":"F32","shape":[1]}}`, make([]byte, 4)) }, "w", "needs dtype"},
		{"unknown entry field", func() []byte {
			return image(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, make([]byte, 4))
		}, "w", "malformed entry"},
		{"entry not an object", func() []byte { return image(`{"w":[0,4]}`, make([]byte, 4)) }, "w", "malformed entry"},
		{"three offsets", func() []byte {
			return image(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, make([]byte, 8))
		}, "w", "2 entries"},
		{"offset past data section", func() []byte { return image("{"+f32("w", 0, 8, 2)+"}", make([]byte, 4)) }, "w", "out of range"},
		{"end before begin", func() []byte { return image("{"+f32("w", 4, 0, 1)+"}", make([]byte, 4)) }, "w", "end before they begin"},
		{"negative offset", func() []byte { return image("{"+f32("w", -4, 0, 1)+"}", make([]byte, 4)) }, "w", "are negative"},
		{"negative dimension", func() []byte { return image("{"+f32("w", 0, 4, -1)+"}", make([]byte, 4)) }, "w", "negative dimension"},
		{"shape overflows int64", func() []byte {
			return image("{"+f32("w", 0, 4, 1<<40, 1<<40)+"}", make([]byte, 4))
		}, "w", "overflows"},
		{"byte size != shape", func() []byte { return image("{"+f32("w", 0, 8, 3)+"}", make([]byte, 8)) }, "w", "needs 12 bytes"},
		{"duplicate name", func() []byte {
			return image("{"+f32("w", 0, 4, 1)+","+f32("w", 4, 8, 1)+"}", make([]byte, 8))
		}, "w", "duplicate"},
		{"overlap", func() []byte {
			return image("{"+f32("a", 0, 8, 2)+","+f32("b", 4, 12, 2)+"}", make([]byte, 12))
		}, "b", "overlap"},
		{"gap between tensors", func() []byte {
			return image("{"+f32("a", 0, 4, 1)+","+f32("b", 8, 12, 1)+"}", make([]byte, 12))
		}, "b", "gap [4, 8)"},
		{"gap at start", func() []byte { return image("{"+f32("a", 4, 8, 1)+"}", make([]byte, 8)) }, "a", "gap [0, 4)"},
		{"unreferenced bytes at end", func() []byte { return image("{"+f32("a", 0, 4, 1)+"}", make([]byte, 8)) }, "a", "4 unreferenced bytes"},
		{"data but no tensors", func() []byte { return image(`{}`, make([]byte, 8)) }, "", "no tensors"},
		{"bad metadata", func() []byte { return image(`{"__metadata__":{"n":1}}`, nil) }, "", "__metadata__"},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, dir, fmt.Sprintf("case%02d.safetensors", i), c.data())
			f, err := Open(p)
			if err == nil {
				f.Close()
			}
			wants := []string{p, c.want}
			if c.tensor != "" {
				wants = append(wants, fmt.Sprintf("%q", c.tensor))
			}
			checkErr(t, err, ErrFormat, wants...)
			// ParseHeader must agree with Open on the same bytes, and so must OpenHeader, except
			// on a data section shorter than the header describes (a truncated file, which
			// OpenHeader accepts: see TestOpenHeaderTruncated).
			_, err2 := ParseHeader(p, c.data())
			checkErr(t, err2, ErrFormat, wants...)
			if c.name != "offset past data section" {
				_, err3 := OpenHeader(p)
				checkErr(t, err3, ErrFormat, wants...)
			}
		})
	}
}

// TestHeaderLengthLimit: a header length above MaxHeaderSize is rejected before anything is
// read or mapped, even when the file is large enough to hold it (a sparse file here).
func TestHeaderLengthLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.safetensors")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], MaxHeaderSize+1)
	if _, err := f.Write(lenBuf[:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxHeaderSize + 64); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Open(p)
	checkErr(t, err, ErrFormat, p, fmt.Sprint(MaxHeaderSize+1), "limit")
}

func TestMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent.safetensors")
	_, err := Open(p)
	checkErr(t, err, ErrFormat, p)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v does not wrap fs.ErrNotExist", err)
	}
}

// TestZeroSizeTensors: empty tensors may share an offset with their neighbours.
func TestZeroSizeTensors(t *testing.T) {
	h, n := validHeader([]entry{{"a", F32, []int64{0, 7}}, {"s", F32, []int64{}}, {"z", BF16, []int64{0}}})
	f, err := ParseHeader("mem", image(h, make([]byte, n)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Tensor("a")
	s, _ := f.Tensor("s")
	if a.NumElements() != 0 || s.NumElements() != 1 {
		t.Fatalf("a %d elements, scalar %d", a.NumElements(), s.NumElements())
	}
	if v, err := a.Float32(); err != nil || len(v) != 0 {
		t.Fatalf("empty Float32: %v %v", v, err)
	}
}

// writeShard writes one valid shard holding the named F32 [2] tensors.
func writeShard(t *testing.T, dir, name string, tensors ...string) {
	t.Helper()
	var es []entry
	for _, n := range tensors {
		es = append(es, entry{n, F32, []int64{2}})
	}
	h, n := validHeader(es)
	writeFile(t, dir, name, image(h, make([]byte, n)))
}

func writeIndex(t *testing.T, dir, weightMap string) string {
	t.Helper()
	return writeFile(t, dir, IndexFile, []byte(`{"metadata": {"total_size": 0}, "weight_map": `+weightMap+`}`))
}

func TestOpenDirValid(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, dir, "s1.safetensors", "a", "b")
	writeShard(t, dir, "s2.safetensors", "c")
	writeIndex(t, dir, `{"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}`)
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := strings.Join(c.Names(), ","); got != "a,b,c" {
		t.Fatalf("names %s", got)
	}
	tc, err := c.Tensor("c")
	if err != nil || filepath.Base(tc.File) != "s2.safetensors" {
		t.Fatalf("c: %v %v", tc, err)
	}
	if _, err := c.Tensor("d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing tensor: %v", err)
	}

	single := t.TempDir()
	writeShard(t, single, SingleFile, "x")
	c2, err := OpenDir(single)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := c2.Names(); len(got) != 1 || got[0] != "x" {
		t.Fatalf("single-file names %v", got)
	}
}

// TestCheckpointValidation: one damaged index or shard set per case.
func TestCheckpointValidation(t *testing.T) {
	cases := []struct {
		name     string
		shards   map[string][]string
		index    string
		sentinel error
		wants    []string
	}{
		{"missing shard file", map[string][]string{"s1.safetensors": {"a"}},
			`{"a": "s1.safetensors", "b": "gone.safetensors"}`, ErrFormat, []string{"gone.safetensors", `"b"`}},
		{"tensor not in its shard", map[string][]string{"s1.safetensors": {"a"}, "s2.safetensors": {"c"}},
			`{"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}`, ErrNotFound, []string{"s1.safetensors", `"b"`}},
		{"tensor missing from index", map[string][]string{"s1.safetensors": {"a", "b"}},
			`{"a": "s1.safetensors"}`, ErrFormat, []string{"s1.safetensors", `"b"`, "not listed"}},
		{"tensor in two shards", map[string][]string{"s1.safetensors": {"a"}, "s2.safetensors": {"a", "c"}},
			`{"a": "s1.safetensors", "c": "s2.safetensors"}`, ErrFormat, []string{"s2.safetensors", `"a"`, "s1.safetensors"}},
		{"shard escapes directory", map[string][]string{"s1.safetensors": {"a"}},
			`{"a": "../s1.safetensors"}`, ErrFormat, []string{"../s1.safetensors", `"a"`, "plain file name"}},
		{"absolute shard path", map[string][]string{"s1.safetensors": {"a"}},
			`{"a": "/s1.safetensors"}`, ErrFormat, []string{"/s1.safetensors", `"a"`, "plain file name"}},
		{"shard in subdirectory", map[string][]string{"s1.safetensors": {"a"}},
			`{"a": "sub/s1.safetensors"}`, ErrFormat, []string{"sub/s1.safetensors", `"a"`}},
		{"empty shard name", map[string][]string{"s1.safetensors": {"a"}},
			`{"a": ""}`, ErrFormat, []string{`"a"`, "plain file name"}},
		{"name listed twice", map[string][]string{"s1.safetensors": {"a"}},
			`{"a": "s1.safetensors", "a": "s1.safetensors"}`, ErrFormat, []string{`"a"`, "twice"}},
		{"weight_map missing", map[string][]string{"s1.safetensors": {"a"}}, `null`, ErrFormat, []string{"weight_map"}},
		{"weight_map empty", map[string][]string{"s1.safetensors": {"a"}}, `{}`, ErrFormat, []string{"weight_map"}},
		{"weight_map values not strings", map[string][]string{"s1.safetensors": {"a"}}, `{"a": 1}`, ErrFormat, []string{"weight_map"}},
		{"damaged shard", map[string][]string{"s1.safetensors": {"a"}, "bad.safetensors": nil},
			`{"a": "s1.safetensors", "z": "bad.safetensors"}`, ErrFormat, []string{"bad.safetensors", `"z"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for s, names := range c.shards {
				if names == nil {
					writeFile(t, dir, s, []byte("garbage!garbage"))
					continue
				}
				writeShard(t, dir, s, names...)
			}
			idx := writeIndex(t, dir, c.index)
			ck, err := OpenDir(dir)
			if err == nil {
				ck.Close()
			}
			checkErr(t, err, c.sentinel, append([]string{idx}, c.wants...)...)
			if c.name == "missing shard file" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v does not wrap fs.ErrNotExist", err)
			}
		})
	}
	t.Run("malformed index JSON", func(t *testing.T) {
		dir := t.TempDir()
		p := writeFile(t, dir, IndexFile, []byte(`{"weight_map": {`))
		_, err := OpenDir(dir)
		checkErr(t, err, ErrFormat, p, "malformed JSON")
	})
}
