package metal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// The pipelines the backend can build: every kernel of the kernel files with the function-constant
// specialisations the host code asks for. Backend.pipeline refuses any other, so the table is
// the complete list by construction (and a test checks it against the kernels the sources
// define); the self-test builds every entry.

// tensorFiles are the kernel files that use Metal 4 tensor ops (compiled with MSL 4.0).
var tensorFiles = map[string]bool{"attention_tensor.metal": true, "gemm_tensor.metal": true, "quant_tensor.metal": true,
	"fpquant_tensor.metal": true, "ggml_tensor.metal": true}

// CompileOptions returns the options kernel file is compiled with: MSL 3.1 (macOS 14; 4.0 for
// the tensor-op files: macOS 26), safe math and precise float32 functions. Safe math keeps what
// the kernels rely on: qsa_scores' isnan guard, the -1e30 sentinels of the online softmaxes and
// their exp underflow to 0, and the written order of every sum (the variants that give another
// kernel's bits need it: relaxed mode may reassociate one of them and not the other). The
// emulator compiles with the same options (emu maps them onto clang's flags).
func CompileOptions(file string) mtl.CompileOptions {
	o := mtl.CompileOptions{LanguageVersion: mtl.Language3_1, MathMode: mtl.MathSafe, PreciseFunctions: true}
	if tensorFiles[file] {
		o.LanguageVersion = mtl.Language4_0
	}
	return o
}

// constNames names the function constants (by index) of each kernel file that declares some.
var constNames = map[string][]string{
	"gemm.metal":             {"gemm_bf16"},
	"gemm_tensor.metal":      {"gemm_bf16"},
	"attention.metal":        {"qsa_sparse"},
	"attention_tensor.metal": {"qsa_sparse"},
	"gdn.metal":              {"gdn_act_silu"},
	"quant.metal":            {"q_bf16", "q_bits", "q_group"},
	"quant_tensor.metal":     {"q_bf16", "q_bits", "q_group"},
	// The float formats' files are compiled after quant.metal: their constant follows its three.
	"fpquant.metal":        {"q_bf16", "q_bits", "q_group", "fp_format"},
	"fpquant_tensor.metal": {"q_bf16", "q_bits", "q_group", "fp_format"},
	// So are the ggml block types' files (in their own libraries: the index is free there too).
	"ggml.metal":        {"q_bf16", "q_bits", "q_group", "gg_type"},
	"ggml_tensor.metal": {"q_bf16", "q_bits", "q_group", "gg_type"},
}

// pipelineEntry is one kernel of a file; bool0 lists the values of the file's bool function
// constant 0 the host builds it with (nil: built without constants); quant marks the kernels of
// MLX affine weights, built with constants 0 (bool: BF16 scales, else F16), 1 (int: bits, one
// of quantBits) and 2 (int: group size, one of quantGroups); fp the kernels of the float
// formats, built with constant 3 (int: fp_format, an index of fpFormats); gg the kernels of the
// ggml block types, built with constant 3 (int: gg_type, a ggml type id of op.GGMLBlockTypes).
type pipelineEntry struct {
	file, kernel  string
	bool0         []bool
	quant, fp, gg bool
}

// The bit widths and group sizes of the quantized kernels' specialisations (op.Quant.Validate).
var (
	quantBits   = []int{2, 3, 4, 5, 6, 8}
	quantGroups = []int{32, 64, 128}
)

var (
	noConst  []bool
	bothBool = []bool{false, true}
)

