// fpquant_tensor.metal: the Metal 4 tensor-op form of qmm_fp (fpquant.metal) for GPUs with matrix
// units in their cores (M5 class): quant_tensor.metal's tile (qmm_tensor_tile, one
// mpp::tensor_ops::matmul2d per K step into a float32 cooperative tensor) over the float
// formats' weight source. Compiled after quant.metal, quant_tensor.metal and fpquant.metal
// (Backend.library concatenates them), so that those compile where Metal 4 is missing.
//   qmm_fp_tensor          one weight
//   qmm_fp_tensor_grouped  the MoE experts over the tile table of moe_slot_plan
// Operands are float32 (x as it is, W decoded exactly): bitwise equal to qmm_fp where matmul2d
// sums k in ascending order with fused multiply-adds (the emulator does).

// qmm_fp_tensor: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void qmm_fp_tensor(device float* y [[buffer(0)]],
                          const device float* x [[buffer(1)]],
                          const device uchar* codes [[buffer(2)]],
                          const device uchar* scales [[buffer(3)]],
                          constant GemmParams& p [[buffer(4)]],
                          uint2 tg [[threadgroup_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint r0 = tg.y * QMM_BM;
    FloatW ws = {codes, scales, p.K};
    qmm_tensor_tile(y, x, ws, r0, min(r0 + QMM_BM, p.rows), tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmm_fp_tensor_grouped: qmm_fp_grouped's grid and tile table. Threadgroup memory: 8 KiB.
kernel void qmm_fp_tensor_grouped(device float* y [[buffer(0)]],
                                  const device float* x [[buffer(1)]],
                                  const device uchar* codes [[buffer(2)]],
                                  const device uchar* scales [[buffer(3)]],
                                  const device int* tiles [[buffer(4)]],
                                  constant GemmParams& p [[buffer(5)]],
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
    FloatW ws = fp_expert(codes, scales, e, p.N, p.K);
    qmm_tensor_tile(y, x, ws, r0, r1, tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}
