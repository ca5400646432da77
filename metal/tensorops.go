package metal

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/x448/float16"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Metal 4 tensor-op kernels as the default on the GPUs with matrix units behind them.
//
// On a device of MTLGPUFamilyApple10 that supports Metal 4 (M5), attention runs qsa_flash_tensor
// and the GEMMs (dense and grouped experts) gemm_tensor instead of the simdgroup kernels, once a
// first-use self-check on the device passed: one small case of the op run with both kernels in
// passes of their own, the tensor-op result within the kernel's tolerance of the simdgroup one
// (a GPU that miscompiles or misexecutes the tensor ops keeps the simdgroup kernel). The decision
// is logged (Backend.SetLog) and reported (TensorOps, Kernels). Until a Mac run has confirmed the
// tensor-op kernels, this check is what stands between them and a wrong result. Everywhere else
// (older GPUs, the emulator, which reports no Apple family) they run only when asked for with
// Prefer.

const (
	// attnTensorKernel is qsa_flash on tensor ops, P in half (attention_tensor.metal).
	attnTensorKernel = "qsa_flash_tensor"
	// attnTensorPFKernel is qsa_flash_tensor with P in float: qsa_attn_mm's arithmetic in its
	// order (bitwise equal to it on the emulator).
	attnTensorPFKernel = "qsa_attn_tensor"
	// gemmSimdKernel names the simdgroup GEMMs of gemm.metal (gemm_w16, gemm_w32 and their
	// grouped forms) as an alternative of op "gemm"; gemmTensorKernel those of gemm_tensor.metal.
	gemmSimdKernel   = "gemm"
	gemmTensorKernel = "gemm_tensor"
)

// tensorDefault is one op whose default kernel is a tensor-op kernel on M5-class GPUs: the
// simdgroup kernel it replaces and the self-check comparing the two.
type tensorDefault struct {
	kernel, reference string
	check             func(b *Backend, kernel, reference string) (string, error)
}

var tensorDefaults = map[string]tensorDefault{
	"attention": {attnTensorKernel, attnFlashKernel, checkAttention},
	"gemm":      {gemmTensorKernel, gemmSimdKernel, checkGEMM},
}

// tensorChoice is the decision for one op, made once per Backend.
type tensorChoice struct {
	once sync.Once
	use  bool
	note string
}

// TensorOpsCompile reports whether the device compiles Metal 4 tensor ops: the emulator does; a
// GPU when it supports MTLGPUFamilyMetal4 (mtl.FamilyReporter).
func (b *Backend) TensorOpsCompile() bool {
	if b.name == "emu" {
		return true
	}
	f, ok := b.dev.(mtl.FamilyReporter)
	return ok && f.SupportsFamily(mtl.FamilyMetal4)
}

// TensorOpsDefault reports whether the tensor-op kernels are candidates for the default on this
// device: a GPU of MTLGPUFamilyApple10 with Metal 4 (the first-use self-check decides).
func (b *Backend) TensorOpsDefault() bool {
	f, ok := b.dev.(mtl.FamilyReporter)
	return ok && f.SupportsFamily(mtl.FamilyApple10) && f.SupportsFamily(mtl.FamilyMetal4)
}

// TensorDefault returns the tensor-op kernel op runs by default on this device, running its
// first-use self-check the first time; false where there is none (not an M5-class GPU, an op
// without one) or the self-check failed.
func (b *Backend) TensorDefault(opName string) (string, bool) { return b.tensorDefault(opName) }

// tensorDefault returns op's tensor-op kernel when it is the default on this device, running the
// first-use self-check the first time.
func (b *Backend) tensorDefault(opName string) (string, bool) {
	d, ok := tensorDefaults[opName]
	if !ok || !b.TensorOpsDefault() {
		return "", false
	}
	b.mu.Lock()
	c, ok := b.tensor[opName]
	if !ok {
		c = &tensorChoice{}
		b.tensor[opName] = c
	}
	b.mu.Unlock()
	c.once.Do(func() {
		note, err := d.check(b, d.kernel, d.reference)
		if err != nil {
			c.note = fmt.Sprintf("%s: %s (the %s self-check failed: %v)", opName, d.reference, d.kernel, err)
		} else {
			c.use = true
			c.note = fmt.Sprintf("%s: %s (first-use self-check on this device: %s)", opName, d.kernel, note)
		}
		b.logf("metal: %s", c.note)
	})
	if c.use {
		return d.kernel, true
	}
	return "", false
}

