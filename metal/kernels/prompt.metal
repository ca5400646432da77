// prompt.metal: the per-token pieces of a prefill around the mixers and the MoE: RMSNorm1p, the
// GatedResidual norms, reads and writes (grouped over S streams), the MoE combine and router,
// embed, PLE (gather, gate, dilated conv with carried state) and the element-wise steps (gates,
// activations, residual adds). Math: docs/MODELS.md (RMSNorm1p, GatedResidual, MoE block, PLE). Reductions run in a fixed order: each
// thread sums its strided elements in index order, simd_sum per simdgroup, then the simdgroup
// partials in simdgroup order, so every kernel that normalises a row the same way (rms_norm,
// gr_norm_h4, gr_norm_h_moec, gr_norm_h_stream_out) produces the same bits for it.
// All kernels assume 32-lane simdgroups (the host checks threadExecutionWidth).
#include <metal_stdlib>
using namespace metal;

// Sum of v over the threadgroup, the same value in every thread. part holds one float per
// simdgroup; the trailing barrier lets the caller reuse part at once.
static inline float tg_sum(float v, threadgroup float* part, uint tid, uint ntg) {
    float s = simd_sum(v);
    if (tid % 32 == 0) {
        part[tid / 32] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float tot = 0.0f;
    uint nsg = (ntg + 31) / 32;
    for (uint i = 0; i < nsg; ++i) {
        tot += part[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return tot;
}

// The MoE combine of element d of token t: sum over slots j in slot order of w[j] * ye[rk[j], d],
// skipping empty slots (rk = -1). fma keeps the rounding the same in every kernel that combines.
static inline float moe_comb_elem(const device float* ye, const device int* rk, const device float* w,
                                  uint t, uint d, uint K, uint D) {
    float acc = 0.0f;
    for (uint j = 0; j < K; ++j) {
        int r = rk[t * K + j];
        if (r < 0) {
            continue;
        }
        acc = fma(w[t * K + j], ye[uint(r) * D + d], acc);
    }
    return acc;
}

// moe_comb: out[t, d] = sum_j w[t, j] * ye[rk[t, j], d]. Grid (ceil(D / ntg), T), one thread per
// element. No threadgroup memory.
kernel void moe_comb(device float* out [[buffer(0)]],
                     const device float* ye [[buffer(1)]],
                     const device int* rk [[buffer(2)]],
                     const device float* w [[buffer(3)]],
                     constant MoECombParams& p [[buffer(4)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.D) {
        return;
    }
    out[t * p.D + d] = moe_comb_elem(ye, rk, w, t, d, p.K, p.D);
}

// moe_comb_slots: moe_comb with the valid slots of the token compacted first (one simdgroup,
// simd_prefix_exclusive_sum), so the element loop has no branch on empty slots. K <= 32.
// Bitwise equal to moe_comb. Threadgroup memory: 260 B (32 rows + 32 weights + count).
kernel void moe_comb_slots(device float* out [[buffer(0)]],
                           const device float* ye [[buffer(1)]],
                           const device int* rk [[buffer(2)]],
                           const device float* w [[buffer(3)]],
                           constant MoECombParams& p [[buffer(4)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint2 ntg2 [[threads_per_threadgroup]]) {
    threadgroup int rows[32];
    threadgroup float ws[32];
    threadgroup uint count[1];
    uint t = tg.y;
    if (tid < 32) {
        int r = -1;
        float wj = 0.0f;
        if (tid < p.K) {
            r = rk[t * p.K + tid];
            wj = w[t * p.K + tid];
        }
        uint valid = r >= 0 ? 1u : 0u;
        uint pos = simd_prefix_exclusive_sum(valid);
        uint n = simd_sum(valid);
        if (valid != 0) {
            rows[pos] = r;
            ws[pos] = wj;
        }
        if (tid == 0) {
            count[0] = n;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.D) {
        return;
    }
    uint n = count[0];
    float acc = 0.0f;
    for (uint j = 0; j < n; ++j) {
        acc = fma(ws[j], ye[uint(rows[j]) * p.D + d], acc);
    }
    out[t * p.D + d] = acc;
}

// Sum of squares of one row of D elements (thread-strided, then tg_sum).
static inline float row_ss(const device float* x, uint D, threadgroup float* part, uint tid, uint ntg) {
    float ss = 0.0f;
    for (uint d = tid; d < D; d += ntg) {
        float v = x[d];
        ss = fma(v, v, ss);
    }
    return tg_sum(ss, part, tid, ntg);
}

// y = x * rsqrt(ss / D + eps) * (1 + w) for one row.
static inline void row_scale1p(device float* y, const device float* x, const device float* w, float ss,
                               uint D, float eps, uint tid, uint ntg) {
    float r = rsqrt(ss / float(D) + eps);
    for (uint d = tid; d < D; d += ntg) {
        y[d] = x[d] * r * (1.0f + w[d]);
    }
}

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

// u[t, d]: the combine plus the shared expert's output.
static inline float moe_u(const device float* ye, const device int* rk, const device float* w,
                          const device float* shared, constant GRApplyParams& p, uint t, uint d) {
    float u = moe_comb_elem(ye, rk, w, t, d, p.K, p.D);
    if (p.has_shared != 0) {
        u += shared[t * p.D + d];
    }
    return u;
}

// gr_apply_moec: the GatedResidual write after the MoE with the combine fused in:
// H[t, s, d] += beta[t, s] * u[t, d], u = moe_comb(ye, rk, w) + shared. Grid (ceil(D / ntg), T).
// No threadgroup memory.
kernel void gr_apply_moec(device float* h [[buffer(0)]],
                          const device float* ye [[buffer(1)]],
                          const device int* rk [[buffer(2)]],
                          const device float* w [[buffer(3)]],
                          const device float* beta [[buffer(4)]],
                          const device float* shared [[buffer(5)]],
                          constant GRApplyParams& p [[buffer(6)]],
                          uint2 tg [[threadgroup_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.D) {
        return;
    }
    float u = moe_u(ye, rk, w, shared, p, t, d);
    for (uint s = 0; s < p.S; ++s) {
        uint i = (t * p.S + s) * p.D + d;
        h[i] = fma(beta[t * p.S + s], u, h[i]);
    }
}

// gr_norm_h_moec: gr_apply_moec followed by the next read's grouped norm, one threadgroup per
// token: H[t, s] += beta[t, s] * u[t]; Hn[t, s] = RMSNorm1p(H[t, s]) with hw[s]. Each thread
// reads back only the H elements it wrote itself. Bitwise equal to gr_apply_moec then gr_norm_h4
// at the same threadgroup size. S <= 8. Threadgroup memory: 128 B.
kernel void gr_norm_h_moec(device float* h [[buffer(0)]],
                           device float* hn [[buffer(1)]],
                           const device float* ye [[buffer(2)]],
                           const device int* rk [[buffer(3)]],
                           const device float* w [[buffer(4)]],
                           const device float* beta [[buffer(5)]],
                           const device float* hw [[buffer(6)]],
                           const device float* shared [[buffer(7)]],
                           constant GRApplyParams& p [[buffer(8)]],
                           uint t [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    float ss[8];
    for (uint s = 0; s < 8; ++s) {
        ss[s] = 0.0f;
    }
    for (uint d = tid; d < p.D; d += ntg) {
        float u = moe_u(ye, rk, w, shared, p, t, d);
        for (uint s = 0; s < p.S; ++s) {
            uint i = (t * p.S + s) * p.D + d;
            float v = fma(beta[t * p.S + s], u, h[i]);
            h[i] = v;
            ss[s] = fma(v, v, ss[s]);
        }
    }
    for (uint s = 0; s < p.S; ++s) {
        uint off = (t * p.S + s) * p.D;
        float tot = tg_sum(ss[s], part, tid, ntg);
        row_scale1p(hn + off, h + off, hw + s * p.D, tot, p.D, p.eps, tid, ntg);
    }
}

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

// moe_route: softmax over the E router logits of one token and its top-K (descending p, ties to
// the lower expert index), renormalised when norm is set. One threadgroup per token; the
// probabilities live in threadgroup memory (E floats, dynamic, index 0) plus 384 B static:
// E = 512 -> 2.4 KiB, 13 threadgroups per core by memory.
// status [2]: a token whose logits hold a NaN or an infinity sets status[0] to 1 and lowers
// status[1] to its index (the host sets it to 0xffffffff before the pass and refuses the pass
// after it: the routing of such a token is meaningless).
kernel void moe_route(device float* wout [[buffer(0)]],
                      device int* iout [[buffer(1)]],
                      const device float* logits [[buffer(2)]],
                      constant RouteParams& p [[buffer(3)]],
                      device atomic_uint* status [[buffer(4)]],
                      threadgroup float* pe [[threadgroup(0)]],
                      uint t [[threadgroup_position_in_grid]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    threadgroup float bestv[32];
    threadgroup int besti[32];
    const device float* l = logits + t * p.E;
    float m = -3.402823466e+38f;
    bool bad = false;
    for (uint e = tid; e < p.E; e += ntg) {
        bad = bad || !isfinite(l[e]);
        m = max(m, l[e]);
    }
    if (bad) {
        atomic_store_explicit(&status[0], 1u, memory_order_relaxed);
        atomic_fetch_min_explicit(&status[1], t, memory_order_relaxed);
    }
    m = simd_max(m);
    if (tid % 32 == 0) {
        part[tid / 32] = m;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint nsg = (ntg + 31) / 32;
    m = part[0];
    for (uint i = 1; i < nsg; ++i) {
        m = max(m, part[i]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0f;
    for (uint e = tid; e < p.E; e += ntg) {
        float v = exp(l[e] - m);
        pe[e] = v;
        s += v;
    }
    s = tg_sum(s, part, tid, ntg);
    float inv = 1.0f / s;
    for (uint e = tid; e < p.E; e += ntg) {
        pe[e] *= inv;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float wsum = 0.0f;
    for (uint k = 0; k < p.K; ++k) {
        // Each thread's best among its experts (strided, ascending index, so ties keep the lower).
        float bv = -1.0f;
        int bi = -1;
        for (uint e = tid; e < p.E; e += ntg) {
            float v = pe[e];
            if (v > bv) {
                bv = v;
                bi = int(e);
            }
        }
        // Reduce: larger value wins, equal values go to the lower index.
        for (uint off = 16; off > 0; off /= 2) {
            float ov = simd_shuffle_down(bv, off);
            int oi = simd_shuffle_down(bi, off);
            if ((tid % 32) + off < 32 && (ov > bv || (ov == bv && oi >= 0 && (bi < 0 || oi < bi)))) {
                bv = ov;
                bi = oi;
            }
        }
        if (tid % 32 == 0) {
            bestv[tid / 32] = bv;
            besti[tid / 32] = bi;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        bv = bestv[0];
        bi = besti[0];
        for (uint i = 1; i < nsg; ++i) {
            float ov = bestv[i];
            int oi = besti[i];
            if (ov > bv || (ov == bv && oi >= 0 && (bi < 0 || oi < bi))) {
                bv = ov;
                bi = oi;
            }
        }
        wsum += bv;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) {
            wout[t * p.K + k] = bv;
            iout[t * p.K + k] = bi;
            pe[bi] = -2.0f; // taken
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // Thread 0 wrote the slots; it renormalises them in slot order.
    if (p.norm != 0 && tid == 0) {
        for (uint k = 0; k < p.K; ++k) {
            wout[t * p.K + k] = wout[t * p.K + k] / wsum;
        }
    }
}

// embed: H[t, s, :] = table[tok[t], :] widened to float32, repeated into the S streams; the
// table is table16 (bfloat16 or half bits) or table32 (float32) per p.dtype, the other binding
// unused. Grid (ceil(D / ntg), T). Token ids outside [0, V) are rejected on the host. No
// threadgroup memory.
kernel void embed(device float* h [[buffer(0)]],
                  const device ushort* table16 [[buffer(1)]],
                  const device float* table32 [[buffer(2)]],
                  const device int* tok [[buffer(3)]],
                  constant EmbedParams& p [[buffer(4)]],
                  uint2 tg [[threadgroup_position_in_grid]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.D) {
        return;
    }
    uint i = uint(tok[t]) * p.D + d;
    float v;
    if (p.dtype == 0) {
        v = table32[i];
    } else {
        ushort b = table16[i];
        v = p.dtype == 1 ? as_type<float>(uint(b) << 16) : float(as_type<half>(b));
    }
    for (uint s = 0; s < p.S; ++s) {
        h[(t * p.S + s) * p.D + d] = v;
    }
}

static inline float sigmoid1(float x) {
    return 1.0f / (1.0f + exp(-x));
}

// ew_act: y[i] = mul * act(x[i] / div) (GatedResidual: silu(z / S) of the read's low-rank mix,
// 2 sigmoid(v / S) of its write gates). y may alias x. Grid ceil(n / ntg). No threadgroup memory.
kernel void ew_act(device float* y [[buffer(0)]],
                   const device float* x [[buffer(1)]],
                   constant ActParams& p [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    float v = x[i] / p.div;
    if (p.act == 1) {
        v = v * sigmoid1(v);
    } else if (p.act == 2) {
        v = sigmoid1(v);
    }
    y[i] = p.mul * v;
}

// ew_add: h[i] += u[i] (+ v[i]) (the residual add of qwen3_next blocks; u + v first, as the
// runner adds the routed and shared expert outputs). Grid ceil(n / ntg). No threadgroup memory.
kernel void ew_add(device float* h [[buffer(0)]],
                   const device float* u [[buffer(1)]],
                   const device float* v [[buffer(2)]],
                   constant EwParams& p [[buffer(3)]],
                   uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    float a = u[i];
    if (p.has_v != 0) {
        a += v[i];
    }
    h[i] += a;
}

// ew_sigmoid_mul: o[i] *= sigmoid(g[i]) (the attention output gate). Grid ceil(n / ntg).
kernel void ew_sigmoid_mul(device float* o [[buffer(0)]],
                           const device float* g [[buffer(1)]],
                           constant EwParams& p [[buffer(2)]],
                           uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    o[i] = o[i] * sigmoid1(g[i]);
}

// row_sigmoid_scale: x[r, d] *= sigmoid(s[r]) for rows of D (the shared expert's gate).
// Grid ceil(n / ntg), n = rows * D.
kernel void row_sigmoid_scale(device float* x [[buffer(0)]],
                              const device float* s [[buffer(1)]],
                              constant EwParams& p [[buffer(2)]],
                              uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    x[i] = x[i] * sigmoid1(s[i / p.D]);
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

// The MoE slot table on the device (what the CPU MoEExperts builds on the host): rows grouped by
// expert in expert order, then in slot order within an expert, so the grouped GEMMs see the same
// rows as the CPU op. Work per expert is a serial pass over the T*K slots in slot order, which
// makes the row assignment deterministic without atomics.
// moe_slot_count: count[e] = slots routed to expert e. Grid ceil(E / 256), 256 threads.
kernel void moe_slot_count(device int* count [[buffer(0)]],
                           const device int* idx [[buffer(1)]],
                           constant MoESlotParams& p [[buffer(2)]],
                           uint e [[thread_position_in_grid]]) {
    if (e >= p.E) {
        return;
    }
    int n = 0;
    uint tk = p.T * p.K;
    for (uint i = 0; i < tk; ++i) {
        n += idx[i] == int(e) ? 1 : 0;
    }
    count[e] = n;
}

// moe_slot_plan: base[e] = first row of expert e, base[E] = rows used; tiles[3 i ..] =
// (expert, first row, end row) per 32-row tile in expert order, the unused entries up to ntiles
// empty (0, 0, 0: the grouped GEMM skips them). One thread (grid 1, 32 threads, lane 0 works).
kernel void moe_slot_plan(device int* base [[buffer(0)]],
                          device int* tiles [[buffer(1)]],
                          const device int* count [[buffer(2)]],
                          constant MoESlotParams& p [[buffer(3)]],
                          uint tid [[thread_position_in_grid]]) {
    if (tid != 0) {
        return;
    }
    int r = 0;
    uint nt = 0;
    for (uint e = 0; e < p.E; ++e) {
        base[e] = r;
        int end = r + count[e];
        for (int r0 = r; r0 < end && nt < p.ntiles; r0 += 32) {
            tiles[3 * nt] = int(e);
            tiles[3 * nt + 1] = r0;
            tiles[3 * nt + 2] = min(r0 + 32, end);
            ++nt;
        }
        r = end;
    }
    base[p.E] = r;
    for (; nt < p.ntiles; ++nt) {
        tiles[3 * nt] = 0;
        tiles[3 * nt + 1] = 0;
        tiles[3 * nt + 2] = 0;
    }
}

// moe_slot_scatter: thread e < E gives its slots the rows base[e].. in slot order: rk[slot] = row,
// rowtok[row] = token; thread E marks empty slots (idx outside [0, E)) with rk = -1.
// Grid ceil((E + 1) / 256), 256 threads.
kernel void moe_slot_scatter(device int* rk [[buffer(0)]],
                             device int* rowtok [[buffer(1)]],
                             const device int* idx [[buffer(2)]],
                             const device int* base [[buffer(3)]],
                             constant MoESlotParams& p [[buffer(4)]],
                             uint e [[thread_position_in_grid]]) {
    if (e > p.E) {
        return;
    }
    uint tk = p.T * p.K;
    if (e == p.E) {
        for (uint i = 0; i < tk; ++i) {
            if (idx[i] < 0 || idx[i] >= int(p.E)) {
                rk[i] = -1;
            }
        }
        return;
    }
    int r = base[e];
    for (uint i = 0; i < tk; ++i) {
        if (idx[i] == int(e)) {
            rk[i] = r;
            rowtok[r] = int(i / p.K);
            ++r;
        }
    }
}

// moe_slot_gather: xg[row, :] = x[rowtok[row], :] for the rows in use. Grid (ceil(D / ntg), T*K).
kernel void moe_slot_gather(device float* xg [[buffer(0)]],
                            const device float* x [[buffer(1)]],
                            const device int* rowtok [[buffer(2)]],
                            const device int* base [[buffer(3)]],
                            constant MoESlotParams& p [[buffer(4)]],
                            uint2 gid [[thread_position_in_grid]]) {
    uint d = gid.x;
    uint r = gid.y;
    if (d >= p.D || int(r) >= base[p.E]) {
        return;
    }
    xg[r * p.D + d] = x[uint(rowtok[r]) * p.D + d];
}

// copy_f32: dst[i] = src[i] (the session's fixed-size states backed up inside a prefill's
// command buffer). Grid ceil(n / 256), 256 threads.
kernel void copy_f32(device float* dst [[buffer(0)]],
                     const device float* src [[buffer(1)]],
                     constant CopyParams& p [[buffer(2)]],
                     uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        dst[i] = src[i];
    }
}
