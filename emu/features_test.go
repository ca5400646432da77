package emu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"

	"github.com/stratakernels/strata/metal/mtl"
)

func TestPrefixScan(t *testing.T) {
	for _, s := range []Schedule{Forward, Reversed, Shuffled} {
		dev := openDev(t, Options{Schedule: s, Seed: 7})
		p := pipe(t, loadLib(t, dev, "scan.metal"), "block_scan")
		if got := p.StaticThreadgroupMemoryLength(); got != 128 {
			t.Errorf("static threadgroup memory %d, want 128", got)
		}
		const n, block = 1000, 256
		x := make([]uint32, n)
		for i := range x {
			x[i] = uint32(i*37%101) + 1
		}
		xb, yb := u32Buf(t, dev, x), newBuf(t, dev, 4*n)
		if err := dispatch(t, dev, p, []arg{{buf: xb}, {buf: yb}, {bytes: u32Bytes(n)}}, nil, [3]int{(n + block - 1) / block, 1, 1}, [3]int{block, 1, 1}); err != nil {
			t.Fatal(err)
		}
		y := u32s(yb)
		var acc uint32
		for i := range n {
			if i%block == 0 {
				acc = 0
			}
			acc += x[i]
			if y[i] != acc {
				t.Fatalf("%v: y[%d] = %d, want %d", s, i, y[i], acc)
			}
		}
	}
}

func TestSimdCollectives(t *testing.T) {
	dev := openDev(t, Options{Schedule: Shuffled, Seed: 3})
	p := pipe(t, loadLib(t, dev, "features.metal"), "simd_ops")
	const n, nops = 64, 16
	x := make([]float32, n)
	for i := range x {
		if i < 32 {
			x[i] = float32(i * 7 % 32)
		} else {
			x[i] = float32(i * 5 % 16)
		}
	}
	out := newBuf(t, dev, 4*n*nops)
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: out}}, nil, [3]int{1, 1, 1}, [3]int{n, 1, 1}); err != nil {
		t.Fatal(err)
	}
	got := u32s(out)
	for i := range n {
		sg, l := i/32*32, i%32
		v := func(lane int) float32 { return x[sg+lane] }
		var sum, mx, mn, incl, excl float32
		mn = 1e9
		var ballot, odd uint32
		all, any := uint32(1), uint32(0)
		for k := range 32 {
			sum += v(k)
			mx, mn = max(mx, v(k)), min(mn, v(k))
			if k < l {
				excl += v(k)
			}
			if k <= l {
				incl += v(k)
			}
			if v(k) > 8 {
				ballot |= 1 << k
			}
			if v(k) > 30 {
				any = 1
			}
			odd += uint32(v(k)) & 1
		}
		up, down := v(l), v(l)
		if l >= 1 {
			up = v(l - 1)
		}
		if l+2 <= 31 {
			down = v(l + 2)
		}
		first := uint32(0)
		if l == 0 {
			first = 1
		}
		want := []uint32{uint32(sum), uint32(mx), uint32(mn), uint32(incl), uint32(excl), uint32(v(31 - l)),
			uint32(v(l ^ 1)), uint32(up), uint32(down), uint32(v(3)), uint32(v(0)), ballot, all, any, first, odd + 3100}
		for op, w := range want {
			if g := got[i*nops+op]; g != w {
				t.Errorf("thread %d op %d: got %d, want %d", i, op, g, w)
			}
		}
	}
}

func TestEarlyReturnLanesAreInactive(t *testing.T) {
	dev := openDev(t, Options{})
	p := pipe(t, loadLib(t, dev, "features.metal"), "early_return")
	const threads, n = 64, 40
	x := make([]float32, threads)
	for i := range x {
		x[i] = float32(i + 1)
	}
	out := f32Buf(t, dev, make([]float32, 2*threads))
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: out}, {bytes: u32Bytes(n)}}, nil, [3]int{1, 1, 1}, [3]int{threads, 1, 1}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for i := range threads {
		var sum, excl float32
		for k := i / 32 * 32; k < min(i/32*32+32, n); k++ {
			sum += x[k]
			if k < i {
				excl += x[k]
			}
		}
		if i >= n {
			sum, excl = 0, 0 // never written
		}
		if got[2*i] != sum || got[2*i+1] != excl {
			t.Errorf("thread %d: got (%v, %v), want (%v, %v)", i, got[2*i], got[2*i+1], sum, excl)
		}
	}
}

