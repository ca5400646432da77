package metal

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// logSink collects a Backend's log messages.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) log(msg string) {
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
}

func (l *logSink) joined() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// tensorOpCalls runs an attention (HPG 12, D 256, dense), a BF16 MatMul and a MoEExperts on b
// through op.Exec (the path of the C ABI's and Python's op entry points).
func tensorOpCalls(t *testing.T, b *Backend) {
	t.Helper()
	c := attentionCase(t, "T3_pos200_hq24_hkv2_d256")
	q, k, v := c.Inputs()
	o, lse := make([]float32, len(q)), make([]float32, c.T*c.Hq)
	attention(t, b, o, lse, q, k, v, c.Params(), nil)
	wo, wl := optest.RefAttention(q, k, v, c.Params(), nil)
	checkClose64(t, "attention o", o, wo, 1e-3)
	checkClose64(t, "attention lse", lse, wl, 1e-5)
	x, y := optest.Floats(7, 5*40, 1), make([]float32, 5*33)
	w := randMatrix(t, 8, 33, 40, op.BF16, 0.3)
	a := op.MatMul{Y: f32(y), X: f32(x), T: 5, W: w}
	exec(t, b, func(p op.Pass) error { return p.MatMul(a) }, &a)
	checkClose64(t, "matmul y", y, optest.RefMatMul(x, 5, w), 2e-5)
}

// TestTensorOpsByCapability: on a device of MTLGPUFamilyApple10 with Metal 4 (here the emulator
// reporting them), attention and the GEMMs run the tensor-op kernels once their first-use
// self-checks passed, the decisions are logged and reported, and op.Exec (what the C ABI and
// Python op entry points run) uses them; on the plain emulator and on a GPU without those
// families the simdgroup kernels run, and Prefer refuses tensor-op kernels where Metal 4 is
// missing.
func TestTensorOpsByCapability(t *testing.T) {
	m5, err := New(newFakeDevice(t, mtl.FamilyApple10, mtl.FamilyMetal4, mtl.FamilyMetal3))
	if err != nil {
		t.Fatal(err)
	}
	var logs logSink
	m5.SetLog(logs.log)
	tensorOpCalls(t, m5)
	checkVariant(t, m5, "qsa_flash_tensor_f32_hpg12_tq1_bk32_bd32")
	checkVariant(t, m5, "gemm_tensor_w16_BF16_bm64_bn64")
	for _, want := range []string{"attention: qsa_flash_tensor (first-use self-check on this device: o within", "gemm: gemm_tensor (first-use self-check"} {
		if !strings.Contains(logs.joined(), want) {
			t.Errorf("log %q lacks %q", logs.joined(), want)
		}
		if !strings.Contains(m5.Kernels(), want) {
			t.Errorf("Kernels() %q lacks %q", m5.Kernels(), want)
		}
	}
	t.Log(logs.joined())

	m4, err := New(newFakeDevice(t, mtl.FamilyApple9, mtl.FamilyMetal3))
	if err != nil {
		t.Fatal(err)
	}
	tensorOpCalls(t, m4)
	checkVariant(t, m4, "qsa_flash_f32_hpg12_tq1_bk32_bd256")
	checkVariant(t, m4, "gemm_w16_BF16_bm32_bn32_bk16")
	if d := m4.TensorOps(); len(d) != 0 {
		t.Errorf("decisions on a GPU without tensor-op defaults: %v", d)
	}
	if err := m4.Prefer("attention", attnTensorKernel); !errors.Is(err, op.ErrUnsupported) {
		t.Errorf("Prefer of a tensor-op kernel without Metal 4: %v", err)
	}
	plain := testBackend(t)
	tensorOpCalls(t, plain)
	checkVariant(t, plain, "qsa_flash_f32_hpg12")
	if strings.Contains(strings.Join(plain.Variants(), ","), "tensor") {
		t.Errorf("the emulator chose tensor-op kernels by itself: %v", plain.Variants())
	}
}

