package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"testing"

	"github.com/stratakernels/strata/op/optest"
)

// denseRoPERef64 rotates x [T, H, Dh] in float64 (optest.RefRoPE).
func denseRoPERef64(x []float32, T, H, Dh, rot int, pos []float64, theta float64) []float64 {
	return optest.RefRoPE(optest.To64(x), T, H, Dh, rot, pos, theta)
}

func TestRoPECases(t *testing.T) {
	for i, c := range optest.RoPECases() {
		name := fmt.Sprintf("T%d_H%d_d%d_rot%d_pos%d_row%v", c.T, c.H, c.Dh, c.Rot, c.Pos0, c.PerRow)
		x := optest.Floats(uint64(500+i), c.T*c.H*c.Dh, 1)
		pos := make([]float64, c.T)
		pos32 := make([]int32, c.T)
		for j := range pos {
			pos32[j] = int32(c.Pos0 + j)
			if c.PerRow {
				pos32[j] = int32((j * 7919) % 5000)
			}
			pos[j] = float64(pos32[j])
		}
		want := denseRoPERef64(x, c.T, c.H, c.Dh, c.Rot, pos, c.Theta)
		var err error
		if c.PerRow {
			err = ropeAt(x, c.T, c.H, c.Dh, c.Rot, pos32, c.Theta)
		} else {
			err = rope(x, c.T, c.H, c.Dh, c.Rot, c.Pos0, c.Theta)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		denseCheck(t, name, x, want, 1e-6)
	}
	x0 := optest.Floats(3, 300*3*256, 1)
	denseSameAcrossProcs(t, "RoPE", func() []float32 {
		x := append([]float32(nil), x0...)
		if err := rope(x, 300, 3, 256, 64, 17, 1e7); err != nil {
			t.Fatal(err)
		}
		return x
	})
}

func TestRoPEErrors(t *testing.T) {
	x := make([]float32, 2*2*8)
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"odd rot", op.ErrInvalidArgument, func() error { return rope(x, 2, 2, 8, 3, 0, 1e4) }},
		{"rot > d", op.ErrInvalidArgument, func() error { return rope(x, 2, 2, 8, 10, 0, 1e4) }},
		{"rot 0", op.ErrInvalidArgument, func() error { return rope(x, 2, 2, 8, 0, 0, 1e4) }},
		{"negative pos0", op.ErrInvalidArgument, func() error { return rope(x, 2, 2, 8, 8, -1, 1e4) }},
		{"theta 0", op.ErrInvalidArgument, func() error { return rope(x, 2, 2, 8, 8, 0, 0) }},
		{"short x", op.ErrShape, func() error { return rope(x[:31], 2, 2, 8, 8, 0, 1e4) }},
		{"pos count", op.ErrShape, func() error { return ropeAt(x, 2, 2, 8, 8, []int32{1}, 1e4) }},
		{"negative pos", op.ErrInvalidArgument, func() error { return ropeAt(x, 2, 2, 8, 8, []int32{1, -2}, 1e4) }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}

// TestRMSNorm1pRoPEFused requires the fused norm+rotary pass to equal RMSNorm1p then RoPE bit
// for bit, across GOMAXPROCS.
func TestRMSNorm1pRoPEFused(t *testing.T) {
	for _, c := range []struct{ T, H, d, rot, pos0 int }{{1, 1, 8, 4, 0}, {17, 3, 256, 64, 5}, {65, 2, 128, 64, 1000}} {
		x := optest.Floats(4, c.T*c.H*c.d, 2)
		w := optest.Floats(5, c.d, 0.1)
		want := append([]float32(nil), x...)
		if err := rmsNorm1p(want, want, c.T*c.H, c.d, w, 1e-6); err != nil {
			t.Fatal(err)
		}
		if err := rope(want, c.T, c.H, c.d, c.rot, c.pos0, 1e7); err != nil {
			t.Fatal(err)
		}
		denseSameAcrossProcs(t, fmt.Sprint(c), func() []float32 {
			got := append([]float32(nil), x...)
			if err := rmsNorm1pRoPE(got, c.T, c.H, c.d, w, 1e-6, c.rot, c.pos0, 1e7); err != nil {
				t.Fatal(err)
			}
			denseBitwise(t, fmt.Sprint(c), got, want)
			return got
		})
	}
	if err := rmsNorm1pRoPE(make([]float32, 16), 2, 1, 8, make([]float32, 7), 1e-6, 4, 0, 1e7); !errors.Is(err, op.ErrShape) {
		t.Fatalf("short weights: %v", err)
	}
}

// BenchmarkRMSNorm1pRoPE runs the fused q_norm + RoPE of an attention layer at the real shape
// (T 512, 24 heads x 256, rotary 64).
func BenchmarkRMSNorm1pRoPE(b *testing.B) {
	const T, H, d = 512, 24, 256
	x := optest.Floats(1, T*H*d, 1)
	w := optest.Floats(2, d, 0.1)
	b.SetBytes(8 * T * H * d)
	for b.Loop() {
		if err := rmsNorm1pRoPE(x, T, H, d, w, 1e-6, 64, 0, 1e7); err != nil {
			b.Fatal(err)
		}
	}
}
