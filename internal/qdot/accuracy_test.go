package qdot

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stratakernels/strata/internal/blas"
)

// TestAccuracy measures each mode's error against the float64 product of the original float32
// activations and the weight's own values (its dequantization: what the f32 mode multiplies),
// on the projection width of Qwen3.8-Flash-Next (K 2560) with activations that have outlier
// channels; the f32 SGEMM's error on the same operands is the baseline. It logs max |y - ref| /
// max |ref| and the relative RMS error, and fails above limits a few times the measured
// figures (to catch a broken path, not to certify one). For FP8 it also separates the int8
// path's two losses: the weights' mapping to int8 (with exact activations) and the
// activations' quantization (with exact weights).
func TestAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	const T, N, K = 32, 256, 2560
	x := randActs(r, T, K)
	x64 := to64(x)
	w := randWeights(r, N, K)
	type weight struct {
		name string
		deq  []float64
		i8   Int8Weights
		b16  BF16Weights
	}
	var ws []weight
	for _, c := range []struct{ bits, group int }{{4, 64}, {4, 128}, {8, 64}} {
		a, deq := quantizeAffine(w, N, K, c.bits, c.group)
		ws = append(ws, weight{int8Case{c.bits, c.group}.String(), deq, a, a})
	}
	fp8, fp8deq := quantizeFP8(w, N, K)
	ws = append(ws, weight{"fp8", fp8deq, fp8, fp8})
	bf := &BF16{N: N, K: K, Bits: make([]uint16, N*K)}
	bfdeq := make([]float64, N*K)
	for i, v := range w {
		bf.Bits[i] = ToBF16(float32(v))
		bfdeq[i] = float64(widen16(bf.Bits[i], false))
	}
	ws = append(ws, weight{"bf16", bfdeq, nil, bf})

	check := func(what string, y []float32, ref []float64, limMax, limRMS float64) {
		t.Helper()
		m, rms := relErr(y, N, ref, T, N)
		t.Logf("%-34s max %.2e  rms %.2e", what, m, rms)
		if !(m <= limMax && rms <= limRMS) {
			t.Errorf("%s: max %.3g rms %.3g above %.3g / %.3g", what, m, rms, limMax, limRMS)
		}
	}
	y := make([]float32, T*N)
	for _, wt := range ws {
		ref := matmul64(x64, wt.deq, T, N, K)
		w32 := make([]float32, N*K)
		for i, v := range wt.deq {
			w32[i] = float32(v)
		}
		if err := blas.Sgemm(false, true, T, N, K, 1, x, K, w32, K, 0, y, N); err != nil {
			t.Fatal(err)
		}
		check(wt.name+" f32 sgemm", y, ref, 1e-5, 1e-5)
		if wt.i8 != nil {
			for _, blk := range Blocks {
				if wt.name == "fp8" && blk != 32 || wt.name != "fp8" && int8CaseGroup(wt.i8)%blk != 0 {
					continue
				}
				var a Int8Act
				if err := QuantizeInt8(&a, x, T, K, blk); err != nil {
					t.Fatal(err)
				}
				if err := MatMulInt8(y, N, &a, wt.i8, 0, N, BestInt8()); err != nil {
					t.Fatal(err)
				}
				check(wt.name+" int8 block "+itoa(blk), y, ref, 0.08, 0.04)
				if wt.name == "fp8" {
					// The two losses apart, in float64: int8 weights with exact activations,
					// exact weights with int8 activations.
					src, _ := wt.i8.int8Source()
					q := make([]int32, K)
					s := make([]float32, K/32)
					w8 := make([]float64, N*K)
					for n := 0; n < N; n++ {
						src.row(n, q, s, nil)
						for k := range q {
							w8[n*K+k] = float64(s[k/32]) * float64(q[k])
						}
					}
					check("fp8 int8 weights only (float64)", f32(matmul64(x64, w8, T, N, K)), ref, 0.05, 0.02)
					check("fp8 int8 activations only (float64)", f32(matmul64(dequantActs(&a), wt.deq, T, N, K)), ref, 0.05, 0.02)
				}
			}
		}
		var xb BF16Act
		if err := RoundBF16(&xb, x, T, K); err != nil {
			t.Fatal(err)
		}
		if err := MatMulBF16(y, N, &xb, wt.b16, 0, N, BestBF16()); err != nil {
			t.Fatal(err)
		}
		check(wt.name+" bf16", y, ref, 0.05, 0.02)
	}
}

// int8CaseGroup is the group of an Int8Weights.
func int8CaseGroup(w Int8Weights) int {
	src, err := w.int8Source()
	if err != nil {
		return 1
	}
	return src.group
}

// f32 narrows a float64 slice.
func f32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func itoa(v int) string { return strconv.Itoa(v) }
