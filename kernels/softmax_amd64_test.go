//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAttnSoftmax8: the vector online-softmax step against float64 on scores spread over the
// whole exp range, masked (-Inf) scores giving exact zeros, a first block (m = -Inf) and a
// later one (rescale alpha); then a NaN score, which must reach its row's sum.
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

	// A NaN score (row 2, key 17) is left out of the max and gives a NaN probability and sum,
	// as the portable step computes it; the other rows are as without it.
	poisoned := slices.Clone(raw)
	poisoned[17*rp+2] = float32(math.NaN())
	st2, m2, l2, a2 := slices.Clone(poisoned), slices.Clone(m0), slices.Clone(l0), make([]float32, 8)
	attnSoftmax8(&st2[0], rp, nc, scale, &m2[0], &l2[0], &a2[0])
	if !math.IsNaN(float64(st2[17*rp+2])) || !math.IsNaN(float64(l2[2])) || m2[2] != m[2] || a2[2] != alpha[2] {
		t.Fatalf("NaN score: probability %v, l %v, m %v (want %v), alpha %v (want %v)", st2[17*rp+2], l2[2], m2[2], m[2], a2[2], alpha[2])
	}
	for r := 0; r < 8; r++ {
		for c := 0; c < nc; c++ {
			if (r != 2 || c != 17) && math.Float32bits(st2[c*rp+r]) != math.Float32bits(st[c*rp+r]) {
				t.Fatalf("NaN score at row 2 key 17: row %d key %d changed: %v, was %v", r, c, st2[c*rp+r], st[c*rp+r])
			}
		}
		if r != 2 && (l2[r] != l[r] || m2[r] != m[r] || a2[r] != alpha[r]) {
			t.Fatalf("NaN score at row 2: row %d's state changed", r)
		}
	}
}
