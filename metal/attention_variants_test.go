package metal

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal/emu"
	"github.com/stratakernels/strata/op"
)

// attnVariantTols are the variants of op attention with their tolerances against the CPU op
// (relative to max |o|, max |lse|). qsa_attn_mm sums in float like qsa_flash: the tolerances of
// TestAttentionOpCases (measured: o 4.2e-7, lse 8.8e-8 at most). qsa_flash_ph rounds the
// probabilities to half (relative error <= 2^-11 each): measured on o 2.9e-4 at most over the op
// cases (T63_pos200, d 13), 1.5e-4 on the sparse cases, 1.0e-4 on the golden; tolerance 1e-3.
// Its lse is float and must have qsa_flash's bits.
var attnVariantTols = []struct {
	kernel, prefix string
	o, lse         float64
}{
	{attnMMKernel, "qsa_attn_mm_f32_hpg", 5e-6, 2e-6},
	{attnFlashPHKernel, "qsa_flash_ph_f32_hpg", 1e-3, 2e-6},
}

func attnParams(T, Pos0, Hq, Hkv, D int) op.AttnParams {
	return op.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: D, Pos0: Pos0, Scale: float32(1 / math.Sqrt(float64(D)))}
}

// runAttnVariant runs kernel on b (after Prefer) and checks the variant record names it.
func runAttnVariant(t *testing.T, b *Backend, kernel, prefix string, q, k, v []float32, p op.AttnParams, sel *op.Selection) (o, lse []float32) {
	t.Helper()
	if err := b.Prefer("attention", kernel); err != nil {
		t.Fatal(err)
	}
	b.ResetVariants()
	o, lse = make([]float32, len(q)), make([]float32, p.T*p.Hq)
	if err := b.Attention(o, lse, q, k, v, p, sel); err != nil {
		t.Fatal(err)
	}
	vs := b.Variants()
	if len(vs) != 1 || !strings.HasPrefix(vs[0], prefix) || strings.Contains(vs[0], "_sparse x") != (sel != nil) {
		t.Fatalf("variants %v, want one %s* dispatch (sparse %v)", vs, prefix, sel != nil)
	}
	return o, lse
}

// TestAttentionVariantsOpCases runs qsa_attn_mm and qsa_flash_ph on the shared attention case
// list against kernels.Attention, and requires qsa_flash_ph's lse to have qsa_flash's bits.
func TestAttentionVariantsOpCases(t *testing.T) {
	b := testBackend(t)
	for _, vt := range attnVariantTols {
		for _, c := range opcases.AttentionCases() {
			t.Run(vt.kernel+"/"+c.Name, func(t *testing.T) {
				q, k, v := c.Inputs()
				p := attnParams(c.T, c.Pos0, c.Hq, c.Hkv, c.D)
				wo, wl := make([]float32, len(q)), make([]float32, c.T*c.Hq)
				if err := kernels.Attention(wo, wl, q, k, v, p, nil); err != nil {
					t.Fatal(err)
				}
				o, lse := runAttnVariant(t, b, vt.kernel, vt.prefix, q, k, v, p, nil)
				checkClose(t, "o", o, wo, vt.o)
				checkClose(t, "lse", lse, wl, vt.lse)
				if vt.kernel == attnFlashPHKernel {
					_, fl := runAttnVariant(t, b, attnFlashKernel, "qsa_flash_f32_hpg", q, k, v, p, nil)
					checkBitwise(t, "lse vs qsa_flash", lse, fl)
				}
			})
		}
	}
}

// TestAttentionVariantsSparse: both variants with QSA selections (function constant qsa_sparse)
// against the CPU op.
func TestAttentionVariantsSparse(t *testing.T) {
	b := testBackend(t)
	for _, vt := range attnVariantTols {
		r := &rng{s: 31}
		for _, c := range []struct{ T, Pos0, Hq, Hkv, D int }{{5, 0, 6, 2, 13}, {16, 60, 24, 2, 64}, {9, 200, 12, 1, 256}, {4, 90, 2, 2, 256}} {
			n := c.Pos0 + c.T
			q, k, v := r.fill(c.T*c.Hq*c.D, -2, 2), r.fill(n*c.Hkv*c.D, -2, 2), r.fill(n*c.Hkv*c.D, -1, 1)
			sel := randomSelection(r, c.T, c.Pos0)
			t.Run(fmt.Sprintf("%s/T%d_pos%d_hq%d_hkv%d_d%d", vt.kernel, c.T, c.Pos0, c.Hq, c.Hkv, c.D), func(t *testing.T) {
				p := attnParams(c.T, c.Pos0, c.Hq, c.Hkv, c.D)
				wo, wl := make([]float32, len(q)), make([]float32, c.T*c.Hq)
				if err := kernels.Attention(wo, wl, q, k, v, p, sel); err != nil {
					t.Fatal(err)
				}
				o, lse := runAttnVariant(t, b, vt.kernel, vt.prefix, q, k, v, p, sel)
				checkClose(t, "o", o, wo, vt.o)
				checkClose(t, "lse", lse, wl, vt.lse)
			})
		}
	}
}

