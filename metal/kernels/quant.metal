// quant.metal: y = x W^T and row gathers for weights W [N, K] quantized as MLX's affine mode
// (op.Quant), read in their packed form: per row a little-endian bit stream of K codes of
// q_bits bits, least significant bit first (3-, 5- and 6-bit codes straddle 32-bit words), and per
// group of q_group inputs a scale and a bias (bfloat16 or half bits, q_bf16), element
// w = scale * q + bias. Source: docs/FORMATS.md section 2 (mlx.core.quantize, mode "affine").
//   qmm_affine          prefill rows: 32 x 32 output tiles like gemm.metal, the W tile dequantized
//                       into threadgroup memory inside the K loop, 8x8 simdgroup matrices, float32
//                       accumulation; K in steps of 32 (K is a multiple of the group, so of 32)
//   qmm_affine_grouped  the MoE experts: W [E, N, K] stacked per expert, the tile table of
//                       moe_slot_plan (expert, first row, end row) per 32-row tile
//   qmv_affine          one or few rows (decode shapes): no threadgroup memory, each lane
//                       dequantizes 8 codes of a column at a time, simd_sum per output
//   qmv_affine_grouped  qmv_affine over the tile table of moe_slot_plan
//   qgather_affine      rows of a quantized table (embedding, PLE n-gram table) dequantized
// quant_tensor.metal (compiled after this file) holds the Metal 4 tensor-op form of qmm_affine;
// fpquant.metal (also compiled after it) reads the float formats through the same tile and row
// loops (qmm_tile, qmv_rows: templates over a weight source).
//
// Dequantized values are exact: scale * q needs at most 11 + 8 significant bits, so
// fma(scale, q, bias) rounds once, as optest.Dequant does, whether or not the compiler contracts.
// qmm_affine therefore gives gemm_w32's bits on the dequantized float32 weight (same tiles, same
// k-ascending fma chain per output element).
// Function constants: 0 q_bf16 (scales and biases are bfloat16, else half), 1 q_bits
// (2, 3, 4, 5, 6 or 8), 2 q_group (32, 64 or 128). All kernels assume 32-lane simdgroups.
#include <metal_stdlib>
using namespace metal;

constant bool q_bf16 [[function_constant(0)]];
constant int q_bits [[function_constant(1)]];
constant int q_group [[function_constant(2)]];

#define QMM_BM 32
#define QMM_BN 32
#define QMM_BK 32
#define QMV_ROWS 4 // rows of x per pass of qmv
#define QMV_COLS 4 // output columns per simdgroup of qmv (2 simdgroups: 8 per threadgroup)

static inline float q_widen(ushort b) {
    if (q_bf16) {
        return as_type<float>(uint(b) << 16);
    }
    return float(as_type<half>(b));
}

// q_dequant8: the 8 weights k .. k+7 (k % 8 == 0, so one group) of the row whose code words,
// scales and biases start at codes, scales, biases. The 8 codes are 8 * q_bits bits starting at
// bit k * q_bits, a multiple of 8 * q_bits: they span at most two aligned words, the second one
// read only when they reach into it (never past the row).
static inline void q_dequant8(const device uint* codes, const device ushort* scales, const device ushort* biases,
                              uint k, thread float* w) {
    uint bits = uint(q_bits);
    uint sb = k * bits;
    uint o = sb % 32;
    uint w0 = codes[sb / 32];
    uint w1 = o + 8 * bits > 32 ? codes[sb / 32 + 1] : 0u;
    // lo, hi: bits 0..31 and 32..63 of the stream from bit sb on.
    uint lo = o == 0 ? w0 : (w0 >> o) | (w1 << (32 - o));
    uint hi = o == 0 ? w1 : w1 >> o;
    uint mask = (1u << bits) - 1u;
    uint g = k / uint(q_group);
    float s = q_widen(scales[g]);
    float b = q_widen(biases[g]);
    for (uint j = 0; j < 8; ++j) {
        uint p = j * bits;
        uint q;
        if (p + bits <= 32) {
            q = lo >> p;
        } else if (p >= 32) {
            q = hi >> (p - 32);
        } else {
            q = (lo >> p) | (hi << (32 - p));
        }
        w[j] = fma(s, float(q & mask), b);
    }
}

