// gemm_tensor.metal: the GEMMs of gemm.metal (y = x W^T for float32 activations x [rows, K] and
// 16-bit weights W [N, K], bfloat16 or half by function constant 0, or float32 weights) on
// Metal 4 tensor ops: one mpp::tensor_ops::matmul2d per output tile over all of K, the operands
// read through tensor views of device memory (the op clips the edge tiles itself), float32
// accumulation. The host picks these kernels on GPUs whose matrix units run tensor ops (M5),
// elsewhere only through Prefer.
//   gemm_tensor_w16 / gemm_tensor_w32                  one weight: 64 x 64 output tiles
//   gemm_tensor_w16_grouped / gemm_tensor_w32_grouped  the MoE experts: the tile table of
//       moe_slot_plan (expert, first row, end row; at most 32 rows), 32 x 64 output tiles
// Every output element is one product sum over ascending k (on the emulator the same fma chain
// as gemm.metal's, so the results are bitwise equal there; a GPU's matrix units choose their own
// order). No threadgroup memory.
#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

constant bool gemm_bf16 [[function_constant(0)]];

#define GT_BM 64  // rows per tile of the dense GEMM
#define GT_BMG 32 // rows per tile of the grouped GEMM (moe_slot_plan's tiles)
#define GT_BN 64  // output columns per tile

typedef dextents<int32_t, 2> gt_ext;

// y[r0 .. r1) [.., n0 .. n0+GT_BN) = x[r0 .. r1) W^T for W [N, K] of element type W (BM rows
// at most).
template <int BM, typename W>
static inline void gemm_tensor_tile(device float* y, const device float* x, const device W* w,
                                    uint r0, uint r1, uint n0, uint N, uint K) {
    constexpr auto desc = matmul2d_descriptor(BM, GT_BN, static_cast<int>(dynamic_extent), false, true, false,
                                              matmul2d_descriptor::mode::multiply);
    matmul2d<desc, execution_simdgroups<4>> op;
    int rows = int(r1 - r0);
    tensor<device const float, gt_ext, tensor_inline> xv(x + ulong(r0) * K, gt_ext(int(K), rows));
    tensor<device const W, gt_ext, tensor_inline> wv(w + ulong(n0) * K, gt_ext(int(K), int(N - n0)));
    tensor<device float, gt_ext, tensor_inline> yv(y + ulong(r0) * N + n0, gt_ext(int(N - n0), rows),
                                                    array<int32_t, 2>{1, int(N)});
    op.run(xv, wv, yv);
}

// The 16-bit weight as its element type (function constant 0).
template <int BM>
static inline void gemm_tensor_tile16(device float* y, const device float* x, const device ushort* w,
                                      uint r0, uint r1, uint n0, uint N, uint K) {
    if (gemm_bf16) {
        gemm_tensor_tile<BM>(y, x, (const device bfloat*)w, r0, r1, n0, N, K);
    } else {
        gemm_tensor_tile<BM>(y, x, (const device half*)w, r0, r1, n0, N, K);
    }
}

// gemm_tensor_w16: grid (ceil(N / 64), ceil(rows / 64)), 128 threads.
kernel void gemm_tensor_w16(device float* y [[buffer(0)]],
                            const device float* x [[buffer(1)]],
                            const device ushort* w [[buffer(2)]],
                            constant GemmParams& p [[buffer(3)]],
                            uint2 tg [[threadgroup_position_in_grid]]) {
    uint r0 = tg.y * GT_BM;
    gemm_tensor_tile16<GT_BM>(y, x, w, r0, min(r0 + GT_BM, p.rows), tg.x * GT_BN, p.N, p.K);
}

// gemm_tensor_w32: gemm_tensor_w16 for a float32 weight.
kernel void gemm_tensor_w32(device float* y [[buffer(0)]],
                            const device float* x [[buffer(1)]],
                            const device float* w [[buffer(2)]],
                            constant GemmParams& p [[buffer(3)]],
                            uint2 tg [[threadgroup_position_in_grid]]) {
    uint r0 = tg.y * GT_BM;
    gemm_tensor_tile<GT_BM>(y, x, w, r0, min(r0 + GT_BM, p.rows), tg.x * GT_BN, p.N, p.K);
}

// gemm_tensor_w16_grouped: grid (ceil(N / 64), tiles), 128 threads; tiles[3*i ..] = (expert,
// first row, end row) with at most 32 rows, rows sorted by expert.
kernel void gemm_tensor_w16_grouped(device float* y [[buffer(0)]],
                                    const device float* x [[buffer(1)]],
                                    const device ushort* w [[buffer(2)]],
                                    const device int* tiles [[buffer(3)]],
                                    constant GemmParams& p [[buffer(4)]],
                                    uint2 tg [[threadgroup_position_in_grid]]) {
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return; // an empty entry of a tile table sized for the worst case (uniform per threadgroup)
    }
    gemm_tensor_tile16<GT_BMG>(y, x, w + ulong(e) * p.N * p.K, r0, r1, tg.x * GT_BN, p.N, p.K);
}

// gemm_tensor_w32_grouped: gemm_tensor_w16_grouped for float32 expert weights.
kernel void gemm_tensor_w32_grouped(device float* y [[buffer(0)]],
                                    const device float* x [[buffer(1)]],
                                    const device float* w [[buffer(2)]],
                                    const device int* tiles [[buffer(3)]],
                                    constant GemmParams& p [[buffer(4)]],
                                    uint2 tg [[threadgroup_position_in_grid]]) {
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return; // an empty entry of a tile table sized for the worst case (uniform per threadgroup)
    }
    gemm_tensor_tile<GT_BMG>(y, x, w + ulong(e) * p.N * p.K, r0, r1, tg.x * GT_BN, p.N, p.K);
}