// TensorOps returns the tensor-op decisions made so far ("attention: qsa_flash_tensor
// (first-use self-check ...)"), sorted by op; empty on a device where they are not candidates.
func (b *Backend) TensorOps() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, c := range b.tensor {
		if c.note != "" {
			out = append(out, c.note)
		}
	}
	sort.Strings(out)
	return out
}

// CheckTensorOps runs the first-use self-check of every op with a tensor-op default now (on a
// device where they are candidates) and returns the decisions (TensorOps).
func (b *Backend) CheckTensorOps() []string {
	for opName := range tensorDefaults {
		b.tensorDefault(opName)
	}
	return b.TensorOps()
}

// forced is b whose Passes run the kernels of force whatever Prefer and the capability defaults
// say (the self-checks run both kernels of a comparison this way, leaving Prefer alone).
type forced struct {
	*Backend
	force map[string]string
}

func (f forced) Begin(w op.Weights, s op.Scratch) (op.Pass, error) {
	j, err := f.Backend.begin(w, s)
	if err != nil {
		return nil, err
	}
	j.force = f.force
	return j, nil
}

// checkRand fills n values uniform in [-scale, scale) from seed (splitmix64).
func checkRand(seed uint64, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		seed += 0x9E3779B97F4A7C15
		z := seed
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		x[i] = scale * (2*float32(z>>40)/(1<<24) - 1)
	}
	return x
}

