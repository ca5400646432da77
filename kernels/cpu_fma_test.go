package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// kernelSets lists the micro-kernel sets this machine can run: the assembly set when the CPU
// has it, and always the portable one.
func kernelSets() []bool {
	if hasAVX2FMA {
		return []bool{true, false}
	}
	return []bool{false}
}

// forEachKernel runs f once per kernel set (subtests "asm" and "go").
func forEachKernel(t *testing.T, f func(t *testing.T)) {
	for _, asm := range kernelSets() {
		t.Run(map[bool]string{true: "asm", false: "go"}[asm], func(t *testing.T) {
			prev := useAsm
			useAsm = asm
			defer func() { useAsm = prev }()
			f(t)
		})
	}
}

func TestKernelNames(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		want := "generic Go"
		if useAsm {
			want = "avx2-fma asm"
		}
		if GDNKernel() != want || AttentionKernel() != want {
			t.Fatalf("GDNKernel %q, AttentionKernel %q, want %q", GDNKernel(), AttentionKernel(), want)
		}
	})
}

// TestFMAGemm: the panel kernels against a float64 product for every row/column tail of the
// 6x16 panels, row-major and transposed A, k = 0 included; each row bitwise equal to the
// one-row kernel (the order of every sum does not depend on the tile); elements outside C
// untouched.
func TestFMAGemm(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		fill := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.Float64()*2 - 1)
			}
			return x
		}
		for _, m := range []int{1, 5, 6, 7, 13} {
			for _, n := range []int{1, 7, 8, 9, 16, 17, 31, 48, 131} {
				for _, k := range []int{0, 1, 5, 36} {
					for _, trans := range []bool{false, true} {
						name := fmt.Sprintf("m%d_n%d_k%d_trans%v", m, n, k, trans)
						ldc, ldb := n+3, n+5
						a := fill(m*k + m)
						ars, as := k, 1
						if trans {
							ars, as = 1, m
						}
						bm := fill(max(k, 1) * ldb)
						b := make([]*float32, k)
						fmaRowTable(b, bm, ldb, n)
						c := fill(m * ldc)
						want := make([]float64, len(c))
						for i := range c {
							want[i] = float64(c[i])
						}
						for i := 0; i < m; i++ {
							for d := 0; d < n; d++ {
								for j := 0; j < k; j++ {
									want[i*ldc+d] += float64(a[i*ars+j*as]) * float64(bm[j*ldb+d])
								}
							}
						}
						rows := slices.Clone(c)
						fmaGemm(c, ldc, a, ars, as, b, m, n, k)
						for i := 0; i < m; i++ {
							fmaRow(rows[i*ldc:i*ldc+n], a[i*ars:], as, b)
						}
						for i := range c {
							if i%ldc >= n {
								if c[i] != float32(want[i]) {
									t.Fatalf("%s: element %d outside C changed", name, i)
								}
								continue
							}
							if e := math.Abs(float64(c[i]) - want[i]); e > 1e-5*(1+math.Abs(want[i])) {
								t.Fatalf("%s: C[%d] = %v, want %v", name, i, c[i], want[i])
							}
							if math.Float32bits(c[i]) != math.Float32bits(rows[i]) {
								t.Fatalf("%s: C[%d] = %v from the panel, %v from the row kernel", name, i, c[i], rows[i])
							}
						}
					}
				}
			}
		}
	})
}

// BenchmarkFMAGemm: the panel kernel on a 128x128x128 product (C += A B, as [Q; K] S of the
// GDN chunk at dk = dv = 128), one core: the per-core ceiling of the chunked scan.
func BenchmarkFMAGemm(b *testing.B) {
	const n = 128
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 2*n*n)
	for i := range x {
		x[i] = float32(rng.Float64())
	}
	c := make([]float32, n*n)
	rows := make([]*float32, n)
	fmaRowTable(rows, x[n*n:], n, n)
	for _, asm := range kernelSets() {
		b.Run(map[bool]string{true: "asm", false: "go"}[asm], func(b *testing.B) {
			prev := useAsm
			useAsm = asm
			defer func() { useAsm = prev }()
			for b.Loop() {
				fmaGemm(c, n, x, n, 1, rows, n, n, n)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