// TestAttentionVariantsGolden: both variants on the transformers golden (96 tokens at pos0 =
// 200, 24 q / 2 kv heads x 256); qsa_attn_mm within the op-case tolerances (measured: o 1.5e-6,
// lse 7.4e-8), qsa_flash_ph o within 1e-3 (measured 1.0e-4).
func TestAttentionVariantsGolden(t *testing.T) {
	g := golden(t, "op_attn_moe.safetensors", "attn.q", "attn.k", "attn.v", "attn.o", "attn.lse")
	p := op.AttnParams{T: 96, Hq: 24, Hkv: 2, D: 256, Pos0: 200, Scale: 1.0 / 16}
	b := testBackend(t)
	for _, c := range []struct {
		kernel, prefix string
		o, lse         float64
	}{{attnMMKernel, "qsa_attn_mm_f32_hpg12_tq1_bm16_bk32_bd64 ", 5e-6, 2e-6}, {attnFlashPHKernel, "qsa_flash_ph_f32_hpg12_tq1_bk32_bd256 ", 1e-3, 1e-6}} {
		t.Run(c.kernel, func(t *testing.T) {
			o, lse := runAttnVariant(t, b, c.kernel, c.prefix, g["attn.q"], g["attn.k"], g["attn.v"], p, nil)
			checkClose(t, "attn.o", o, g["attn.o"], c.o)
			checkClose(t, "attn.lse", lse, g["attn.lse"], c.lse)
		})
	}
}

// TestAttentionVariantsSchedules runs both variants (dense and sparse) under the emulator's
// reversed and shuffled lane schedules and under ASan, requires the forward schedule's bits, and
// checks their static threadgroup memory: qsa_attn_mm 11,008 B (+ 16 KiB of queries at D 256),
// qsa_flash_ph 9,344 B (+ rows*D*4 B of queries).
func TestAttentionVariantsSchedules(t *testing.T) {
	ac := opcases.AttentionCases()[13] // T63_pos0, HPG 3, d 13
	q, k, v := ac.Inputs()
	ap := attnParams(ac.T, ac.Pos0, ac.Hq, ac.Hkv, ac.D)
	r := &rng{s: 43}
	const sT, sPos0, sHq, sHkv, sD = 6, 70, 4, 1, 72
	sq, sk, sv := r.fill(sT*sHq*sD, -2, 2), r.fill((sPos0+sT)*sHkv*sD, -2, 2), r.fill((sPos0+sT)*sHkv*sD, -1, 1)
	sel := randomSelection(r, sT, sPos0)
	sp := attnParams(sT, sPos0, sHq, sHkv, sD)
	run := func(b *Backend, kernel, prefix string) [][]float32 {
		o, lse := runAttnVariant(t, b, kernel, prefix, q, k, v, ap, nil)
		so, slse := runAttnVariant(t, b, kernel, prefix, sq, sk, sv, sp, sel)
		return [][]float32{o, lse, so, slse}
	}
	fwd := testBackend(t)
	static := map[string]int{attnMMKernel: 11008, attnFlashPHKernel: 9344}
	for _, vt := range attnVariantTols {
		want := run(fwd, vt.kernel, vt.prefix)
		for _, o := range []emu.Options{
			{Threads: 2, Schedule: emu.Reversed},
			{Threads: 2, Schedule: emu.Shuffled, Seed: 9},
			{Threads: 2, ASan: true},
		} {
			dev, err := emu.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := New(dev)
			got := run(b, vt.kernel, vt.prefix)
			name := vt.kernel + " " + o.Schedule.String()
			if o.ASan {
				name = vt.kernel + " asan"
			}
			for i := range want {
				checkBitwise(t, name, got[i], want[i])
			}
			tgMem := -1
			for _, st := range dev.(*emu.Device).Stats() {
				if st.Kernel == vt.kernel {
					tgMem = st.StaticThreadgroupMemory
				}
			}
			if tgMem != static[vt.kernel] {
				t.Errorf("%s: %d B of static threadgroup memory, want %d", name, tgMem, static[vt.kernel])
			}
			dev.Close()
		}
	}
}
