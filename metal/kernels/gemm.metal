// gemm.metal: y = x W^T (nn.Linear without bias) for float32 activations x [rows, K] and 16-bit
// weights W [N, K] (bfloat16 or half, function constant 0) or float32 weights, float32
// accumulation on 8x8 simdgroup matrices.
//   gemm_w16          one weight
//   gemm_w32          one float32 weight (norm-sized vectors, widened or float32 checkpoints);
//                     the same tile and summation order as gemm_w16
//   gemm_w16_grouped  the MoE experts: rows sorted by expert, one weight [N, K] per expert in
//                     W [E, N, K], a tile table (expert, first row, end row) per 32-row tile
// Tile: 32 rows x 32 output columns per threadgroup, 4 simdgroups of 16 x 16 (2 x 2 matrices),
// K in steps of 16; every output element sums its K products in the same order whatever the
// grid, so results do not depend on the row count or the tile's place.
#include <metal_stdlib>
using namespace metal;

constant bool gemm_bf16 [[function_constant(0)]];

#define GEMM_BM 32
#define GEMM_BN 32
#define GEMM_BK 16

static inline float widen16(ushort b) {
    if (gemm_bf16) {
        return as_type<float>(uint(b) << 16);
    }
    return float(as_type<half>(b));
}

// Weight element i as float32: 16-bit weights widen exactly, float32 weights load as they are.
static inline float wload(const device ushort* w, uint i) {
    return widen16(w[i]);
}

static inline float wload(const device float* w, uint i) {
    return w[i];
}

