// moe.metal: the MoE block around the experts' GEMMs: the router (moe_route: softmax and top-K),
// the slot table the grouped GEMMs read (moe_slot_count, moe_slot_plan, moe_slot_scatter,
// moe_slot_gather), the combine of the experts' outputs (moe_comb, moe_comb_slots) and the
// GatedResidual write with the combine fused in (gr_apply_moec, gr_norm_h_moec). Host side:
// moe.go. Math: docs/MODELS.md (MoE block, GatedResidual).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

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
