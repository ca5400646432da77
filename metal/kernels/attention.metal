// attention.metal: attention of a prefill chunk with the QSA selection (docs/MODELS.md "Attention
// layer"): causal grouped-query attention over the cache, optionally restricted per query row to
// the positions the indexer (qsa.metal) selected. Host side: attention.go (qsa_flash) and
// attention_variants.go (the variants Prefer picks); the Metal 4 tensor-op forms are
// attention_tensor.metal's.
//   qsa_flash       blocked online softmax (FlashAttention, Dao et al. 2022)
//   qsa_flash_ph    qsa_flash with the probabilities in half for the value product
//   qsa_attn_mm     the same attention on 8x8 simdgroup matrices (short chunks)
// All kernels assume 32-lane simdgroups (the host checks threadExecutionWidth).
#include <metal_stdlib>
using namespace metal;

// Function constant 0: rows may carry a sparse selection (dense flags, offsets, token lists).
constant bool qsa_sparse [[function_constant(0)]];

#define QSA_RMAX 16  // score rows per tile (HPG query heads x tq tokens)
#define QSA_BK 32    // keys per block: one per lane in the score phase
#define QSA_NSG 4    // simdgroups; simdgroup s owns head dims s*64 .. s*64+63 (D <= 256)
#define QSA_NEG -1.0e30f

