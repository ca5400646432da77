package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// kernelSet is one micro-kernel set: the portable Go kernels, the assembly kernels with their
// AVX2 (or NEON) panels, or the assembly kernels with the AVX-512F panels.
type kernelSet struct {
	name        string
	asm, avx512 bool
}

// kernelSets lists the micro-kernel sets this machine can run: the AVX-512 set when the CPU
// has it, the assembly set when the CPU has it, and always the portable one.
func kernelSets() []kernelSet {
	var sets []kernelSet
	if hasAsm512 {
		sets = append(sets, kernelSet{"avx512", true, true})
	}
	if hasAsmPanels {
		sets = append(sets, kernelSet{"asm", true, false})
	}
	return append(sets, kernelSet{"go", false, false})
}

// use selects the set and returns a function that restores the previous one.
func (s kernelSet) use() (restore func()) {
	prevAsm, prev512 := useAsm, useAsm512
	useAsm, useAsm512 = s.asm, s.avx512
	return func() { useAsm, useAsm512 = prevAsm, prev512 }
}

// forEachKernel runs f once per kernel set (subtests "avx512", "asm" and "go").
func forEachKernel(t *testing.T, f func(t *testing.T)) {
	for _, s := range kernelSets() {
		t.Run(s.name, func(t *testing.T) {
			defer s.use()()
			f(t)
		})
	}
}

func TestKernelNames(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		want := "generic Go"
		if useAsm {
			want = cpuAsmName
			if useAsm512 {
				want = cpuAsm512Name
			}
		}
		if want == "" {
			t.Fatal("no kernel name")
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
	for _, s := range kernelSets() {
		b.Run(s.name, func(b *testing.B) {
			defer s.use()()
			for b.Loop() {
				fmaGemm(c, n, x, n, 1, rows, n, n, n)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestAttnSoftmax8: the vector online-softmax step against float64 on scores spread over the
// whole exp range, masked (-Inf) scores giving exact zeros, a first block (m = -Inf) and a
// later one (rescale alpha).
func TestAttnSoftmax8(t *testing.T) {
	if !hasAsmVec {
		t.Skip("no vector softmax kernel on this CPU or build")
	}
	const rp, nc = 16, 40
	rng := rand.New(rand.NewPCG(5, 6))
	st := make([]float32, nc*rp)
	for i := range st {
		st[i] = float32(rng.Float64()*240 - 200) // scaled by 0.5: exponents down to about -220
	}
	for c := 30; c < nc; c++ {
		st[c*rp+3] = float32(math.Inf(-1))
	}
	scale := float32(0.5)
	m := make([]float32, 8)
	l := make([]float32, 8)
	alpha := make([]float32, 8)
	for i := range m {
		m[i] = float32(math.Inf(-1))
	}
	m[5], l[5] = 100, 2 // a row that already has a running max above this block's scores
	m0, l0 := slices.Clone(m), slices.Clone(l)
	raw := slices.Clone(st)
	attnSoftmax8(&st[0], rp, nc, scale, &m[0], &l[0], &alpha[0])
	worst := 0.0
	for r := 0; r < 8; r++ {
		mNew := float64(m0[r])
		for c := 0; c < nc; c++ {
			mNew = math.Max(mNew, float64(raw[c*rp+r]*scale))
		}
		if float64(m[r]) != mNew {
			t.Fatalf("row %d: max %v, want %v", r, m[r], mNew)
		}
		a := math.Exp(float64(m0[r]) - mNew)
		sum := float64(l0[r]) * a
		for c := 0; c < nc; c++ {
			arg := raw[c*rp+r]*scale - float32(mNew) // as the kernel forms it
			want := math.Exp(float64(arg))
			got := float64(st[c*rp+r])
			if arg < -87 { // flushed (so are masked scores), below the normal range near -87.3
				if got != 0 {
					t.Fatalf("row %d key %d: %v, want exactly 0", r, c, got)
				}
				continue
			}
			worst = math.Max(worst, math.Abs(got-want)/want)
			sum += want
		}
		if e := math.Abs(float64(l[r])-sum) / sum; e > 1e-6 {
			t.Errorf("row %d: l = %v, want %v", r, l[r], sum)
		}
		if e := math.Abs(float64(alpha[r]) - a); e > 1e-6*a {
			t.Errorf("row %d: alpha = %v, want %v", r, alpha[r], a)
		}
	}
	t.Logf("worst relative error of exp: %.3g", worst)
	if worst > 5e-7 {
		t.Errorf("exp relative error %.3g > 5e-7", worst)
	}
	// Rows 8..15 were not touched.
	for c := 0; c < nc; c++ {
		if !slices.Equal(st[c*rp+8:c*rp+16], raw[c*rp+8:c*rp+16]) {
			t.Fatalf("key %d: rows past the 8 changed", c)
		}
	}
}

// TestGDNElementwise: the element-wise chunk steps (both kernel sets) against float64 on every
// length tail.
func TestGDNElementwise(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(8, 9))
		for n := 0; n <= 37; n++ {
			v, ks, src := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := 0; i < n; i++ {
				v[i], ks[i], src[i] = float32(rng.Float64()*2-1), float32(rng.Float64()*2-1), float32(rng.Float64()*2-1)
			}
			b, e, s := float32(0.37), float32(0.81), float32(-1.7)
			rhs, sc := make([]float32, n), make([]float32, n)
			gdnRHS(rhs, v, ks, b, e)
			gdnScaleCopy(sc, src, s)
			for i := 0; i < n; i++ {
				w := float64(b) * (float64(v[i]) - float64(e)*float64(ks[i]))
				if math.Abs(float64(rhs[i])-w) > 1e-6 {
					t.Fatalf("n=%d: rhs[%d] = %v, want %v", n, i, rhs[i], w)
				}
				if sc[i] != s*src[i] {
					t.Fatalf("n=%d: scaled[%d] = %v, want %v", n, i, sc[i], s*src[i])
				}
			}
		}
	})
}

// TestFMAGemmSetsAgree: the AVX-512 panels give bitwise the values of the AVX2 panels (the same
// fused multiply-adds in the same order per element) on shapes that cross every column block
// (64, 32, 16 and the masked tail of the six-row form; 128, 64, 16 and the tail of the
// one-row form).
func TestFMAGemmSetsAgree(t *testing.T) {
	if !hasAsm512 {
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
			fmaRowTable(b, bm, ldb, n)
			var got [2][]float32
			for s, set := range []kernelSet{{"avx512", true, true}, {"asm", true, false}} {
				restore := set.use()
				got[s] = slices.Clone(c0)
				fmaGemm(got[s], ldc, a, k, 1, b, m, n, k)
				restore()
			}
			for i := range c0 {
				if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
					t.Fatalf("m%d n%d: C[%d] = %v (avx512), %v (avx2)", m, n, i, got[0][i], got[1][i])
				}
			}
		}
	}
}
