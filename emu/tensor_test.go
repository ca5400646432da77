package emu

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/stratakernels/strata/metal/mtl"
)

// quarters returns n values k/4 with k in [-8, 8]: exact in half, and their products summed over
// a few dozen terms are exact in float.
func quarters(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(rng.IntN(17)-8) / 4
	}
	return v
}

func f32Of(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func halfBuf(t *testing.T, dev *Device, v []float64) mtl.Buffer {
	b := newBuf(t, dev, 2*len(v))
	for i, x := range v {
		h := float16.Fromfloat32(float32(x)).Bits()
		b.Contents()[2*i], b.Contents()[2*i+1] = byte(h), byte(h>>8)
	}
	return b
}

func u32x3(a, b, c int) []byte {
	out := u32Bytes(uint32(a))
	out = append(out, u32Bytes(uint32(b))...)
	out = append(out, u32Bytes(uint32(c))...)
	return append(out, 0, 0, 0, 0) // uint3 is 16 bytes
}

// matmul64 returns the M x N row-major product of row-major a (M x K) and b (K x N) in float64.
func matmul64(a, b []float64, m, n, k int) []float64 {
	c := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				s += a[i*k+p] * b[p*n+j]
			}
			c[i*n+j] = s
		}
	}
	return c
}

func transpose(a []float64, rows, cols int) []float64 {
	t := make([]float64, len(a))
	for r := range rows {
		for c := range cols {
			t[c*rows+r] = a[r*cols+c]
		}
	}
	return t
}

func TestTensorMatmulSimdgroup(t *testing.T) {
	const M, N, K = 40, 20, 13 // edge tiles in M and N
	rng := rand.New(rand.NewPCG(5, 6))
	a, b, c0 := quarters(rng, M*K), quarters(rng, K*N), quarters(rng, M*N)
	ab := matmul64(a, b, M, N, K)
	cases := []struct {
		kernel string
		acc    bool
		a, b   []float64 // as stored
	}{
		{"mm_simd", false, a, b},
		{"mm_simd_acc", true, a, b},
		{"mm_simd_tl", false, transpose(a, M, K), b},
		{"mm_simd_tr", false, a, transpose(b, K, N)},
	}
	for _, seed := range []uint64{1, 2} {
		dev := openDev(t, Options{Seed: seed, Schedule: Shuffled})
		lib := loadLib(t, dev, "tensor.metal")
		for _, tc := range cases {
			p := pipe(t, lib, tc.kernel)
			cb := f32Buf(t, dev, f32Of(c0))
			if !tc.acc {
				for i := range M * N { // multiply overwrites: whatever C held must not show
					copy(cb.Contents()[4*i:], u32Bytes(math.Float32bits(1e30)))
				}
			}
			args := []arg{{buf: f32Buf(t, dev, f32Of(tc.a))}, {buf: f32Buf(t, dev, f32Of(tc.b))}, {buf: cb}, {bytes: u32x3(M, N, K)}}
			if err := dispatch(t, dev, p, args, nil, [3]int{(N + 7) / 8, (M + 15) / 16, 1}, [3]int{32, 1, 1}); err != nil {
				t.Fatal(err)
			}
			got := f32s(cb)
			for i, w := range ab {
				if tc.acc {
					w += c0[i]
				}
				if float64(got[i]) != w {
					t.Fatalf("seed %d %s: C[%d][%d] = %v, want %v", seed, tc.kernel, i/N, i%N, got[i], w)
				}
			}
		}
	}
}

func TestTensorMatmulCooperative(t *testing.T) {
	const M, N, K = 64, 48, 24
	rng := rand.New(rand.NewPCG(7, 8))
	a, b, c0 := quarters(rng, M*K), quarters(rng, K*N), quarters(rng, M*N)
	ab := matmul64(a, b, M, N, K)
	for _, seed := range []uint64{1, 2} {
		dev := openDev(t, Options{Seed: seed})
		lib := loadLib(t, dev, "tensor.metal")
		for _, tc := range []struct {
			kernel string
			acc    bool
		}{{"mm_coop_sg4", false}, {"mm_coop_sg4_acc", true}, {"mm_coop_tg", false}} {
			p := pipe(t, lib, tc.kernel)
			cb := f32Buf(t, dev, f32Of(c0))
			args := []arg{{buf: halfBuf(t, dev, a)}, {buf: halfBuf(t, dev, b)}, {buf: cb}, {bytes: u32x3(M, N, K)}}
			if err := dispatch(t, dev, p, args, nil, [3]int{N / 16, M / 32, 1}, [3]int{128, 1, 1}); err != nil {
				t.Fatal(err)
			}
			got := f32s(cb)
			for i, v := range ab {
				if tc.acc {
					v += c0[i]
				}
				w := 2*v + float64(i%N%16) // 2 v + the column within the 32x16 tile
				if float64(got[i]) != w {
					t.Fatalf("seed %d %s: C[%d][%d] = %v, want %v", seed, tc.kernel, i/N, i%N, got[i], w)
				}
			}
		}
	}
}

