package qdot

import (
	"math/rand/v2"
	"testing"
)

// TestInt8Rows: an Int8Rows weight gives, with every int8 kernel, bitwise the product of the
// portable kernel on it; an MLX 4-bit weight handed over as Int8Rows (its codes as signed
// bytes, its scales and biases per group) gives bitwise the product of the Affine weight
// itself; signed codes reach -128 and 127; 4-bit codes in the nibble form (Nibbles, with an
// offset or biases) give bitwise the products of their byte form; bad shapes are refused.
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
	// 4-bit codes with an offset (as Q4_0's q - 8) and with biases (as Q4_K's), in the byte
	// form (Row) and the nibble form (Nibbles): bitwise the same products.
	nib := make([]byte, N*K)
	for i := range nib {
		nib[i] = byte(r.IntN(16))
	}
	nib[0], nib[1] = 0, 15
	nscales, biases := make([]float32, N*K/32), make([]float32, N*K/32)
	for i := range biases {
		nscales[i], biases[i] = (0.5+r.Float32())*1e-3, (r.Float32()-0.5)*1e-2
	}
	nibRows := func(off int32, bias bool, nibbles bool) *Int8Rows {
		w := &Int8Rows{N: N, K: K, Group: 32, Bias: bias, Row: func(n int, q []int8, s, b []float32) {
			for k := range K {
				q[k] = int8(int32(nib[n*K+k]) + off)
			}
			copy(s, nscales[n*K/32:(n+1)*K/32])
			if bias {
				copy(b, biases[n*K/32:(n+1)*K/32])
			}
		}}
		if nibbles {
			w.NibbleOff = off
			w.Nibbles = func(n int, c []byte, s, b []float32) {
				for m := range K / 2 {
					c[m] = nib[n*K+2*m] | nib[n*K+2*m+1]<<4
				}
				copy(s, nscales[n*K/32:(n+1)*K/32])
				if bias {
					copy(b, biases[n*K/32:(n+1)*K/32])
				}
			}
		}
		return w
	}
	for _, c := range []struct {
		name string
		w    Int8Weights
		ref  Int8Weights
	}{{"mlx4_as_rows", asRows, aff}, {"signed_g64", signed, signed},
		{"nibbles_off-8", nibRows(-8, false, true), nibRows(-8, false, false)},
		{"nibbles_bias", nibRows(0, true, true), nibRows(0, true, false)},
		{"nibbles_off-15_bias", nibRows(-15, true, true), nibRows(-15, true, false)}} {
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
	for _, bad := range []*Int8Rows{nil, {N: 4, K: 64, Group: 32}, {N: 4, K: 64, Group: 16, Row: signed.Row}, {N: 4, K: 48, Group: 32, Row: signed.Row}, {N: 0, K: 64, Group: 32, Row: signed.Row},
		{N: 4, K: 64, Group: 32, Row: signed.Row, NibbleOff: -8}, {N: 4, K: 64, Group: 32, Row: signed.Row, Nibbles: nibRows(0, false, true).Nibbles, NibbleOff: 1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
