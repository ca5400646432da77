// ggml.metal: y = x W^T and row gathers for weights W [N, K] stored in ggml's block-quantized
// types (op.GGMLBlocks: the GGUF file's bytes as they are), read in that form. Row n is K / B
// blocks of S bytes (B elements each, B = 32 or 256) starting at byte n * (K / B) * S; each
// block is ggml's block_<type> struct, little-endian, packed (no alignment: a block of 18, 22,
// 34, 110 or 210 bytes puts its halves on odd addresses, so every field is read as bytes).
// Sources: ggml/src/ggml-common.h (the block structs) and the dequantize_row_<type> functions
// of ggml/src/ggml-quants.c of llama.cpp; docs/FORMATS.md, section GGUF. Each element is
// computed as ggml's dequantizer computes it in float32, operation for operation:
//   Q4_0   d (f16), 16 bytes of nibbles: w = (q - 8) * d
//   Q4_1   d, m (f16), nibbles: w = q * d + m
//   Q5_0   d, 32 high bits (uint32), nibbles: w = (q - 16) * d
//   Q5_1   d, m, high bits, nibbles: w = q * d + m
//   Q8_0   d, 32 int8: w = q * d
//   MXFP4  e (E8M0), nibbles: w = kv[q] * 2^(e - 128), kv the E2M1 values doubled
//   IQ4_NL d, nibbles: w = d * kv[q], kv the 16-entry non-linear table
//   Q2_K   16 scale bytes (4-bit scale, 4-bit min), 2-bit codes, d, dmin:
//          w = (d * sc) * q - dmin * m, sub-blocks of 16
//   Q3_K   high-bit mask, 2-bit codes, 16 6-bit scales in 12 bytes, d:
//          w = (d * (sc - 32)) * (q - 4 * !high), sub-blocks of 16
//   Q4_K   d, dmin, 8 6-bit scales and mins in 12 bytes, nibbles:
//          w = (d * sc) * q - dmin * m, sub-blocks of 32
//   Q5_K   as Q4_K with a fifth bit from 32 high-bit bytes
//   Q6_K   low nibbles, 2 high bits, 16 int8 scales, d: w = (d * sc) * (q - 32), sub-blocks of 16
//   IQ4_XS d, 8 6-bit scales (2 high bits in a uint16, 4 low in 4 bytes), nibbles:
//          w = (d * (sc - 32)) * kv[q], kv IQ4_NL's table, sub-blocks of 32
// Every product of a scale and a code above is exact in float32 except Q6_K's and IQ4_XS's last
// one (up to 25 significant bits), which rounds once as ggml's does; an add or subtract of a
// min rounds once (fused or not: the product before it is exact). So the values are ggml's bits
// (optest.DequantGGML's), on a GPU too where it keeps float32 subnormals, which only MXFP4's
// scales of e = 0 and 1 (and products of them) reach.
// Compiled after quant.metal (Backend.library concatenates them): its 32 x 32 tile (qmm_tile)
// and row loop (qmv_rows) run over this file's weight source, so the kernels have the affine
// kernels' summation order.
//   qmm_gg          prefill rows: qmm_affine's tile with the W tile decoded into threadgroup memory
//   qmm_gg_grouped  the MoE experts: W [E, N, K], expert e's rows after expert e-1's, the tile
//                   table of moe_slot_plan
//   qmv_gg          one or few rows: qmv_affine's lanes over K
//   qmv_gg_grouped  qmv_gg over the tile table
//   qgather_gg      rows of a table (embedding, PLE n-gram table) decoded
// ggml_tensor.metal holds the Metal 4 tensor-op form of qmm_gg.
// Function constant 3 gg_type: ggml's type id (op.GGMLType) of the weight, one of the types
// below. K is a multiple of the type's block (so of 32: the tile's K steps and the decoder's
// groups of 8 never straddle a block).

constant int gg_type [[function_constant(3)]];