// checkRel is max |a - b| / max |b|, infinite where a is not finite.
func checkRel(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		x := float64(a[i])
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return math.Inf(1)
		}
		d = max(d, math.Abs(x-float64(b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// checkAttention compares kernel with reference on one small case at the real head shape
// (T = 3 at pos0 = 40, HPG 12, D 256), dense and with a selection, o within 1e-3 (P in half)
// and lse within 1e-5 relative.
func checkAttention(b *Backend, kernel, reference string) (string, error) {
	const T, pos0, Hq, Hkv, D = 3, 40, 12, 1, 256
	q := checkRand(1, T*Hq*D, 2)
	k, v := checkRand(2, (pos0+T)*Hkv*D, 2), checkRand(3, (pos0+T)*Hkv*D, 1)
	p := op.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: D, Pos0: pos0, Scale: 1.0 / 16}
	sel := &op.Selection{T: T, Dense: []bool{true, false, false}, Offsets: []int32{0, 0}}
	var toks []int32
	for t := 1; t < T; t++ {
		for pos := t; pos <= pos0+t; pos += 3 {
			toks = append(toks, int32(pos))
		}
		sel.Offsets = append(sel.Offsets, int32(len(toks)))
	}
	run := func(kern string) ([][]float32, error) {
		o, lse := make([]float32, T*Hq*D), make([]float32, T*Hq)
		so, slse := make([]float32, T*Hq*D), make([]float32, T*Hq)
		dense := op.Attention{O: op.HostF32(o), LSE: op.HostF32(lse), Q: op.HostF32(q), K: op.HostF32(k), V: op.HostF32(v), P: p}
		sparse := op.Attention{O: op.HostF32(so), LSE: op.HostF32(slse), Q: op.HostF32(q), K: op.HostF32(k), V: op.HostF32(v), P: p,
			Sel: sel, Tok: op.HostI32(toks)}
		_, err := op.Exec(forced{b, map[string]string{"attention": kern}}, func(ps op.Pass) error {
			if err := ps.Attention(dense); err != nil {
				return err
			}
			return ps.Attention(sparse)
		}, &dense, &sparse)
		return [][]float32{o, lse, so, slse}, err
	}
	got, err := run(kernel)
	if err != nil {
		return "", err
	}
	want, err := run(reference)
	if err != nil {
		return "", fmt.Errorf("reference %s: %w", reference, err)
	}
	eo, el := max(checkRel(got[0], want[0]), checkRel(got[2], want[2])), max(checkRel(got[1], want[1]), checkRel(got[3], want[3]))
	if !(eo <= 1e-3 && el <= 1e-5) {
		return "", fmt.Errorf("o differs from %s by %.3g, lse by %.3g relative (limits 1e-3, 1e-5)", reference, eo, el)
	}
	return fmt.Sprintf("o within %.2g, lse within %.2g of %s", eo, el, reference), nil
}

// checkGEMM compares kernel with reference on a dense BF16 GEMM (T = 70, N = 72, K = 136, edge
// tiles in every dimension) and a grouped one (MoEExperts: 6 tokens, top-2 of 3 F16 experts, D 64,
// I 40), within 1e-5 relative.
func checkGEMM(b *Backend, kernel, reference string) (string, error) {
	const T, N, K = 70, 72, 136
	w := &op.Matrix{N: N, K: K, DType: op.BF16, U16: make([]uint16, N*K)}
	for i, f := range checkRand(4, N*K, 0.1) {
		w.U16[i] = uint16(math.Float32bits(f) >> 16)
	}
	x := checkRand(5, T*K, 1)
	const mT, mK, E, D, I = 6, 2, 3, 64, 40
	ex := &op.Experts{E: E, D: D, I: I}
	for e := 0; e < E; e++ {
		gu := &op.Matrix{N: 2 * I, K: D, DType: op.F16, U16: make([]uint16, 2*I*D)}
		dn := &op.Matrix{N: D, K: I, DType: op.F16, U16: make([]uint16, D*I)}
		for i, f := range checkRand(uint64(10+e), len(gu.U16), 0.2) {
			gu.U16[i] = float16.Fromfloat32(f).Bits()
		}
		for i, f := range checkRand(uint64(20+e), len(dn.U16), 0.2) {
			dn.U16[i] = float16.Fromfloat32(f).Bits()
		}
		ex.GateUp, ex.Down = append(ex.GateUp, gu), append(ex.Down, dn)
	}
	mx := checkRand(6, mT*D, 1)
	idx := make([]int32, mT*mK)
	for i := range idx {
		idx[i] = int32((i/mK + i%mK) % E)
	}
	run := func(kern string) ([][]float32, []int32, error) {
		y, ye, rk := make([]float32, T*N), make([]float32, mT*mK*D), make([]int32, mT*mK)
		mm := op.MatMul{Y: op.HostF32(y), X: op.HostF32(x), T: T, W: w}
		me := op.MoEExperts{YE: op.HostF32(ye), RK: op.HostI32(rk), X: op.HostF32(mx), Idx: op.HostI32(idx), T: mT, K: mK, Ex: ex}
		_, err := op.Exec(forced{b, map[string]string{"gemm": kern}}, func(ps op.Pass) error {
			if err := ps.MatMul(mm); err != nil {
				return err
			}
			return ps.MoEExperts(me)
		}, &mm, &me)
		return [][]float32{y, ye}, rk, err
	}
	got, grk, err := run(kernel)
	if err != nil {
		return "", err
	}
	want, wrk, err := run(reference)
	if err != nil {
		return "", fmt.Errorf("reference %s: %w", reference, err)
	}
	for i := range wrk {
		if grk[i] != wrk[i] {
			return "", fmt.Errorf("slot row %d is %d, %s gives %d", i, grk[i], reference, wrk[i])
		}
	}
	ey, ee := checkRel(got[0], want[0]), checkRel(got[1], want[1])
	if !(ey <= 1e-5 && ee <= 1e-5) {
		return "", fmt.Errorf("y differs from %s by %.3g, the experts' rows by %.3g relative (limit 1e-5)", reference, ey, ee)
	}
	return fmt.Sprintf("y within %.2g, expert rows within %.2g of %s", ey, ee, reference), nil
}
