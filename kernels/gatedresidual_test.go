package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stratakernels/strata/op/optest"
)

type denseGR struct {
	g                    *op.GRWeights
	down, up, inj, normW []float32
}

func denseGRWeights(t *testing.T, c optest.GRCase, seed uint64) denseGR {
	S, D, R := c.S, c.D, c.R
	var r denseGR
	r.normW = optest.Floats(seed, S*D, 0.3)
	g := &op.GRWeights{S: S, D: D, R: R, Norm: r.normW}
	g.Down, r.down = denseMatrix(t, seed+1, R, S*D, c.DType, 0.05)
	g.Up, r.up = denseMatrix(t, seed+2, S*D, R, c.DType, 0.2)
	if c.Inject {
		g.Inj, r.inj = denseMatrix(t, seed+3, S, S*D, c.DType, 0.05)
	}
	r.g = g
	return r
}

func denseSigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestGRReadCases(t *testing.T) { forEachKernel(t, testGRReadCases) }

func testGRReadCases(t *testing.T) {
	const eps = 1e-6
	for i, c := range optest.GRCases() {
		name := fmt.Sprintf("T%d_S%d_D%d_R%d_inj%v_%s", c.T, c.S, c.D, c.R, c.Inject, c.DType)
		S, D, R, T := c.S, c.D, c.R, c.T
		gw := denseGRWeights(t, c, uint64(900+10*i))
		H := optest.Floats(uint64(950+i), T*S*D, 2)
		x := make([]float32, T*D)
		var beta []float32
		if c.Inject {
			beta = make([]float32, T*S)
		}
		if err := grRead(x, beta, H, T, gw.g, eps); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		hn := denseNormRef64(H, S, D, gw.normW, eps)
		z := denseLinear64(hn, T, gw.down, R, S*D)
		for j, v := range z {
			v /= float64(S)
			z[j] = v * denseSigmoid64(v)
		}
		a := denseLinear64(z, T, gw.up, S*D, R)
		wantX := make([]float64, T*D)
		for tk := 0; tk < T; tk++ {
			for d := 0; d < D; d++ {
				for s := 0; s < S; s++ {
					k := tk*S*D + s*D + d
					wantX[tk*D+d] += denseSigmoid64(a[k]) * hn[k] / float64(S)
				}
			}
		}
		denseCheck(t, name+" x", x, wantX, 1e-5)
		if c.Inject {
			b := denseLinear64(hn, T, gw.inj, S, S*D)
			for j := range b {
				b[j] = 2 * denseSigmoid64(b[j]/float64(S))
			}
			denseCheck(t, name+" beta", beta, b, 1e-5)
		}
		if T == 65 {
			denseSameAcrossProcs(t, name, func() []float32 {
				xx := make([]float32, T*D)
				bb := make([]float32, T*S)
				if err := grRead(xx, bb, H, T, gw.g, eps); err != nil {
					t.Fatal(err)
				}
				return append(xx, bb...)
			})
		}
	}
}

// TestGRFusedEqualUnfused checks the fused writes against their unfused compositions, bitwise,
// and GRWrite against a float64 reference.
func TestGRFusedEqualUnfused(t *testing.T) {
	const eps = 1e-6
	for _, T := range optest.DenseT {
		const S, D, K = 4, 256, 10
		rows := T*K + 5
		H0 := optest.Floats(uint64(T), T*S*D, 2)
		beta := optest.Uniform(uint64(T+1), T*S, 0, 2)
		ye := optest.Floats(uint64(T+2), rows*D, 1)
		rk := optest.Slots(uint64(T+3), T, K, rows, 7)
		w := optest.Uniform(uint64(T+4), T*K, 0, 0.3)
		shared := optest.Floats(uint64(T+5), T*D, 0.5)
		norm := optest.Floats(uint64(T+6), S*D, 0.3)
		for _, sh := range [][]float32{shared, nil} {
			name := fmt.Sprintf("T%d shared=%v", T, sh != nil)
			// unfused
			Hu := append([]float32(nil), H0...)
			u := make([]float32, T*D)
			if err := moeCombine(u, ye, rows, rk, w, T, K, D); err != nil {
				t.Fatal(err)
			}
			for j := range sh {
				u[j] += sh[j]
			}
			if err := grWrite(Hu, beta, u, T, S, D); err != nil {
				t.Fatal(err)
			}
			Hnu := make([]float32, T*S*D)
			if err := rmsNorm1pGrouped(Hnu, Hu, T, S, D, norm, eps); err != nil {
				t.Fatal(err)
			}
			// GRWrite against float64
			want := denseTo64(H0)
			for tk := 0; tk < T; tk++ {
				for s := 0; s < S; s++ {
					for d := 0; d < D; d++ {
						want[tk*S*D+s*D+d] += float64(beta[tk*S+s]) * float64(u[tk*D+d])
					}
				}
			}
			denseCheck(t, name+" GRWrite", Hu, want, 1e-6)
			// fused
			Ha := append([]float32(nil), H0...)
			if err := grApplyMoEC(Ha, beta, ye, rows, rk, w, sh, T, S, K, D); err != nil {
				t.Fatal(err)
			}
			denseBitwise(t, name+" GRApplyMoEC", Ha, Hu)
			Hb := append([]float32(nil), H0...)
			Hnb := make([]float32, T*S*D)
			if err := grNormHMoEC(Hb, Hnb, beta, ye, rows, rk, w, sh, T, S, K, D, norm, eps); err != nil {
				t.Fatal(err)
			}
			denseBitwise(t, name+" GRNormHMoEC H", Hb, Hu)
			denseBitwise(t, name+" GRNormHMoEC Hn", Hnb, Hnu)
			Hc := append([]float32(nil), H0...)
			Hnc := make([]float32, T*S*D)
			if err := grWriteNormH(Hc, Hnc, beta, u, T, S, D, norm, eps); err != nil {
				t.Fatal(err)
			}
			denseBitwise(t, name+" GRWriteNormH H", Hc, Hu)
			denseBitwise(t, name+" GRWriteNormH Hn", Hnc, Hnu)
		}
	}
}

