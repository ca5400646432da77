package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
)

// allValues holds one metadata entry of every value type, arrays of each and an array of arrays.
func allValues() []KV {
	var kvs []KV
	for i, x := range []any{uint8(200), int8(-5), uint16(60000), int16(-300), uint32(1 << 30), int32(-7), float32(1.5),
		true, "héllo", uint64(1 << 60), int64(-1 << 50), float64(-2.25),
		[]uint8{1, 2}, []int8{-1}, []uint16{9}, []int16{-9, 9}, []uint32{}, []int32{1, -2, 3}, []float32{0.5},
		[]bool{true, false}, []string{"a", "", "ü"}, []uint64{7}, []int64{-8}, []float64{3.5},
		[]Value{ValueOf([]int32{1}), ValueOf([]string{"x", "y"})}} {
		kvs = append(kvs, KV{Key: "test.k" + string(rune('a'+i)), Value: ValueOf(x)})
	}
	return kvs
}

// TestWriteRoundTrip: a file written by Write opens with Open holding every metadata value
// as given (each value type, arrays, arrays of arrays) and every tensor's bytes at an offset
// aligned as general.alignment says, for alignments 32 (default) and 64.
func TestWriteRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 4*512)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, align := range []uint32{0, 64} {
		kvs := allValues()
		if align != 0 {
			kvs = append(kvs, KV{Key: "general.alignment", Value: ValueOf(align)})
		}
		var ts []WriteTensor
		want := map[string][]byte{}
		for i, typ := range []op.GGMLType{op.GGMLF32, op.GGMLQ8_0, op.GGMLQ4_K, op.GGMLQ6_K, op.GGMLIQ4_XS, op.GGMLBF16} {
			b, err := Quantize(typ, x[:(i+1)*256], 256)
			if err != nil {
				t.Fatal(err)
			}
			name := "t." + typ.String()
			want[name] = b
			ts = append(ts, WriteTensor{Name: name, Dims: []uint64{256, uint64(i + 1)}, Type: typ, Data: func() ([]byte, error) { return b, nil }})
		}
		ts = append(ts, WriteTensor{Name: "stack", Dims: []uint64{32, 2, 3}, Type: op.GGMLQ4_0, Data: func() ([]byte, error) { return make([]byte, 6*18), nil }})
		want["stack"] = make([]byte, 6*18)
		p := filepath.Join(t.TempDir(), "x.gguf")
		if err := Write(p, kvs, ts); err != nil {
			t.Fatal(err)
		}
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Metadata(), kvs) {
			t.Errorf("alignment %d: metadata read back differs:\n got %v\nwant %v", align, f.Metadata(), kvs)
		}
		if a := max(align, DefaultAlignment); f.Alignment != int(a) {
			t.Errorf("alignment %d read as %d", a, f.Alignment)
		}
		got := f.Tensors()
		if len(got) != len(ts) {
			t.Fatalf("%d tensors read, %d written", len(got), len(ts))
		}
		for i, tn := range got {
			if tn.Name != ts[i].Name || !reflect.DeepEqual(tn.Dims, ts[i].Dims) || tn.Type != ts[i].Type || !bytes.Equal(tn.Data, want[tn.Name]) {
				t.Errorf("tensor %d: read %q %v %v (%d bytes), wrote %q %v %v", i, tn.Name, tn.Dims, tn.Type, len(tn.Data), ts[i].Name, ts[i].Dims, ts[i].Type)
			}
			if tn.Offset%uint64(f.Alignment) != 0 {
				t.Errorf("%q at offset %d", tn.Name, tn.Offset)
			}
		}
		f.Close()
	}
}

