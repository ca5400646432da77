// attention_tensor.metal: the attention of attention.metal's qsa_flash (causal, optionally
// QSA-sparse grouped-query attention over the cache, online softmax) with its two products on
// Metal 4 tensor ops (mpp::tensor_ops::matmul2d into cooperative tensors), for the GPUs whose
// matrix units run them (M5); the host (attention_tensor.go) picks these kernels there by
// capability, elsewhere only through Prefer.
//   qsa_flash_tensor  P in half, written over the dead S buffer, for the value product
//   qsa_attn_tensor   P in float: qsa_attn_mm's arithmetic in qsa_attn_mm's order
// Tile: the HPG query heads of one KV head for one token (grid (T, Hkv), 128 threads = 4
// simdgroups; HPG <= 16, D <= 256). Per block of 32 keys:
//   S [16 x 32] = Q [16 x D] K^T [D x 32] into a cooperative tensor (the rows past HPG are zero
//     and never stored), then stored into the [HPG x 32] view of the S buffer;
//   softmax on registers: simdgroup s owns rows 4s .. 4s+3, lane l key l: running max m and sum
//     l per row in float, the rescale factors exp(m_old - m_new) published per row;
//   P (PT) overwrites S in place once every S element is in registers;
//   O [16 x D] = diag(corr) O + P [16 x 32] V [32 x D], O held as cooperative tensors of 16 x 32
//     head dims, each element scaled by its row's factor (its row from the tensor's own index
//     map: nothing depends on the cooperative layout).
// Dense tiles read Q, K and V through tensor views of device memory (keys kb .. kb+31 of KV head
// g are rows of stride Hkv*D). Rows with a selection gather their keys: K and V are staged 32 keys
// x 32 head dims at a time in threadgroup memory and S accumulates over the chunks of D (on the
// emulator every element is then the same fma chain over ascending head dims as in the dense
// path; a GPU's matrix units order their sums themselves).
// Output o = O / l, lse = m + log(l). Threadgroup memory: S/P 4*HPG*32 B, with a selection the
// staging chunk 4 KiB (both dynamic, index 0), static 192 B (positions, row factors): HPG 12 ->
// 1,728 B dense, 5,824 B with a selection, at any D.
#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

// Function constant 0: rows may carry a sparse selection (dense flags, offsets, token lists).
constant bool qsa_sparse [[function_constant(0)]];

#define QT_RM 16      // rows of the product tiles (HPG query heads, zero-padded)
#define QT_BK 32      // keys per block: one per lane in the softmax
#define QT_BD 32      // head dims per O tile and per K/V staging chunk
#define QT_NCH 8      // O tiles: D <= QT_NCH * QT_BD = 256
#define QT_NEG -1.0e30f

typedef tensor<device const float, dextents<int32_t, 2>, tensor_inline> qt_dev;
typedef tensor<threadgroup float, dextents<int32_t, 2>, tensor_inline> qt_tg;

// The right operand type of the value product: V from device memory, or its staged chunk.
template <bool GATHER>
struct qt_vsrc {
    typedef qt_dev type;
};
template <>
struct qt_vsrc<true> {
    typedef qt_tg type;
};

// Sets every element of a cooperative tensor this thread holds.
template <typename C>
static inline void qt_fill(thread C& c, float x) {
    for (uint16_t i = 0; i < c.get_capacity(); ++i) {
        if (c.is_valid_element(i)) {
            c[i] = x;
        }
    }
}

// Multiplies each element of rows < hpg by f[row] (the row from the tensor's own index map).
template <typename C>
static inline void qt_scale_rows(thread C& c, threadgroup const float* f, uint hpg) {
    for (uint16_t i = 0; i < c.get_capacity(); ++i) {
        if (c.is_valid_element(i)) {
            uint r = uint(c.get_multidimensional_index(i)[1]);
            if (r < hpg) {
                c[i] *= f[r];
            }
        }
    }
}