// TestTensorOpsSelfCheckFails: a tensor-op attention that computes a wrong result (its source
// replaced by one that scales o by 0.99) fails its first-use self-check: attention keeps
// qsa_flash, says why in the log, and the GEMMs still use their tensor-op kernels.
func TestTensorOpsSelfCheckFails(t *testing.T) {
	b, err := New(newFakeDevice(t, mtl.FamilyApple10, mtl.FamilyMetal4))
	if err != nil {
		t.Fatal(err)
	}
	src, err := Source("attention_tensor.metal")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(src, "rowf[r] = 1.0f / l[i];", "rowf[r] = 0.99f / l[i];", 1)
	if bad == src {
		t.Fatal("the output normalisation of attention_tensor.metal moved: update the test")
	}
	if err := b.SetSource("attention_tensor.metal", bad); err != nil {
		t.Fatal(err)
	}
	var logs logSink
	b.SetLog(logs.log)
	tensorOpCalls(t, b)
	checkVariant(t, b, "qsa_flash_f32_hpg12_tq1_bk32_bd256")
	checkVariant(t, b, "gemm_tensor_w16_BF16")
	if got := logs.joined(); !strings.Contains(got, "attention: qsa_flash (the qsa_flash_tensor self-check failed: o differs from qsa_flash by") {
		t.Errorf("log %q does not give the failed self-check", got)
	}
	t.Log(logs.joined())
}

// TestTensorOpsSchedules: qsa_flash_tensor, qsa_attn_tensor (dense and with a selection) and
// gemm_tensor (dense and grouped) give the forward schedule's bits under the reversed and
// shuffled schedules (the shuffled run also draws other cooperative-tensor layouts) and in an
// AddressSanitizer build; threadgroup memory: 192 B static for the attention kernels, none for
// the GEMMs; at HPG 12 the attention kernels use 1,728 B dense and 5,824 B with a selection
// (at most 7,616 B: 4 threadgroups per core by memory). qsa_flash_tensor's lse has
// qsa_attn_mm's bits.
func TestTensorOpsSchedules(t *testing.T) {
	ac := optest.AttentionCases()[13] // T63_pos0, HPG 3, d 13
	q, k, v := ac.Inputs()
	ap := ac.Params()
	r := &rng{s: 61}
	const sT, sPos0, sHq, sHkv, sD = 5, 70, 24, 2, 72
	sq, sk, sv := r.fill(sT*sHq*sD, -2, 2), r.fill((sPos0+sT)*sHkv*sD, -2, 2), r.fill((sPos0+sT)*sHkv*sD, -1, 1)
	sel := randomSelection(r, sT, sPos0)
	sp := op.AttnParams{T: sT, Hq: sHq, Hkv: sHkv, D: sD, Pos0: sPos0, Scale: 1.0 / 8}
	runAttn := func(b *Backend) [][]float32 {
		o, lse := make([]float32, len(q)), make([]float32, ac.T*ac.Hq)
		attention(t, b, o, lse, q, k, v, ap, nil)
		so, slse := make([]float32, len(sq)), make([]float32, sT*sHq)
		attention(t, b, so, slse, sq, sk, sv, sp, sel)
		return [][]float32{o, lse, so, slse}
	}
	mm := randMatrix(t, 9, 70, 45, op.F16, 0.3)
	mx := optest.Floats(10, 67*45, 1)
	runGEMM := func(b *Backend) [][]float32 {
		y := make([]float32, 67*70)
		a := op.MatMul{Y: f32(y), X: f32(mx), T: 67, W: mm}
		exec(t, b, func(p op.Pass) error { return p.MatMul(a) }, &a)
		ye, rk := moeExperts(t, b)
		return [][]float32{y, ye, floats(rk)}
	}
	opts := append(schedules, emu.Options{Threads: 2, ASan: true})
	for _, c := range []struct {
		op, kernel, ran string
		run             func(*Backend) [][]float32
		static          int
	}{
		{"attention", attnTensorKernel, "qsa_flash_tensor_f32_hpg3_tq1", runAttn, 192},
		{"attention", attnTensorPFKernel, "qsa_attn_tensor_f32_hpg3_tq1", runAttn, 192},
		{"gemm", gemmTensorKernel, "gemm_tensor_w16_F16_bm64_bn64", runGEMM, 0},
	} {
		t.Run(c.kernel, func(t *testing.T) {
			prefer := func(b *Backend) {
				if err := b.Prefer(c.op, c.kernel); err != nil {
					t.Fatal(err)
				}
			}
			devs := compareSchedules(t, opts, prefer, func(b *Backend) [][]float32 {
				out := c.run(b)
				checkVariant(t, b, c.ran)
				return out
			})
			for _, dev := range devs {
				for _, st := range dev.Stats() {
					if strings.HasPrefix(st.Kernel, c.kernel) && st.StaticThreadgroupMemory != c.static {
						t.Errorf("%s: %d B of static threadgroup memory, want %d", st.Kernel, st.StaticThreadgroupMemory, c.static)
					}
				}
			}
		})
	}
	// Threadgroup memory at the real shape, and lse against qsa_attn_mm.
	g := golden(t, "op_attn_moe.safetensors", "attn.q", "attn.k", "attn.v")
	gp := op.AttnParams{T: 4, Hq: 24, Hkv: 2, D: 256, Pos0: 200, Scale: 1.0 / 16}
	gq := g["attn.q"][:4*24*256]
	gsel := randomSelection(r, 4, 200)
	lses := map[string][2][]float32{}
	for _, kernel := range []string{attnTensorKernel, attnMMKernel} {
		b := testBackend(t)
		if err := b.Prefer("attention", kernel); err != nil {
			t.Fatal(err)
		}
		o, lse, slse := make([]float32, len(gq)), make([]float32, 4*24), make([]float32, 4*24)
		attention(t, b, o, lse, gq, g["attn.k"], g["attn.v"], gp, nil)
		attention(t, b, o, slse, gq, g["attn.k"], g["attn.v"], gp, gsel)
		lses[kernel] = [2][]float32{lse, slse}
		if kernel != attnTensorKernel {
			continue
		}
		want := map[string]int{"qsa_flash_tensor_f32_hpg12_tq1_bk32_bd32": 1728, "qsa_flash_tensor_f32_hpg12_tq1_bk32_bd32_sparse": 5824}
		for _, st := range b.VariantStats() {
			if w, ok := want[st.Variant]; ok {
				if st.ThreadgroupBytes != w {
					t.Errorf("%s: %d B of threadgroup memory, want %d", st.Variant, st.ThreadgroupBytes, w)
				}
				delete(want, st.Variant)
			}
		}
		if len(want) != 0 {
			t.Errorf("variants did not run: %v (ran %v)", want, b.Variants())
		}
	}
	checkBitwise(t, "qsa_flash_tensor lse vs qsa_attn_mm", lses[attnTensorKernel][0], lses[attnMMKernel][0])
	checkBitwise(t, "qsa_flash_tensor sparse lse vs qsa_attn_mm", lses[attnTensorKernel][1], lses[attnMMKernel][1])
}

