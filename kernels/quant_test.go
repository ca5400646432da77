package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// TestDequantKernels: every kernel set (AVX-512, AVX2, portable) dequantizes every bit width,
// group size and scale dtype bitwise as optest.Dequant (a bit-by-bit reader evaluating
// scale * q + bias in float64), on rows whose codes straddle words (3, 5, 6 bits) and on a run of
// rows starting past the first.
func TestDequantKernels(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		for _, bits := range op.QuantBits {
			for _, g := range op.QuantGroups {
				for _, sdt := range []op.DType{op.BF16, op.F16} {
					t.Run(fmt.Sprintf("b%d_g%d_%v", bits, g, sdt), func(t *testing.T) {
						const N, K = 7, 384
						m, want, err := optest.RandQuant(uint64(100*bits+g), N, K, bits, g, sdt, 0.5)
						if err != nil {
							t.Fatal(err)
						}
						got, err := dequantF32(m)
						if err != nil {
							t.Fatal(err)
						}
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("element %d (row %d col %d): %g, want %g", i, i/K, i%K, got[i], want[i])
							}
						}
						part := make([]float32, 3*K)
						dequantRows(part, m.Q, K, 2, 5, make([]float32, quantScratch(m.Q, K, 3)))
						for i, v := range part {
							if math.Float32bits(v) != math.Float32bits(want[2*K+i]) {
								t.Fatalf("rows 2..4, element %d: %g, want %g", i, v, want[2*K+i])
							}
						}
					})
				}
			}
		}
	})
}
