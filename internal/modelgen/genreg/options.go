package genreg

import "github.com/stratakernels/strata/internal/safetensors"

// MLXOptions are the arguments of one MLX conversion (modelgen.ConvertMLX), as mlx_lm.convert's
// and mlx_vlm.convert's.
type MLXOptions struct {
	// Quantize (-q) quantizes in Mode with Bits (--q-bits, 0: the mode's default) and Group
	// (--q-group-size, 0: the mode's default).
	Quantize    bool
	Bits, Group int
	// Mode (--q-mode) is "" or "affine" (4 bits in groups of 64 by default), or one of MLX's
	// float modes "mxfp4", "nvfp4", "mxfp8", whose bits and group sizes are fixed (mlx's
	// fp_quantize: 4 in 32, 4 in 16, 8 in 32).
	Mode string
	// Recipe (--quant-predicate) is "" (the model's own predicate: the router mlp.gate and
	// mlp.shared_expert_gate at 8 bits in groups of 64, affine, everything else at Bits), or one of
	// "mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6": v_proj and down_proj of the first and
	// last eighth of the layers and of every third layer between at the high width, lm_head at
	// the high width, every other module at the low one; each quantized module gets its own
	// entry in the quantization block, with the group size Group as given (0 writes null, as
	// mlx_lm.convert does without --q-group-size).
	Recipe string
	// VLM quantizes as mlx-vlm's quantize_model does with the predicate of its models with n-gram
	// tables (the newest seen, docs/FORMATS.md section 2): the router and shared-expert gate
	// entries carry "mode": "affine"; each n-gram table row block (plan role ngram_table) takes
	// fallback_group_size 32, so it is quantized at the global bits and mode in groups of the
	// global size where that divides its width and else of 32, with its own entry either way;
	// any other module whose width the global group does not divide stays float. Without it the
	// rules are mlx-lm's (a table whose width the group does not divide stays float, router
	// entries without mode).
	VLM bool
	// GainsAsW stores the zero-centred gains as w, as mlx-vlm has for the models with n-gram
	// tables since its PR #2032, instead of the family's MLX convention 1 + w. The conversion is
	// read back and refused when the family would not read its gains in the convention written.
	GainsAsW bool
}

// FP8Options say which modules an FP8 copy (modelgen.ConvertFP8) stores as F8_E4M3 and how its
// quantization_config reads, as one of the published FP8 releases is laid out (a family's
// FP8Releases).
type FP8Options struct {
	// Roles, when set, limits the converted Linear modules to the plan roles named (e.g. the
	// routed "experts"); nil converts every Linear module but the embeddings, lm_head and the
	// modules Keep names.
	Roles []string
	// Keep names modules left in bf16 (each a module path or a run of its dotted parts, as
	// modules_to_not_convert entries name them: "mlp.gate" names model.layers.3.mlp.gate).
	Keep []string
	// Tables stores the tables whose plan gives a whole-tensor scale (family.Spec.TensorScale:
	// an n-gram table) as F8_E4M3 with that one scale, named in modules_to_convert by their path
	// inside their decoder layer.
	Tables bool
	// ListVectors also names every norm, conv and vector in modules_to_not_convert (some
	// releases' lists do: input_layernorm, linear_attn.A_log, ...), not only the Linear modules
	// kept.
	ListVectors bool
	// Fmt writes "fmt": "e4m3"; PerTensorFlags writes weight_per_tensor and act_per_tensor false
	// (each as some release's config has it).
	Fmt, PerTensorFlags bool
	// ScaleDType is the dtype of the scales: BF16 (as published) or F32.
	ScaleDType safetensors.DType
}