// attentionCase is the attention case of optest called name.
func attentionCase(t *testing.T, name string) optest.AttentionCase {
	t.Helper()
	for _, c := range optest.AttentionCases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no attention case %s", name)
	return optest.AttentionCase{}
}

// moeExperts runs MoEExperts on b for 9 tokens, top-3 of 5 F16 experts (D 40, I 24), a few
// slots empty: grouped GEMM tiles of several sizes.
func moeExperts(t *testing.T, b *Backend) ([]float32, []int32) {
	t.Helper()
	const T, K, E, D, I = 9, 3, 5, 40, 24
	ex := &op.Experts{E: E, D: D, I: I}
	for e := 0; e < E; e++ {
		ex.GateUp = append(ex.GateUp, randMatrix(t, uint64(30+e), 2*I, D, op.F16, 0.3))
		ex.Down = append(ex.Down, randMatrix(t, uint64(40+e), D, I, op.F16, 0.3))
	}
	idx := make([]int32, T*K)
	for i := range idx {
		idx[i] = int32((i*3 + i/K) % E)
		if i%7 == 3 {
			idx[i] = -1
		}
	}
	x := optest.Floats(11, T*D, 1)
	ye, rk := make([]float32, T*K*D), make([]int32, T*K)
	a := op.MoEExperts{YE: f32(ye), RK: i32(rk), X: f32(x), Idx: i32(idx), T: T, K: K, Ex: ex}
	exec(t, b, func(p op.Pass) error { return p.MoEExperts(a) }, &a)
	return ye, rk
}
