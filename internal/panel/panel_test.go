package panel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// forEachSet runs f once per kernel set this machine runs (subtests named after the sets).
func forEachSet(t *testing.T, f func(t *testing.T, s Set)) {
	for _, s := range Sets() {
		t.Run(s.String(), func(t *testing.T) { f(t, s) })
	}
}

func TestSets(t *testing.T) {
	sets := Sets()
	if sets[0] != Best() || sets[len(sets)-1] != Generic {
		t.Fatalf("Sets() = %v, want Best() = %v first and Generic last", sets, Best())
	}
	for _, s := range sets {
		if s.String() == "" {
			t.Fatalf("set %d has no name", s)
		}
	}
	t.Logf("sets: %v", sets)
	if Best() < Asm512 {
		defer func() {
			if recover() == nil {
				t.Fatal("Gemm with a set this CPU does not run did not panic")
			}
		}()
		c := make([]float32, 1)
		b := []*float32{&c[0]}
		Gemm(Asm512, c, 1, c, 1, 1, b, 1, 1, 1)
	}
}

// TestGemm: every set against a float64 product for every row/column tail of the 6-row
// panels, row-major and transposed A, k = 0 included; each row bitwise equal to the one-row
// kernel (the order of every sum does not depend on the tile); elements outside C untouched.
func TestGemm(t *testing.T) {
	forEachSet(t, func(t *testing.T, s Set) {
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
						RowTable(b, bm, ldb, n)
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
						Gemm(s, c, ldc, a, ars, as, b, m, n, k)
						for i := 0; i < m; i++ {
							Row(s, rows[i*ldc:i*ldc+n], a[i*ars:], as, b)
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

// TestGemmSplitK: a product split along k into calls that each add onto C gives the bits of
// one call (each element is one chain of terms in index order), for every set.
func TestGemmSplitK(t *testing.T) {
	forEachSet(t, func(t *testing.T, s Set) {
		rng := rand.New(rand.NewPCG(13, 14))
		const m, n, k = 13, 70, 41
		a := make([]float32, m*k)
		bm := make([]float32, k*n)
		c0 := make([]float32, m*n)
		for _, x := range [][]float32{a, bm, c0} {
			for i := range x {
				x[i] = float32(rng.Float64()*2 - 1)
			}
		}
		b := make([]*float32, k)
		RowTable(b, bm, n, n)
		one := slices.Clone(c0)
		Gemm(s, one, n, a, k, 1, b, m, n, k)
		split := slices.Clone(c0)
		for _, r := range [][2]int{{0, 1}, {1, 17}, {17, 18}, {18, 41}} {
			Gemm(s, split, n, a[r[0]:], k, 1, b[r[0]:r[1]], m, n, r[1]-r[0])
		}
		for i := range one {
			if math.Float32bits(one[i]) != math.Float32bits(split[i]) {
				t.Fatalf("C[%d] = %v in one call, %v split along k", i, one[i], split[i])
			}
		}
	})
}

// TestSetsAgree: the AVX-512 panels give bitwise the values of the AVX2 panels (the same fused
// multiply-adds in the same order per element) on shapes that cross every column block (64,
// 32, 16 and the masked tail of the six-row form; 128, 64, 16 and the tail of the one-row form).
func TestSetsAgree(t *testing.T) {
	if Best() < Asm512 {
		t.Skip("no AVX-512 kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, m := range []int{1, 6, 7, 12, 13} {
		for _, n := range []int{15, 16, 33, 63, 64, 100, 127, 128, 200, 255, 256} {
			const k = 29
			ldc, ldb := n+1, n+3
			a := make([]float32, m*k)
			bm := make([]float32, k*ldb)
			c0 := make([]float32, m*ldc)
			for _, x := range [][]float32{a, bm, c0} {
				for i := range x {
					x[i] = float32(rng.Float64()*2 - 1)
				}
			}
			b := make([]*float32, k)
			RowTable(b, bm, ldb, n)
			var got [2][]float32
			for i, s := range []Set{Asm512, Asm} {
				got[i] = slices.Clone(c0)
				Gemm(s, got[i], ldc, a, k, 1, b, m, n, k)
			}
			for i := range c0 {
				if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
					t.Fatalf("m%d n%d: C[%d] = %v (avx512), %v (avx2)", m, n, i, got[0][i], got[1][i])
				}
			}
		}
	}
}

// BenchmarkGemm: the panel kernel on a 128x128x128 product (C += A B, as [Q; K] S of the GDN
// chunk at dk = dv = 128), one core: the per-core ceiling of the chunked scan.
func BenchmarkGemm(b *testing.B) {
	const n = 128
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 2*n*n)
	for i := range x {
		x[i] = float32(rng.Float64())
	}
	c := make([]float32, n*n)
	rows := make([]*float32, n)
	RowTable(rows, x[n*n:], n, n)
	for _, s := range Sets() {
		b.Run(s.String(), func(b *testing.B) {
			for b.Loop() {
				Gemm(s, c, n, x, n, 1, rows, n, n, n)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
