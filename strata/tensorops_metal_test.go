package strata

import (
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// m5Device is the emulator reporting the GPU families of an M5 (MTLGPUFamilyApple10 with Metal
// 4, and Apple7 to Apple9 below it): the Metal backend then picks its tensor-op kernels by capability, as on that GPU.
type m5Device struct{ mtl.Device }

func (m5Device) SupportsFamily(f mtl.GPUFamily) bool {
	return (f >= mtl.FamilyApple7 && f <= mtl.FamilyApple10) || f == mtl.FamilyMetal4 || f == mtl.FamilyMetal3
}

// TestTensorOpsByCapability: on a Metal device with M5's families the op entry points (what the
// C ABI's strata_attention and Python's strata.attention call) and a whole prefill run the
// tensor-op kernels after their first-use self-checks, which the device log reports; the tiny
// qwen4exp model stays within the transformers goldens' tolerances (goldenRun).
func TestTensorOpsByCapability(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	dev, err := Open(Options{Backend: "metal", MetalDevice: m5Device{emuDevice(t)}, Log: func(_ LogLevel, msg string) {
		mu.Lock()
		logs = append(logs, msg)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	const T, pos0, Hq, Hkv, D = 3, 5, 4, 2, 16
	q, k, v := make([]float32, T*Hq*D), make([]float32, (pos0+T)*Hkv*D), make([]float32, (pos0+T)*Hkv*D)
	for i := range k {
		k[i], v[i] = float32(i%7)/7-0.5, float32(i%5)/5-0.4
	}
	for i := range q {
		q[i] = float32(i%11)/11 - 0.5
	}
	o := make([]float32, len(q))
	a := op.Attention{O: op.HostF32(o), Q: op.HostF32(q), K: op.HostF32(k), V: op.HostF32(v),
		P: op.AttnParams{T: T, Hq: Hq, Hkv: Hkv, D: D, Pos0: pos0, Scale: 0.25}}
	if err := dev.Attention(a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dev.Kernels(), "qsa_flash_tensor_f32_hpg2") {
		t.Errorf("the attention entry point did not run qsa_flash_tensor: %s", dev.Kernels())
	}
	m, err := LoadModel(dev, testdata("qwen4exp-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{MaxContext: 128})
	if err != nil {
		t.Fatal(err)
	}
	goldenRun(t, "qwen4exp", m, s, openGoldens(t, "q4_model_goldens.safetensors"), "a")
	for _, want := range []string{"qsa_flash_tensor_f32", "gemm_tensor_w16_BF16", "gemm_tensor_w16_grouped"} {
		if !strings.Contains(dev.Kernels(), want) {
			t.Errorf("the prefill did not run %s: %s", want, dev.Kernels())
		}
	}
	mu.Lock()
	joined := strings.Join(logs, "\n")
	mu.Unlock()
	for _, want := range []string{"attention: qsa_flash_tensor (first-use self-check", "gemm: gemm_tensor (first-use self-check"} {
		if !strings.Contains(joined, want) {
			t.Errorf("device log lacks %q:\n%s", want, joined)
		}
	}
}
