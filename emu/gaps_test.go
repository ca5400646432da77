package emu

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/x448/float16"

	"github.com/stratakernels/strata/metal/mtl"
)

func TestBoolAndBfloatVectors(t *testing.T) {
	dev := openDev(t, Options{})
	p := pipe(t, loadLib(t, dev, "gaps.metal"), "bool_bfloat")
	out := newBuf(t, dev, 4*17)
	x := []float32{1, 5, -2, 7, 3, 4, -1, 7}
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: out}}, nil, [3]int{1, 1, 1}, [3]int{1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 0, 1, 3, 5, -1, 7, 0, 1, 7, -2, -2, 7, 10.5, 7, 1.5, 1}
	for i, w := range want {
		if g := f32s(out)[i]; g != w {
			t.Errorf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

func TestQuadgroupFunctions(t *testing.T) {
	const threads, n, nq = 32, 30, 11
	dev := openDev(t, Options{Schedule: Shuffled, Seed: 4})
	p := pipe(t, loadLib(t, dev, "gaps.metal"), "quads")
	x := make([]float32, threads)
	for i := range x {
		x[i] = float32(i*5%8) + 0.5
	}
	out := f32Buf(t, dev, make([]float32, threads*nq))
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: out}, {bytes: u32Bytes(n)}}, nil, [3]int{1, 1, 1}, [3]int{threads, 1, 1}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for i := range n {
		q, l := i/4*4, i%4
		live := func(k int) bool { return q+k < n }
		nan := float32(math.NaN())
		v := func(k int) float32 { // reads of inactive lanes see the all-ones poison
			if !live(k) {
				return nan
			}
			return x[q+k]
		}
		var sum, excl, mx float32
		var ballot float32
		all, any, first := float32(1), float32(0), float32(0)
		for k := range 4 {
			if !live(k) {
				continue
			}
			sum += v(k)
			mx = max(mx, v(k))
			if k < l {
				excl += v(k)
			}
			if v(k) > 3 {
				ballot += float32(int(1) << k)
			}
			if v(k) < 1 {
				all = 0
			}
			if v(k) > 6 {
				any = 1
			}
		}
		if l == 0 {
			first = 1
		}
		down := v(l)
		if l+1 <= 3 {
			down = v(l + 1)
		}
		want := []float32{sum, mx, excl, v(3 - l), v(l ^ 1), down, v(0), ballot, all, any, first}
		for op, w := range want {
			if g := got[i*nq+op]; g != w && !(math.IsNaN(float64(g)) && math.IsNaN(float64(w))) {
				t.Errorf("thread %d op %d: got %v, want %v", i, op, g, w)
			}
		}
	}
}

func TestHalfFunctionConstant(t *testing.T) {
	dev := openDev(t, Options{})
	lib := loadLib(t, dev, "gaps.metal")
	p := pipe(t, lib, "hconst", mtl.Constant{Index: 0, Type: mtl.Float, Value: math.Float32bits(0.1)})
	x := []float32{1, 3, -7, 100}
	y := newBuf(t, dev, 16)
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: y}}, nil, [3]int{1, 1, 1}, [3]int{4, 1, 1}); err != nil {
		t.Fatal(err)
	}
	h := float16.Fromfloat32(0.1).Float32()
	for i, v := range x {
		w := float16.Fromfloat32(h * float16.Fromfloat32(v).Float32()).Float32()
		if g := f32s(y)[i]; g != w {
			t.Errorf("y[%d] = %v, want %v", i, g, w)
		}
	}
	if _, err := lib.Pipeline("hconst", []mtl.Constant{{Index: 0, Type: mtl.Int, Value: 1}}); err == nil {
		t.Error("an int value for a half constant was accepted")
	}
}

func TestCastsAndLayout(t *testing.T) {
	dev := openDev(t, Options{})
	p := pipe(t, loadLib(t, dev, "gaps.metal"), "casts_layout")
	ps := f32Buf(t, dev, []float32{1, 2, 3, 4.5, 5, 6.5}) // two 12-byte structs
	out := newBuf(t, dev, 4*13)
	if err := dispatch(t, dev, p, []arg{{buf: ps}, {buf: out}}, nil, [3]int{1, 1, 1}, [3]int{1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	want := []float32{7, 10, 2, -1, 12, 4.5, 6.5, 6, 6, 7, 15, -2, 3}
	for i, w := range want {
		if g := f32s(out)[i]; g != w {
			t.Errorf("out[%d] = %v, want %v", i, g, w)
		}
	}
}

// The legal probes that bind buffers unusually run as Metal runs them.
func TestLegalProbesRun(t *testing.T) {
	dev := openDev(t, Options{})
	load := func(name string) mtl.Library {
		src, err := os.ReadFile(filepath.Join("testdata", "probes", name))
		if err != nil {
			t.Fatal(err)
		}
		lib, err := dev.NewLibrary(name, string(src), testCompile)
		if err != nil {
			t.Fatal(err)
		}
		return lib
	}
	// Overloads by address space pick the object's space: 1234 from the functions, 1234 from the
	// member functions.
	p := pipe(t, load("ok_address_space_overloads.metal"), "k")
	y := newBuf(t, dev, 16)
	if err := dispatch(t, dev, p, []arg{{buf: y}, {buf: f32Buf(t, dev, []float32{0})}, {buf: f32Buf(t, dev, []float32{0})},
		{buf: f32Buf(t, dev, []float32{0})}}, nil, [3]int{1, 1, 1}, [3]int{4, 1, 1}); err != nil {
		t.Fatal(err)
	}
	for i, g := range f32s(y) {
		if g != 2468 {
			t.Errorf("address-space overloads: y[%d] = %v, want 2468", i, g)
		}
	}
	// Buffers without attributes take indices 0, 1, 2.
	p = pipe(t, load("ok_unattributed_buffers.metal"), "k")
	x, y := f32Buf(t, dev, []float32{3, 4, 5}), newBuf(t, dev, 12)
	if err := dispatch(t, dev, p, []arg{{buf: x}, {buf: y}, {bytes: u32Bytes(2)}}, nil, [3]int{1, 1, 1}, [3]int{3, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if g := f32s(y); g[0] != 3 || g[1] != 4 || g[2] != 0 {
		t.Errorf("unattributed buffers: y = %v, want [3 4 0]", g)
	}
	// A buffer guarded by a false function constant need not be bound; index 701 selects it.
	lib := load("ok_function_constants.metal")
	for _, bias := range []bool{false, true} {
		c := []mtl.Constant{{Index: 0, Type: mtl.Int, Value: 5}, {Index: 701, Type: mtl.Bool, Value: 0}}
		args := []arg{{buf: f32Buf(t, dev, []float32{1, 2})}}
		if bias {
			c[1].Value = 1
			args = append(args, arg{buf: f32Buf(t, dev, []float32{10, 20})})
		}
		p := pipe(t, lib, "k", c...)
		if err := dispatch(t, dev, p, args, nil, [3]int{1, 1, 1}, [3]int{2, 1, 1}); err != nil {
			t.Fatal(err)
		}
		want := []float32{7, 9}
		if bias {
			want = []float32{17, 29}
		}
		if g := f32s(args[0].buf); g[0] != want[0] || g[1] != want[1] {
			t.Errorf("function constants (bias %t): y = %v, want %v", bias, g, want)
		}
	}
}
