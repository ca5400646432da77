// ggml_tensor.metal: the Metal 4 tensor-op form of qmm_gg (ggml.metal) for GPUs with matrix units
// in their cores (M5 class): quant_tensor.metal's tile (qmm_tensor_tile, one
// mpp::tensor_ops::matmul2d per K step into a float32 cooperative tensor) over the ggml block
// types' weight source. Compiled after quant.metal, quant_tensor.metal and ggml.metal
// (Backend.library concatenates them), so that those compile where Metal 4 is missing.
//   qmm_gg_tensor          one weight
//   qmm_gg_tensor_grouped  the MoE experts over the tile table of moe_slot_plan
// Operands are float32 (x as it is, W decoded as ggml.metal decodes it): bitwise equal to qmm_gg
// where matmul2d sums k in ascending order with fused multiply-adds (the emulator does).

// qmm_gg_tensor: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void qmm_gg_tensor(device float* y [[buffer(0)]],
                          const device float* x [[buffer(1)]],
                          const device uchar* data [[buffer(2)]],
                          constant GemmParams& p [[buffer(3)]],
                          uint2 tg [[threadgroup_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint r0 = tg.y * QMM_BM;
    GGMLW ws = {data, p.K};
    qmm_tensor_tile(y, x, ws, r0, min(r0 + QMM_BM, p.rows), tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmm_gg_tensor_grouped: qmm_gg_grouped's grid and tile table. Threadgroup memory: 8 KiB.
kernel void qmm_gg_tensor_grouped(device float* y [[buffer(0)]],
                                  const device float* x [[buffer(1)]],
                                  const device uchar* data [[buffer(2)]],
                                  const device int* tiles [[buffer(3)]],
                                  constant GemmParams& p [[buffer(4)]],
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
    GGMLW ws = gg_expert(data, e, p.N, p.K);
    qmm_tensor_tile(y, x, ws, r0, r1, tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}
