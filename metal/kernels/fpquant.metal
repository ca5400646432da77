// fpquant.metal: y = x W^T and row gathers for weights W [N, K] stored as 8-bit and 4-bit floats,
// read in their packed form (op/weights_fp.go): FP8Block, E4M3 codes (one byte each, row-major)
// with one BF16 or F32 scale per 128 x 128 block (the last block row and column ragged), and
// MLX's floating-point modes, codes packed little-endian into 32-bit words with one 8-bit scale
// per group: mxfp4 (E2M1 nibbles, low nibble first, E8M0 scales, groups of 32), nvfp4 (E2M1, E4M3
// scales, groups of 16) and mxfp8 (E4M3 bytes, E8M0 scales, groups of 32). An element is
// decode(code) * decode(scale), one float32 multiply, as the CPU kernels compute it (bitwise the
// same values where the GPU keeps float32 subnormals; the emulator does). Sources: mlx's fp4.h,
// fp8.h and fp_quantized.h (element and scale decoders), transformers' finegrained_fp8.py (the
// FP8 block layout).
// Compiled after quant.metal (Backend.library concatenates them): its 32 x 32 tile (qmm_tile)
// and row loop (qmv_rows) run over this file's weight source, so the kernels have the affine
// kernels' summation order.
//   qmm_fp          prefill rows: qmm_affine's tile with the W tile decoded into threadgroup memory
//   qmm_fp_grouped  the MoE experts: W [E, N, K] stacked per expert (codes, then scales), the
//                   tile table of moe_slot_plan
//   qmv_fp          one or few rows: qmv_affine's lanes over K
//   qmv_fp_grouped  qmv_fp over the tile table
//   qgather_fp      rows of a table (embedding, PLE n-gram table) decoded
// fpquant_tensor.metal holds the Metal 4 tensor-op form of qmm_fp.
// Function constant 3 fp_format: 0 FP8Block with BF16 scales, 1 FP8Block with F32 scales,
// 2 mxfp4, 3 nvfp4, 4 mxfp8. K is any width for FP8Block (codes past K read as zero weights, x
// past K as zero) and a multiple of the group for the MLX modes.

constant int fp_format [[function_constant(3)]];

#define FP_FP8_BF16 0
#define FP_FP8_F32 1
#define FP_MXFP4 2
#define FP_NVFP4 3
#define FP_MXFP8 4
#define FP8_BLOCK 128

static inline bool fp_block() {
    return fp_format == FP_FP8_BF16 || fp_format == FP_FP8_F32;
}

static inline bool fp_nibbles() {
    return fp_format == FP_MXFP4 || fp_format == FP_NVFP4;
}

static inline uint fp_group() {
    return fp_format == FP_NVFP4 ? 16u : 32u;
}

// fp_e4m3: E4M3 code b (float8_e4m3fn): a normal code (exponent > 0) is its magnitude's bits
// moved to a float32's (the exponent rebased from bias 7 to 127), a subnormal one m * 2^-9
// (exact), 0x7f / 0xff the quiet NaN; bit 7 the sign.
static inline float fp_e4m3(uint b) {
    uint mag = b & 0x7fu;
    uint v = mag < 8u ? as_type<uint>(float(mag) * (1.0f / 512.0f)) : (mag << 20) + (120u << 23);
    if (mag == 0x7fu) {
        v = 0x7fc00000u;
    }
    return as_type<float>(v | ((b & 0x80u) << 24));
}

// The 16 E2M1 values (codes 8 .. 15 are 0 .. 7 negated; 8 is -0).
constant float fp_e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// fp_e8m0: E8M0 scale s as a float32, 2^(s - 127): s = 0 the subnormal 2^-127, 255 +Inf.
static inline float fp_e8m0(uint s) {
    return as_type<float>(s == 0u ? 0x00400000u : s << 23);
}

// FloatW is one float-format weight [N, K] as a weight source of quant.metal's loops: its codes
// and scales (bytes: BF16 or F32 block scales, or 8-bit codes).
struct FloatW {
    const device uchar* codes;
    const device uchar* scales;
    uint K;
};

// fp_scale: the scale of input k of row n.
static inline float fp_scale(thread const FloatW& ws, uint n, uint k) {
    if (fp_block()) {
        uint g = n / FP8_BLOCK * ((ws.K + FP8_BLOCK - 1) / FP8_BLOCK) + k / FP8_BLOCK;
        if (fp_format == FP_FP8_F32) {
            return ((const device float*)ws.scales)[g];
        }
        return as_type<float>(uint(((const device ushort*)ws.scales)[g]) << 16);
    }
    uint s = ws.scales[n * (ws.K / fp_group()) + k / fp_group()];
    return fp_format == FP_NVFP4 ? fp_e4m3(s) : fp_e8m0(s);
}

// w_dequant8: the 8 weights k .. k+7 of row n (k % 8 == 0: one block or group), zero past K
// (FP8Block rows of any width; the last K step of a tile reaches past K when 32 does not divide
// it). A 4-bit row's codes start on a word (K is a multiple of 16).
static inline void w_dequant8(thread const FloatW& ws, uint n, uint k, thread float* w) {
    if (k >= ws.K) {
        for (uint j = 0; j < 8; ++j) {
            w[j] = 0.0f;
        }
        return;
    }
    float s = fp_scale(ws, n, k);
    if (fp_nibbles()) {
        uint word = ((const device uint*)ws.codes)[(n * ws.K + k) / 8];
        for (uint j = 0; j < 8; ++j) {
            w[j] = fp_e2m1[(word >> (4 * j)) & 15u] * s;
        }
        return;
    }
    const device uchar* c = ws.codes + n * ws.K + k;
    for (uint j = 0; j < 8; ++j) {
        w[j] = k + j < ws.K ? fp_e4m3(c[j]) * s : 0.0f;
    }
}