// qsa_flash: grid (ceil(T / tq), Hkv), 128 threads. The tile's rows are the HPG query heads of KV
// head g for tq consecutive tokens: every K/V row loaded serves all of them. Row r is token
// t0 + r / hpg, query head g*hpg + r % hpg. Per block of 32 keys:
//   scores: lane l takes key l; simdgroup s sums q . k over its 64 head dims for every row, the
//     four partial dots are added in simdgroup order (the same sum in every simdgroup);
//   softmax: running max m and sum l per row (replicated in the four simdgroups, same bits);
//   values: simdgroup 0 publishes the probabilities and key positions in threadgroup memory;
//     lane l of simdgroup s accumulates head dims s*64 + l and s*64 + 32 + l over the block's
//     keys in order, each row over the keys it attends only (a value row past a row's causal
//     limit is not multiplied: a NaN or infinity there reaches exactly the rows that attend it).
// Output o = acc / l; lse = m + log(l) (natural log of the sum of exp of the scaled scores).
// Threadgroup memory: queries rows*D*4 B (dynamic, index 0) + 10.1 KiB static (8 KiB partial
// dots, 2 KiB probabilities, 128 B positions): HPG 12, D 256 -> 22.1 KiB, one threadgroup per
// core by memory (HPG 1 with tq 16: 26.1 KiB).
// qsa_flash_tile is the body of qsa_flash and qsa_flash_ph; PT is the type the probabilities are
// stored in for the value phase (float: qsa_flash; half: qsa_flash_ph).
template <typename PT>
static inline void qsa_flash_tile(device float* o, device float* lse, const device float* q,
                                  const device float* k, const device float* v,
                                  const device int* sel_dense, const device int* sel_off,
                                  const device int* sel_tok, constant QSAFlashParams& p,
                                  threadgroup float* qs, threadgroup float* part, threadgroup PT* pbuf,
                                  threadgroup uint* posbuf, uint2 tg, uint tid) {
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
                    pbuf[r * QSA_BK + lane] = PT(pr[r]);
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
                // A value row past row r's causal limit is never multiplied (not even by its
                // weight 0: 0 * NaN is NaN).
                if (r < R && posbuf[c] <= p.pos0 + t0 + r / p.hpg) {
                    float w = float(pbuf[r * QSA_BK + c]);
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

// qsa_flash: qsa_flash_tile with float probabilities (the default attention kernel).
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
    qsa_flash_tile(o, lse, q, k, v, sel_dense, sel_off, sel_tok, p, qs, part, pbuf, posbuf, tg, tid);
}

// qsa_flash_ph: qsa_flash with the block's probabilities rounded to half before the value phase
// ("P in half"); scores, max, sum l, lse and the output accumulators stay float, so lse has
// qsa_flash's bits and o differs by the half rounding of P (at most 2^-11 max |v|).
// Grid and threads as qsa_flash. Threadgroup memory: queries rows*D*4 B (dynamic) + 9.1 KiB
// static (8 KiB partial dots, 1 KiB half probabilities, 128 B positions): HPG 12, D 256 ->
// 21.1 KiB, HPG 1 with tq 16 -> 25.1 KiB; one threadgroup per core by memory.
kernel void qsa_flash_ph(device float* o [[buffer(0)]],
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
    threadgroup half pbuf[QSA_RMAX * QSA_BK];
    threadgroup uint posbuf[QSA_BK];
    qsa_flash_tile(o, lse, q, k, v, sel_dense, sel_off, sel_tok, p, qs, part, pbuf, posbuf, tg, tid);
}

#define QSA_MM_BD 64 // head dims per K/V staging chunk of qsa_attn_mm

// qsa_attn_mm: attention with the score and value products on 8x8 simdgroup matrices, for short
// chunks (a few new tokens, where the tile is one or two tokens' HPG rows). Grid (ceil(T / tq),
// Hkv), 128 threads; the tile's rows are those of qsa_flash (row r: token t0 + r / hpg, query
// head g*hpg + r % hpg), padded with zero rows to QSA_RMAX = 16 (two 8-row blocks). D is padded
// with zeros to Dp, a multiple of QSA_MM_BD. Per block of 32 keys:
//   scores: S [16 x 32] = Q [16 x Dp] K^T [Dp x 32]; simdgroup s owns keys 8s .. 8s+7 (two 8x8
//     accumulators) and multiply-accumulates over the head dims in ascending steps of 8, K staged
//     transposed in chunks of 64 dims;
//   softmax: simdgroup s owns rows 4s .. 4s+3, lane l key l: running max m and sum l per row in
//     float, the probabilities overwrite the scores, the rescale factors exp(m_old - m_new) go
//     to threadgroup memory per row;
//   values: O [16 x Dp] = corr * O + P [16 x 32] V [32 x Dp], V staged in chunks of 64 dims,
//     simdgroup s owns dims c*64 + 16s .. c*64 + 16s + 15 of chunk c (2 x 2 accumulators per
//     chunk). The rescale multiplies each accumulator element by its row's factor: the row of a
//     lane's element is read from a matrix loaded from a table of row indices, so nothing
//     depends on the matrices' lane layout, and a row's NaN stays in its row (a product with a
//     diagonal matrix would add 0 * NaN to every row). A value row is multiplied only into the
//     rows that attend it: in a block holding keys past the tile's first token (the causal
//     diagonal), the product runs once per token of the tile, over V with the rows past that
//     token's limit zeroed, and only that token's rows keep its result (each row sees the same
//     products, in the same order, as over the whole V; a NaN or infinity in a value row reaches
//     exactly the rows that attend it).
// All sums are float. Output o = O / l (through the query staging), lse = m + log(l).
// Threadgroup memory: queries 16*Dp*4 B (dynamic, index 0; 16 KiB at D 256) + 11,008 B static
// (8 KiB K/V chunk, 2 KiB scores/probabilities, 512 B diagonals, 128 B positions, 128 B row
// m and l) = 27,392 B at D 256 (the 512 B "diagonals" hold the row table and the factors): one threadgroup per core by memory (4 KiB + 11,008 B at D <= 64).
kernel void qsa_attn_mm(device float* o [[buffer(0)]],
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
    threadgroup float kvs[QSA_BK * QSA_MM_BD];
    threadgroup float sp[QSA_RMAX * QSA_BK];
    threadgroup float dg[2 * 64];
    threadgroup uint posbuf[QSA_BK];
    threadgroup float mrow[QSA_RMAX];
    threadgroup float lrow[QSA_RMAX];
    uint lane = tid % 32;
    uint sg = tid / 32;
    uint g = tg.y;
    uint t0 = tg.x * p.tq;
    uint ntok = min(p.tq, p.T - t0);
    uint R = p.hpg * ntok;
    uint D = p.D;
    uint Dp = (D + QSA_MM_BD - 1) / QSA_MM_BD * QSA_MM_BD;
    uint nch = Dp / QSA_MM_BD;

    for (uint i = tid; i < QSA_RMAX * Dp; i += 128) {
        uint r = i / Dp;
        uint d = i % Dp;
        float x = 0.0f;
        if (r < R && d < D) {
            x = q[((t0 + r / p.hpg) * p.Hq + g * p.hpg + r % p.hpg) * D + d];
        }
        qs[i] = x;
    }
    // dg: the row (0..7) of each element of an 8x8 matrix, then the rescale factor of each row.
    for (uint i = tid; i < 2 * 64; i += 128) {
        dg[i] = i < 64 ? float(i / 8) : 0.0f;
    }

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

    float m[4];
    float l[4];
    for (uint i = 0; i < 4; ++i) {
        m[i] = QSA_NEG;
        l[i] = 0.0f;
    }
    simdgroup_float8x8 acc[256 / QSA_MM_BD][2][2];
    for (uint c = 0; c < 256 / QSA_MM_BD; ++c) {
        for (uint i = 0; i < 2; ++i) {
            for (uint j = 0; j < 2; ++j) {
                acc[c][i][j] = simdgroup_float8x8(0.0f);
            }
        }
    }

    for (uint kb = 0; kb < nkeys; kb += QSA_BK) {
        uint nb = min(uint(QSA_BK), nkeys - kb);
        if (tid < QSA_BK) {
            uint pos = 0;
            if (tid < nb) {
                pos = sparse ? uint(sel_tok[soff + kb + tid]) : kb + tid;
            }
            posbuf[tid] = pos;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        simdgroup_float8x8 s0 = simdgroup_float8x8(0.0f);
        simdgroup_float8x8 s1 = simdgroup_float8x8(0.0f);
        for (uint c = 0; c < nch; ++c) {
            for (uint i = tid; i < QSA_BK * QSA_MM_BD; i += 128) {
                uint key = i / QSA_MM_BD;
                uint dd = i % QSA_MM_BD;
                uint d = c * QSA_MM_BD + dd;
                float x = 0.0f;
                if (key < nb && d < D) {
                    x = k[(posbuf[key] * p.Hkv + g) * D + d];
                }
                kvs[dd * QSA_BK + key] = x;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (uint kk = 0; kk < QSA_MM_BD; kk += 8) {
                simdgroup_float8x8 a0;
                simdgroup_float8x8 a1;
                simdgroup_float8x8 b;
                simdgroup_load(a0, qs + c * QSA_MM_BD + kk, Dp);
                simdgroup_load(a1, qs + 8 * Dp + c * QSA_MM_BD + kk, Dp);
                simdgroup_load(b, kvs + kk * QSA_BK + sg * 8, QSA_BK);
                simdgroup_multiply_accumulate(s0, a0, b, s0);
                simdgroup_multiply_accumulate(s1, a1, b, s1);
            }
            // kvs is restaged by the next chunk.
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        simdgroup_store(s0, sp + sg * 8, QSA_BK);
        simdgroup_store(s1, sp + 8 * QSA_BK + sg * 8, QSA_BK);
        threadgroup_barrier(mem_flags::mem_threadgroup);

        for (uint i = 0; i < 4; ++i) {
            uint r = sg * 4 + i;
            bool ok = r < R && lane < nb && posbuf[lane] <= p.pos0 + t0 + r / p.hpg;
            float sc = ok ? sp[r * QSA_BK + lane] * p.scale : QSA_NEG;
            float mnew = max(m[i], simd_max(sc));
            float corr = exp(m[i] - mnew);
            float pe = ok ? exp(sc - mnew) : 0.0f;
            l[i] = l[i] * corr + simd_sum(pe);
            m[i] = mnew;
            sp[r * QSA_BK + lane] = pe;
            if (lane == 0) {
                dg[64 + r] = corr;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // rows: the row (0..7) of each of this lane's elements of an 8x8 matrix.
        simdgroup_float8x8 rows;
        simdgroup_load(rows, dg, 8);
        for (uint c = 0; c < nch; ++c) {
            for (uint i = 0; i < 2; ++i) {
                for (uint j = 0; j < 2; ++j) {
                    for (uint e = 0; e < 2; ++e) {
                        acc[c][i][j].thread_elements()[e] *= dg[64 + i * 8 + uint(rows.thread_elements()[e])];
                    }
                }
            }
        }
        // A block with keys past the first token's limit runs its value product once per token.
        bool diagonal = false;
        for (uint key = 0; key < nb; ++key) {
            diagonal = diagonal || posbuf[key] > p.pos0 + t0;
        }
        uint npass = diagonal ? ntok : 1;
        simdgroup_float8x8 p0;
        simdgroup_float8x8 p1;
        for (uint c = 0; c < nch; ++c) {
            simdgroup_float8x8 prev[2][2];
            for (uint i = 0; i < 2; ++i) {
                for (uint j = 0; j < 2; ++j) {
                    prev[i][j] = acc[c][i][j];
                }
            }
            for (uint u = 0; u < npass; ++u) {
                uint limit = p.pos0 + t0 + (diagonal ? u : ntok - 1);
                for (uint i = tid; i < QSA_BK * QSA_MM_BD; i += 128) {
                    uint key = i / QSA_MM_BD;
                    uint dd = i % QSA_MM_BD;
                    uint d = c * QSA_MM_BD + dd;
                    float x = 0.0f;
                    if (key < nb && d < D && posbuf[key] <= limit) {
                        x = v[(posbuf[key] * p.Hkv + g) * D + d];
                    }
                    kvs[i] = x;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                simdgroup_float8x8 pv[2][2];
                for (uint i = 0; i < 2; ++i) {
                    for (uint j = 0; j < 2; ++j) {
                        pv[i][j] = prev[i][j];
                    }
                }
                for (uint kk = 0; kk < QSA_BK; kk += 8) {
                    simdgroup_load(p0, sp + kk, QSA_BK);
                    simdgroup_load(p1, sp + 8 * QSA_BK + kk, QSA_BK);
                    for (uint j = 0; j < 2; ++j) {
                        simdgroup_float8x8 vb;
                        simdgroup_load(vb, kvs + kk * QSA_MM_BD + sg * 16 + j * 8, QSA_MM_BD);
                        simdgroup_multiply_accumulate(pv[0][j], p0, vb, pv[0][j]);
                        simdgroup_multiply_accumulate(pv[1][j], p1, vb, pv[1][j]);
                    }
                }
                // Token u's rows keep this pass's result (every row, outside the diagonal).
                for (uint i = 0; i < 2; ++i) {
                    for (uint j = 0; j < 2; ++j) {
                        for (uint e = 0; e < 2; ++e) {
                            uint r = i * 8 + uint(rows.thread_elements()[e]);
                            if (!diagonal || r / p.hpg == u) {
                                acc[c][i][j].thread_elements()[e] = pv[i][j].thread_elements()[e];
                            }
                        }
                    }
                }
                // kvs is restaged by the next pass or chunk.
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
        }
        // sp, dg and posbuf are rewritten by the next block.
    }

    for (uint c = 0; c < nch; ++c) {
        for (uint i = 0; i < 2; ++i) {
            for (uint j = 0; j < 2; ++j) {
                simdgroup_store(acc[c][i][j], qs + i * 8 * Dp + c * QSA_MM_BD + sg * 16 + j * 8, Dp);
            }
        }
    }
    if (lane == 0) {
        for (uint i = 0; i < 4; ++i) {
            mrow[sg * 4 + i] = m[i];
            lrow[sg * 4 + i] = l[i];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < R * D; e += 128) {
        uint r = e / D;
        uint d = e % D;
        float inv = 1.0f / lrow[r];
        o[((t0 + r / p.hpg) * p.Hq + g * p.hpg + r % p.hpg) * D + d] = qs[r * Dp + d] * inv;
    }
    if (tid < R) {
        lse[(t0 + tid / p.hpg) * p.Hq + g * p.hpg + tid % p.hpg] = mrow[tid] + log(lrow[tid]);
    }
}
