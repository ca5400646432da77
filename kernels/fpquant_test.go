package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// sameBits reports whether two float32 are bitwise equal, any NaN equal to any other NaN (its
// payload after a multiply is the hardware's choice of operand).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// checkDecode compares the values of m that the kernels decode (all rows, and rows 2..4 alone)
// with want bitwise.
func checkDecode(t *testing.T, m *op.Matrix, want []float32) {
	t.Helper()
	got, err := dequantF32(m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("element %d (row %d col %d): %g (%#08x), want %g (%#08x)", i, i/m.K, i%m.K,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	K := m.K
	part := make([]float32, 3*K)
	unpackRows(part, m, 2, 5, make([]float32, packedScratch(m, 3)))
	for i, v := range part {
		if !sameBits(v, want[2*K+i]) {
			t.Fatalf("rows 2..4, element %d: %g, want %g", i, v, want[2*K+i])
		}
	}
	row := make([]float32, K)
	if err := m.Validate("checkDecode"); err != nil {
		t.Fatal(err)
	}
	rowF32(row, m, m.N-1, nil)
	for i, v := range row {
		if !sameBits(v, want[(m.N-1)*K+i]) {
			t.Fatalf("last row, element %d: %g, want %g", i, v, want[(m.N-1)*K+i])
		}
	}
}

// TestFP8Decode: every kernel set decodes FP8Block weights bitwise as optest.DequantFP8, with
// every E4M3 code in every block (the NaNs and subnormals included) and block scales that are
// subnormal, huge, infinite, NaN or negative, in BF16 and F32; K = 300 (a ragged block of 44:
// 32 in the vector kernels, 12 in the tail), 77 (all tail) and 256, N = 259 (a ragged block row).
func TestFP8Decode(t *testing.T) {
	f32s := []float32{1, 0.00123, -3.5, 1e-39, 3e38, float32(math.NaN()), float32(math.Inf(1)), 0x1p-140, 7}
	bf16s := []uint16{0x3f80, 0x0001, 0xff80, 0x7fc0, 0x3a83, 0xc2f7, 0x7f7f, 0x0080, 0x3c00}
	forEachKernel(t, func(t *testing.T) {
		for _, K := range []int{300, 77, 256} {
			for _, dt := range []op.DType{op.BF16, op.F32} {
				t.Run(fmt.Sprintf("K%d_%v", K, dt), func(t *testing.T) {
					const N = 259
					grid := op.FP8Grid(N, K)
					f := &op.BlockFP8{Codes: make([]uint8, N*K), ScaleDType: dt, Grid: grid}
					for i := range f.Codes {
						f.Codes[i] = uint8(i*37 + i/K)
					}
					n := grid[0] * grid[1]
					if dt == op.BF16 {
						for i := 0; i < n; i++ {
							f.Scales = append(f.Scales, bf16s[i%len(bf16s)])
						}
					} else {
						for i := 0; i < n; i++ {
							f.ScalesF32 = append(f.ScalesF32, f32s[i%len(f32s)])
						}
					}
					m, err := op.NewMatrixFP8Block(N, K, f)
					if err != nil {
						t.Fatal(err)
					}
					checkDecode(t, m, optest.DequantFP8(m))
				})
			}
		}
	})
}

// TestQFloatDecode: every kernel set decodes QFloat weights of each mode bitwise as
// optest.DequantQFloat, over random code words (every nibble and byte) and every scale bit
// pattern (E8M0 0 and 255, E4M3 NaN and negative scales included).
func TestQFloatDecode(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		for _, mode := range op.QuantModes {
			t.Run(mode.String(), func(t *testing.T) {
				const N, K = 33, 256
				r := rand.New(rand.NewPCG(uint64(mode), 3))
				q := &op.QuantFloat{Mode: mode, Codes: make([]uint32, N*K*mode.Bits()/32), Scales: make([]uint8, N*K/mode.Group())}
				for i := range q.Codes {
					q.Codes[i] = r.Uint32()
				}
				for i := range q.Scales {
					q.Scales[i] = uint8(i)
				}
				m, err := op.NewMatrixQFloat(N, K, q)
				if err != nil {
					t.Fatal(err)
				}
				checkDecode(t, m, optest.DequantQFloat(m))
			})
		}
	})
}