// TestWriteRefused: what Write cannot write as given is refused naming the key or tensor, and
// neither the file nor a temporary is left behind.
func TestWriteRefused(t *testing.T) {
	ok := func() ([]byte, error) { return make([]byte, 34), nil }
	good := WriteTensor{Name: "w", Dims: []uint64{32, 1}, Type: op.GGMLQ8_0, Data: ok}
	cases := []struct {
		name string
		kvs  []KV
		ts   []WriteTensor
		want string
	}{
		{"duplicate key", []KV{{Key: "a", Value: ValueOf(uint32(1))}, {Key: "a", Value: ValueOf(uint32(2))}}, nil, `"a" appears twice`},
		{"empty key", []KV{{Key: "", Value: ValueOf(true)}}, nil, "key is empty"},
		{"unsupported Go value", []KV{{Key: "m", Value: ValueOf(map[string]int{})}}, nil, `metadata "m"`},
		{"type and value differ", []KV{{Key: "m", Value: Value{Type: Uint32, X: int32(1)}}}, nil, "holds int32"},
		{"array element type differs", []KV{{Key: "m", Value: Value{Type: Array, Elem: Int64, X: []int32{1}}}}, nil, "array of int64 holds []int32"},
		{"bad alignment", []KV{{Key: "general.alignment", Value: ValueOf(uint32(24))}}, nil, "power of two"},
		{"duplicate tensor", nil, []WriteTensor{good, good}, `"w" appears twice`},
		{"row not whole blocks", nil, []WriteTensor{{Name: "w", Dims: []uint64{48, 1}, Type: op.GGMLQ8_0, Data: ok}}, "not a whole number"},
		{"unknown type", nil, []WriteTensor{{Name: "w", Dims: []uint64{32}, Type: 99, Data: ok}}, "type 99"},
		{"extent 0", nil, []WriteTensor{{Name: "w", Dims: []uint64{32, 0}, Type: op.GGMLQ8_0, Data: ok}}, "extent 0"},
		{"five extents", nil, []WriteTensor{{Name: "w", Dims: []uint64{32, 1, 1, 1, 1}, Type: op.GGMLQ8_0, Data: ok}}, "5 dimensions"},
		{"long name", nil, []WriteTensor{{Name: strings.Repeat("n", 64), Dims: []uint64{32}, Type: op.GGMLQ8_0, Data: ok}}, "longer than 63"},
		{"data of another size", nil, []WriteTensor{{Name: "w", Dims: []uint64{64, 1}, Type: op.GGMLQ8_0, Data: ok}}, "34 bytes, want 68"},
		{"data error", nil, []WriteTensor{{Name: "w", Dims: []uint64{32}, Type: op.GGMLQ8_0, Data: func() ([]byte, error) { return nil, errors.New("boom") }}}, `tensor "w": boom`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		p := filepath.Join(dir, "x.gguf")
		err := Write(p, c.kvs, c.ts)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s and %q", c.name, err, p, c.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: left %v behind", c.name, ents)
		}
	}
}

// FuzzWrite: metadata and tensors built from arbitrary bytes either are refused by Write or
// written so that Parse accepts the image and gives them back unchanged. A part of the corpus
// of a 5-minute run is kept in testdata/fuzz/FuzzWrite.
func FuzzWrite(f *testing.F) {
	f.Add([]byte("general.name\x00abc\x01\x02\x03"), uint8(2), uint8(3))
	f.Add([]byte{0xff, 0, 7, 8, 9}, uint8(8), uint8(0))
	f.Fuzz(func(t *testing.T, seed []byte, nt, typ uint8) {
		rng := rand.New(rand.NewPCG(uint64(len(seed)), uint64(nt)<<8|uint64(typ)))
		var kvs []KV
		for i := 0; i+2 < len(seed) && len(kvs) < 16; i += 3 {
			key := string(seed[i : i+1+int(seed[i+1])%max(1, len(seed)-i-1)])
			var x any
			switch seed[i+2] % 6 {
			case 0:
				x = string(seed[i:])
			case 1:
				x = uint32(seed[i+2])
			case 2:
				x = []string{key, string(seed)}
			case 3:
				x = []float64{float64(seed[i])}
			case 4:
				x = []Value{ValueOf([]uint8(seed[i:]))}
			case 5:
				x = seed[i+2]&1 == 1
			}
			kvs = append(kvs, KV{Key: key, Value: ValueOf(x)})
		}
		var ts []WriteTensor
		types := QuantizeTypes
		for i := range int(nt % 5) {
			ty := types[(int(typ)+i)%len(types)]
			k := ty.BlockSize() * (1 + rng.IntN(2)) * max(1, 32/ty.BlockSize())
			rows := 1 + rng.IntN(3)
			x := make([]float32, k*rows)
			for j := range x {
				x[j] = float32(rng.NormFloat64())
			}
			b, err := Quantize(ty, x, k)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, WriteTensor{Name: "t" + string(rune('0'+i)), Dims: []uint64{uint64(k), uint64(rows)}, Type: ty, Data: func() ([]byte, error) { return b, nil }})
		}
		p := filepath.Join(t.TempDir(), "f.gguf")
		if err := Write(p, kvs, ts); err != nil {
			return // refused: nothing to check but that it did not panic
		}
		img, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		file, err := Parse("f.gguf", img)
		if err != nil {
			t.Fatalf("Write wrote an image Parse refuses: %v", err)
		}
		if got := file.Metadata(); !(len(got) == 0 && len(kvs) == 0) && !reflect.DeepEqual(got, kvs) {
			t.Fatalf("metadata differs:\n got %v\nwant %v", got, kvs)
		}
		for i, tn := range file.Tensors() {
			want, _ := ts[i].Data()
			if !bytes.Equal(tn.Data, want) || tn.Type != ts[i].Type {
				t.Fatalf("tensor %q differs", tn.Name)
			}
		}
		if n := binary.LittleEndian.Uint64(img[8:]); n != uint64(len(ts)) {
			t.Fatalf("tensor count %d", n)
		}
	})
}
