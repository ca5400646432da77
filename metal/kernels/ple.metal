// ple.metal: the per-layer embeddings (PLE): the table gather (ple_gather), the gate of the S
// streams (ple_gate), the dilated causal conv with its carried state (ple_conv, ple_state).
// Host side: ple.go. Math: docs/MODELS.md (PLE).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// ple_gather: emb[t, h*hd + j] = table[ids[t, h], j] widened to float32. Grid
// (ceil(heads*hd / ntg), T). Ids are checked against the table on the host. No threadgroup memory.
kernel void ple_gather(device float* emb [[buffer(0)]],
                       const device ushort* table16 [[buffer(1)]],
                       const device float* table32 [[buffer(2)]],
                       const device int* ids [[buffer(3)]],
                       constant PLEGatherParams& p [[buffer(4)]],
                       uint2 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint e = tg.x * ntg2.x + tid;
    if (e >= p.heads * p.hd) {
        return;
    }
    uint h = e / p.hd;
    uint src = uint(ids[t * p.heads + h]) * p.hd + e % p.hd;
    float v;
    if (p.dtype == 0) {
        v = table32[src];
    } else if (p.dtype == 1) {
        v = as_type<float>(uint(table16[src]) << 16);
    } else {
        v = float(as_type<half>(table16[src]));
    }
    emb[t * p.heads * p.hd + e] = v;
}

// ple_gate: one threadgroup per token, the PLE gate of its S streams: kn = RMSNorm1p(key_s;
// nk_s), qn = RMSNorm1p(H_s; nq_s), g = kn . qn / sqrt(D), g = sign(g) sqrt(max(|g|, 1e-6))
// (0 stays 0), gv_s = sigmoid(g) * value, gvn_s = RMSNorm1p(gv_s; nc_s). key, H, gv, gvn
// [T, S, D]; value [T, D]. Each thread reads back only the gv elements it wrote. S <= 8.
// Threadgroup memory: 128 B.
kernel void ple_gate(device float* gv [[buffer(0)]],
                     device float* gvn [[buffer(1)]],
                     const device float* key [[buffer(2)]],
                     const device float* value [[buffer(3)]],
                     const device float* h [[buffer(4)]],
                     const device float* nk [[buffer(5)]],
                     const device float* nq [[buffer(6)]],
                     const device float* nc [[buffer(7)]],
                     constant NormParams& p [[buffer(8)]],
                     uint t [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    uint D = p.D;
    for (uint s = 0; s < p.S; ++s) {
        uint off = (t * p.S + s) * D;
        float rk = rsqrt(row_ss(key + off, D, part, tid, ntg) / float(D) + p.eps);
        float rq = rsqrt(row_ss(h + off, D, part, tid, ntg) / float(D) + p.eps);
        float dot = 0.0f;
        for (uint d = tid; d < D; d += ntg) {
            float kn = key[off + d] * rk * (1.0f + nk[s * D + d]);
            float qn = h[off + d] * rq * (1.0f + nq[s * D + d]);
            dot = fma(kn, qn, dot);
        }
        dot = tg_sum(dot, part, tid, ntg);
        float g = dot / sqrt(float(D));
        if (g != 0.0f) {
            g = copysign(sqrt(max(fabs(g), 1e-6f)), g);
        }
        float sg = sigmoid1(g);
        float ss = 0.0f;
        for (uint d = tid; d < D; d += ntg) {
            float v = sg * value[t * D + d];
            gv[off + d] = v;
            ss = fma(v, v, ss);
        }
        ss = tg_sum(ss, part, tid, ntg);
        row_scale1p(gvn + off, gv + off, nc + s * D, ss, D, p.eps, tid, ntg);
    }
}

// ple_conv: H[t, c] += gv[t, c] + silu(sum_j w[c, j] * gvn[t - (K-1-j)*dil, c]), steps before the
// chunk read from the carried state [(K-1)*dil, C] (oldest first). Sum in tap order. Grid
// (ceil(C / ntg), T). No threadgroup memory.
kernel void ple_conv(device float* h [[buffer(0)]],
                     const device float* gv [[buffer(1)]],
                     const device float* gvn [[buffer(2)]],
                     const device float* state [[buffer(3)]],
                     const device float* w [[buffer(4)]],
                     constant PLEConvParams& p [[buffer(5)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint c = tg.x * ntg2.x + tid;
    if (c >= p.C) {
        return;
    }
    int L = int((p.K - 1) * p.dil);
    float acc = 0.0f;
    for (uint j = 0; j < p.K; ++j) {
        int src = int(t) - int((p.K - 1 - j) * p.dil);
        float x = src < 0 ? state[uint(L + src) * p.C + c] : gvn[uint(src) * p.C + c];
        acc = fma(w[c * p.K + j], x, acc);
    }
    uint i = t * p.C + c;
    h[i] += gv[i] + acc * sigmoid1(acc);
}

// ple_state: the carried state <- the last (K-1)*dil steps of [state; gvn]. One thread per
// channel reads all its rows before writing any (the rows it overwrites may be the ones it
// reads). (K-1)*dil <= 32. Grid ceil(C / ntg). No threadgroup memory.
kernel void ple_state(device float* state [[buffer(0)]],
                      const device float* gvn [[buffer(1)]],
                      constant PLEConvParams& p [[buffer(2)]],
                      uint c [[thread_position_in_grid]]) {
    if (c >= p.C) {
        return;
    }
    uint L = (p.K - 1) * p.dil;
    float rows[32];
    for (uint i = 0; i < L; ++i) {
        uint src = p.T + i; // row of [state; gvn]
        rows[i] = src < L ? state[src * p.C + c] : gvn[(src - L) * p.C + c];
    }
    for (uint i = 0; i < L; ++i) {
        state[i * p.C + c] = rows[i];
    }
}