func denseBitwise(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %g, want %g (bitwise)", name, i, got[i], want[i])
		}
	}
}

func TestGRErrors(t *testing.T) {
	c := optest.GRCase{T: 2, S: 2, D: 8, R: 3, Inject: true, DType: op.F32}
	gw := denseGRWeights(t, c, 1)
	H := make([]float32, 2*16)
	x := make([]float32, 16)
	beta := make([]float32, 4)
	ye := make([]float32, 3*8)
	bad := *gw.g
	bad.Up = gw.g.Down
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"nil weights", op.ErrInvalidArgument, func() error { return grRead(x, beta, H, 2, nil, 1e-6) }},
		{"bad up", op.ErrShape, func() error { return grRead(x, beta, H, 2, &bad, 1e-6) }},
		{"short H", op.ErrShape, func() error { return grRead(x, beta, H[:31], 2, gw.g, 1e-6) }},
		{"beta missing", op.ErrInvalidArgument, func() error { return grRead(x, nil, H, 2, gw.g, 1e-6) }},
		{"write u", op.ErrShape, func() error { return grWrite(H, beta, x[:15], 2, 2, 8) }},
		{"write beta", op.ErrShape, func() error { return grWrite(H, beta[:3], x, 2, 2, 8) }},
		{"moec rk", op.ErrInvalidArgument, func() error {
			return grApplyMoEC(H, beta, ye, 3, []int32{0, 3, 1, -1}, make([]float32, 4), nil, 2, 2, 2, 8)
		}},
		{"moec shared", op.ErrShape, func() error {
			return grApplyMoEC(H, beta, ye, 3, []int32{0, 2, 1, -1}, make([]float32, 4), x[:3], 2, 2, 2, 8)
		}},
		{"normh Hn", op.ErrShape, func() error {
			return grNormHMoEC(H, H[:8], beta, ye, 3, []int32{0, 2, 1, -1}, make([]float32, 4), nil, 2, 2, 2, 8, gw.normW, 1e-6)
		}},
		{"writenorm norm", op.ErrShape, func() error {
			return grWriteNormH(H, make([]float32, 32), beta, x, 2, 2, 8, gw.normW[:8], 1e-6)
		}},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}