// TestFPMatMulKernelSets: MatMul over a float-format weight gives bitwise the same product with
// every kernel set (the decoded blocks are identical, and the SGEMM is the same).
func TestFPMatMulKernelSets(t *testing.T) {
	for _, mk := range []func() (*op.Matrix, []float32, error){
		func() (*op.Matrix, []float32, error) { return optest.RandFP8Block(1, 300, 1000, op.BF16, 0.1) },
		func() (*op.Matrix, []float32, error) { return optest.RandQFloat(2, 300, 1024, op.NVFP4, 0.1) },
	} {
		m, _, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		x := optest.Floats(3, 7*m.K, 1)
		var want []float32
		forEachKernel(t, func(t *testing.T) {
			y := make([]float32, 7*m.N)
			if err := matMulChecked(y, x, 7, m); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = y
				return
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v: y[%d] = %g, want %g (the first kernel set's)", m.DType, i, y[i], want[i])
				}
			}
		})
	}
}

// BenchmarkUnpack decodes 256 rows of a [2560, 2560] weight (one GEMM block of 655360 values)
// per format and kernel set: the float formats beside the bf16 widening and 4-bit QAffine
// decoding they compete with (Gvalues/s; compare within one run).
func BenchmarkUnpack(b *testing.B) {
	const N, K, rows = 2560, 2560, 256
	bf, _ := denseMatrix(b, 1, N, K, op.BF16, 0.05)
	qa, _, _ := optest.RandQuant(2, N, K, 4, 64, op.BF16, 0.05)
	f8, _, _ := optest.RandFP8Block(3, N, K, op.BF16, 0.05)
	mx4, _, _ := optest.RandQFloat(4, N, K, op.MXFP4, 0.05)
	nv4, _, _ := optest.RandQFloat(5, N, K, op.NVFP4, 0.05)
	mx8, _, _ := optest.RandQFloat(6, N, K, op.MXFP8, 0.05)
	dst := make([]float32, rows*K)
	for _, s := range kernelSets() {
		for _, m := range []struct {
			name string
			w    *op.Matrix
		}{{"bf16", bf}, {"q4_g64", qa}, {"fp8_BF16", f8}, {"mxfp4", mx4}, {"nvfp4", nv4}, {"mxfp8", mx8}} {
			b.Run(s.name+"/"+m.name, func(b *testing.B) {
				defer s.use()()
				sb := make([]float32, packedScratch(m.w, rows))
				for b.Loop() {
					if m.w.DType == op.BF16 {
						widenU16(dst, m.w.U16[:rows*K], op.BF16)
					} else {
						unpackRows(dst, m.w, 0, rows, sb)
					}
				}
				b.ReportMetric(float64(rows*K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gvalues/s")
			})
		}
	}
}

// BenchmarkMatMulFP runs y = x W^T at BenchmarkMatMul's real shapes with float-format weights
// beside bf16 ones (the peer: the same SGEMM on a widened block), in GFLOP/s.
func BenchmarkMatMulFP(b *testing.B) {
	shapes := []struct {
		name    string
		T, N, K int
	}{
		{"proj_T512_N2560_K2560", 512, 2560, 2560},
		{"expert_gateup_T10_N1280_K2560", 10, 1280, 2560},
		{"expert_down_T10_N2560_K640", 10, 2560, 640},
	}
	for _, s := range shapes {
		bf, _ := denseMatrix(b, 1, s.N, s.K, op.BF16, 0.05)
		f8, _, _ := optest.RandFP8Block(2, s.N, s.K, op.BF16, 0.05)
		mx4, _, _ := optest.RandQFloat(3, s.N, s.K, op.MXFP4, 0.05)
		nv4, _, _ := optest.RandQFloat(4, s.N, s.K, op.NVFP4, 0.05)
		x := optest.Floats(5, s.T*s.K, 1)
		y := make([]float32, s.T*s.N)
		for _, w := range []struct {
			name string
			m    *op.Matrix
		}{{"BF16", bf}, {"fp8_BF16", f8}, {"mxfp4", mx4}, {"nvfp4", nv4}} {
			b.Run(s.name+"_"+w.name, func(b *testing.B) {
				for b.Loop() {
					if err := matMulChecked(y, x, s.T, w.m); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(s.T)*float64(s.N)*float64(s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
