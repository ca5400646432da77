// Package kernels is strata's CPU backend: every op of Qwen3.8-Flash-Next and Qwen3-Next
// (GEMM, RMSNorm, RoPE, QSA attention and indexer, Gated DeltaNet, MoE, GatedResidual, PLE)
// in Go, parallel and bitwise deterministic across runs and GOMAXPROCS (work is split by
// output ownership and every reduction runs in a fixed order).
//
// The math follows transformers' models/qwen4_exp/modeling_qwen4_exp.py and
// models/qwen3_next/modeling_qwen3_next.py (v5.17). All activations are float32, row-major and
// token-major ([T, D], [T, H, d]); Gated DeltaNet state is float32 [Hv, dk, dv]. Weights are
// float32, bf16/f16 (widened where used), MLX affine-quantized (op.QAffine: 2 to 8-bit codes
// dequantized block by block inside the GEMMs by AVX2, AVX-512F or portable kernels, quant.go),
// 8-bit and 4-bit floats (op.FP8Block, op.QFloat: decoded the same way, fpquant.go), or GGUF
// block types kept as the file stores them (op.GGML: decoded block by block to ggml's values,
// ggml.go). In the
// int8 and bf16 compute modes (op.WeightOptions.Compute) the products of the matrices whose
// format the mode takes run through package internal/qdot instead, from operands Weights.Prepare
// makes once (compute.go); f32, the default, is the arithmetic above. Invalid shapes
// return errors wrapping op.ErrShape (or another sentinel of package op); no op panics on bad input.
package kernels
