package metal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/op"
)

// moeSlots makes a slot table: rk rows in [0, rows) with about one empty slot in five.
func moeSlots(r *rng, T, K, rows int) ([]int32, []float32) {
	rk := make([]int32, T*K)
	for i := range rk {
		if r.next()%5 == 0 {
			rk[i] = -1
		} else {
			rk[i] = int32(r.next() % uint64(rows))
		}
	}
	return rk, r.fill(T*K, 0, 1)
}

var moeShapes = []struct{ T, K, D, rows int }{
	{1, 1, 1, 1}, {3, 10, 37, 30}, {17, 10, 256, 170}, {5, 33, 40, 165}, {65, 4, 300, 260},
}

// TestMoECombine: moe_comb and moe_comb_slots against kernels.MoECombine (tolerance 1e-6
// relative: fma vs separate rounding) and against each other (bitwise).
func TestMoECombine(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 7}
	for _, c := range moeShapes {
		t.Run(fmt.Sprintf("T%d_K%d_D%d", c.T, c.K, c.D), func(t *testing.T) {
			ye := r.fill(c.rows*c.D, -2, 2)
			rk, w := moeSlots(r, c.T, c.K, c.rows)
			want := make([]float32, c.T*c.D)
			if err := kernels.MoECombine(want, ye, c.rows, rk, w, c.T, c.K, c.D); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, c.T*c.D)
			if err := b.MoECombine(got, ye, c.rows, rk, w, c.T, c.K, c.D); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "out", got, want, 1e-6)
			if c.K <= 32 {
				if err := b.Prefer("moe_comb", "moe_comb"); err != nil {
					t.Fatal(err)
				}
				plain := make([]float32, c.T*c.D)
				if err := b.MoECombine(plain, ye, c.rows, rk, w, c.T, c.K, c.D); err != nil {
					t.Fatal(err)
				}
				_ = b.Prefer("moe_comb", "")
				checkBitwise(t, "moe_comb vs moe_comb_slots", plain, got)
			}
		})
	}
	t.Log(b.Variants())
}

// TestMoECombineGolden: the transformers golden at n = 2560, top-10 (tolerance 1e-6 relative).
func TestMoECombineGolden(t *testing.T) {
	g := golden(t, "op_attn_moe.safetensors", "moe.ye", "moe.rk", "moe.w", "moe.out")
	rk := make([]int32, len(g["moe.rk"]))
	for i, v := range g["moe.rk"] {
		rk[i] = int32(v)
	}
	const T, K, D = 32, 10, 2560
	b := testBackend(t)
	got := make([]float32, T*D)
	if err := b.MoECombine(got, g["moe.ye"], 320, rk, g["moe.w"], T, K, D); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "moe.out", got, g["moe.out"], 1e-6)
}

