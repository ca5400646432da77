package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// TestGGMLDecode: every kernel set decodes every GGML block type bitwise as optest.DequantGGML
// (ggml's values), on the generated weights and on blocks of random bytes (half scales that are
// subnormal, huge, infinite or NaN; every code and sub-block scale; MXFP4 exponents 0 to 255),
// all rows, a run of rows and a single row.
func TestGGMLDecode(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		for _, gt := range op.GGMLBlockTypes {
			t.Run(gt.String(), func(t *testing.T) {
				m, want, err := optest.RandGGML(uint64(gt), 7, 512, gt, 0.1)
				if err != nil {
					t.Fatal(err)
				}
				checkDecode(t, m, want)
				r := rand.New(rand.NewPCG(uint64(gt), 1))
				raw := make([]byte, len(m.GG.Data))
				for i := range raw {
					raw[i] = byte(r.UintN(256))
				}
				rm, err := op.NewMatrixGGML(7, 512, &op.GGMLBlocks{Type: gt, Data: raw})
				if err != nil {
					t.Fatal(err)
				}
				checkDecode(t, rm, optest.DequantGGML(rm))
			})
		}
	})
}
