package metal

import (
	"fmt"
	"math"
	"testing"

	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// TestRMSNorm: rms_norm and the grouped forms against the CPU ops (2e-6 relative: float32 sums
// vs float64), gr_norm_h4 bitwise against rms_norm.
func TestRMSNorm(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 17}
	for _, c := range []struct{ T, S, D int }{{1, 1, 1}, {3, 4, 37}, {17, 4, 256}, {5, 1, 300}, {2, 4, 2560}} {
		t.Run(fmt.Sprintf("T%d_S%d_D%d", c.T, c.S, c.D), func(t *testing.T) {
			x := r.fill(c.T*c.S*c.D, -3, 3)
			w := r.fill(c.S*c.D, -0.5, 0.5)
			want := make([]float32, len(x))
			if err := kernels.RMSNorm1pGrouped(want, x, c.T, c.S, c.D, w, 1e-6); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(x))
			if err := b.RMSNorm1pGrouped(got, x, c.T, c.S, c.D, w, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "grouped", got, want, 2e-6)
			if err := b.Prefer("gr_norm_h4", "rms_norm"); err != nil {
				t.Fatal(err)
			}
			rows := make([]float32, len(x))
			if err := b.RMSNorm1pGrouped(rows, x, c.T, c.S, c.D, w, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkBitwise(t, "gr_norm_h4 vs rms_norm", got, rows)
			if c.S == 1 {
				plain := make([]float32, len(x))
				if err := kernels.RMSNorm1p(want, x, c.T, c.D, w, 1e-6); err != nil {
					t.Fatal(err)
				}
				if err := b.RMSNorm1p(plain, x, c.T, c.D, w, 1e-6); err != nil {
					t.Fatal(err)
				}
				checkClose(t, "plain", plain, want, 2e-6)
			}
		})
	}
}

// TestGRNormHStreamOut: x = mean_s(sigmoid(a_s) * Hn_s) against a float64 reference built on the
// CPU grouped norm (2e-6 relative).
func TestGRNormHStreamOut(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 19}
	for _, c := range []struct{ T, S, D int }{{1, 4, 32}, {9, 4, 300}, {4, 1, 64}} {
		t.Run(fmt.Sprintf("T%d_S%d_D%d", c.T, c.S, c.D), func(t *testing.T) {
			H := r.fill(c.T*c.S*c.D, -3, 3)
			a := r.fill(c.T*c.S*c.D, -4, 4)
			hw := r.fill(c.S*c.D, -0.5, 0.5)
			Hn := make([]float32, len(H))
			if err := kernels.RMSNorm1pGrouped(Hn, H, c.T, c.S, c.D, hw, 1e-6); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, c.T*c.D)
			for tt := 0; tt < c.T; tt++ {
				for d := 0; d < c.D; d++ {
					var s float64
					for k := 0; k < c.S; k++ {
						i := (tt*c.S+k)*c.D + d
						s += float64(Hn[i]) / (1 + math.Exp(-float64(a[i])))
					}
					want[tt*c.D+d] = float32(s / float64(c.S))
				}
			}
			got := make([]float32, c.T*c.D)
			if err := b.GRNormHStreamOut(got, H, a, hw, c.T, c.S, c.D, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "x", got, want, 2e-6)
		})
	}
}

// TestEmbed: rows widened exactly (bitwise) and repeated into the streams.
func TestEmbed(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 23}
	const V, D, S = 50, 40, 4
	bits := make([]uint16, V*D)
	for i := range bits {
		bits[i] = uint16(r.next()) & 0x7bff // finite in both formats
	}
	tok := []int32{0, 49, 7, 7, 12}
	for _, dt := range []op.DType{op.BF16, op.F16} {
		m, err := kernels.NewMatrixU16(V, D, dt, bits)
		if err != nil {
			t.Fatal(err)
		}
		H := make([]float32, len(tok)*S*D)
		if err := b.Embed(H, tok, m, S); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, D)
		for i, id := range tok {
			if err := m.RowF32(row, int(id)); err != nil {
				t.Fatal(err)
			}
			for s := 0; s < S; s++ {
				checkBitwise(t, fmt.Sprintf("%v token %d stream %d", dt, i, s), H[(i*S+s)*D:(i*S+s+1)*D], row)
			}
		}
	}
}
