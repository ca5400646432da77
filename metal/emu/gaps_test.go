package emu

import (
	"math"
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