// A weight source describes a weight [N, K] in device memory; w_dequant8(ws, n, k, w) gives its
// 8 weights k .. k+7 of row n (k % 8 == 0; zero for inputs past K). The tile and row loops below
// are written once over it (templates; each source's w_dequant8 is found by argument-dependent
// lookup where they are instantiated). AffineW is an MLX affine weight; fpquant.metal defines
// the float formats' source.
struct AffineW {
    const device uint* codes;
    const device ushort* scales;
    const device ushort* biases;
    uint K;
};

static inline void w_dequant8(thread const AffineW& ws, uint n, uint k, thread float* w) {
    uint words = ws.K * uint(q_bits) / 32;
    uint groups = ws.K / uint(q_group);
    q_dequant8(ws.codes + n * words, ws.scales + n * groups, ws.biases + n * groups, k, w);
}

// qmm_load: the x tile as [QMM_BM rows][QMM_BK] (rows r0 .. r1-1, zero past r1 and past K) and
// the W tile bs [QMM_BK][QMM_BN] (columns n0 .. n0+31 dequantized by ws, zero past N) for
// inputs k0 .. k0+31. Thread tid dequantizes 8 inputs of column tid % 32 (a simdgroup writes 32
// consecutive bs entries per input: no bank conflicts).
template <typename W>
static inline void qmm_load(const device float* x, thread const W& ws, uint r0, uint r1, uint n0, uint N, uint K,
                            uint k0, threadgroup float* as, threadgroup float* bs, uint tid) {
    for (uint e = tid; e < QMM_BM * QMM_BK; e += 128) {
        uint row = r0 + e / QMM_BK;
        uint k = k0 + e % QMM_BK;
        as[e] = row < r1 && k < K ? x[row * K + k] : 0.0f;
    }
    uint wn = tid % QMM_BN;
    uint wk = 8 * (tid / QMM_BN);
    uint ng = n0 + wn;
    float w[8];
    if (ng < N) {
        w_dequant8(ws, ng, k0 + wk, w);
    } else {
        for (uint j = 0; j < 8; ++j) {
            w[j] = 0.0f;
        }
    }
    for (uint j = 0; j < 8; ++j) {
        bs[(wk + j) * QMM_BN + wn] = w[j];
    }
}

// qmm_store: the output tile cs [QMM_BM][QMM_BN] into rows r0 .. r1-1, columns n0 .. N-1 of y.
static inline void qmm_store(device float* y, threadgroup const float* cs, uint r0, uint r1, uint n0, uint N,
                             uint tid) {
    for (uint e = tid; e < QMM_BM * QMM_BN; e += 128) {
        uint row = r0 + e / QMM_BN;
        uint ng = n0 + e % QMM_BN;
        if (row < r1 && ng < N) {
            y[row * N + ng] = cs[e];
        }
    }
}