func TestTensorReduce(t *testing.T) {
	const M, N, K = 8, 16, 4
	a := make([]float64, M*K)
	b := make([]float64, K*N)
	rng := rand.New(rand.NewPCG(9, 10))
	for r := range M {
		for k := range K {
			if r < 4 { // rows 0-3 of A B are all negative: max with the default identity shows 0
				a[r*K+k] = -float64(1 + (r+k)%3)
			} else {
				a[r*K+k] = float64(rng.IntN(7) - 3)
			}
		}
	}
	for i := range b {
		b[i] = float64(1 + rng.IntN(3))
	}
	s := matmul64(a, b, M, N, K)
	want := make([]float64, 64)
	for r := range M {
		sum, mx, mn := 0.0, math.Inf(-1), math.Inf(1)
		for c := range N {
			sum += s[r*N+c]
			mx, mn = math.Max(mx, s[r*N+c]), math.Min(mn, s[r*N+c])
		}
		want[r], want[8+r], want[16+r], want[56+r] = sum, math.Max(0, mx), mx, mn
	}
	for c := range N {
		sum, mx := 0.0, math.Inf(-1)
		for r := range M {
			sum += s[r*N+c]
			mx = math.Max(mx, s[r*N+c])
		}
		want[24+c], want[40+c] = sum, mx
	}
	for _, seed := range []uint64{1, 2} {
		dev := openDev(t, Options{Seed: seed})
		p := pipe(t, loadLib(t, dev, "tensor.metal"), "reduce")
		out := newBuf(t, dev, 4*64)
		if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, f32Of(a))}, {buf: f32Buf(t, dev, f32Of(b))}, {buf: out}}, nil, [3]int{1, 1, 1}, [3]int{32, 1, 1}); err != nil {
			t.Fatal(err)
		}
		got := f32s(out)
		for i, w := range want {
			if float64(got[i]) != w {
				t.Errorf("seed %d: out[%d] = %v, want %v", seed, i, got[i], w)
			}
		}
		if got[8] != 0 || got[16] >= 0 {
			t.Errorf("seed %d: row 0 max with the default (sum) identity %v, with max_identity %v: want 0 and negative", seed, got[8], got[16])
		}
	}
}

// A kernel that reads cooperative tensor elements as if lane l held row-major elements l*cap...
// gets a wrong product, and a different one under each seed.
func TestTensorLayoutAssumptionFails(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	a, b := quarters(rng, 16*8), quarters(rng, 8*16)
	ab := matmul64(a, b, 16, 16, 8)
	var results [][]float32
	for _, seed := range []uint64{1, 2} {
		dev := openDev(t, Options{Seed: seed})
		p := pipe(t, loadLib(t, dev, "tensor.metal"), "assumes_layout")
		c := newBuf(t, dev, 4*256)
		if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, f32Of(a))}, {buf: f32Buf(t, dev, f32Of(b))}, {buf: c}}, nil, [3]int{1, 1, 1}, [3]int{32, 1, 1}); err != nil {
			t.Fatal(err)
		}
		got := f32s(c)
		wrong := 0
		for i, w := range ab {
			if float64(got[i]) != w {
				wrong++
			}
		}
		if wrong < 128 {
			t.Errorf("seed %d: only %d of 256 elements misplaced; the layout assumption went unnoticed", seed, wrong)
		}
		results = append(results, got)
	}
	if sameBits(results[0], results[1]) {
		t.Error("seeds 1 and 2 gave the same layout")
	}
}

func TestTensorFaults(t *testing.T) {
	dev := openDev(t, Options{})
	lib := loadLib(t, dev, "tensor.metal")
	p := pipe(t, lib, "static_slice_past_end")
	err := dispatch(t, dev, p, []arg{{buf: newBuf(t, dev, 4*48)}, {buf: newBuf(t, dev, 4*128)}}, nil, [3]int{1, 1, 1}, [3]int{32, 1, 1})
	if !errors.Is(err, mtl.ErrExecution) || !strings.Contains(err.Error(), "past the end of the tensor") {
		t.Errorf("static slice past the end: %v", err)
	}
	// execution_simdgroups<4> dispatched with 2 simdgroups.
	p = pipe(t, lib, "mm_coop_sg4")
	args := []arg{{buf: newBuf(t, dev, 2*64*24)}, {buf: newBuf(t, dev, 2*24*48)}, {buf: newBuf(t, dev, 4*64*48)}, {bytes: u32x3(64, 48, 24)}}
	err = dispatch(t, dev, p, args, nil, [3]int{1, 1, 1}, [3]int{64, 1, 1})
	if !errors.Is(err, mtl.ErrExecution) || !strings.Contains(err.Error(), "execution_simdgroups<4>") {
		t.Errorf("scope of 4 simdgroups on 2: %v", err)
	}
	if _, err := prepass("kernel void k(tensor<device float, dextents<int, 2>> t [[buffer(0)]]) {}"); err == nil ||
		!strings.Contains(err.Error(), "tensor arguments") {
		t.Errorf("tensor kernel argument: %v", err)
	}
}