#define GG_Q4_0 2
#define GG_Q4_1 3
#define GG_Q5_0 6
#define GG_Q5_1 7
#define GG_Q8_0 8
#define GG_Q2_K 10
#define GG_Q3_K 11
#define GG_Q4_K 12
#define GG_Q5_K 13
#define GG_Q6_K 14
#define GG_IQ4_NL 20
#define GG_IQ4_XS 23
#define GG_MXFP4 39

// gg_block: elements per block of gg_type.
static inline uint gg_block() {
    switch (gg_type) {
    case GG_Q2_K:
    case GG_Q3_K:
    case GG_Q4_K:
    case GG_Q5_K:
    case GG_Q6_K:
    case GG_IQ4_XS:
        return 256u;
    default:
        return 32u;
    }
}

// gg_block_bytes: bytes per block of gg_type (sizeof ggml's block_<type>).
static inline uint gg_block_bytes() {
    switch (gg_type) {
    case GG_Q4_0:
    case GG_IQ4_NL:
        return 18u;
    case GG_Q4_1:
        return 20u;
    case GG_Q5_0:
        return 22u;
    case GG_Q5_1:
        return 24u;
    case GG_Q8_0:
        return 34u;
    case GG_MXFP4:
        return 17u;
    case GG_Q2_K:
        return 84u;
    case GG_Q3_K:
        return 110u;
    case GG_Q4_K:
        return 144u;
    case GG_Q5_K:
        return 176u;
    case GG_Q6_K:
        return 210u;
    default: // GG_IQ4_XS
        return 136u;
    }
}

// gg_row_bytes: bytes of a row of K elements.
static inline uint gg_row_bytes(uint K) {
    return K / gg_block() * gg_block_bytes();
}

// gg_f16: the IEEE half at p (two bytes, little-endian, any alignment) as a float32 (exact).
static inline float gg_f16(const device uchar* p) {
    ushort bits = ushort(uint(p[0]) | (uint(p[1]) << 8));
    return float(as_type<half>(bits));
}

// gg_u32: the little-endian uint32 at p (any alignment).
static inline uint gg_u32(const device uchar* p) {
    return uint(p[0]) | (uint(p[1]) << 8) | (uint(p[2]) << 16) | (uint(p[3]) << 24);
}

// gg_i8: byte b as a signed 8-bit integer.
static inline int gg_i8(uint b) {
    return int(b) - (b >= 128u ? 256 : 0);
}

// The IQ4_NL / IQ4_XS code values (kvalues_iq4nl of ggml-common.h) and MXFP4's E2M1 values
// doubled (kvalues_mxfp4: 0, 0.5, 1, 1.5, 2, 3, 4, 6 times 2, codes 8 .. 15 negated), as floats.
constant float gg_iq4nl[16] = {-127.0f, -104.0f, -83.0f, -65.0f, -49.0f, -35.0f, -22.0f, -10.0f,
                               1.0f,    13.0f,   25.0f,  38.0f,  53.0f,  69.0f,  89.0f,  113.0f};
constant float gg_mxfp4[16] = {0.0f, 1.0f,  2.0f,  3.0f,  4.0f,  6.0f,  8.0f,  12.0f,
                               0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -6.0f, -8.0f, -12.0f};

