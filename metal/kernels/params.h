// params.h: the parameter structs of every kernel (constant buffers set with setBytes), shared by
// all kernel files: the host prepends this header to each .metal source before compiling it, and
// package metal holds the Go twin of each struct (metal/params.go; a test compares names, field
// order and offsets). Every field is 4 bytes (uint, int, float; flags are uint 0/1), so a struct
// is its fields in order with no padding.
#ifndef STRATA_PARAMS_H
#define STRATA_PARAMS_H
#include <metal_stdlib>
using namespace metal;

// ---- gdn.metal

struct GDNPreParams {
    uint T;
    uint Hk;
    uint Hv;
    uint Dk;
    uint Dv;
    uint K; // conv kernel length
};

struct GDNConvParams {
    uint T;
    uint C;
    uint K;
};

struct GDNScanParams {
    uint T;
    uint Hk;
    uint Hv;
    uint Dk;
    uint Dv;
    uint tiled; // value head h reads qk head h % Hk (else h / (Hv / Hk))
};

struct GDNPostParams {
    uint Dv;
    float eps;
};

// ---- gemm.metal

struct GemmParams {
    uint rows; // rows of x (all experts for the grouped form)
    uint N;
    uint K;
};

struct SwiGLUParams {
    uint rows;
    uint I;
};

// ---- norm.metal (gr_norm_h_stream_out and ple_gate take NormParams too)

struct NormParams {
    uint D;   // elements per row (per stream)
    uint S;   // streams per token (1 for a plain RMSNorm1p)
    float eps;
};

// ---- embed.metal

struct EmbedParams {
    uint T;
    uint D;
    uint S;
    uint V;
    uint dtype; // table dtype: 0 float32 (table32), 1 bfloat16, 2 half (table16)
};

// ---- moe.metal

struct RouteParams {
    uint E;
    uint K;
    uint norm; // norm_topk_prob
};

struct MoECombParams {
    uint T;
    uint K;
    uint D;
};

struct GRApplyParams {
    uint T;
    uint K;
    uint S;
    uint D;
    float eps;
    uint has_shared; // shared [T, D] (the gated shared-expert output) is added to u
};

struct MoESlotParams {
    uint T;
    uint K;
    uint E;
    uint D;
    uint ntiles; // tile-table entries to fill (the host's upper bound)
};

// ---- gatedresidual.metal (gr_norm_h_stream_out takes NormParams)

struct StreamParams {
    uint D;
    uint S;
};

// ---- elementwise.metal

struct ActParams {
    uint n;
    float div; // the input is divided by div first
    float mul; // the output is multiplied by mul
    uint act;  // 0 identity, 1 silu, 2 sigmoid
};

struct EwParams {
    uint n;
    uint D;     // row length (row_sigmoid_scale)
    uint has_v; // ew_add: v is added too
};

struct CopyParams {
    uint n;
};

// ---- ple.metal (ple_gate takes NormParams)

struct PLEGatherParams {
    uint T;
    uint heads;
    uint hd;    // head dim (table row length)
    uint dtype; // 0 float32 (table32), 1 bfloat16, 2 half (table16)
};

struct PLEConvParams {
    uint T;
    uint C;   // channels S*D
    uint K;   // conv kernel (4)
    uint dil; // dilation (3)
};

// ---- qsa.metal

struct QSAPrepParams {
    uint T;
    uint Hq;
    uint Hkv;
    uint D;    // head dim (256)
    uint rot;  // rotary dims (64)
    uint pos0; // position of token 0 (rope table row)
    uint row0; // cache row of token 0
    float eps;
};

struct QSAIndexParams {
    uint T;
    uint pos0;  // position of token 0
    uint row0;  // key cache row of token 0
    uint nh;    // index heads
    uint dim;   // index head dim (128)
    uint ratio; // tokens per block (4)
    uint rot;   // rotary dims (64)
    uint keep;  // blocks a sparse row keeps (budget / ratio)
    uint nbmax; // blocks of the last sparse row: row stride of the score matrix
    float eps;
    float scale; // 1 / sqrt(dim)
};

// ---- attention.metal, attention_tensor.metal

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

// ---- quant.metal, quant_tensor.metal (qmm_affine and qmv_affine take GemmParams)

struct QGatherParams {
    uint rows; // table rows gathered (one id each)
    uint rep;  // copies written per row (the S streams of Embed; 1 for PLE)
    uint K;    // row length
};

#endif // STRATA_PARAMS_H
