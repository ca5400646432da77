// qsa_prompt.metal: attention of a prefill chunk with the QSA selection (MODELS.md "Attention
// layer"): causal grouped-query attention over the cache, optionally restricted per query row to
// the positions the indexer selected.
//   qsa_flash  blocked online softmax (FlashAttention, Dao et al. 2022)
// All kernels assume 32-lane simdgroups (the host checks threadExecutionWidth).
#include <metal_stdlib>
using namespace metal;

// Function constant 0: rows may carry a sparse selection (dense flags, offsets, token lists).
constant bool qsa_sparse [[function_constant(0)]];

#define QSA_RMAX 16  // score rows per tile (HPG query heads x tq tokens)
#define QSA_BK 32    // keys per block: one per lane in the score phase
#define QSA_NSG 4    // simdgroups; simdgroup s owns head dims s*64 .. s*64+63 (D <= 256)
#define QSA_NEG -1.0e30f

struct QSAFlashParams {
    uint T;
    uint Hq;
    uint Hkv;
    uint D;
    uint pos0;
    float scale;
    uint hpg; // query heads per KV head
    uint tq;  // query tokens per tile (hpg * tq <= QSA_RMAX); 1 when qsa_sparse
};

// qsa_flash: grid (ceil(T / tq), Hkv), 128 threads. The tile's rows are the HPG query heads of KV
// head g for tq consecutive tokens: every K/V row loaded serves all of them. Row r is token
// t0 + r / hpg, query head g*hpg + r % hpg. Per block of 32 keys:
//   scores: lane l takes key l; simdgroup s sums q . k over its 64 head dims for every row, the
//     four partial dots are added in simdgroup order (the same sum in every simdgroup);
//   softmax: running max m and sum l per row (replicated in the four simdgroups, same bits);
//   values: simdgroup 0 publishes the probabilities and key positions in threadgroup memory;
//     lane l of simdgroup s accumulates head dims s*64 + l and s*64 + 32 + l over the block's
//     keys in order.
// Output o = acc / l; lse = m + log(l) (natural log of the sum of exp of the scaled scores).
// Threadgroup memory: queries rows*D*4 B (dynamic, index 0) + 10.1 KiB static (8 KiB partial
// dots, 2 KiB probabilities, 128 B positions): HPG 12, D 256 -> 22.1 KiB, one threadgroup per
// core by memory (HPG 1 with tq 16: 26.1 KiB).
kernel void qsa_flash(device float* o [[buffer(0)]],
                      device float* lse [[buffer(1)]],
                      const device float* q [[buffer(2)]],
                      const device float* k [[buffer(3)]],
                      const device float* v [[buffer(4)]],
                      const device int* sel_dense [[buffer(5)]],
                      const device int* sel_off [[buffer(6)]],
                      const device int* sel_tok [[buffer(7)]],
                      constant QSAFlashParams& p [[buffer(8)]],
                      threadgroup float* qs [[threadgroup(0)]],
                      uint2 tg [[threadgroup_position_in_grid]],
                      uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float part[QSA_NSG * QSA_RMAX * QSA_BK];
    threadgroup float pbuf[QSA_RMAX * QSA_BK];
    threadgroup uint posbuf[QSA_BK];
    uint lane = tid % 32;
    uint sg = tid / 32;
    uint g = tg.y;
    uint t0 = tg.x * p.tq;
    uint ntok = min(p.tq, p.T - t0);
    uint R = p.hpg * ntok;
    uint D = p.D;

    for (uint i = tid; i < R * D; i += 128) {
        uint r = i / D;
        uint d = i % D;
        uint t = t0 + r / p.hpg;
        uint h = g * p.hpg + r % p.hpg;
        qs[i] = q[(t * p.Hq + h) * D + d];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // Keys of the tile: dense positions 0..nkeys-1, or the selection list of its one token.
    bool sparse = false;
    uint soff = 0;
    uint nkeys = p.pos0 + t0 + ntok;
    if (qsa_sparse) {
        if (sel_dense[t0] == 0) {
            sparse = true;
            soff = uint(sel_off[t0]);
            nkeys = uint(sel_off[t0 + 1]) - soff;
        }
    }

    float m[QSA_RMAX];
    float l[QSA_RMAX];
    float acc[QSA_RMAX][2];
    for (uint r = 0; r < QSA_RMAX; ++r) {
        m[r] = QSA_NEG;
        l[r] = 0.0f;
        acc[r][0] = 0.0f;
        acc[r][1] = 0.0f;
    }
    uint dlo = sg * 64;
    uint dhi = min(dlo + 64, D);

    for (uint kb = 0; kb < nkeys; kb += QSA_BK) {
        uint nb = min(uint(QSA_BK), nkeys - kb);
        bool kok = lane < nb;
        uint pos = 0;
        if (kok) {
            pos = sparse ? uint(sel_tok[soff + kb + lane]) : kb + lane;
        }
        float ps[QSA_RMAX];
        for (uint r = 0; r < QSA_RMAX; ++r) {
            ps[r] = 0.0f;
        }
        if (kok) {
            const device float* kp = k + (pos * p.Hkv + g) * D;
            for (uint d = dlo; d < dhi; ++d) {
                float kd = kp[d];
                for (uint r = 0; r < QSA_RMAX; ++r) {
                    if (r < R) {
                        ps[r] = fma(qs[r * D + d], kd, ps[r]);
                    }
                }
            }
        }
        for (uint r = 0; r < QSA_RMAX; ++r) {
            if (r < R) {
                part[(sg * QSA_RMAX + r) * QSA_BK + lane] = ps[r];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float pr[QSA_RMAX];
        for (uint r = 0; r < QSA_RMAX; ++r) {
            pr[r] = 0.0f;
            if (r < R) {
                float sdot = part[(0 * QSA_RMAX + r) * QSA_BK + lane];
                for (uint s = 1; s < QSA_NSG; ++s) {
                    sdot += part[(s * QSA_RMAX + r) * QSA_BK + lane];
                }
                uint limit = p.pos0 + t0 + r / p.hpg;
                bool ok = kok && pos <= limit;
                float sc = ok ? sdot * p.scale : QSA_NEG;
                float mnew = max(m[r], simd_max(sc));
                float corr = exp(m[r] - mnew);
                float pe = ok ? exp(sc - mnew) : 0.0f;
                l[r] = l[r] * corr + simd_sum(pe);
                acc[r][0] *= corr;
                acc[r][1] *= corr;
                m[r] = mnew;
                pr[r] = pe;
            }
        }
        // Simdgroup 0 publishes the block's probabilities and positions (every simdgroup holds
        // the same values); the value phase reads them as threadgroup broadcasts.
        if (sg == 0) {
            for (uint r = 0; r < QSA_RMAX; ++r) {
                if (r < R) {
                    pbuf[r * QSA_BK + lane] = pr[r];
                }
            }
            posbuf[lane] = pos;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        uint d0 = dlo + lane;
        uint d1 = dlo + 32 + lane;
        for (uint c = 0; c < nb; ++c) {
            const device float* vp = v + (posbuf[c] * p.Hkv + g) * D;
            float v0 = d0 < dhi ? vp[d0] : 0.0f;
            float v1 = d1 < dhi ? vp[d1] : 0.0f;
            for (uint r = 0; r < QSA_RMAX; ++r) {
                if (r < R) {
                    float w = pbuf[r * QSA_BK + c];
                    acc[r][0] = fma(w, v0, acc[r][0]);
                    acc[r][1] = fma(w, v1, acc[r][1]);
                }
            }
        }
        // pbuf and posbuf are rewritten by the next block.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    for (uint r = 0; r < R; ++r) {
        uint t = t0 + r / p.hpg;
        uint h = g * p.hpg + r % p.hpg;
        float inv = 1.0f / l[r];
        device float* orow = o + (t * p.Hq + h) * D;
        uint d0 = dlo + lane;
        uint d1 = dlo + 32 + lane;
        if (d0 < dhi) {
            orow[d0] = acc[r][0] * inv;
        }
        if (d1 < dhi) {
            orow[d1] = acc[r][1] * inv;
        }
        if (tid == 0) {
            lse[t * p.Hq + h] = m[r] + log(l[r]);
        }
    }
}
