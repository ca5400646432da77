// elementwise.metal: the element-wise steps of a prefill: activations (ew_act), residual adds
// (ew_add), the attention output gate (ew_sigmoid_mul), the shared expert's row gate
// (row_sigmoid_scale) and a float32 copy (copy_f32). Host side: elementwise.go (swiglu is
// gemm.metal's). One thread per element, no threadgroup memory.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// ew_act: y[i] = mul * act(x[i] / div) (GatedResidual: silu(z / S) of the read's low-rank mix,
// 2 sigmoid(v / S) of its write gates). y may alias x. Grid ceil(n / ntg). No threadgroup memory.
kernel void ew_act(device float* y [[buffer(0)]],
                   const device float* x [[buffer(1)]],
                   constant ActParams& p [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    float v = x[i] / p.div;
    if (p.act == 1) {
        v = v * sigmoid1(v);
    } else if (p.act == 2) {
        v = sigmoid1(v);
    }
    y[i] = p.mul * v;
}

// ew_add: h[i] += u[i] (+ v[i]) (the residual add of qwen3_next blocks; u + v first, as the
// runner adds the routed and shared expert outputs). Grid ceil(n / ntg). No threadgroup memory.
kernel void ew_add(device float* h [[buffer(0)]],
                   const device float* u [[buffer(1)]],
                   const device float* v [[buffer(2)]],
                   constant EwParams& p [[buffer(3)]],
                   uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    float a = u[i];
    if (p.has_v != 0) {
        a += v[i];
    }
    h[i] += a;
}

// ew_sigmoid_mul: o[i] *= sigmoid(g[i]) (the attention output gate). Grid ceil(n / ntg).
kernel void ew_sigmoid_mul(device float* o [[buffer(0)]],
                           const device float* g [[buffer(1)]],
                           constant EwParams& p [[buffer(2)]],
                           uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    o[i] = o[i] * sigmoid1(g[i]);
}

// row_sigmoid_scale: x[r, d] *= sigmoid(s[r]) for rows of D (the shared expert's gate).
// Grid ceil(n / ntg), n = rows * D.
kernel void row_sigmoid_scale(device float* x [[buffer(0)]],
                              const device float* s [[buffer(1)]],
                              constant EwParams& p [[buffer(2)]],
                              uint i [[thread_position_in_grid]]) {
    if (i >= p.n) {
        return;
    }
    x[i] = x[i] * sigmoid1(s[i / p.D]);
}

// copy_f32: dst[i] = src[i] (the session's fixed-size states backed up inside a prefill's
// command buffer). Grid ceil(n / 256), 256 threads.
kernel void copy_f32(device float* dst [[buffer(0)]],
                     const device float* src [[buffer(1)]],
                     constant CopyParams& p [[buffer(2)]],
                     uint i [[thread_position_in_grid]]) {
    if (i < p.n) {
        dst[i] = src[i];
    }
}