func TestSimdgroupMatrix(t *testing.T) {
	dev := openDev(t, Options{})
	lib := loadLib(t, dev, "features.metal")
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b, c [64]float64
	for i := range 64 {
		a[i] = float64(rng.IntN(17)-8) / 4 // exact in half and bfloat
		b[i] = float64(rng.IntN(17)-8) / 4
		c[i] = float64(rng.IntN(33)-16) / 16
	}
	round := map[string]func(float32) float32{
		"float":  func(f float32) float32 { return f },
		"half":   func(f float32) float32 { return float16.Fromfloat32(f).Float32() },
		"bfloat": bf16,
	}
	for _, typ := range []string{"float", "half", "bfloat"} {
		p := pipe(t, lib, "mma8_"+typ)
		enc := func(v [64]float64) mtl.Buffer {
			switch typ {
			case "half":
				buf := newBuf(t, dev, 128)
				for i, x := range v {
					h := float16.Fromfloat32(float32(x)).Bits()
					buf.Contents()[2*i], buf.Contents()[2*i+1] = byte(h), byte(h>>8)
				}
				return buf
			case "bfloat":
				buf := newBuf(t, dev, 128)
				for i, x := range v {
					h := math.Float32bits(float32(x)) >> 16
					buf.Contents()[2*i], buf.Contents()[2*i+1] = byte(h), byte(h>>8)
				}
				return buf
			}
			f := make([]float32, 64)
			for i, x := range v {
				f[i] = float32(x)
			}
			return f32Buf(t, dev, f)
		}
		cf := make([]float32, 64)
		for i := range c {
			cf[i] = float32(c[i])
		}
		d, e := newBuf(t, dev, 256), newBuf(t, dev, 256)
		if err := dispatch(t, dev, p, []arg{{buf: enc(a)}, {buf: enc(b)}, {buf: f32Buf(t, dev, cf)}, {buf: d}, {buf: e}}, nil, [3]int{1, 1, 1}, [3]int{32, 1, 1}); err != nil {
			t.Fatal(err)
		}
		gd := f32s(d)
		ge := f32s(e)
		if typ != "float" { // e holds T elements
			for i := range 64 {
				h := uint16(e.Contents()[2*i]) | uint16(e.Contents()[2*i+1])<<8
				if typ == "half" {
					ge[i] = float16.Frombits(h).Float32()
				} else {
					ge[i] = math.Float32frombits(uint32(h) << 16)
				}
			}
		}
		for r := range 8 {
			for col := range 8 {
				want, wantT := c[r*8+col], 0.0
				for k := range 8 {
					want += a[r*8+k] * b[k*8+col]
					wantT += a[k*8+r] * b[k*8+col]
				}
				if float64(gd[r*8+col]) != want {
					t.Errorf("%s: D[%d][%d] = %v, want %v", typ, r, col, gd[r*8+col], want)
				}
				if w := round[typ](float32(wantT)); ge[r*8+col] != w {
					t.Errorf("%s: (A^T B)[%d][%d] = %v, want %v", typ, r, col, ge[r*8+col], w)
				}
			}
		}
	}
}

func TestVectorsAndConversions(t *testing.T) {
	dev := openDev(t, Options{})
	p := pipe(t, loadLib(t, dev, "features.metal"), "vectors")
	out := newBuf(t, dev, 4*32)
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, []float32{1.5, -2.25, 3.75, 8})}, {buf: out}}, nil, [3]int{1, 1, 1}, [3]int{1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	f := math.Float32bits
	h := func(x float32) uint32 { return uint32(float16.Fromfloat32(x).Bits()) }
	want := []uint32{f(8), f(-2.25), f(1), h(3.75), 11, 107, 13, 18, 8, 2, f(6), f(5), f(-2.25), f(3.75),
		h(1.5) | h(-2.25)<<16, 44, 8, 5, f(0.375), 7, 1, 0, f(-3.375)}
	got := u32s(out)
	for i, w := range want {
		if got[i] != w {
			t.Errorf("out[%d] = %#x, want %#x", i, got[i], w)
		}
	}
}

