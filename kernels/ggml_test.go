package kernels

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// TestGGMLDecode: every kernel set decodes every GGML block type bitwise as optest.DequantGGML
// (ggml's values), on the generated weights and on blocks of random bytes (half scales that are
// subnormal, huge, infinite or NaN; every code and sub-block scale; MXFP4 exponents 0 to 255),
// all rows, a run of rows and a single row; the kernels line names the set that ran.
func TestGGMLDecode(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		want := map[bool]string{false: "generic Go", true: "Go unpacking, avx2 scaling"}[useAsm]
		if useAsm && useAsm512 {
			want = "Go unpacking, avx512 scaling"
		}
		if GGMLKernel() != want || !strings.Contains(Backend{}.Kernels(), "GGML dequantization "+want) {
			t.Fatalf("GGMLKernel %q, Kernels %q, want %q", GGMLKernel(), Backend{}.Kernels(), want)
		}
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

// BenchmarkGGMLDecode times the decoding of a [64, 4096] weight of each type (the kernel set
// the CPU runs by default), in elements per nanosecond through b.SetBytes(elements).
func BenchmarkGGMLDecode(b *testing.B) {
	const N, K = 64, 4096
	dst := make([]float32, N*K)
	for _, gt := range op.GGMLBlockTypes {
		m, _, err := optest.RandGGML(1, N, K, gt, 0.1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(gt.String(), func(b *testing.B) {
			b.SetBytes(N * K)
			for b.Loop() {
				unpackRows(dst, m, 0, N, nil)
			}
		})
	}
}
