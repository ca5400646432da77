// gatedresidual.metal: the GatedResidual read's output side, the block input from the S streams:
// from raw streams with the grouped norm recomputed (gr_norm_h_stream_out) or from streams
// already normalised (gr_stream_mean). Host side: gatedresidual.go (the write after the MoE is
// moe.metal's gr_apply_moec / gr_norm_h_moec). Math: docs/MODELS.md (GatedResidual).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// gr_norm_h_stream_out: the read's output side, one threadgroup per token: the grouped norm of
// H[t] recomputed (bitwise as gr_norm_h4) and x[t, d] = (sum_s sigmoid(a[t, s, d]) * Hn[t, s, d]) / S,
// a the pre-sigmoid read gate [T, S, D] (W_up output). The final hyper-connection mixer and
// every block input use it. S <= 8. Threadgroup memory: 128 B.
kernel void gr_norm_h_stream_out(device float* x [[buffer(0)]],
                                 const device float* h [[buffer(1)]],
                                 const device float* a [[buffer(2)]],
                                 const device float* hw [[buffer(3)]],
                                 constant NormParams& p [[buffer(4)]],
                                 uint t [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    float r[8];
    for (uint s = 0; s < p.S; ++s) {
        float ss = row_ss(h + (t * p.S + s) * p.D, p.D, part, tid, ntg);
        r[s] = rsqrt(ss / float(p.D) + p.eps);
    }
    for (uint d = tid; d < p.D; d += ntg) {
        float acc = 0.0f;
        for (uint s = 0; s < p.S; ++s) {
            uint i = (t * p.S + s) * p.D + d;
            float hn = h[i] * r[s] * (1.0f + hw[s * p.D + d]);
            float g = 1.0f / (1.0f + exp(-a[i]));
            acc = fma(g, hn, acc);
        }
        x[t * p.D + d] = acc / float(p.S);
    }
}

// gr_stream_mean: the block input of a GatedResidual read from already normalised streams:
// x[t, d] = (sum over s in order of sigmoid(a[t, s, d]) * Hn[t, s, d]) / S, the same sum as
// gr_norm_h_stream_out. Grid (ceil(D / ntg), T). No threadgroup memory.
kernel void gr_stream_mean(device float* x [[buffer(0)]],
                           const device float* hn [[buffer(1)]],
                           const device float* a [[buffer(2)]],
                           constant StreamParams& p [[buffer(3)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.D) {
        return;
    }
    float acc = 0.0f;
    for (uint s = 0; s < p.S; ++s) {
        uint i = (t * p.S + s) * p.D + d;
        acc = fma(1.0f / (1.0f + exp(-a[i])), hn[i], acc);
    }
    x[t * p.D + d] = acc / float(p.S);
}
