package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratakernels/strata/metal/mtl"
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "emu-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = d
	code := m.Run()
	os.RemoveAll(d)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cacheDir is shared by the tests of one run (it starts empty) so that each file compiles once
// per build flavour; TestCompileErrorsAndCache checks an empty cache of its own.
var cacheDir string

func testCache(*testing.T) string { return cacheDir }

func openDev(t *testing.T, opts Options) *Device {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = testCache(t)
	}
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(*Device)
}

// testCompile are the compile options of the test sources (4.0: some use tensor ops).
var testCompile = mtl.CompileOptions{LanguageVersion: mtl.Language4_0, MathMode: mtl.MathSafe}

func loadLib(t *testing.T, dev *Device, file string) mtl.Library {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	lib, err := dev.NewLibrary(file, string(src), testCompile)
	if err != nil {
		t.Fatal(err)
	}
	l := lib.(*library)
	if !l.cached {
		t.Logf("%s: compiled in %.2fs (asan=%t)", file, l.prog.CompileSeconds, dev.opts.ASan)
	} else {
		t.Logf("%s: cache hit in %v", file, time.Since(t0))
	}
	return lib
}

func pipe(t *testing.T, lib mtl.Library, fn string, c ...mtl.Constant) mtl.Pipeline {
	t.Helper()
	p, err := lib.Pipeline(fn, c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// arg is one binding of a dispatch: a buffer at index, or bytes.
type arg struct {
	buf   mtl.Buffer
	bytes []byte
}

// dispatch runs one dispatch and returns the command buffer's error.
func dispatch(t *testing.T, dev *Device, p mtl.Pipeline, args []arg, tg map[int]int, groups, threads [3]int) error {
	t.Helper()
	cb, err := dev.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	enc, err := cb.ComputeEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetPipeline(p)
	for i, a := range args {
		if a.buf != nil {
			enc.SetBuffer(a.buf, 0, i)
		} else if a.bytes != nil {
			enc.SetBytes(a.bytes, i)
		}
	}
	for i, n := range tg {
		enc.SetThreadgroupMemoryLength(n, i)
	}
	enc.DispatchThreadgroups(groups, threads)
	enc.EndEncoding()
	t0 := time.Now()
	cb.Commit()
	err = cb.Wait()
	t.Logf("%s: ran in %v", p.Name(), time.Since(t0))
	return err
}

func newBuf(t *testing.T, dev *Device, n int) mtl.Buffer {
	t.Helper()
	b, err := dev.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func f32Buf(t *testing.T, dev *Device, v []float32) mtl.Buffer {
	b := newBuf(t, dev, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], math.Float32bits(x))
	}
	return b
}

func u32Buf(t *testing.T, dev *Device, v []uint32) mtl.Buffer {
	b := newBuf(t, dev, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], x)
	}
	return b
}

func u32s(b mtl.Buffer) []uint32 {
	out := make([]uint32, b.Length()/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b.Contents()[4*i:])
	}
	return out
}

func f32s(b mtl.Buffer) []float32 {
	out := make([]float32, b.Length()/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b.Contents()[4*i:]))
	}
	return out
}

func u32Bytes(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// bf16 rounds to bfloat, nearest even (the emulator's and Metal's conversion).
func bf16(f float32) float32 {
	u := math.Float32bits(f)
	u = (u + 0x7fff + (u >> 16 & 1)) &^ 0xffff
	return math.Float32frombits(u)
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
