// qsa.metal: the QSA preparation and indexer of an attention layer over a prefill chunk
// (docs/MODELS.md "Attention layer"); the attention itself is attention.metal's. Host side: qsa.go.
//   qsa_prep        q/k RMSNorm1p over the head dim, partial RoPE, query/gate split, K/V
//                   append into the cache
//   qsa_index_prep  the indexer's query RMSNorm1p + RoPE and the raw index key append
//   qsa_block_keys  block keys: mean of Ratio raw keys -> RMSNorm1p -> RoPE at the block start
//   qsa_scores      score_b = sum_h relu(q_h . key_b) / sqrt(Dim) per sparse query row
//   qsa_select      top-keep blocks per row (ties to the lower block index) plus the tail, as
//                   ascending token lists for qsa_flash's sparse rows
// RoPE reads a table rope[pos, j] = (cos, sin)(pos * theta^(-2j/rot)), j < rot/2, that the host
// computes in float64 and rounds (as the CPU op evaluates its angles), so large positions lose
// nothing to float32 angle arithmetic.
// All kernels assume 32-lane simdgroups (the host checks threadExecutionWidth).
#include <metal_stdlib>
using namespace metal;

// Sum of v over the threadgroup (fixed order: simd_sum, then the simdgroup partials in order),
// the same value in every thread; part holds one value per simdgroup.
template <typename V>
static inline V qsa_tg_sum(V v, threadgroup V* part, uint tid, uint ntg) {
    V s = simd_sum(v);
    if (tid % 32 == 0) {
        part[tid / 32] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    V tot = V(0);
    uint nsg = (ntg + 31) / 32;
    for (uint i = 0; i < nsg; ++i) {
        tot += part[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return tot;
}

// RMSNorm1p of one head x[0..D) then RoPE over its first rot dims at table row cs (pairs
// (j, j + rot/2)), written to y; y and x must not overlap. The sum of squares is the
// thread-strided fma sum of norm.metal's rms_norm.
static inline void qsa_norm_rope_row(device float* y, const device float* x, const device float* w,
                                     const device float* cs, uint D, uint rot, float eps,
                                     threadgroup float* part, uint tid, uint ntg) {
    float ss = 0.0f;
    for (uint d = tid; d < D; d += ntg) {
        float v = x[d];
        ss = fma(v, v, ss);
    }
    ss = qsa_tg_sum(ss, part, tid, ntg);
    float r = rsqrt(ss / float(D) + eps);
    uint half_rot = rot / 2;
    for (uint d = tid; d < D; d += ntg) {
        if (d < half_rot) {
            float a = x[d] * r * (1.0f + w[d]);
            float b = x[d + half_rot] * r * (1.0f + w[d + half_rot]);
            float c = cs[2 * d];
            float sn = cs[2 * d + 1];
            y[d] = a * c - b * sn;
            y[d + half_rot] = b * c + a * sn;
        } else if (d >= rot) {
            y[d] = x[d] * r * (1.0f + w[d]);
        }
    }
}

// qsa_prep: grid (Hq + Hkv, T), threads min(256, D rounded to 32). Slot h < Hq: query head h of
// token t from qg [T, Hq, 2D] ([query | gate] per head): q = RoPE(RMSNorm1p(query; qw)),
// gate copied out. Slot Hq + g: KV head g: kc[row0 + t, g] = RoPE(RMSNorm1p(k; kw)),
// vc[row0 + t, g] = v. Threadgroup memory: 32 B.
kernel void qsa_prep(device float* q [[buffer(0)]],
                     device float* gate [[buffer(1)]],
                     device float* kc [[buffer(2)]],
                     device float* vc [[buffer(3)]],
                     const device float* qg [[buffer(4)]],
                     const device float* kraw [[buffer(5)]],
                     const device float* vraw [[buffer(6)]],
                     const device float* qw [[buffer(7)]],
                     const device float* kw [[buffer(8)]],
                     const device float* rope [[buffer(9)]],
                     constant QSAPrepParams& p [[buffer(10)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint2 ntg2 [[threads_per_threadgroup]]) {
    threadgroup float part[8];
    uint slot = tg.x;
    uint t = tg.y;
    uint D = p.D;
    const device float* cs = rope + (p.pos0 + t) * p.rot;
    if (slot < p.Hq) {
        const device float* src = qg + (t * p.Hq + slot) * 2 * D;
        qsa_norm_rope_row(q + (t * p.Hq + slot) * D, src, qw, cs, D, p.rot, p.eps, part, tid, ntg2.x);
        for (uint d = tid; d < D; d += ntg2.x) {
            gate[(t * p.Hq + slot) * D + d] = src[D + d];
        }
        return;
    }
    uint g = slot - p.Hq;
    uint dst = ((p.row0 + t) * p.Hkv + g) * D;
    qsa_norm_rope_row(kc + dst, kraw + (t * p.Hkv + g) * D, kw, cs, D, p.rot, p.eps, part, tid, ntg2.x);
    for (uint d = tid; d < D; d += ntg2.x) {
        vc[dst + d] = vraw[(t * p.Hkv + g) * D + d];
    }
}

// qsa_index_prep: grid (nh + 1, T). Slot h < nh: iq[t, h] = RoPE(RMSNorm1p(iqk[t, h]; qw)) at
// position pos0 + t; slot nh: the raw index key iqk[t, nh] appended at keys[row0 + t].
// iqk [T, nh + 1, dim] is the index_qk_proj output. Threadgroup memory: 32 B.
kernel void qsa_index_prep(device float* iq [[buffer(0)]],
                           device float* keys [[buffer(1)]],
                           const device float* iqk [[buffer(2)]],
                           const device float* qw [[buffer(3)]],
                           const device float* rope [[buffer(4)]],
                           constant QSAIndexParams& p [[buffer(5)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint2 ntg2 [[threads_per_threadgroup]]) {
    threadgroup float part[8];
    uint h = tg.x;
    uint t = tg.y;
    const device float* src = iqk + (t * (p.nh + 1) + h) * p.dim;
    if (h < p.nh) {
        qsa_norm_rope_row(iq + (t * p.nh + h) * p.dim, src, qw, rope + (p.pos0 + t) * p.rot, p.dim, p.rot, p.eps,
                          part, tid, ntg2.x);
        return;
    }
    for (uint d = tid; d < p.dim; d += ntg2.x) {
        keys[(p.row0 + t) * p.dim + d] = src[d];
    }
}

// qsa_block_keys: grid (nbmax), threads min(256, dim rounded to 32): bk[b] = RoPE(RMSNorm1p(
// mean of raw keys ratio*b .. ratio*b + ratio - 1; kw)) at position ratio*b. The mean sums the
// raw keys in token order, then divides. Threadgroup memory: dim floats (dynamic, index 0) + 32 B.
kernel void qsa_block_keys(device float* bk [[buffer(0)]],
                           const device float* keys [[buffer(1)]],
                           const device float* kw [[buffer(2)]],
                           const device float* rope [[buffer(3)]],
                           constant QSAIndexParams& p [[buffer(4)]],
                           threadgroup float* pooled [[threadgroup(0)]],
                           uint b [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[8];
    float ss = 0.0f;
    for (uint d = tid; d < p.dim; d += ntg) {
        float acc = 0.0f;
        for (uint i = 0; i < p.ratio; ++i) {
            acc += keys[(b * p.ratio + i) * p.dim + d];
        }
        float v = acc / float(p.ratio);
        pooled[d] = v;
        ss = fma(v, v, ss);
    }
    ss = qsa_tg_sum(ss, part, tid, ntg);
    float r = rsqrt(ss / float(p.dim) + p.eps);
    const device float* cs = rope + (b * p.ratio) * p.rot;
    uint half_rot = p.rot / 2;
    device float* y = bk + b * p.dim;
    for (uint d = tid; d < p.dim; d += ntg) {
        if (d < half_rot) {
            float a = pooled[d] * r * (1.0f + kw[d]);
            float c2 = pooled[d + half_rot] * r * (1.0f + kw[d + half_rot]);
            float c = cs[2 * d];
            float sn = cs[2 * d + 1];
            y[d] = a * c - c2 * sn;
            y[d + half_rot] = c2 * c + a * sn;
        } else if (d >= p.rot) {
            y[d] = pooled[d] * r * (1.0f + kw[d]);
        }
    }
}

// qsa_scores: grid (ceil(nbmax / 256), T), 256 threads, one thread per (row, block):
// sc[t, b] = scale * sum over heads in order of relu(iq[t, h] . bk[b]) (dots in index order) for
// the nb = (pos0 + t + 1) / ratio blocks of a sparse row (nb > keep); NaN becomes -inf so that it
// ranks last. Dense rows are skipped. No threadgroup memory.
kernel void qsa_scores(device float* sc [[buffer(0)]],
                       const device float* iq [[buffer(1)]],
                       const device float* bk [[buffer(2)]],
                       constant QSAIndexParams& p [[buffer(3)]],
                       uint2 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint b = tg.x * ntg2.x + tid;
    uint nb = (p.pos0 + t + 1) / p.ratio;
    if (nb <= p.keep || b >= nb) {
        return;
    }
    const device float* kb = bk + b * p.dim;
    float s = 0.0f;
    for (uint h = 0; h < p.nh; ++h) {
        const device float* qh = iq + (t * p.nh + h) * p.dim;
        float dot = 0.0f;
        for (uint d = 0; d < p.dim; ++d) {
            dot = fma(qh[d], kb[d], dot);
        }
        s += max(dot, 0.0f);
    }
    s *= p.scale;
    if (isnan(s)) {
        s = -INFINITY;
    }
    sc[t * p.nbmax + b] = s;
}

// Order-preserving key of a float score: larger floats give larger keys; both zeros map alike.
static inline uint qsa_key(float s) {
    if (s == 0.0f) {
        return 0x80000000u;
    }
    uint u = as_type<uint>(s);
    return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of v over the threadgroup in thread order, and the total in *total.
// part holds one value per simdgroup.
static inline uint qsa_tg_prefix(uint v, threadgroup uint* part, uint tid, uint ntg, thread uint* total) {
    uint pre = simd_prefix_exclusive_sum(v);
    uint s = simd_sum(v);
    if (tid % 32 == 0) {
        part[tid / 32] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint before = 0;
    uint tot = 0;
    uint nsg = (ntg + 31) / 32;
    for (uint i = 0; i < nsg; ++i) {
        if (i < tid / 32) {
            before += part[i];
        }
        tot += part[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    *total = tot;
    return before + pre;
}

// qsa_select: grid (T), 256 threads, one threadgroup per query row; dense rows (nb <= keep)
// return at once. The keep-th largest score key is found by a 32-step radix descent (each step
// counts the keys >= a candidate); blocks above it are kept, and of the blocks equal to it the
// lowest-indexed ones up to keep in all (ties to the lower block index, as the CPU op). The
// row's tokens are written in ascending order at tok[off[t] ..]: the kept blocks' ratio tokens,
// then the tail ratio*nb .. pos. Threadgroup memory: 32 B.
kernel void qsa_select(device int* tok [[buffer(0)]],
                       const device float* sc [[buffer(1)]],
                       const device int* off [[buffer(2)]],
                       constant QSAIndexParams& p [[buffer(3)]],
                       uint t [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint ntg [[threads_per_threadgroup]]) {
    threadgroup uint part[8];
    uint pos = p.pos0 + t;
    uint nb = (pos + 1) / p.ratio;
    if (nb <= p.keep) {
        return;
    }
    const device float* row = sc + t * p.nbmax;
    uint thr = 0;
    for (int bit = 31; bit >= 0; --bit) {
        uint cand = thr | (1u << uint(bit));
        uint n = 0;
        for (uint b = tid; b < nb; b += ntg) {
            n += qsa_key(row[b]) >= cand ? 1u : 0u;
        }
        n = qsa_tg_sum(n, part, tid, ntg);
        if (n >= p.keep) {
            thr = cand;
        }
    }
    uint gt = 0;
    for (uint b = tid; b < nb; b += ntg) {
        gt += qsa_key(row[b]) > thr ? 1u : 0u;
    }
    gt = qsa_tg_sum(gt, part, tid, ntg);
    uint ties = p.keep - gt;
    device int* out = tok + off[t];
    uint eq_before = 0;
    uint kept_before = 0;
    for (uint b0 = 0; b0 < nb; b0 += ntg) {
        uint b = b0 + tid;
        uint k = b < nb ? qsa_key(row[b]) : 0u;
        uint is_eq = (b < nb && k == thr) ? 1u : 0u;
        uint n_eq = 0;
        uint eq_rank = eq_before + qsa_tg_prefix(is_eq, part, tid, ntg, &n_eq);
        uint kept = (b < nb && (k > thr || (is_eq != 0 && eq_rank < ties))) ? 1u : 0u;
        uint n_kept = 0;
        uint slot = kept_before + qsa_tg_prefix(kept, part, tid, ntg, &n_kept);
        if (kept != 0) {
            for (uint i = 0; i < p.ratio; ++i) {
                out[slot * p.ratio + i] = int(b * p.ratio + i);
            }
        }
        eq_before += n_eq;
        kept_before += n_kept;
    }
    for (uint x = nb * p.ratio + tid; x <= pos; x += ntg) {
        out[p.keep * p.ratio + (x - nb * p.ratio)] = int(x);
    }
}
