// norm.metal: RMSNorm1p over rows (rms_norm) and its grouped form over the S streams of a token
// (gr_norm_h4, the GatedResidual read's norm). Host side: norm.go. Math: docs/MODELS.md
// (RMSNorm1p). The row sums are common.h's, so every kernel that normalises a row gives the
// same bits for it.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// rms_norm: RMSNorm1p over rows of D; row i uses weights w[(i % S) * D ...] (S = 1: plain
// RMSNorm1p; S > 1: the grouped form). One threadgroup per row. Threadgroup memory: 128 B.
kernel void rms_norm(device float* y [[buffer(0)]],
                     const device float* x [[buffer(1)]],
                     const device float* w [[buffer(2)]],
                     constant NormParams& p [[buffer(3)]],
                     uint row [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    const device float* xr = x + row * p.D;
    float ss = row_ss(xr, p.D, part, tid, ntg);
    row_scale1p(y + row * p.D, xr, w + (row % p.S) * p.D, ss, p.D, p.eps, tid, ntg);
}

// gr_norm_h4: GatedResidual's grouped RMSNorm1p of one token's S (4) streams, one threadgroup per
// token: Hn[t, s] = RMSNorm1p(H[t, s]) with w[s]. Bitwise equal to rms_norm with the same S and
// threadgroup size. Threadgroup memory: 128 B.
kernel void gr_norm_h4(device float* hn [[buffer(0)]],
                       const device float* h [[buffer(1)]],
                       const device float* w [[buffer(2)]],
                       constant NormParams& p [[buffer(3)]],
                       uint t [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    for (uint s = 0; s < p.S; ++s) {
        uint off = (t * p.S + s) * p.D;
        float ss = row_ss(h + off, p.D, part, tid, ntg);
        row_scale1p(hn + off, h + off, w + s * p.D, ss, p.D, p.eps, tid, ntg);
    }
}
