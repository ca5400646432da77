package metal

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// TestPLEOpCases: PLEApply on the shared PLE case list against kernels.PLEApply, one call and
// the same stream in two chunks (Split) carrying the conv state: H within 2e-6 relative to
// max |H|, the carried state within 2e-6.
func TestPLEOpCases(t *testing.T) {
	b := testBackend(t)
	for i, c := range opcases.PLECases() {
		t.Run(fmt.Sprintf("T%d_S%d_D%d_%s_split%d", c.T, c.S, c.D, c.DType, c.Split), func(t *testing.T) {
			S, D, E := c.S, c.D, c.Heads*c.HeadDim
			seed := uint64(700 + 10*i)
			w := &kernels.PLEWeights{S: S, D: D, EmbedDim: E, HeadDim: c.HeadDim, Dilation: c.Dilation}
			w.Table = opMatrix(t, seed, c.Rows, c.HeadDim, c.DType, 1)
			w.Key = opMatrix(t, seed+1, S*D, E, c.DType, 0.2)
			w.Value = opMatrix(t, seed+2, D, E, c.DType, 0.2)
			w.NormKey = opcases.Floats(seed+3, S*D, 0.3)
			w.NormQuery = opcases.Floats(seed+4, S*D, 0.3)
			w.NormConv = opcases.Floats(seed+5, S*D, 0.3)
			w.ConvW = opcases.Floats(seed+6, S*D*c.ConvK, 0.5)
			H0 := opcases.Floats(seed+7, c.T*S*D, 1)
			ids := make([]int32, c.T*c.Heads)
			for j, v := range opcases.Uniform(seed+8, len(ids), 0, float32(c.Rows)) {
				ids[j] = min(int32(v), int32(c.Rows-1))
			}
			run := func(apply func([]float32, int, []int32, *op.PLEWeights, []float32, float32) error, split int) ([]float32, []float32) {
				H := slices.Clone(H0)
				st := make([]float32, w.ConvStateLen())
				C, h := S*D, c.Heads
				for lo := 0; lo < c.T; {
					hi := c.T
					if split > 0 && lo == 0 {
						hi = split
					}
					if err := apply(H[lo*C:hi*C], hi-lo, ids[lo*h:hi*h], w, st, 1e-6); err != nil {
						t.Fatal(err)
					}
					lo = hi
				}
				return H, st
			}
			wantH, wantS := run(kernels.PLEApply, 0)
			gotH, gotS := run(b.PLEApply, 0)
			checkClose(t, "H", gotH, wantH, 2e-6)
			checkClose(t, "state", gotS, wantS, 2e-6)
			if c.Split > 0 {
				gotH, gotS = run(b.PLEApply, c.Split)
				checkClose(t, "H (chunked)", gotH, wantH, 2e-6)
				checkClose(t, "state (chunked)", gotS, wantS, 2e-6)
			}
		})
	}
	t.Log(b.Variants())
}

// TestElementwise: ew_add, ew_sigmoid_mul, row_sigmoid_scale and swiglu against float64
// references (1e-6 relative per tensor).
func TestElementwise(t *testing.T) {
	b := testBackend(t)
	const rows, D = 37, 70
	h := opcases.Floats(1, rows*D, 2)
	u, v := opcases.Floats(2, rows*D, 2), opcases.Floats(3, rows*D, 2)
	s := opcases.Floats(4, rows, 3)
	sig := func(x float32) float64 { return 1 / (1 + expf64(-float64(x))) }
	want := make([]float32, len(h))
	for i := range h {
		want[i] = h[i] + (u[i] + v[i])
	}
	got := slices.Clone(h)
	if err := b.Add(got, u, v); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "add", got, want, 1e-6)
	for i := range h {
		want[i] = float32(float64(h[i]) * sig(u[i]))
	}
	got = slices.Clone(h)
	if err := b.SigmoidMul(got, u); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "sigmoid mul", got, want, 1e-6)
	for i := range h {
		want[i] = float32(float64(h[i]) * sig(s[i/D]))
	}
	got = slices.Clone(h)
	if err := b.RowSigmoidScale(got, s, rows, D); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "row sigmoid scale", got, want, 1e-6)
	gu := opcases.Floats(5, rows*2*D, 3)
	wantH, gotH := make([]float32, rows*D), make([]float32, rows*D)
	for r := 0; r < rows; r++ {
		for i := 0; i < D; i++ {
			g := gu[r*2*D+i]
			wantH[r*D+i] = float32(float64(g) * sig(g) * float64(gu[r*2*D+D+i]))
		}
	}
	if err := b.SwiGLU(gotH, gu, rows, D); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "swiglu", gotH, wantH, 1e-6)
	if err := b.Add(got, u[:3], nil); err == nil {
		t.Fatal("Add accepted mismatched lengths")
	}
}