// One 32 x 32 output tile: rows r0 .. r1-1 of x and y, output columns n0 .. n0+31 of w.
// Threadgroup memory (static): A 2 KiB + B 2 KiB + C staging 4 KiB = 8 KiB, 4 threadgroups per
// core by memory.
template <typename W>
static inline void gemm_tile(device float* y, const device float* x, const device W* w,
                             uint r0, uint r1, uint n0, uint N, uint K,
                             threadgroup float* as, threadgroup float* bs, threadgroup float* cs,
                             uint tid) {
    uint sg = tid / 32;
    uint sm = sg / 2; // simdgroup row block (16 rows)
    uint sn = sg % 2; // simdgroup column block (16 columns)
    simdgroup_float8x8 c[2][2];
    for (uint i = 0; i < 2; ++i) {
        for (uint j = 0; j < 2; ++j) {
            c[i][j] = simdgroup_float8x8(0.0f);
        }
    }
    for (uint k0 = 0; k0 < K; k0 += GEMM_BK) {
        for (uint e = tid; e < GEMM_BM * GEMM_BK; e += 128) {
            uint r = e / GEMM_BK;
            uint kk = e % GEMM_BK;
            uint row = r0 + r;
            uint kg = k0 + kk;
            as[e] = (row < r1 && kg < K) ? x[row * K + kg] : 0.0f;
        }
        for (uint e = tid; e < GEMM_BN * GEMM_BK; e += 128) {
            uint n = e / GEMM_BK;
            uint kk = e % GEMM_BK;
            uint ng = n0 + n;
            uint kg = k0 + kk;
            bs[kk * GEMM_BN + n] = (ng < N && kg < K) ? wload(w, ng * K + kg) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < GEMM_BK; kk += 8) {
            simdgroup_float8x8 a[2];
            simdgroup_float8x8 b[2];
            for (uint i = 0; i < 2; ++i) {
                simdgroup_load(a[i], as + (sm * 16 + i * 8) * GEMM_BK + kk, GEMM_BK);
            }
            for (uint j = 0; j < 2; ++j) {
                simdgroup_load(b[j], bs + kk * GEMM_BN + sn * 16 + j * 8, GEMM_BN);
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
            simdgroup_store(c[i][j], cs + (sm * 16 + i * 8) * GEMM_BN + sn * 16 + j * 8, GEMM_BN);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < GEMM_BM * GEMM_BN; e += 128) {
        uint r = e / GEMM_BN;
        uint n = e % GEMM_BN;
        uint row = r0 + r;
        uint ng = n0 + n;
        if (row < r1 && ng < N) {
            y[row * N + ng] = cs[e];
        }
    }
}

// gemm_w16: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void gemm_w16(device float* y [[buffer(0)]],
                     const device float* x [[buffer(1)]],
                     const device ushort* w [[buffer(2)]],
                     constant GemmParams& p [[buffer(3)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[GEMM_BM * GEMM_BK];
    threadgroup float bs[GEMM_BK * GEMM_BN];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    uint r0 = tg.y * GEMM_BM;
    gemm_tile(y, x, w, r0, min(r0 + GEMM_BM, p.rows), tg.x * GEMM_BN, p.N, p.K, as, bs, cs, tid);
}

// gemm_w32: gemm_w16 for a float32 weight. Grid (ceil(N / 32), ceil(rows / 32)), 128 threads.
// Threadgroup memory: 8 KiB.
kernel void gemm_w32(device float* y [[buffer(0)]],
                     const device float* x [[buffer(1)]],
                     const device float* w [[buffer(2)]],
                     constant GemmParams& p [[buffer(3)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[GEMM_BM * GEMM_BK];
    threadgroup float bs[GEMM_BK * GEMM_BN];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    uint r0 = tg.y * GEMM_BM;
    gemm_tile(y, x, w, r0, min(r0 + GEMM_BM, p.rows), tg.x * GEMM_BN, p.N, p.K, as, bs, cs, tid);
}

// gemm_w16_grouped: grid (ceil(N / 32), tiles), 128 threads; tiles[3*i ..] = (expert, first row,
// end row) with at most 32 rows, rows sorted by expert. Threadgroup memory: 8 KiB.
kernel void gemm_w16_grouped(device float* y [[buffer(0)]],
                             const device float* x [[buffer(1)]],
                             const device ushort* w [[buffer(2)]],
                             const device int* tiles [[buffer(3)]],
                             constant GemmParams& p [[buffer(4)]],
                             uint2 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[GEMM_BM * GEMM_BK];
    threadgroup float bs[GEMM_BK * GEMM_BN];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return; // an empty entry of a tile table sized for the worst case (uniform per threadgroup)
    }
    const device ushort* we = w + ulong(e) * p.N * p.K;
    gemm_tile(y, x, we, r0, r1, tg.x * GEMM_BN, p.N, p.K, as, bs, cs, tid);
}

// gemm_w32_grouped: gemm_w16_grouped for float32 expert weights. Threadgroup memory: 8 KiB.
kernel void gemm_w32_grouped(device float* y [[buffer(0)]],
                             const device float* x [[buffer(1)]],
                             const device float* w [[buffer(2)]],
                             const device int* tiles [[buffer(3)]],
                             constant GemmParams& p [[buffer(4)]],
                             uint2 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[GEMM_BM * GEMM_BK];
    threadgroup float bs[GEMM_BK * GEMM_BN];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return; // an empty entry of a tile table sized for the worst case (uniform per threadgroup)
    }
    const device float* we = w + ulong(e) * p.N * p.K;
    gemm_tile(y, x, we, r0, r1, tg.x * GEMM_BN, p.N, p.K, as, bs, cs, tid);
}

// swiglu: h[r, i] = silu(gu[r, i]) * gu[r, I + i] for gu [rows, 2I] (gate columns first).
// Grid ceil(rows * I / ntg). No threadgroup memory.
kernel void swiglu(device float* h [[buffer(0)]],
                   const device float* gu [[buffer(1)]],
                   constant SwiGLUParams& p [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
    if (i >= p.rows * p.I) {
        return;
    }
    uint r = i / p.I;
    uint c = i % p.I;
    float gv = gu[r * 2 * p.I + c];
    h[i] = gv / (1.0f + exp(-gv)) * gu[r * 2 * p.I + p.I + c];
}

// swiglu_split: h[i] = silu(g[i]) * u[i] for g, u [rows, I]: the gate and up products of experts
// whose gate and up projections have different storage formats (two grouped GEMMs).
// Grid ceil(rows * I / ntg). No threadgroup memory.
kernel void swiglu_split(device float* h [[buffer(0)]],
                         const device float* g [[buffer(1)]],
                         const device float* u [[buffer(2)]],
                         constant SwiGLUParams& p [[buffer(3)]],
                         uint i [[thread_position_in_grid]]) {
    if (i >= p.rows * p.I) {
        return;
    }
    float gv = g[i];
    h[i] = gv / (1.0f + exp(-gv)) * u[i];
}