// gg_e8m0_half: MXFP4's scale e as ggml applies it, 2^(e - 128) (half the E8M0 value): the
// subnormals 2^-128 and 2^-127 for e = 0 and 1.
static inline float gg_e8m0_half(uint e) {
    return as_type<float>(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
}

// gg_nibble: the 4-bit code of element j (< 32) of a 32-element run whose 16 bytes start at qs:
// elements 0 .. 15 in the low nibbles, 16 .. 31 in the high ones.
static inline uint gg_nibble(const device uchar* qs, uint j) {
    return (uint(qs[j % 16]) >> (j < 16 ? 0 : 4)) & 15u;
}

// gg_scale_min_k4: the 6-bit scale (sc) and min (m) of sub-block i (< 8) of a Q4_K / Q5_K
// block from its 12 scale bytes s: i < 4 in the low 6 bits of s[i] and s[i + 4]; i >= 4 a low
// nibble of s[i + 4] (scale) or its high nibble (min) with the top 2 bits of s[i - 4] (scale) or
// s[i] (min) above it.
static inline void gg_scale_min_k4(const device uchar* s, uint i, thread uint& sc, thread uint& m) {
    if (i < 4) {
        sc = uint(s[i]) & 63u;
        m = uint(s[i + 4]) & 63u;
    } else {
        sc = (uint(s[i + 4]) & 15u) | ((uint(s[i - 4]) >> 6) << 4);
        m = (uint(s[i + 4]) >> 4) | ((uint(s[i]) >> 6) << 4);
    }
}

// gg_dequant8: the 8 elements j .. j+7 (j % 8 == 0) of the block at b.
static inline void gg_dequant8(const device uchar* b, uint j, thread float* w) {
    switch (gg_type) {
    case GG_Q4_0: {
        float d = gg_f16(b);
        for (uint i = 0; i < 8; ++i) {
            w[i] = float(int(gg_nibble(b + 2, j + i)) - 8) * d;
        }
        return;
    }
    case GG_Q4_1: {
        float d = gg_f16(b);
        float m = gg_f16(b + 2);
        for (uint i = 0; i < 8; ++i) {
            w[i] = float(gg_nibble(b + 4, j + i)) * d + m;
        }
        return;
    }
    case GG_Q5_0: {
        float d = gg_f16(b);
        uint qh = gg_u32(b + 2);
        for (uint i = 0; i < 8; ++i) {
            uint q = gg_nibble(b + 6, j + i) | (((qh >> (j + i)) & 1u) << 4);
            w[i] = float(int(q) - 16) * d;
        }
        return;
    }
    case GG_Q5_1: {
        float d = gg_f16(b);
        float m = gg_f16(b + 2);
        uint qh = gg_u32(b + 4);
        for (uint i = 0; i < 8; ++i) {
            uint q = gg_nibble(b + 8, j + i) | (((qh >> (j + i)) & 1u) << 4);
            w[i] = float(q) * d + m;
        }
        return;
    }
    case GG_Q8_0: {
        float d = gg_f16(b);
        for (uint i = 0; i < 8; ++i) {
            w[i] = float(gg_i8(b[2 + j + i])) * d;
        }
        return;
    }
    case GG_MXFP4: {
        float d = gg_e8m0_half(b[0]);
        for (uint i = 0; i < 8; ++i) {
            w[i] = gg_mxfp4[gg_nibble(b + 1, j + i)] * d;
        }
        return;
    }
    case GG_IQ4_NL: {
        float d = gg_f16(b);
        for (uint i = 0; i < 8; ++i) {
            w[i] = d * gg_iq4nl[gg_nibble(b + 2, j + i)];
        }
        return;
    }
    case GG_Q2_K: {
        // Halves of 128 elements; in each, 4 shifts (2 bits each) of 32 code bytes, 16
        // elements per scale byte.
        uint h = j / 128, g = j % 128 / 32, s = j % 32;
        uint sc = b[8 * h + 2 * g + s / 16];
        float dl = gg_f16(b + 80) * float(sc & 15u);
        float ml = gg_f16(b + 82) * float(sc >> 4);
        const device uchar* q = b + 16 + 32 * h + s;
        for (uint i = 0; i < 8; ++i) {
            w[i] = dl * float((uint(q[i]) >> (2 * g)) & 3u) - ml;
        }
        return;
    }
    case GG_Q3_K: {
        // Q2_K's code layout; the high bit of element s of shift g in half h is bit 4h + g of
        // mask byte s (clear: the code is lowered by 4).
        uint h = j / 128, g = j % 128 / 32, s = j % 32;
        uint is = 8 * h + 2 * g + s / 16;
        const device uchar* sb = b + 96;
        uint lo = is < 8 ? uint(sb[is]) & 15u : uint(sb[is - 8]) >> 4;
        uint hi = (uint(sb[8 + is % 4]) >> (2 * (is / 4))) & 3u;
        float dl = gg_f16(b + 108) * float(int(lo | (hi << 4)) - 32);
        uint m = 1u << (4 * h + g);
        const device uchar* q = b + 32 + 32 * h + s;
        const device uchar* hm = b + s;
        for (uint i = 0; i < 8; ++i) {
            int v = int((uint(q[i]) >> (2 * g)) & 3u) - ((uint(hm[i]) & m) != 0u ? 0 : 4);
            w[i] = dl * float(v);
        }
        return;
    }
    case GG_Q4_K:
    case GG_Q5_K: {
        // Chunks of 64 elements over 32 code bytes (low nibbles, then high ones); sub-block
        // is = element / 32, whose fifth bit (Q5_K) is bit is of high-bit byte element % 32.
        uint c = j / 64, l = j % 32, is = j / 32;
        uint sc, mn;
        gg_scale_min_k4(b + 4, is, sc, mn);
        float d1 = gg_f16(b) * float(sc);
        float m1 = gg_f16(b + 2) * float(mn);
        uint sh = j % 64 < 32 ? 0 : 4;
        bool five = gg_type == GG_Q5_K;
        const device uchar* q = b + (five ? 48 : 16) + 32 * c + l;
        for (uint i = 0; i < 8; ++i) {
            uint v = (uint(q[i]) >> sh) & 15u;
            if (five) {
                v += ((uint(b[16 + l + i]) >> is) & 1u) << 4;
            }
            w[i] = d1 * float(v) - m1;
        }
        return;
    }
    case GG_Q6_K: {
        // Halves of 128 elements in quarters of 32: quarter u takes the low (u < 2) or high
        // nibbles of code bytes 32 * (u % 2) + l of the half's 64, and bits 2u, 2u+1 of its
        // high-bit byte l.
        uint h = j / 128, u = j % 128 / 32, l = j % 32;
        const device uchar* ql = b + 64 * h + 32 * (u % 2) + l;
        const device uchar* qh = b + 128 + 32 * h + l;
        float ds = gg_f16(b + 208) * float(gg_i8(b[192 + 8 * h + l / 16 + 2 * u]));
        uint sh = u < 2 ? 0 : 4;
        for (uint i = 0; i < 8; ++i) {
            uint v = ((uint(ql[i]) >> sh) & 15u) | (((uint(qh[i]) >> (2 * u)) & 3u) << 4);
            w[i] = ds * float(int(v) - 32);
        }
        return;
    }
    default: { // GG_IQ4_XS
        uint ib = j / 32;
        uint hi = (uint(b[2]) | (uint(b[3]) << 8)) >> (2 * ib);
        uint ls = ((uint(b[4 + ib / 2]) >> (4 * (ib % 2))) & 15u) | ((hi & 3u) << 4);
        float dl = gg_f16(b) * float(int(ls) - 32);
        for (uint i = 0; i < 8; ++i) {
            w[i] = dl * gg_iq4nl[gg_nibble(b + 8 + 16 * ib, j % 32 + i)];
        }
        return;
    }
    }
}

// GGMLW is one ggml-typed weight [N, K] as a weight source of quant.metal's loops: its rows of
// blocks as the file stores them.
struct GGMLW {
    const device uchar* data;
    uint K;
};

// w_dequant8: the 8 weights k .. k+7 of row n (k % 8 == 0, k < K).
static inline void w_dequant8(thread const GGMLW& ws, uint n, uint k, thread float* w) {
    uint B = gg_block();
    const device uchar* b = ws.data + ulong(n) * gg_row_bytes(ws.K) + ulong(k / B) * gg_block_bytes();
    gg_dequant8(b, k % B, w);
}

// gg_expert: expert e of a stack of E weights [N, K] (each expert's rows after expert e-1's).
static inline GGMLW gg_expert(const device uchar* data, uint e, uint N, uint K) {
    GGMLW ws = {data + ulong(e) * N * gg_row_bytes(K), K};
    return ws;
}

// qmm_gg: grid (ceil(N / 32), ceil(rows / 32)), 128 threads. Threadgroup memory: 8 KiB.
kernel void qmm_gg(device float* y [[buffer(0)]],
                   const device float* x [[buffer(1)]],
                   const device uchar* data [[buffer(2)]],
                   constant GemmParams& p [[buffer(3)]],
                   uint2 tg [[threadgroup_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float as[QMM_BM * QMM_BK];
    threadgroup float bs[QMM_BK * QMM_BN];
    uint r0 = tg.y * QMM_BM;
    GGMLW ws = {data, p.K};
    qmm_tile(y, x, ws, r0, min(r0 + QMM_BM, p.rows), tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmm_gg_grouped: grid (ceil(N / 32), tiles), 128 threads; tiles[3*i ..] = (expert, first row,
// end row) with at most 32 rows, rows sorted by expert. Threadgroup memory: 8 KiB.
kernel void qmm_gg_grouped(device float* y [[buffer(0)]],
                           const device float* x [[buffer(1)]],
                           const device uchar* data [[buffer(2)]],
                           const device int* tiles [[buffer(3)]],
                           constant GemmParams& p [[buffer(4)]],
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
    GGMLW ws = gg_expert(data, e, p.N, p.K);
    qmm_tile(y, x, ws, r0, r1, tg.x * QMM_BN, p.N, p.K, as, bs, tid);
}

// qmv_gg: grid (ceil(N / 8), ceil(rows / QMV_ROWS)), 64 threads (2 simdgroups of 4 columns).
// No threadgroup memory.
kernel void qmv_gg(device float* y [[buffer(0)]],
                   const device float* x [[buffer(1)]],
                   const device uchar* data [[buffer(2)]],
                   constant GemmParams& p [[buffer(3)]],
                   uint2 tg [[threadgroup_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]]) {
    uint r0 = tg.y * QMV_ROWS;
    uint n0 = (tg.x * 2 + tid / 32) * QMV_COLS;
    GGMLW ws = {data, p.K};
    qmv_rows(y, x, ws, r0, min(r0 + QMV_ROWS, p.rows), n0, p.N, p.K, tid % 32);
}

// qmv_gg_grouped: grid (ceil(N / 8), tiles), 64 threads, over the tile table of qmm_gg_grouped.
// No threadgroup memory.
kernel void qmv_gg_grouped(device float* y [[buffer(0)]],
                           const device float* x [[buffer(1)]],
                           const device uchar* data [[buffer(2)]],
                           const device int* tiles [[buffer(3)]],
                           constant GemmParams& p [[buffer(4)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]]) {
    uint e = uint(tiles[3 * tg.y]);
    uint r0 = uint(tiles[3 * tg.y + 1]);
    uint r1 = uint(tiles[3 * tg.y + 2]);
    if (r0 >= r1) {
        return;
    }
    uint n0 = (tg.x * 2 + tid / 32) * QMV_COLS;
    GGMLW ws = gg_expert(data, e, p.N, p.K);
    qmv_rows(y, x, ws, r0, r1, n0, p.N, p.K, tid % 32);
}

// qgather_gg: out[(r * rep + s) * K + d] = table[ids[r], d] decoded, for r < rows and every
// copy s < rep (Embed: ids = tokens, rep = S streams; PLE: the hashed n-gram ids, rep = 1). The
// ids are checked on the host. Grid (ceil(K / 8 / ntg), rows), one thread per 8 elements (the
// decoder's unit, so the values are the GEMMs' bits). No threadgroup memory.
kernel void qgather_gg(device float* out [[buffer(0)]],
                       const device uchar* data [[buffer(1)]],
                       const device int* ids [[buffer(2)]],
                       constant QGatherParams& p [[buffer(3)]],
                       uint2 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint2 ntg2 [[threads_per_threadgroup]]) {
    uint r = tg.y;
    uint k = 8 * (tg.x * ntg2.x + tid);
    if (k >= p.K) {
        return;
    }
    GGMLW ws = {data, p.K};
    float w[8];
    w_dequant8(ws, uint(ids[r]), k, w);
    for (uint s = 0; s < p.rep; ++s) {
        for (uint i = 0; i < 8; ++i) {
            out[(r * p.rep + s) * p.K + k + i] = w[i];
        }
    }
}
