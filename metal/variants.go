package metal

import "slices"

// Alternative is one kernel Backend.Prefer accepts for an op: the ops' defaults and the variants
// that compute the same op another way. Alternatives returns the one list of them; the tests and
// the self-test read it.
type Alternative struct {
	// Op is the name Prefer takes ("attention", "gemm", ...); Kernel the kernel (family) name.
	Op, Kernel string
	// Default: the host picks this kernel without Prefer (for moe_comb: when K <= 32; for
	// attention and gemm: on a device without tensor-op defaults, see TensorOps).
	Default bool
	// Bitwise, when set, is the kernel whose bits this one gives; BitwiseEmulated says that the
	// equality holds on the emulator only (Metal 4 tensor ops leave their summation order to the
	// GPU: there only Tol holds). Without Bitwise the kernel agrees within Tol.
	Bitwise         string
	BitwiseEmulated bool
	// Tensor: the kernel uses Metal 4 tensor ops (compiled with MSL 4.0: on the emulator, and on
	// GPUs of MTLGPUFamilyMetal4).
	Tensor bool
	// Cases are the ops of op/optest whose cases exercise the kernel (an entry with a "/" is a
	// prefix of case names: "MatMul/q" the quantized MatMul cases); Tol overrides optest's
	// tolerances for it (keys as optest.Options.Tol; nil: the defaults scaled by OpTolScale).
	Cases []string
	Tol   map[string]float64
	// Ran is the prefix of the variant names its dispatches record (Backend.Variants).
	Ran string
}

// OpTolScale scales op/optest's default tolerances for the Metal kernels (float32 sums in other
// orders, float32 exp and norms where the CPU and the references use float64).
const OpTolScale = 4

// halfP is the attention output tolerance of the kernels that round the probabilities to half
// before the value product: o moves by up to 2^-11 max |v| (measured on the op cases and the
// golden: at most 2.9e-4 relative to max |o|).
var halfP = map[string]float64{"Attention.o": 1e-3}

var grCases = []string{"GRRead", "GRApplyMoEC", "GRWrite"}

// Alternatives lists every kernel Prefer accepts, per op, default first.
func Alternatives() []Alternative { return slices.Clone(alternatives) }