// BenchmarkGatedResidual runs the GatedResidual read and the fused MoE-combine write + next
// norm at the real shapes (S 4, D 2560, R 320, top-10) for T = 512, weights op.F32.
func BenchmarkGatedResidual(b *testing.B) {
	const T, S, D, R, K = 512, 4, 2560, 320, 10
	down, _ := denseMatrix(b, 1, R, S*D, op.F32, 0.02)
	up, _ := denseMatrix(b, 2, S*D, R, op.F32, 0.05)
	inj, _ := denseMatrix(b, 3, S, S*D, op.F32, 0.02)
	g := &op.GRWeights{S: S, D: D, R: R, Norm: optest.Floats(4, S*D, 0.1), Down: down, Up: up, Inj: inj}
	H := optest.Floats(5, T*S*D, 1)
	x, beta, Hn := make([]float32, T*D), make([]float32, T*S), make([]float32, T*S*D)
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if err := grRead(x, beta, H, T, g, 1e-6); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2*T*(2*R*S*D+S*S*D)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	ye := optest.Floats(6, T*K*D, 1)
	rk := make([]int32, T*K)
	for i := range rk {
		rk[i] = int32(i)
	}
	w := optest.Floats(7, T*K, 0.1)
	b.Run("norm_h_moec", func(b *testing.B) {
		for b.Loop() {
			if err := grNormHMoEC(H, Hn, beta, ye, T*K, rk, w, x, T, S, K, D, g.Norm, 1e-6); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(4 * T * (K*D + 3*S*D))
	})
}

// TestGRMatMulBitwise: the GatedResidual's row-tiled products against MatMul's column blocks,
// bitwise, for the read's three shapes (Down [R, S*D], Up [S*D, R], Inj [S, S*D]), T across
// one, several and a partial row block, every weight dtype and the compute modes that take
// them, on 1 to 3 cores.
func TestGRMatMulBitwise(t *testing.T) {
	const S, D, R = 4, 256, 96
	for _, mode := range []op.ComputeMode{op.ComputeF32, op.ComputeInt8, op.ComputeBF16} {
		store := Backend{}.NewWeights(op.WeightOptions{Compute: mode})
		for _, dt := range []string{"f32", "bf16", "f16", "mlx4"} {
			for i, shape := range [][2]int{{R, S * D}, {S * D, R}, {S, S * D}} {
				N, K := shape[0], shape[1]
				var m *op.Matrix
				var err error
				switch dt {
				case "f32":
					m, _, err = optest.RandMatrix(uint64(31+i), N, K, op.F32, 0.05)
				case "bf16":
					m, _, err = optest.RandMatrix(uint64(31+i), N, K, op.BF16, 0.05)
				case "f16":
					m, _, err = optest.RandMatrix(uint64(31+i), N, K, op.F16, 0.05)
				case "mlx4":
					m, _, err = optest.RandQuant(uint64(31+i), N, K, 4, 32, op.BF16, 0.05)
				}
				if err != nil {
					t.Fatal(err)
				}
				w, err := store.Prepare(m)
				if err != nil {
					t.Fatal(err)
				}
				for _, T := range []int{1, grRowBlock, 2*grRowBlock + 37} {
					name := fmt.Sprintf("%v %s [%d, %d] T %d", mode, dt, N, K, T)
					x := optest.Floats(uint64(40+T), T*K, 1)
					want := make([]float32, T*N)
					if err := matMul(want, x, T, w); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					denseSameAcrossProcs(t, name, func() []float32 {
						y := optest.Floats(5, T*N, 1)
						if err := grMatMul(y, x, T, w); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						sameSlice(t, name, y, want)
						return y
					})
				}
			}
		}
	}
}

// BenchmarkGRProducts: the GatedResidual read's three products at the qwen4exp slice's shapes
// (Down [R, S*D], Up [S*D, R], Inj [S, S*D]; S 4, D 2560, R 320; bf16 weights widened per
// call, as the slice stores them) at T = 512 and 2048: the row tiles (new, grMatMul) against
// MatMul's column blocks (old), interleaved call by call (the order alternating). Reports ms
// and cpu-ms per read's three products for each, and new/old.
func BenchmarkGRProducts(b *testing.B) {
	const S, D, R = 4, 2560, 320
	var ws []*op.Matrix
	for i, sh := range [][2]int{{R, S * D}, {S * D, R}, {S, S * D}} {
		m, _, err := optest.RandMatrix(uint64(61+i), sh[0], sh[1], op.BF16, 0.02)
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, m)
	}
	for _, T := range []int{512, 2048} {
		Hn := optest.Floats(7, T*S*D, 1)
		z, a, beta := make([]float32, T*R), make([]float32, T*S*D), make([]float32, T*S)
		b.Run(fmt.Sprintf("T%d", T), func(b *testing.B) {
			var wall, cpu [2]float64
			step := func(v int) {
				mm := func(y, x []float32, w *op.Matrix) {
					var err error
					if v == 0 {
						err = matMul(y, x, T, w)
					} else {
						err = grMatMul(y, x, T, w)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				t0, c0 := time.Now(), processCPU()
				mm(z, Hn, ws[0])
				mm(a, z, ws[1])
				mm(beta, Hn, ws[2])
				wall[v] += time.Since(t0).Seconds()
				cpu[v] += processCPU() - c0
			}
			i := 0
			for b.Loop() {
				step(i % 2)
				step(1 - i%2)
				i++
			}
			n := float64(b.N)
			flops := 2 * float64(T) * (2*R*S*D + S*S*D)
			b.ReportMetric(1e3*wall[0]/n, "old-ms")
			b.ReportMetric(1e3*wall[1]/n, "new-ms")
			b.ReportMetric(1e3*cpu[0]/n, "old-cpu-ms")
			b.ReportMetric(1e3*cpu[1]/n, "new-cpu-ms")
			b.ReportMetric(flops*n/wall[0]/1e9, "old-GFLOP/s")
			b.ReportMetric(flops*n/wall[1]/1e9, "new-GFLOP/s")
			b.ReportMetric(wall[1]/wall[0], "new/old")
		})
	}
}