// pipelineTable lists every kernel the host code dispatches, per file.
var pipelineTable = func() []pipelineEntry {
	var t []pipelineEntry
	add := func(file string, bool0 []bool, kernels ...string) {
		for _, k := range kernels {
			t = append(t, pipelineEntry{file: file, kernel: k, bool0: bool0})
		}
	}
	add("gdn.metal", noConst, "gdn_pre", "gdn_conv_update", "gdn_norm_qk", "gdn_scan", gdnScanChunkKernel)
	add("gdn.metal", bothBool, "gdn_post")
	add("gemm.metal", bothBool, "gemm_w16", "gemm_w16_grouped")
	add("gemm.metal", []bool{false}, "gemm_w32", "gemm_w32_grouped")
	add("gemm.metal", []bool{true}, "swiglu", "swiglu_split")
	add("gemm_tensor.metal", bothBool, "gemm_tensor_w16", "gemm_tensor_w16_grouped")
	add("gemm_tensor.metal", []bool{false}, "gemm_tensor_w32", "gemm_tensor_w32_grouped")
	add("norm.metal", noConst, "rms_norm", "gr_norm_h4")
	add("embed.metal", noConst, "embed")
	add("moe.metal", noConst, "moe_route", "moe_comb", "moe_comb_slots", "gr_apply_moec", "gr_norm_h_moec",
		"moe_slot_count", "moe_slot_plan", "moe_slot_scatter", "moe_slot_gather")
	add("gatedresidual.metal", noConst, "gr_stream_mean", "gr_norm_h_stream_out")
	add("elementwise.metal", noConst, "ew_act", "ew_add", "ew_sigmoid_mul", "row_sigmoid_scale", "copy_f32")
	add("ple.metal", noConst, "ple_gather", "ple_gate", "ple_conv", "ple_state")
	add("qsa.metal", noConst, "qsa_prep", "qsa_index_prep", "qsa_block_keys", "qsa_scores", "qsa_select")
	add("attention.metal", bothBool, attnFlashKernel, attnFlashPHKernel, attnMMKernel)
	add("attention_tensor.metal", bothBool, attnTensorKernel, attnTensorPFKernel)
	for _, k := range []string{"qmm_affine", "qmm_affine_grouped", "qmv_affine", "qmv_affine_grouped", "qgather_affine"} {
		t = append(t, pipelineEntry{file: "quant.metal", kernel: k, quant: true})
	}
	for _, k := range []string{"qmm_affine_tensor", "qmm_affine_tensor_grouped"} {
		t = append(t, pipelineEntry{file: "quant_tensor.metal", kernel: k, quant: true})
	}
	for _, k := range []string{"qmm_fp", "qmm_fp_grouped", "qmv_fp", "qmv_fp_grouped", "qgather_fp"} {
		t = append(t, pipelineEntry{file: "fpquant.metal", kernel: k, fp: true})
	}
	for _, k := range []string{"qmm_fp_tensor", "qmm_fp_tensor_grouped"} {
		t = append(t, pipelineEntry{file: "fpquant_tensor.metal", kernel: k, fp: true})
	}
	for _, k := range []string{"qmm_gg", "qmm_gg_grouped", "qmv_gg", "qmv_gg_grouped", "qgather_gg"} {
		t = append(t, pipelineEntry{file: "ggml.metal", kernel: k, gg: true})
	}
	for _, k := range []string{"qmm_gg_tensor", "qmm_gg_tensor_grouped"} {
		t = append(t, pipelineEntry{file: "ggml_tensor.metal", kernel: k, gg: true})
	}
	return t
}()

// PipelineSpec is one pipeline the backend can build: a kernel of a kernel file specialised
// with one set of function constants.
type PipelineSpec struct {
	File, Kernel string
	Constants    []mtl.Constant
	// Tensor: the file uses Metal 4 tensor ops (it compiles where Backend.TensorOpsCompile).
	Tensor bool
}

// Name is the kernel with its constants, e.g. "gemm_w16[gemm_bf16=1]" or "qsa_prep".
func (s PipelineSpec) Name() string {
	if len(s.Constants) == 0 {
		return s.Kernel
	}
	parts := make([]string, len(s.Constants))
	for i, c := range s.Constants {
		name := fmt.Sprintf("c%d", c.Index)
		if n := constNames[s.File]; c.Index < len(n) {
			name = n[c.Index]
		}
		parts[i] = fmt.Sprintf("%s=%d", name, c.Value)
	}
	return s.Kernel + "[" + strings.Join(parts, ",") + "]"
}