var alternatives = []Alternative{
	{Op: "attention", Kernel: attnFlashKernel, Default: true, Cases: []string{"Attention"}, Ran: "qsa_flash_f32"},
	{Op: "attention", Kernel: attnMMKernel, Cases: []string{"Attention"}, Ran: "qsa_attn_mm_f32"},
	{Op: "attention", Kernel: attnFlashPHKernel, Cases: []string{"Attention"}, Tol: halfP, Ran: "qsa_flash_ph_f32"},
	{Op: "attention", Kernel: attnTensorKernel, Tensor: true, Cases: []string{"Attention"}, Tol: halfP, Ran: "qsa_flash_tensor_f32"},
	{Op: "attention", Kernel: attnTensorPFKernel, Tensor: true, Bitwise: attnMMKernel, BitwiseEmulated: true,
		Cases: []string{"Attention"}, Ran: "qsa_attn_tensor_f32"},
	{Op: "gemm", Kernel: gemmSimdKernel, Default: true, Cases: []string{"MatMul", "MoEExperts"}, Ran: "gemm_w"},
	{Op: "gemm", Kernel: gemmTensorKernel, Tensor: true, Bitwise: gemmSimdKernel, BitwiseEmulated: true,
		Cases: []string{"MatMul", "MoEExperts"}, Ran: "gemm_tensor_w"},
	{Op: "gdn_scan", Kernel: "gdn_scan", Default: true, Cases: []string{"GDNScan"}, Ran: "gdn_scan_f32"},
	{Op: "gdn_scan", Kernel: gdnScanChunkKernel, Cases: []string{"GDNScan"}, Ran: "gdn_scan_chunk_f32"},
	{Op: "moe_comb", Kernel: "moe_comb_slots", Default: true, Cases: []string{"MoECombine"}, Ran: "moe_comb_slots_f32"},
	{Op: "moe_comb", Kernel: "moe_comb", Bitwise: "moe_comb_slots", Cases: []string{"MoECombine"}, Ran: "moe_comb_f32"},
	{Op: "gr_norm_h4", Kernel: "gr_norm_h4", Default: true, Cases: grCases, Ran: "gr_norm_h4_f32"},
	{Op: "gr_norm_h4", Kernel: "rms_norm", Bitwise: "gr_norm_h4", Cases: grCases, Ran: "rms_norm_f32_s"},
	{Op: "gr_norm_h_moec", Kernel: "gr_norm_h_moec", Default: true, Cases: []string{"GRApplyMoEC", "GRWrite"}, Ran: "gr_norm_h_moec_f32"},
	{Op: "gr_norm_h_moec", Kernel: "gr_apply_moec+gr_norm_h4", Bitwise: "gr_norm_h_moec",
		Cases: []string{"GRApplyMoEC", "GRWrite"}, Ran: "gr_norm_h4_f32"},
	{Op: "gr_stream_mean", Kernel: "gr_stream_mean", Default: true, Cases: []string{"GRRead"}, Ran: "gr_stream_mean_f32"},
	{Op: "gr_stream_mean", Kernel: "gr_norm_h_stream_out", Bitwise: "gr_stream_mean", Cases: []string{"GRRead"}, Ran: "gr_norm_h_stream_out_f32"},
	// The GEMMs of MLX affine weights (quant.go): qmm_affine by default (qmv_affine for up to 4
	// rows per weight), qmv_affine summing in another order, the tensor-op qmm_affine_tensor.
	{Op: "qmm", Kernel: qmmKernel, Default: true, Cases: quantCases, Ran: "qmm_affine_"},
	{Op: "qmm", Kernel: qmvKernel, Cases: quantCases, Ran: "qmv_affine_"},
	{Op: "qmm", Kernel: qmmTensorKernel, Tensor: true, Bitwise: qmmKernel, BitwiseEmulated: true, Cases: quantCases, Ran: "qmm_affine_tensor_"},
	// The GEMMs of FP8Block and QFloat weights (fpquant.go), the same three kernels.
	{Op: "qmm_fp", Kernel: qmmFPKernel, Default: true, Cases: fpCases, Ran: "qmm_fp_"},
	{Op: "qmm_fp", Kernel: qmvFPKernel, Cases: fpCases, Ran: "qmv_fp_"},
	{Op: "qmm_fp", Kernel: qmmFPTensorKernel, Tensor: true, Bitwise: qmmFPKernel, BitwiseEmulated: true, Cases: fpCases, Ran: "qmm_fp_tensor_"},
	// The GEMMs of GGML weights (ggml.go), the same three kernels.
	{Op: "qmm_gg", Kernel: qmmGGKernel, Default: true, Cases: ggCases, Ran: "qmm_gg_"},
	{Op: "qmm_gg", Kernel: qmvGGKernel, Cases: ggCases, Ran: "qmv_gg_"},
	{Op: "qmm_gg", Kernel: qmmGGTensorKernel, Tensor: true, Bitwise: qmmGGKernel, BitwiseEmulated: true, Cases: ggCases, Ran: "qmm_gg_tensor_"},
}

// quantCases are the quantized-weight cases of the GEMM ops (op/optest cases_quant.go: names
// "Op/q<bits>_...").
var quantCases = []string{"MatMul/q", "MoEExperts/q"}

// fpCases are the float-format cases of the GEMM ops (op/optest cases_fp.go: names
// "Op/fp8_<scales>/...", "Op/<mode>/...").
var fpCases = []string{"MatMul/fp8_", "MatMul/mxfp", "MatMul/nvfp", "MoEExperts/fp8_", "MoEExperts/mxfp", "MoEExperts/nvfp"}

// ggCases are the GGML cases of the GEMM ops (op/optest cases_ggml.go: names "Op/ggml_<type>/...").
var ggCases = []string{"MatMul/ggml_", "MoEExperts/ggml_"}

// alternativesOf returns the Alternatives of op (nil for an op without any).
func alternativesOf(opName string) []Alternative {
	var out []Alternative
	for _, a := range alternatives {
		if a.Op == opName {
			out = append(out, a)
		}
	}
	return out
}
