package metal

import (
	"fmt"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// opMatrix returns a deterministic weight [n, k] of dtype ("F32", "BF16", "F16"), normal with
// standard deviation scale.
func opMatrix(t *testing.T, seed uint64, n, k int, dtype string, scale float32) *op.Matrix {
	t.Helper()
	bits, wide := opcases.Round16(opcases.Floats(seed, n*k, scale), dtype)
	var m *op.Matrix
	var err error
	switch dtype {
	case "F32":
		m, err = kernels.NewMatrixF32(n, k, wide)
	case "BF16":
		m, err = kernels.NewMatrixU16(n, k, op.BF16, bits)
	default:
		m, err = kernels.NewMatrixU16(n, k, op.F16, bits)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMatMulOpCases: gemm_w16 and gemm_w32 on the shared GEMM case list against kernels.MatMul,
// 2e-6 relative to max |y|.
func TestMatMulOpCases(t *testing.T) {
	b := testBackend(t)
	for i, c := range opcases.GEMMCases() {
		t.Run(fmt.Sprintf("T%d_N%d_K%d_%s", c.T, c.N, c.K, c.DType), func(t *testing.T) {
			w := opMatrix(t, uint64(100+i), c.N, c.K, c.DType, 0.1)
			x := opcases.Floats(uint64(200+i), c.T*c.K, 1)
			want, got := make([]float32, c.T*c.N), make([]float32, c.T*c.N)
			if err := kernels.MatMul(want, x, c.T, w); err != nil {
				t.Fatal(err)
			}
			if err := b.MatMul(got, x, c.T, w); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "y", got, want, 2e-6)
		})
	}
	t.Log(b.Variants())
}

// TestGRReadOpCases: the GatedResidual read (and its normed form from the CPU's Hn) against
// kernels.GRRead on the shared case list: x within 2e-6 relative to max |x|, beta within 1e-6.
func TestGRReadOpCases(t *testing.T) {
	b := testBackend(t)
	for i, c := range opcases.GRCases() {
		t.Run(fmt.Sprintf("T%d_S%d_D%d_R%d_inj%v_%s", c.T, c.S, c.D, c.R, c.Inject, c.DType), func(t *testing.T) {
			S, D, R, T := c.S, c.D, c.R, c.T
			seed := uint64(900 + 10*i)
			g := &kernels.GRWeights{S: S, D: D, R: R, Norm: opcases.Floats(seed, S*D, 0.3)}
			g.Down = opMatrix(t, seed+1, R, S*D, c.DType, 0.05)
			g.Up = opMatrix(t, seed+2, S*D, R, c.DType, 0.2)
			if c.Inject {
				g.Inj = opMatrix(t, seed+3, S, S*D, c.DType, 0.05)
			}
			H := opcases.Floats(seed+4, T*S*D, 2)
			var wb, gb []float32
			if c.Inject {
				wb, gb = make([]float32, T*S), make([]float32, T*S)
			}
			wx, gx := make([]float32, T*D), make([]float32, T*D)
			if err := kernels.GRRead(wx, wb, H, T, g, 1e-6); err != nil {
				t.Fatal(err)
			}
			if err := b.GRRead(gx, gb, H, T, g, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "x", gx, wx, 2e-6)
			if c.Inject {
				checkClose(t, "beta", gb, wb, 1e-6)
			}
			Hn := make([]float32, len(H))
			if err := kernels.RMSNorm1pGrouped(Hn, H, T, S, D, g.Norm, 1e-6); err != nil {
				t.Fatal(err)
			}
			if err := b.GRReadNormed(gx, gb, Hn, T, g); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "x (normed)", gx, wx, 2e-6)
		})
	}
}

// TestGRWrite: GRWrite and GRWriteNormH against the CPU ops at every dense T (H 1e-6, Hn 2e-6
// relative).
func TestGRWrite(t *testing.T) {
	b := testBackend(t)
	const S, D = 4, 256
	for _, T := range opcases.DenseT {
		t.Run(fmt.Sprintf("T%d", T), func(t *testing.T) {
			H0 := opcases.Floats(uint64(T), T*S*D, 2)
			beta := opcases.Uniform(uint64(T+1), T*S, 0, 2)
			u := opcases.Floats(uint64(T+2), T*D, 1)
			norm := opcases.Floats(uint64(T+3), S*D, 0.3)
			want, got := append([]float32(nil), H0...), append([]float32(nil), H0...)
			if err := kernels.GRWrite(want, beta, u, T, S, D); err != nil {
				t.Fatal(err)
			}
			if err := b.GRWrite(got, beta, u, T, S, D); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "H", got, want, 1e-6)
			want, got = append(want[:0], H0...), append(got[:0], H0...)
			wn, gn := make([]float32, len(H0)), make([]float32, len(H0))
			if err := kernels.GRWriteNormH(want, wn, beta, u, T, S, D, norm, 1e-6); err != nil {
				t.Fatal(err)
			}
			if err := b.GRWriteNormH(got, gn, beta, u, T, S, D, norm, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "H (fused)", got, want, 1e-6)
			checkClose(t, "Hn", gn, wn, 2e-6)
		})
	}
}
