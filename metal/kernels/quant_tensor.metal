// quant_tensor.metal: the Metal 4 tensor-op form of qmm_affine for GPUs with matrix units in
// their cores (M5 class), compiled after quant.metal (its dequantization and tile helpers;
// Backend.library concatenates the two), so that quant.metal itself compiles where Metal 4 is
// missing. The tile, the dequantized W tile in threadgroup memory and the epilogue are
// qmm_affine's; the 32 x 32 x 32 products of each K step run as one mpp::tensor_ops::matmul2d
// over the threadgroup's 4 simdgroups, accumulating (mode multiply_accumulate) into a float32
// cooperative tensor that is zeroed first and stored through threadgroup memory at the end.
// The cooperative layout is implementation-defined: the kernel touches the tensor only through
// get_capacity / is_valid_element / load / store.
//   qmm_affine_tensor          one weight
//   qmm_affine_tensor_grouped  the MoE experts over the tile table of moe_slot_plan
// Operands are float32 (x as it is, W dequantized exactly), so the products are qmm_affine's;
// whether they equal its bits depends on the order in which matmul2d sums k (on the emulator: k
// ascending, fma, as simdgroup_multiply_accumulate: bitwise equal).
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace mpp::tensor_ops;

// One 32 x 32 output tile of qmm_affine_tensor, for the weight source ws (quant.metal; the float
// formats' tensor-op kernels in fpquant_tensor.metal use it too). as and bs are 4 KiB each; as
// stages the output.
template <typename W>
static inline void qmm_tensor_tile(device float* y, const device float* x, thread const W& ws, uint r0, uint r1,
                                   uint n0, uint N, uint K, threadgroup float* as, threadgroup float* bs, uint tid) {
    // A: the x tile, M x K (extents (K, M)); B: the W^T tile, K x N (extents (N, K)).
    auto A = tensor<threadgroup float, extents<int, QMM_BK, QMM_BM>, tensor_inline>(as, extents<int, QMM_BK, QMM_BM>());
    auto B = tensor<threadgroup float, extents<int, QMM_BN, QMM_BK>, tensor_inline>(bs, extents<int, QMM_BN, QMM_BK>());
    auto C = tensor<threadgroup float, extents<int, QMM_BN, QMM_BM>, tensor_inline>(as, extents<int, QMM_BN, QMM_BM>());
    constexpr auto desc = matmul2d_descriptor(QMM_BM, QMM_BN, QMM_BK, false, false, false,
                                              matmul2d_descriptor::mode::multiply_accumulate);
    matmul2d<desc, execution_simdgroups<4>> mm;
    auto c = mm.get_destination_cooperative_tensor<decltype(A), decltype(B), float>();
    for (uint16_t i = 0; i < c.get_capacity(); ++i) {
        if (c.is_valid_element(i)) {
            c[i] = 0.0f;
        }
    }
    for (uint k0 = 0; k0 < K; k0 += QMM_BK) {
        qmm_load(x, ws, r0, r1, n0, N, K, k0, as, bs, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        mm.run(A, B, c);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    c.store(C);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    qmm_store(y, as, r0, r1, n0, N, tid);
}

// qmm_affine_tensor: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void qmm_affine_tensor(device float* y [[buffer(0)]],
                              const device float* x [[buffer(1)]],
                              const device uint* codes [[buffer(2)]],
                              const device ushort* scales [[buffer(3)]],
                              const device ushort* biases [[buffer(4)]],
                              constant GemmParams& p [[buffer(5)]],
                              uint2 tg [[threadgroup_position_in_grid]],
                              uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint r0 = tg.y * QMM_BM;
    AffineW ws = {codes, scales, biases, p.K};
    qmm_tensor_tile(y, x, ws, r0, min(r0 + QMM_BM, p.rows), tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmm_affine_tensor_grouped: qmm_affine_grouped's grid and tile table. Threadgroup memory: 8 KiB.
kernel void qmm_affine_tensor_grouped(device float* y [[buffer(0)]],
                                      const device float* x [[buffer(1)]],
                                      const device uint* codes [[buffer(2)]],
                                      const device ushort* scales [[buffer(3)]],
                                      const device ushort* biases [[buffer(4)]],
                                      const device int* tiles [[buffer(5)]],
                                      constant GemmParams& p [[buffer(6)]],
                                      uint2 tg [[threadgroup_position_in_grid]],
                                      uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return;
    }
    AffineW ws = {q_expert_codes(codes, e, p.N, p.K), q_expert_groups(scales, e, p.N, p.K),
                  q_expert_groups(biases, e, p.N, p.K), p.K};
    qmm_tensor_tile(y, x, ws, r0, r1, tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}
