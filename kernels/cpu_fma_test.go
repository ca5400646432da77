package kernels

import (
	"math"
	"math/rand/v2"
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