// The rows of one tile; GATHER: the keys come from a selection list (K and V staged).
template <typename PT, bool GATHER>
static inline void qsa_tensor_rows(device float* o, device float* lse, const device float* q,
                                   const device float* k, const device float* v,
                                   const device int* sel_tok, uint soff, uint nkeys,
                                   constant QSAFlashParams& p, threadgroup float* tgm,
                                   threadgroup uint* posbuf, threadgroup float* rowf, uint2 tg, uint tid) {
    uint lane = tid % 32;
    uint sg = tid / 32;
    uint t = tg.x;
    uint g = tg.y;
    uint hpg = p.hpg;
    int D = int(p.D);
    uint limit = p.pos0 + t;
    uint kvstride = p.Hkv * uint(D);
    threadgroup float* sbuf = tgm;              // [hpg x QT_BK] scores, then P
    threadgroup float* kvs = tgm + hpg * QT_BK; // [QT_BK keys x QT_BD dims] staging (GATHER)
    threadgroup PT* pbuf = (threadgroup PT*)sbuf;

    // S = Q K^T over all of D at once (dense: K from device memory, one key per row of D dims)
    // or over one staged chunk of QT_BD dims (gathered keys), accumulated; O += P V for one tile
    // of QT_BD head dims.
    constexpr auto s_desc = matmul2d_descriptor(QT_RM, QT_BK, static_cast<int>(dynamic_extent), false, true, false,
                                                matmul2d_descriptor::mode::multiply_accumulate);
    constexpr auto sg_desc = matmul2d_descriptor(QT_RM, QT_BK, QT_BD, false, true, false,
                                                 matmul2d_descriptor::mode::multiply_accumulate);
    constexpr auto o_desc = matmul2d_descriptor(QT_RM, QT_BD, QT_BK, false, false, false,
                                                matmul2d_descriptor::mode::multiply_accumulate);
    matmul2d<s_desc, execution_simdgroups<4>> mm_s;
    matmul2d<sg_desc, execution_simdgroups<4>> mm_sg;
    matmul2d<o_desc, execution_simdgroups<4>> mm_o;
    // The tile's query rows: hpg rows of D, stride D.
    qt_dev qv(q + (t * p.Hq + g * hpg) * uint(D), dextents<int32_t, 2>(D, int(hpg)));
    qt_tg sview(sbuf, dextents<int32_t, 2>(QT_BK, int(hpg)));
    tensor<threadgroup PT, dextents<int32_t, 2>, tensor_inline> pview(pbuf, dextents<int32_t, 2>(QT_BK, int(hpg)));
    qt_tg kvview(kvs, dextents<int32_t, 2>(QT_BD, QT_BK));

    typedef decltype(mm_o.template get_destination_cooperative_tensor<decltype(pview), typename qt_vsrc<GATHER>::type, float>()) otile;
    otile oacc[QT_NCH];
    uint nch = (uint(D) + QT_BD - 1) / QT_BD;
    for (uint c = 0; c < QT_NCH; ++c) {
        qt_fill(oacc[c], 0.0f);
    }
    float m[4];
    float l[4];
    for (uint i = 0; i < 4; ++i) {
        m[i] = QT_NEG;
        l[i] = 0.0f;
    }

    for (uint kb = 0; kb < nkeys; kb += QT_BK) {
        uint nb = min(uint(QT_BK), nkeys - kb);
        if (tid < QT_BK) {
            uint pos = 0;
            if (tid < nb) {
                pos = GATHER ? uint(sel_tok[soff + kb + tid]) : kb + tid;
            }
            posbuf[tid] = pos;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        if (!GATHER) {
            qt_dev kview(k + (kb * p.Hkv + g) * uint(D), dextents<int32_t, 2>(D, int(nb)), array<int32_t, 2>{1, int(kvstride)});
            auto sacc = mm_s.template get_destination_cooperative_tensor<qt_dev, qt_dev, float>();
            qt_fill(sacc, 0.0f);
            mm_s.run(qv, kview, sacc);
            sacc.store(sview);
        } else {
            auto qc0 = qv.slice(0, 0);
            auto sacc = mm_sg.template get_destination_cooperative_tensor<decltype(qc0), qt_tg, float>();
            qt_fill(sacc, 0.0f);
            for (uint c = 0; c < nch; ++c) {
                for (uint i = tid; i < QT_BK * QT_BD; i += 128) {
                    uint key = i / QT_BD;
                    uint d = c * QT_BD + i % QT_BD;
                    kvs[i] = (key < nb && d < uint(D)) ? k[posbuf[key] * kvstride + g * uint(D) + d] : 0.0f;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                mm_sg.run(qv.slice(int(c * QT_BD), 0), kvview, sacc);
                // kvs is restaged by the next chunk.
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
            sacc.store(sview);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        float pe[4];
        for (uint i = 0; i < 4; ++i) {
            uint r = sg * 4 + i;
            pe[i] = 0.0f;
            if (r < hpg) {
                bool ok = lane < nb && posbuf[lane] <= limit;
                float sc = ok ? sbuf[r * QT_BK + lane] * p.scale : QT_NEG;
                float mnew = max(m[i], simd_max(sc));
                float corr = exp(m[i] - mnew);
                pe[i] = ok ? exp(sc - mnew) : 0.0f;
                l[i] = l[i] * corr + simd_sum(pe[i]);
                m[i] = mnew;
                if (lane == 0) {
                    rowf[r] = corr;
                }
            }
        }
        // Every score is in registers: P may overwrite the buffer.
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = 0; i < 4; ++i) {
            uint r = sg * 4 + i;
            if (r < hpg) {
                pbuf[r * QT_BK + lane] = PT(pe[i]);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        for (uint c = 0; c < QT_NCH; ++c) {
            if (c >= nch) {
                continue;
            }
            qt_scale_rows(oacc[c], rowf, hpg);
            if (!GATHER) {
                qt_dev vview(v + (kb * p.Hkv + g) * uint(D) + c * QT_BD, dextents<int32_t, 2>(D - int(c * QT_BD), int(nb)),
                             array<int32_t, 2>{1, int(kvstride)});
                mm_o.run(pview, vview, oacc[c]);
            } else {
                for (uint i = tid; i < QT_BK * QT_BD; i += 128) {
                    uint key = i / QT_BD;
                    uint d = c * QT_BD + i % QT_BD;
                    kvs[i] = (key < nb && d < uint(D)) ? v[posbuf[key] * kvstride + g * uint(D) + d] : 0.0f;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                mm_o.run(pview, kvview, oacc[c]);
                // kvs is restaged by the next chunk.
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
        }
        // P, the row factors and the positions are rewritten by the next block.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    for (uint i = 0; i < 4; ++i) {
        uint r = sg * 4 + i;
        if (r < hpg && lane == 0) {
            lse[t * p.Hq + g * hpg + r] = m[i] + log(l[i]);
            rowf[r] = 1.0f / l[i];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    tensor<device float, dextents<int32_t, 2>, tensor_inline> ov(o + (t * p.Hq + g * hpg) * uint(D), dextents<int32_t, 2>(D, int(hpg)));
    for (uint c = 0; c < QT_NCH; ++c) {
        if (c < nch) {
            qt_scale_rows(oacc[c], rowf, hpg);
            oacc[c].store(ov.slice(int(c * QT_BD), 0));
        }
    }
}

// One tile: its rows are dense (keys 0 .. pos0+t) or carry a selection (qsa_sparse).
template <typename PT>
static inline void qsa_tensor_tile(device float* o, device float* lse, const device float* q,
                                   const device float* k, const device float* v,
                                   const device int* sel_dense, const device int* sel_off,
                                   const device int* sel_tok, constant QSAFlashParams& p,
                                   threadgroup float* tgm, threadgroup uint* posbuf,
                                   threadgroup float* rowf, uint2 tg, uint tid) {
    uint t = tg.x;
    if (qsa_sparse) {
        if (sel_dense[t] == 0) {
            uint soff = uint(sel_off[t]);
            qsa_tensor_rows<PT, true>(o, lse, q, k, v, sel_tok, soff, uint(sel_off[t + 1]) - soff, p, tgm, posbuf, rowf, tg, tid);
            return;
        }
    }
    qsa_tensor_rows<PT, false>(o, lse, q, k, v, sel_tok, 0, p.pos0 + t + 1, p, tgm, posbuf, rowf, tg, tid);
}

// qsa_flash_tensor: grid (T, Hkv), 128 threads; threadgroup memory 4*HPG*32 B (+ 4 KiB with a
// selection) dynamic at index 0, 192 B static.
kernel void qsa_flash_tensor(device float* o [[buffer(0)]],
                             device float* lse [[buffer(1)]],
                             const device float* q [[buffer(2)]],
                             const device float* k [[buffer(3)]],
                             const device float* v [[buffer(4)]],
                             const device int* sel_dense [[buffer(5)]],
                             const device int* sel_off [[buffer(6)]],
                             const device int* sel_tok [[buffer(7)]],
                             constant QSAFlashParams& p [[buffer(8)]],
                             threadgroup float* tgm [[threadgroup(0)]],
                             uint2 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
    threadgroup uint posbuf[QT_BK];
    threadgroup float rowf[QT_RM];
    qsa_tensor_tile<half>(o, lse, q, k, v, sel_dense, sel_off, sel_tok, p, tgm, posbuf, rowf, tg, tid);
}

// qsa_attn_tensor: qsa_flash_tensor with P in float. Grid, threads and memory as qsa_flash_tensor.
kernel void qsa_attn_tensor(device float* o [[buffer(0)]],
                            device float* lse [[buffer(1)]],
                            const device float* q [[buffer(2)]],
                            const device float* k [[buffer(3)]],
                            const device float* v [[buffer(4)]],
                            const device int* sel_dense [[buffer(5)]],
                            const device int* sel_off [[buffer(6)]],
                            const device int* sel_tok [[buffer(7)]],
                            constant QSAFlashParams& p [[buffer(8)]],
                            threadgroup float* tgm [[threadgroup(0)]],
                            uint2 tg [[threadgroup_position_in_grid]],
                            uint tid [[thread_index_in_threadgroup]]) {
    threadgroup uint posbuf[QT_BK];
    threadgroup float rowf[QT_RM];
    qsa_tensor_tile<float>(o, lse, q, k, v, sel_dense, sel_off, sel_tok, p, tgm, posbuf, rowf, tg, tid);
}
