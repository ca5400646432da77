package metal

import (
	"fmt"
	"testing"

	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// rand16 returns n finite 16-bit weights of dtype dt, uniform-ish in [-1, 1).
func rand16(r *rng, n int, dt op.DType) []uint16 {
	x := r.fill(n, -1, 1)
	out := make([]uint16, n)
	for i, v := range x {
		if dt == op.BF16 {
			out[i] = uint16(float32bits(v) >> 16)
		} else {
			out[i] = f16bits(v)
		}
	}
	return out
}

// TestMatMul: gemm_w16 against kernels.MatMul for BF16 and F16 weights on edge shapes around
// the 32 x 32 tile and 16-deep K step; tolerance 2e-6 relative to max |y|.
func TestMatMul(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 31}
	for _, dt := range []op.DType{op.BF16, op.F16} {
		for _, c := range []struct{ T, N, K int }{{1, 1, 1}, {3, 17, 9}, {33, 65, 31}, {64, 64, 256}, {65, 40, 300}} {
			t.Run(fmt.Sprintf("%v_T%d_N%d_K%d", dt, c.T, c.N, c.K), func(t *testing.T) {
				w, err := kernels.NewMatrixU16(c.N, c.K, dt, rand16(r, c.N*c.K, dt))
				if err != nil {
					t.Fatal(err)
				}
				x := r.fill(c.T*c.K, -1, 1)
				want, got := make([]float32, c.T*c.N), make([]float32, c.T*c.N)
				if err := kernels.MatMul(want, x, c.T, w); err != nil {
					t.Fatal(err)
				}
				if err := b.MatMul(got, x, c.T, w); err != nil {
					t.Fatal(err)
				}
				checkClose(t, "y", got, want, 2e-6)
			})
		}
	}
	t.Log(b.Variants())
}

// TestMoEExperts: the grouped-GEMM experts against kernels.MoEExperts: identical row table rk,
// ye within 2e-6 relative.
func TestMoEExperts(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 37}
	const E, D, I, T, K = 6, 40, 24, 37, 4
	ex := &kernels.Experts{E: E, D: D, I: I}
	for e := 0; e < E; e++ {
		gu, _ := kernels.NewMatrixU16(2*I, D, op.BF16, rand16(r, 2*I*D, op.BF16))
		dn, _ := kernels.NewMatrixU16(D, I, op.BF16, rand16(r, D*I, op.BF16))
		ex.GateUp = append(ex.GateUp, gu)
		ex.Down = append(ex.Down, dn)
	}
	x := r.fill(T*D, -1, 1)
	idx := make([]int32, T*K)
	for i := range idx {
		idx[i] = int32(r.next()%(E+1)) - 1 // some empty slots
	}
	wantY, wantR := make([]float32, T*K*D), make([]int32, T*K)
	if err := kernels.MoEExperts(wantY, wantR, x, T, idx, K, ex); err != nil {
		t.Fatal(err)
	}
	gotY, gotR := make([]float32, T*K*D), make([]int32, T*K)
	if err := b.MoEExperts(gotY, gotR, x, T, idx, K, ex); err != nil {
		t.Fatal(err)
	}
	for i := range wantR {
		if gotR[i] != wantR[i] {
			t.Fatalf("rk[%d] = %d, want %d", i, gotR[i], wantR[i])
		}
	}
	checkClose(t, "ye", gotY, wantY, 2e-6)
}