// Pipelines lists every pipeline the backend can build, in the table's order (file by file).
func Pipelines() []PipelineSpec {
	var out []PipelineSpec
	for _, e := range pipelineTable {
		if e.quant {
			for _, bf := range bothBool {
				for _, bits := range quantBits {
					for _, g := range quantGroups {
						out = append(out, PipelineSpec{File: e.file, Kernel: e.kernel, Tensor: tensorFiles[e.file],
							Constants: []mtl.Constant{boolConst(0, bf), intConst(1, bits), intConst(2, g)}})
					}
				}
			}
			continue
		}
		if e.fp {
			for f := range fpFormats {
				out = append(out, PipelineSpec{File: e.file, Kernel: e.kernel, Tensor: tensorFiles[e.file],
					Constants: []mtl.Constant{intConst(3, f)}})
			}
			continue
		}
		if e.gg {
			for _, typ := range op.GGMLBlockTypes {
				out = append(out, PipelineSpec{File: e.file, Kernel: e.kernel, Tensor: tensorFiles[e.file],
					Constants: []mtl.Constant{intConst(3, int(typ))}})
			}
			continue
		}
		if e.bool0 == nil {
			out = append(out, PipelineSpec{File: e.file, Kernel: e.kernel, Tensor: tensorFiles[e.file]})
			continue
		}
		for _, v := range e.bool0 {
			out = append(out, PipelineSpec{File: e.file, Kernel: e.kernel, Constants: []mtl.Constant{boolConst(0, v)}, Tensor: tensorFiles[e.file]})
		}
	}
	return out
}

// checkPipeline refuses a pipeline that is not in pipelineTable (a kernel added to the host code
// without its table entry), wrapping op.ErrBackend.
func checkPipeline(file, fn string, constants []mtl.Constant) error {
	for _, e := range pipelineTable {
		if e.file != file || e.kernel != fn {
			continue
		}
		if e.quant {
			if len(constants) == 3 && constants[0].Index == 0 && constants[0].Type == mtl.Bool &&
				constants[1].Index == 1 && constants[1].Type == mtl.Int && slices.Contains(quantBits, int(constants[1].Value)) &&
				constants[2].Index == 2 && constants[2].Type == mtl.Int && slices.Contains(quantGroups, int(constants[2].Value)) {
				return nil
			}
			continue
		}
		if e.fp {
			if len(constants) == 1 && constants[0].Index == 3 && constants[0].Type == mtl.Int && int(constants[0].Value) < len(fpFormats) {
				return nil
			}
			continue
		}
		if e.gg {
			if len(constants) == 1 && constants[0].Index == 3 && constants[0].Type == mtl.Int &&
				slices.Contains(op.GGMLBlockTypes, op.GGMLType(constants[0].Value)) {
				return nil
			}
			continue
		}
		if e.bool0 == nil && len(constants) == 0 {
			return nil
		}
		if len(constants) == 1 && constants[0].Index == 0 && constants[0].Type == mtl.Bool {
			for _, v := range e.bool0 {
				if (constants[0].Value != 0) == v {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("metal: %w: pipeline %s of %s with constants %v is not in the pipeline table (pipelines.go)", op.ErrBackend, fn, file, constants)
}

// Compile compiles kernel file with the device's compiler (once per Backend; the ops compile
// their files on first use). Errors wrap op.ErrBackend and mtl.ErrCompile with the compiler's
// diagnostics.
func (b *Backend) Compile(file string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := b.library(file)
	return err
}

// BuildPipeline builds the pipeline of spec (compiling its file first if needed) and returns
// the bytes of its kernel's own threadgroup variables (MTLComputePipelineState's
// staticThreadgroupMemoryLength). Errors wrap op.ErrBackend and the device's error.
func (b *Backend) BuildPipeline(spec PipelineSpec) (staticThreadgroupBytes int, err error) {
	p, err := b.pipeline(spec.File, spec.Kernel, spec.Constants)
	if err != nil {
		return 0, err
	}
	return p.StaticThreadgroupMemoryLength(), nil
}

// PipelineLimits builds the pipeline of spec (as BuildPipeline) and returns the limits the device
// gave it: MaxTotalThreadsPerThreadgroup (Apple's compiler lowers it below 1024 for kernels that
// need many registers; the emulator reports the kernel's declared limit, or
// emu.Options.MaxThreadsPerThreadgroup) and ThreadExecutionWidth. Errors as BuildPipeline's.
func (b *Backend) PipelineLimits(spec PipelineSpec) (maxThreads, simdWidth int, err error) {
	p, err := b.pipeline(spec.File, spec.Kernel, spec.Constants)
	if err != nil {
		return 0, 0, err
	}
	return p.MaxTotalThreadsPerThreadgroup(), p.ThreadExecutionWidth(), nil
}