func TestAtomics(t *testing.T) {
	dev := openDev(t, Options{Threads: 2})
	p := pipe(t, loadLib(t, dev, "features.metal"), "atomics")
	total, per, fsum := newBuf(t, dev, 4), newBuf(t, dev, 16), newBuf(t, dev, 4)
	if err := dispatch(t, dev, p, []arg{{buf: total}, {buf: per}, {buf: fsum}}, nil, [3]int{4, 1, 1}, [3]int{96, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if got := u32s(total)[0]; got != 384 {
		t.Errorf("total %d, want 384", got)
	}
	for g, n := range u32s(per) {
		if n != 96 {
			t.Errorf("threadgroup %d counted %d, want 96", g, n)
		}
	}
	if got := f32s(fsum)[0]; got != 192 {
		t.Errorf("float sum %v, want 192", got)
	}
}

func TestFunctionConstants(t *testing.T) {
	dev := openDev(t, Options{})
	lib := loadLib(t, dev, "features.metal")
	x := []uint32{0, 1, 2, 3, 4, 5, 6, 7}
	neg5 := int32(-5)
	cases := []struct {
		name   string
		consts []mtl.Constant
		want   func(x uint32) int32
	}{
		{"bias+offset", []mtl.Constant{{Index: 0, Type: mtl.UInt, Value: 3}, {Index: 1, Type: mtl.Bool, Value: 1}, {Index: 2, Type: mtl.Int, Value: uint32(neg5)}},
			func(x uint32) int32 { return int32(3*x) + 100 - 5 }},
		{"no offset", []mtl.Constant{{Index: 0, Type: mtl.UInt, Value: 2}, {Index: 1, Type: mtl.Bool, Value: 0}},
			func(x uint32) int32 { return int32(2 * x) }},
	}
	for _, c := range cases {
		p := pipe(t, lib, "fconst", c.consts...)
		y := newBuf(t, dev, 32)
		if err := dispatch(t, dev, p, []arg{{buf: u32Buf(t, dev, x)}, {buf: y}}, nil, [3]int{2, 1, 1}, [3]int{4, 1, 1}); err != nil {
			t.Fatal(err)
		}
		for i, g := range u32s(y) {
			if int32(g) != c.want(x[i]) {
				t.Errorf("%s: y[%d] = %d, want %d", c.name, i, int32(g), c.want(x[i]))
			}
		}
	}
	if _, err := lib.Pipeline("fconst", []mtl.Constant{{Index: 1, Type: mtl.Float, Value: 0}}); err == nil {
		t.Error("a float value for a bool constant was accepted")
	}
	if _, err := lib.Pipeline("no_such_kernel", nil); err == nil || !errorsIs(err, mtl.ErrNoFunction) {
		t.Errorf("unknown kernel: %v, want ErrNoFunction", err)
	}
}

func TestGrid2DAndDynamicThreadgroupMemory(t *testing.T) {
	dev := openDev(t, Options{Schedule: Reversed})
	p := pipe(t, loadLib(t, dev, "features.metal"), "grid2d")
	out := newBuf(t, dev, 4*16*8)
	if err := dispatch(t, dev, p, []arg{{buf: out}}, map[int]int{0: 128}, [3]int{2, 2, 1}, [3]int{8, 4, 1}); err != nil {
		t.Fatal(err)
	}
	got := u32s(out)
	for py := range 8 {
		for px := range 16 {
			gx, gy, lx, ly := px/8, py/4, px%8, py%4
			want := uint32((gx*8+7-lx)*1000 + gy*4 + 3 - ly)
			if got[py*16+px] != want {
				t.Errorf("(%d,%d) = %d, want %d", px, py, got[py*16+px], want)
			}
		}
	}
	if st := dev.Stats(); len(st) != 1 || st[0].MaxThreadgroupMemory != 128 || st[0].Threads != 128 {
		t.Errorf("stats %+v", st)
	}
}