// fp_weight: the weight of input d of row n.
static inline float fp_weight(thread const FloatW& ws, uint n, uint d) {
    uint i = n * ws.K + d;
    float v = fp_nibbles() ? fp_e2m1[(ws.codes[i / 2] >> (4 * (i % 2))) & 15u] : fp_e4m3(ws.codes[i]);
    return v * fp_scale(ws, n, d);
}

// fp_expert: expert e of a stack of E weights [N, K] (each expert's codes after expert e-1's,
// likewise its scales).
static inline FloatW fp_expert(const device uchar* codes, const device uchar* scales, uint e, uint N, uint K) {
    ulong cbytes = fp_nibbles() ? ulong(N) * K / 2 : ulong(N) * K;
    ulong sbytes = ulong(N) * (K / fp_group());
    if (fp_block()) {
        sbytes = ulong((N + FP8_BLOCK - 1) / FP8_BLOCK) * ((K + FP8_BLOCK - 1) / FP8_BLOCK) *
                 (fp_format == FP_FP8_F32 ? 4 : 2);
    }
    FloatW ws = {codes + e * cbytes, scales + e * sbytes, K};
    return ws;
}

// qmm_fp: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void qmm_fp(device float* y [[buffer(0)]],
                   const device float* x [[buffer(1)]],
                   const device uchar* codes [[buffer(2)]],
                   const device uchar* scales [[buffer(3)]],
                   constant GemmParams& p [[buffer(4)]],
                   uint2 tg [[threadgroup_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint r0 = tg.y * QMM_BM;
    FloatW ws = {codes, scales, p.K};
    qmm_tile(y, x, ws, r0, min(r0 + QMM_BM, p.rows), tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmm_fp_grouped: grid (ceil(N / 32), tiles), 128 threads; tiles[3*i ..] = (expert, first row,
// end row) with at most 32 rows, rows sorted by expert. Threadgroup memory: 8 KiB.
kernel void qmm_fp_grouped(device float* y [[buffer(0)]],
                           const device float* x [[buffer(1)]],
                           const device uchar* codes [[buffer(2)]],
                           const device uchar* scales [[buffer(3)]],
                           const device int* tiles [[buffer(4)]],
                           constant GemmParams& p [[buffer(5)]],
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
    FloatW ws = fp_expert(codes, scales, e, p.N, p.K);
    qmm_tile(y, x, ws, r0, r1, tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmv_fp: grid (ceil(N / 8), ceil(rows / QMV_ROWS)), 64 threads (2 simdgroups of 4 columns).
// No threadgroup memory.
kernel void qmv_fp(device float* y [[buffer(0)]],
                   const device float* x [[buffer(1)]],
                   const device uchar* codes [[buffer(2)]],
                   const device uchar* scales [[buffer(3)]],
                   constant GemmParams& p [[buffer(4)]],
                   uint2 tg [[threadgroup_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]]) {
    uint r0 = tg.y * QMV_ROWS;
    uint n0 = (tg.x * 2 + tid / 32) * QMV_COLS;
    FloatW ws = {codes, scales, p.K};
    qmv_rows(y, x, ws, r0, min(r0 + QMV_ROWS, p.rows), n0, p.N, p.K, tid % 32);
}

// qmv_fp_grouped: grid (ceil(N / 8), tiles), 64 threads, over the tile table of qmm_fp_grouped.
// No threadgroup memory.
kernel void qmv_fp_grouped(device float* y [[buffer(0)]],
                           const device float* x [[buffer(1)]],
                           const device uchar* codes [[buffer(2)]],
                           const device uchar* scales [[buffer(3)]],
                           const device int* tiles [[buffer(4)]],
                           constant GemmParams& p [[buffer(5)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]]) {
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return;
    }
    uint n0 = (tg.x * 2 + tid / 32) * QMV_COLS;
    FloatW ws = fp_expert(codes, scales, e, p.N, p.K);
    qmv_rows(y, x, ws, r0, r1, n0, p.N, p.K, tid % 32);
}

// qgather_fp: out[(r * rep + s) * K + d] = table[ids[r], d] decoded, for r < rows and every
// copy s < rep (Embed: ids = tokens, rep = S streams; PLE: the hashed n-gram ids, rep = 1). The
// ids are checked on the host. Grid (ceil(K / ntg), rows), one thread per element. No
// threadgroup memory.
kernel void qgather_fp(device float* out [[buffer(0)]],
                       const device uchar* codes [[buffer(1)]],
                       const device uchar* scales [[buffer(2)]],
                       const device int* ids [[buffer(3)]],
                       constant QGatherParams& p [[buffer(4)]],
                       uint2 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint2 ntg2 [[threads_per_threadgroup]]) {
    uint r = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.K) {
        return;
    }
    FloatW ws = {codes, scales, p.K};
    float w = fp_weight(ws, uint(ids[r]), d);
    for (uint s = 0; s < p.rep; ++s) {
        out[(r * p.rep + s) * p.K + d] = w;
    }
}
