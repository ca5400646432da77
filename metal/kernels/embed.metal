// embed.metal: the token embedding gather of dense tables (bfloat16, half, float32) into the S
// streams, widened exactly to float32. Host side: embed.go (quantized tables gather with
// quant.metal, fpquant.metal and ggml.metal).
#include <metal_stdlib>
using namespace metal;

// embed: H[t, s, :] = table[tok[t], :] widened to float32, repeated into the S streams; the
// table is table16 (bfloat16 or half bits) or table32 (float32) per p.dtype, the other binding
// unused. Grid (ceil(D / ntg), T). Token ids outside [0, V) are rejected on the host. No
// threadgroup memory.
kernel void embed(device float* h [[buffer(0)]],
                  const device ushort* table16 [[buffer(1)]],
                  const device float* table32 [[buffer(2)]],
                  const device int* tok [[buffer(3)]],
                  constant EmbedParams& p [[buffer(4)]],
                  uint2 tg [[threadgroup_position_in_grid]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint2 ntg2 [[threads_per_threadgroup]]) {
    uint t = tg.y;
    uint d = tg.x * ntg2.x + tid;
    if (d >= p.D) {
        return;
    }
    uint i = uint(tok[t]) * p.D + d;
    float v;
    if (p.dtype == 0) {
        v = table32[i];
    } else {
        ushort b = table16[i];
        v = p.dtype == 1 ? as_type<float>(uint(b) << 16) : float(as_type<half>(b));
    }
    for (uint s = 0; s < p.S; ++s) {
        h[(t * p.S + s) * p.D + d] = v;
    }
}
