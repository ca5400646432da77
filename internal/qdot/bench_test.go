package qdot

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/internal/cputime"
)

// benchShapes are products of a prefill at Qwen3.8-Flash-Next's widths: a projection (N 2560,
// K 2560) at T = 512 and 2048, an expert's gate_up (N 1280, K 2560) and down (N 2560, K 640) at
// the 80 rows an expert sees at T = 512 with 64 experts.
var benchShapes = [][3]int{{512, 2560, 2560}, {2048, 2560, 2560}, {80, 1280, 2560}, {80, 2560, 640}}

// BenchmarkQDot: one core, one whole product y [T, N] = x W^T per iteration: the float32 SGEMM
// of package internal/blas (the GEMM the f32 mode runs: blas.Impl) on float32 operands, then
// each int8 and bf16 kernel of this CPU on MLX 4- and 8-bit (group 64) and FP8 weights and on
// bf16 weights, and the activation quantization and rounding alone. GFLOP/s counts 2 T N K for
// every product, so the figures compare directly; quantize and round report ns per element.
// The products include their per-call weight packing.
func BenchmarkQDot(b *testing.B) {
	b.Logf("f32: %s", blas.Impl())
	r := rand.New(rand.NewPCG(31, 32))
	for _, s := range benchShapes {
		T, N, K := s[0], s[1], s[2]
		flops := 2 * float64(T) * float64(N) * float64(K)
		// loop runs f in b.Loop and reports GFLOP/s of wall time and of the thread's CPU time
		// (which other processes on a shared core do not inflate).
		loop := func(b *testing.B, f func() error) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0, ok := cputime.Thread()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			c1, _ := cputime.Thread()
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if ok {
				b.ReportMetric(flops*float64(b.N)/(c1-c0).Seconds()/1e9, "cpu-GFLOP/s")
			}
		}
		x := randActs(r, T, K)
		w64 := randWeights(r, N, K)
		w32 := make([]float32, N*K)
		for i, v := range w64 {
			w32[i] = float32(v)
		}
		y := make([]float32, T*N)
		b.Run(fmt.Sprintf("%dx%dx%d/f32-sgemm", T, N, K), func(b *testing.B) {
			loop(b, func() error { return blas.Sgemm(false, true, T, N, K, 1, x, K, w32, K, 0, y, N) })
		})
		mlx4, _ := quantizeAffine(w64, N, K, 4, 64)
		mlx8, _ := quantizeAffine(w64, N, K, 8, 64)
		fp8, _ := quantizeFP8(w64, N, K)
		bf := &BF16{N: N, K: K, Bits: make([]uint16, N*K)}
		for i, v := range w32 {
			bf.Bits[i] = ToBF16(v)
		}
		var a32, a64 Int8Act
		if err := QuantizeInt8(&a32, x, T, K, 32); err != nil {
			b.Fatal(err)
		}
		if err := QuantizeInt8(&a64, x, T, K, 64); err != nil {
			b.Fatal(err)
		}
		var xb BF16Act
		if err := RoundBF16(&xb, x, T, K); err != nil {
			b.Fatal(err)
		}
		for _, k := range Int8Kernels() {
			cases := []struct {
				name string
				a    *Int8Act
				w    Int8Weights
			}{{"mlx4-b32", &a32, mlx4}, {"mlx4-b64", &a64, mlx4}, {"mlx8-b64", &a64, mlx8}, {"fp8-b32", &a32, fp8}}
			for _, c := range cases {
				b.Run(fmt.Sprintf("%dx%dx%d/int8-%v-%s", T, N, K, k, c.name), func(b *testing.B) {
					loop(b, func() error { return MatMulInt8(y, N, c.a, c.w, 0, N, k) })
				})
			}
		}
		for _, k := range BF16Kernels() {
			for _, c := range []struct {
				name string
				w    BF16Weights
			}{{"bf16", bf}, {"fp8", fp8}} {
				b.Run(fmt.Sprintf("%dx%dx%d/bf16-%v-%s", T, N, K, k, c.name), func(b *testing.B) {
					loop(b, func() error { return MatMulBF16(y, N, &xb, c.w, 0, N, k) })
				})
			}
		}
		perElem := func(b *testing.B) {
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(T*K), "ns/elem")
		}
		b.Run(fmt.Sprintf("%dx%dx%d/quantize-int8", T, N, K), func(b *testing.B) {
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			for b.Loop() {
				if err := QuantizeInt8(&a32, x, T, K, 32); err != nil {
					b.Fatal(err)
				}
			}
			perElem(b)
		})
		b.Run(fmt.Sprintf("%dx%dx%d/round-bf16", T, N, K), func(b *testing.B) {
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			for b.Loop() {
				if err := RoundBF16(&xb, x, T, K); err != nil {
					b.Fatal(err)
				}
			}
			perElem(b)
		})
	}
}
