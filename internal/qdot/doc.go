// Package qdot holds the GEMMs of strata's two narrow CPU compute modes, y[T, N] = x[T, K] W^T
// with W [N, K] a linear layer's weight:
//
//   - int8: the activations quantized per row and per block of Block elements to int8 with a
//     float32 scale (QuantizeInt8), the weights used as integers with their own scales (MLX
//     affine codes as they are stored; FP8 E4M3 codes mapped to int8 with a power-of-two scale
//     per 32 elements), int32 sums of products, float32 scaling per block.
//   - bf16: the activations rounded to bfloat16 (RoundBF16), the weights as bfloat16 (BF16 as
//     stored, FP8 E4M3 decoded exactly, MLX affine dequantized and rounded), pairwise products
//     accumulated in float32 the way x86's VDPBF16PS does.
//
// Both are opt-in numerics (the f32 GEMMs of package internal/blas remain the default); what
// they change, and by how much, is measured by the tests against float64 products.
//
// # int8 arithmetic
//
// Activation row t is split into blocks c of Block (32, 64 or 128) elements; block c has the
// scale x_c = amax/127 (amax the block's largest |x|) and codes q_x = RNE(x * 127/amax) in
// [-127, 127] (QuantizeInt8 gives the details: zero blocks, non-finite values). A weight row n
// is split into groups g of Group elements (a multiple of Block) with scale s_g and bias b_g
// (w = s_g q_w + b_g: MLX affine; b_g = 0 for FP8). With I_c = sum over block c of q_x q_w, an
// exact int32, and xb_g = sum over the blocks c of g of x_c * sum_c(q_x) (summed in float64,
// rounded once), every kernel computes, in this order, from y = +0:
//
//	for each group g:  for each block c of g:  y = fma(float32(I_c), float32(s_g * x_c), y)
//	                   y = fma(b_g, xb_g, y)   (MLX affine only)
//
// that is y = sum x~ w with x~ = x_c q_x the dequantized activations, rounded only in the
// float32 steps. The integer sums are exact in every kernel (the products are reordered,
// recentred and paired differently, never rounded), so all kernels give bitwise the same y.
//
// # bf16 arithmetic
//
// x~ = bf16(x) rounded to nearest even, subnormals flushed to zero (VDPBF16PS reads subnormal
// inputs as zero); weights w~ likewise. Every element is one chain of fused multiply-adds over
// K (over each FP8 scale block of 128 elements for FP8): from s = +0, pair p (elements 2p,
// 2p+1) adds s = fma(x~_{2p+1} w~_{2p+1}, s) then s = fma(x~_{2p} w~_{2p}, s), each product
// exact and each sum rounded to nearest even: the order VDPBF16PS follows (measured on a Xeon
// with AVX512_BF16: all of 320000 random lanes, against 91% for the even element first). One
// chain over K rounds more than the blocked sums of the f32 GEMM (TestBF16Bound: within
// (K + 3) u sum |x~ w~|), far below what rounding the activations to 8 bits costs
// (TestAccuracy). FP8's blocks are then added, y = p_0, y = y + p_1, ..., with p_b =
// float32(s_b * scale_inv). VDPBF16PS also flushes a subnormal partial sum to zero; the
// emulation on CPUs without it (the FMA panel kernels of internal/panel on the same
// pair-swapped operands) keeps the subnormal, so the two differ only when a partial sum's
// magnitude falls below 2^-126 (the portable kernel, which multiplies and then adds, also
// rounds a product that underflows).
//
// # Kernels
//
// Kernel names an implementation; MatMulInt8 and MatMulBF16 take one, so that the tests run
// every kernel the CPU has side by side (Int8Kernels, BF16Kernels; BestInt8 and BestBF16 pick
// one, BestBF16 by timing VDPBF16PS against its emulation). int8: AVX-512 VNNI (VPDPBUSD on
// 512-bit registers), AVX-VNNI (its VEX form on 256 bits), AVX2 (VPMADDUBSW and VPMADDWD;
// MLX's 8-bit codes recentred to [-128, 127] and paired as |w| with sign(x, w) so that no pair
// sum saturates 16 bits), NEON with the dot-product extension (SDOT), and portable Go. bf16:
// AVX512_BF16 (VDPBF16PS) and the FMA emulation on the panel kernels (AVX-512F, AVX2+FMA,
// NEON, portable Go). Arm's BFDOT is not used: its rounding is not VDPBF16PS's (under
// qemu-aarch64 7.2, which implements the Arm pseudocode, 47% of 80000 random lanes differed
// from the odd-then-even chain), so it would give other bits than every other CPU; AMX is not
// used either.
//
// # Drivers
//
// MatMulInt8 and MatMulBF16 compute the columns [n0, n1) of y on the calling goroutine: the
// weights are packed per call into the goroutine's scratch, panels of 32 columns a block at a
// time (as many panels as fit in 384 KiB, so that the block stays in L2, and at least one), and
// every row tile of the activations runs over the whole block. An int8 panel takes 16 bytes per element of K for 4-bit codes (MLX
// code words as stored, or an Int8Rows weight's Nibbles), 32 for 8-bit MLX (reordered; both
// by an AVX2 8 x 8 word transpose on amd64) and 64 for the others (FP8 codes mapped row by row,
// Int8Rows codes as their Row writes them, then transposed), and its scales. No weight is copied
// beside the caller's: the products read the weights as stored, but for an Int8Rows weight the
// caller packed once (Int8Rows.PackNibbles), whose panels they read in place. Every element's arithmetic is fixed by the definitions above, not by the
// tiling, so any split of the columns over goroutines gives the same bits: ParallelInt8 and
// ParallelBF16 split them over workers.
//
// A linear layer in int8 mode, y = x W^T for an MLX 4-bit W (op.Quant's fields) on all cores:
//
//	var a qdot.Int8Act
//	err := qdot.QuantizeInt8(&a, x, T, K, 32)
//	w := &qdot.Affine{N: N, K: K, Bits: 4, Group: 64, Codes: q.Codes, Scales: q.Scales, Biases: q.Biases}
//	err = qdot.ParallelInt8(y, N, &a, w, qdot.BestInt8(), runtime.GOMAXPROCS(0))
package qdot