// One 32 x 32 output tile of y = x W^T for the weight source ws: 4 simdgroups of 16 x 16 (2 x 2
// matrices), K in steps of QMM_BK. as and bs are 4 KiB each; as stages the output tile after
// the K loop.
template <typename W>
static inline void qmm_tile(device float* y, const device float* x, thread const W& ws, uint r0, uint r1, uint n0,
                            uint N, uint K, threadgroup float* as, threadgroup float* bs, uint tid) {
    uint sg = tid / 32;
    uint sm = sg / 2;
    uint sn = sg % 2;
    simdgroup_float8x8 c[2][2];
    for (uint i = 0; i < 2; ++i) {
        for (uint j = 0; j < 2; ++j) {
            c[i][j] = simdgroup_float8x8(0.0f);
        }
    }
    for (uint k0 = 0; k0 < K; k0 += QMM_BK) {
        qmm_load(x, ws, r0, r1, n0, N, K, k0, as, bs, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < QMM_BK; kk += 8) {
            simdgroup_float8x8 a[2];
            simdgroup_float8x8 b[2];
            for (uint i = 0; i < 2; ++i) {
                simdgroup_load(a[i], as + (sm * 16 + i * 8) * QMM_BK + kk, QMM_BK);
            }
            for (uint j = 0; j < 2; ++j) {
                simdgroup_load(b[j], bs + kk * QMM_BN + sn * 16 + j * 8, QMM_BN);
            }
            for (uint i = 0; i < 2; ++i) {
                for (uint j = 0; j < 2; ++j) {
                    simdgroup_multiply_accumulate(c[i][j], a[i], b[j], c[i][j]);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint i = 0; i < 2; ++i) {
        for (uint j = 0; j < 2; ++j) {
            simdgroup_store(c[i][j], as + (sm * 16 + i * 8) * QMM_BN + sn * 16 + j * 8, QMM_BN);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    qmm_store(y, as, r0, r1, n0, N, tid);
}

// qmm_affine: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void qmm_affine(device float* y [[buffer(0)]],
                       const device float* x [[buffer(1)]],
                       const device uint* codes [[buffer(2)]],
                       const device ushort* scales [[buffer(3)]],
                       const device ushort* biases [[buffer(4)]],
                       constant GemmParams& p [[buffer(5)]],
                       uint2 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint r0 = tg.y * QMM_BM;
    AffineW ws = {codes, scales, biases, p.K};
    qmm_tile(y, x, ws, r0, min(r0 + QMM_BM, p.rows), tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// The weights of expert e in a stack of E [N, K] weights.
static inline const device uint* q_expert_codes(const device uint* codes, uint e, uint N, uint K) {
    return codes + ulong(e) * N * (K * uint(q_bits) / 32);
}

static inline const device ushort* q_expert_groups(const device ushort* v, uint e, uint N, uint K) {
    return v + ulong(e) * N * (K / uint(q_group));
}

// qmm_affine_grouped: grid (ceil(N / 32), tiles), 128 threads; tiles[3*i ..] = (expert, first
// row, end row) with at most 32 rows, rows sorted by expert. Threadgroup memory: 8 KiB.
kernel void qmm_affine_grouped(device float* y [[buffer(0)]],
                               const device float* x [[buffer(1)]],
                               const device uint* codes [[buffer(2)]],
                               const device ushort* scales [[buffer(3)]],
                               const device ushort* biases [[buffer(4)]],
                               const device int* tiles [[buffer(5)]],
                               constant GemmParams& p [[buffer(6)]],
                               uint2 tg [[threadgroup_position_in_grid]],
                               uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return; // an empty entry of a tile table sized for the worst case (uniform per threadgroup)
    }
    AffineW ws = {q_expert_codes(codes, e, p.N, p.K), q_expert_groups(scales, e, p.N, p.K),
                  q_expert_groups(biases, e, p.N, p.K), p.K};
    qmm_tile(y, x, ws, r0, r1, tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmv_rows: y[r, n] for rows r0 .. r1-1 and the QMV_COLS columns n0 .. of one simdgroup, in
// passes of QMV_ROWS rows, for the weight source ws. Lane l sums inputs 8l .. 8l+7, 256 + 8l ..
// in order (dequantize, then fma; x and w are zero past K), then simd_sum adds the lanes;
// columns past N are skipped (uniform in the simdgroup).
template <typename W>
static inline void qmv_rows(device float* y, const device float* x, thread const W& ws, uint r0, uint r1, uint n0,
                            uint N, uint K, uint lane) {
    for (uint rb = r0; rb < r1; rb += QMV_ROWS) {
        uint nr = min(uint(QMV_ROWS), r1 - rb);
        float acc[QMV_ROWS][QMV_COLS];
        for (uint r = 0; r < QMV_ROWS; ++r) {
            for (uint c = 0; c < QMV_COLS; ++c) {
                acc[r][c] = 0.0f;
            }
        }
        for (uint k = 8 * lane; k < K; k += 256) {
            float xv[QMV_ROWS][8];
            for (uint r = 0; r < QMV_ROWS; ++r) {
                for (uint j = 0; j < 8; ++j) {
                    xv[r][j] = r < nr && k + j < K ? x[(rb + r) * K + k + j] : 0.0f;
                }
            }
            for (uint c = 0; c < QMV_COLS; ++c) {
                uint n = n0 + c;
                if (n >= N) {
                    break;
                }
                float w[8];
                w_dequant8(ws, n, k, w);
                for (uint r = 0; r < QMV_ROWS; ++r) {
                    for (uint j = 0; j < 8; ++j) {
                        acc[r][c] = fma(xv[r][j], w[j], acc[r][c]);
                    }
                }
            }
        }
        for (uint r = 0; r < QMV_ROWS; ++r) {
            for (uint c = 0; c < QMV_COLS; ++c) {
                float s = simd_sum(acc[r][c]);
                if (lane == 0 && r < nr && n0 + c < N) {
                    y[(rb + r) * N + n0 + c] = s;
                }
            }
        }
    }
}

// qmv_affine: grid (ceil(N / 8), ceil(rows / QMV_ROWS)), 64 threads (2 simdgroups of 4 columns).
// No threadgroup memory.
kernel void qmv_affine(device float* y [[buffer(0)]],
                       const device float* x [[buffer(1)]],
                       const device uint* codes [[buffer(2)]],
                       const device ushort* scales [[buffer(3)]],
                       const device ushort* biases [[buffer(4)]],
                       constant GemmParams& p [[buffer(5)]],
                       uint2 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]]) {
    uint r0 = tg.y * QMV_ROWS;
    uint n0 = (tg.x * 2 + tid / 32) * QMV_COLS;
    AffineW ws = {codes, scales, biases, p.K};
    qmv_rows(y, x, ws, r0, min(r0 + QMV_ROWS, p.rows), n0, p.N, p.K, tid % 32);
}

// qmv_affine_grouped: grid (ceil(N / 8), tiles), 64 threads, over the tile table of
// qmm_affine_grouped (a tile's rows in passes of QMV_ROWS). No threadgroup memory.
kernel void qmv_affine_grouped(device float* y [[buffer(0)]],
                               const device float* x [[buffer(1)]],
                               const device uint* codes [[buffer(2)]],
                               const device ushort* scales [[buffer(3)]],
                               const device ushort* biases [[buffer(4)]],
                               const device int* tiles [[buffer(5)]],
                               constant GemmParams& p [[buffer(6)]],
                               uint2 tg [[threadgroup_position_in_grid]],
                               uint tid [[thread_index_in_threadgroup]]) {
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return;
    }
    uint n0 = (tg.x * 2 + tid / 32) * QMV_COLS;
    AffineW ws = {q_expert_codes(codes, e, p.N, p.K), q_expert_groups(scales, e, p.N, p.K),
                  q_expert_groups(biases, e, p.N, p.K), p.K};
    qmv_rows(y, x, ws, r0, r1, n0, p.N, p.K, tid % 32);
}

// qgather_affine: out[(r * rep + s) * K + d] = table[ids[r], d] dequantized, for r < rows and
// every copy s < rep (Embed: ids = tokens, rep = S streams; PLE: ids = the hashed n-gram ids,
// rep = 1). The ids are checked on the host. Grid (ceil(K / ntg), rows), one thread per element.
// No threadgroup memory.
kernel void qgather_affine(device float* out [[buffer(0)]],
                           const device uint* codes [[buffer(1)]],
                           const device ushort* scales [[buffer(2)]],
                           const device ushort* biases [[buffer(3)]],
                           const device int* ids [[buffer(4)]],
                           constant QGatherParams& p [[buffer(5)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint2 ntg2 [[threads_per_threadgroup]]) {
    uint r = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.K) {
        return;
    }
    uint bits = uint(q_bits);
    uint row = uint(ids[r]);
    const device uint* rc = codes + row * (p.K * bits / 32);
    uint sb = d * bits;
    uint o = sb % 32;
    uint v = rc[sb / 32] >> o;
    if (o + bits > 32) {
        v |= rc[sb / 32 + 1] << (32 - o);
    }
    uint g = row * (p.K / uint(q_group)) + d / uint(q_group);
    float w = fma(q_widen(scales[g]), float(v & ((1u << bits) - 1u)), q_widen(biases[g]));
    for (uint s = 0; s < p.rep; ++s) {
        out[(r * p.rep + s) * p.K + d] = w;
    }
}