// TestGRApplyMoEC: gr_apply_moec and gr_norm_h_moec against the CPU ops (1e-6 relative), and the
// fused norm bitwise against apply + gr_norm_h4.
func TestGRApplyMoEC(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 11}
	for _, c := range []struct {
		T, S, K, D, rows int
		shared           bool
	}{{1, 4, 10, 32, 10, false}, {5, 4, 10, 300, 50, true}, {17, 1, 3, 64, 40, false}, {9, 4, 7, 257, 63, true}} {
		t.Run(fmt.Sprintf("T%d_S%d_K%d_D%d_shared%v", c.T, c.S, c.K, c.D, c.shared), func(t *testing.T) {
			H := r.fill(c.T*c.S*c.D, -3, 3)
			beta := r.fill(c.T*c.S, 0, 2)
			ye := r.fill(c.rows*c.D, -1, 1)
			rk, w := moeSlots(r, c.T, c.K, c.rows)
			norm := r.fill(c.S*c.D, -0.5, 0.5)
			var shared []float32
			if c.shared {
				shared = r.fill(c.T*c.D, -1, 1)
			}
			wantH := append([]float32(nil), H...)
			wantHn := make([]float32, len(H))
			if err := kernels.GRNormHMoEC(wantH, wantHn, beta, ye, c.rows, rk, w, shared, c.T, c.S, c.K, c.D, norm, 1e-6); err != nil {
				t.Fatal(err)
			}
			gotH := append([]float32(nil), H...)
			if err := b.GRApplyMoEC(gotH, beta, ye, c.rows, rk, w, shared, c.T, c.S, c.K, c.D); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "H", gotH, wantH, 1e-6)
			fusedH := append([]float32(nil), H...)
			fusedHn := make([]float32, len(H))
			if err := b.GRNormHMoEC(fusedH, fusedHn, beta, ye, c.rows, rk, w, shared, c.T, c.S, c.K, c.D, norm, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "Hn", fusedHn, wantHn, 2e-6)
			checkBitwise(t, "fused H vs gr_apply_moec", fusedH, gotH)
			if err := b.Prefer("gr_norm_h_moec", "gr_apply_moec+gr_norm_h4"); err != nil {
				t.Fatal(err)
			}
			splitH := append([]float32(nil), H...)
			splitHn := make([]float32, len(H))
			if err := b.GRNormHMoEC(splitH, splitHn, beta, ye, c.rows, rk, w, shared, c.T, c.S, c.K, c.D, norm, 1e-6); err != nil {
				t.Fatal(err)
			}
			_ = b.Prefer("gr_norm_h_moec", "")
			checkBitwise(t, "gr_norm_h_moec vs gr_apply_moec+gr_norm_h4: H", fusedH, splitH)
			checkBitwise(t, "gr_norm_h_moec vs gr_apply_moec+gr_norm_h4: Hn", fusedHn, splitHn)
		})
	}
}

// TestTopKRoute: moe_route against kernels.TopKRoute: identical expert ids, weights within 1e-6.
func TestTopKRoute(t *testing.T) {
	b := testBackend(t)
	r := &rng{s: 13}
	for _, c := range []struct {
		T, E, K int
		norm    bool
	}{{1, 12, 10, true}, {7, 512, 10, true}, {5, 300, 8, false}, {3, 40, 40, true}} {
		t.Run(fmt.Sprintf("T%d_E%d_K%d_norm%v", c.T, c.E, c.K, c.norm), func(t *testing.T) {
			logits := r.fill(c.T*c.E, -4, 4)
			wantW, wantI := make([]float32, c.T*c.K), make([]int32, c.T*c.K)
			if err := kernels.TopKRoute(wantW, wantI, logits, c.T, c.E, c.K, c.norm); err != nil {
				t.Fatal(err)
			}
			gotW, gotI := make([]float32, c.T*c.K), make([]int32, c.T*c.K)
			if err := b.TopKRoute(gotW, gotI, logits, c.T, c.E, c.K, c.norm); err != nil {
				t.Fatal(err)
			}
			for i := range wantI {
				if gotI[i] != wantI[i] {
					t.Fatalf("slot %d: expert %d, want %d", i, gotI[i], wantI[i])
				}
			}
			checkClose(t, "w", gotW, wantW, 1e-6)
		})
	}
}

// TestMoEErrors: bad input is rejected before any work with the kernels sentinels.
func TestMoEErrors(t *testing.T) {
	b := testBackend(t)
	out := make([]float32, 4)
	if err := b.MoECombine(out, make([]float32, 8), 2, []int32{0, 2}, []float32{1, 1}, 1, 2, 4); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("rk out of range: %v, want ErrArg", err)
	}
	if err := b.MoECombine(out, make([]float32, 7), 2, []int32{0, 1}, []float32{1, 1}, 1, 2, 4); !errors.Is(err, op.ErrShape) {
		t.Errorf("short ye: %v, want ErrShape", err)
	}
	if err := b.TopKRoute(make([]float32, 3), make([]int32, 3), make([]float32, 2), 1, 2, 3, true); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("K > E: %v, want ErrArg", err)
	}
	if err := b.Prefer("moe_comb", "gdn_scan"); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("Prefer of a foreign kernel: %v, want ErrArg", err)
	}
}
