package strata

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// TestInspectFP8Releases: the header-only Qwen3-Next-80B-A3B-Instruct-FP8 and
// Qwen3.8-Flash-Next-FP8 (their config.json and tensor tables, assembled from the published
// layouts: modelgen.Releases) pass Inspect with every FP8 module found: Qwen3-Next's every Linear
// layer but lm_head, the routers, the shared-expert gates and in_proj_ba (73992 modules with BF16
// block scales), Qwen3.8's routed experts one by one (73728) and the n-gram table's 128 row blocks
// with their one scale, 185.5 GB in all as published; the resident weights are the FP8 codes and
// the bf16 rest.
func TestInspectFP8Releases(t *testing.T) {
	cases := []struct {
		name    string
		quant   string
		formats []QuantBytes
		bytes   [2]float64 // TensorBytes range
	}{
		{"qwen3-next-80b-a3b-instruct-fp8", "FP8 E4M3, blocks of 128 x 128, 407 modules_to_not_convert entries",
			[]QuantBytes{{Format: "FP8 E4M3 in 128 x 128 blocks, BF16 scales", Modules: 73992}}, [2]float64{81e9, 83e9}},
		{"qwen3.8-flash-next-fp8", "FP8 E4M3, blocks of 128 x 128, 903 modules_to_not_convert entries, 1 modules_to_convert",
			[]QuantBytes{{Format: "FP8 E4M3 in 128 x 128 blocks, BF16 scales", Modules: 73728}, {Format: "FP8 E4M3, one BF16 scale per tensor", Modules: 128}},
			[2]float64{185.4e9, 185.6e9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Inspect(headerOnly(t, tc.name, modelgen.HeaderOnly{}))
			if err != nil {
				t.Fatal(err)
			}
			for i := range in.Quantized {
				in.Quantized[i].Bytes = 0
			}
			if in.Quantization != tc.quant || !slices.Equal(in.Quantized, tc.formats) || in.MLX || in.FusedExperts || in.ShiftedGains {
				t.Fatalf("Inspect: %q %+v MLX %v fused %v shifted %v", in.Quantization, in.Quantized, in.MLX, in.FusedExperts, in.ShiftedGains)
			}
			if b := float64(in.TensorBytes); b < tc.bytes[0] || b > tc.bytes[1] {
				t.Errorf("%d tensor bytes, want %v", in.TensorBytes, tc.bytes)
			}
			if r := float64(in.ResidentBytes) / float64(in.UsedBytes); r < 1 || r > 1.01 {
				t.Errorf("resident %d bytes for %d bytes of tensors used", in.ResidentBytes, in.UsedBytes)
			}
			if !slices.ContainsFunc(in.WeightDTypes, func(d DTypeBytes) bool { return d.DType == "F8_E4M3" }) {
				t.Errorf("weight dtypes %+v", in.WeightDTypes)
			}
		})
	}
}

// TestFormatsResident: a loaded FP8 copy keeps its weights as FP8 in memory, views of the mapped
// file (the experts' E4M3 codes and BF16 block scales; the n-gram table's codes, with its one scale
// repeated over each row block's grid), and an mxfp4 conversion its codes and U8 scales; the
// other weights stay bf16.
func TestFormatsResident(t *testing.T) {
	root := t.TempDir()
	inside := func(m *Model, name string, p unsafe.Pointer, n uintptr) {
		t.Helper()
		tn, err := m.ck.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		lo := uintptr(unsafe.Pointer(&tn.Data[0]))
		if uintptr(p) < lo || uintptr(p)+n > lo+uintptr(len(tn.Data)) {
			t.Errorf("%s: the loaded weight is not a view of the file's bytes", name)
		}
	}
	write := func(name string) *Model {
		f, _ := modelgen.FormatFixtureNamed(name)
		dir, _, err := f.Write(root)
		if err != nil {
			t.Fatal(err)
		}
		return loadDir(t, dir)
	}

	m := write("qwen4exp-fmt-fp8")
	const pre = "model.language_model.layers.1."
	ex := m.layers[1].experts
	if !ex.Split() || ex.GateUp[0].DType != op.FP8Block || ex.Up[0].DType != op.FP8Block || ex.Down[0].DType != op.FP8Block {
		t.Fatalf("experts: split %v, %v %v", ex.Split(), ex.GateUp[0].DType, ex.Down[0].DType)
	}
	for e := 0; e < ex.E; e++ {
		for _, w := range []struct {
			proj string
			m    *op.Matrix
		}{{"gate_proj", ex.GateUp[e]}, {"up_proj", ex.Up[e]}, {"down_proj", ex.Down[e]}} {
			mod := pre + "mlp.experts." + strconv.Itoa(e) + "." + w.proj
			inside(m, mod+".weight", unsafe.Pointer(&w.m.FP8.Codes[0]), uintptr(len(w.m.FP8.Codes)))
			inside(m, mod+".weight_scale_inv", unsafe.Pointer(&w.m.FP8.Scales[0]), 2*uintptr(len(w.m.FP8.Scales)))
		}
	}
	ple := m.layers[1].PLE
	scale, err := m.ck.Tensor(pre + "ple.ple_embedding.ngram_embedding.weight_scale")
	if err != nil {
		t.Fatal(err)
	}
	s0 := uint16(scale.Data[0]) | uint16(scale.Data[1])<<8
	for k, part := range ple.Table {
		if part.DType != op.FP8Block || slices.ContainsFunc(part.FP8.Scales, func(s uint16) bool { return s != s0 }) {
			t.Fatalf("n-gram row block %d: %v, scales %v (want all %#x)", k, part.DType, part.FP8.Scales, s0)
		}
		inside(m, pre+"ple.ple_embedding.ngram_embedding.shard_"+strconv.Itoa(k)+".weight", unsafe.Pointer(&part.FP8.Codes[0]), uintptr(len(part.FP8.Codes)))
	}
	if d := m.layers[1].MoE.Router.DType; d != op.BF16 {
		t.Errorf("router %v, want BF16 (not converted)", d)
	}

	m = write("qwen4exp-fmt-mxfp4")
	const vpre = "language_model.model.layers.0."
	ex = m.layers[0].experts
	q := ex.GateUp[0]
	if q.DType != op.QFloat || q.QF.Mode != op.MXFP4 {
		t.Fatalf("experts %v", q.DType)
	}
	inside(m, vpre+"mlp.switch_mlp.gate_proj.weight", unsafe.Pointer(&q.QF.Codes[0]), 4*uintptr(len(q.QF.Codes)))
	inside(m, vpre+"mlp.switch_mlp.gate_proj.scales", unsafe.Pointer(&q.QF.Scales[0]), uintptr(len(q.QF.Scales)))
	if r := m.layers[0].MoE.Router; r.DType != op.QAffine || r.Q.Bits != 8 {
		t.Errorf("router %v, want 8-bit affine", r.DType)
	}
	for _, n := range m.ck.Names() {
		if strings.HasSuffix(n, ".scales") {
			if tn, _ := m.ck.Tensor(n); tn.DType != safetensors.U8 && tn.DType != safetensors.BF16 {
				t.Errorf("%s is %s", n, tn.DType)
			}
		}
	}
}
