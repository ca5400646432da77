package qdot

import (
	"math/rand/v2"
	"testing"
)

// TestInt8Rows: an Int8Rows weight gives, with every int8 kernel, bitwise the product of the
// portable kernel on it; an MLX 4-bit weight handed over as Int8Rows (its codes as signed
// bytes, its scales and biases per group) gives bitwise the product of the Affine weight
// itself; signed codes reach -128 and 127; bad shapes are refused.
func TestInt8Rows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const T, N, K = 13, 70, 256
	x := randActs(r, T, K)
	var a Int8Act
	if err := QuantizeInt8(&a, x, T, K, 32); err != nil {
		t.Fatal(err)
	}
	aff, _ := quantizeAffine(randWeights(r, N, K), N, K, 4, 32)
	asRows := &Int8Rows{N: N, K: K, Group: 32, Bias: true, Row: func(n int, q []int8, s, b []float32) {
		q32 := make([]int32, K)
		aff.affineRow(n, q32)
		for k, v := range q32 {
			q[k] = int8(v)
		}
		aff.affineScales(n, s, b)
	}}
	codes := make([]int8, N*K)
	for i := range codes {
		codes[i] = int8(r.IntN(256) - 128)
	}
	codes[0], codes[1] = -128, 127
	scales := make([]float32, N*K/64)
	for i := range scales {
		scales[i] = (0.5 + r.Float32()) * 1e-3
	}
	signed := &Int8Rows{N: N, K: K, Group: 64, Row: func(n int, q []int8, s, _ []float32) {
		copy(q, codes[n*K:(n+1)*K])
		copy(s, scales[n*K/64:(n+1)*K/64])
	}}
	for _, c := range []struct {
		name string
		w    Int8Weights
		ref  Int8Weights
	}{{"mlx4_as_rows", asRows, aff}, {"signed_g64", signed, signed}} {
		want := make([]float32, T*N)
		if err := MatMulInt8(want, N, &a, c.ref, 0, N, Go); err != nil {
			t.Fatal(err)
		}
		for _, k := range Int8Kernels() {
			got := make([]float32, T*N)
			if err := ParallelInt8(got, N, &a, c.w, k, 3); err != nil {
				t.Fatal(err)
			}
			sameBits(t, c.name+" "+k.String(), got, want, N, T, N)
		}
	}
	for _, bad := range []*Int8Rows{nil, {N: 4, K: 64, Group: 32}, {N: 4, K: 64, Group: 16, Row: signed.Row}, {N: 4, K: 48, Group: 32, Row: signed.Row}, {N: 0, K: 64, Group: 32, Row: signed.Row}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
