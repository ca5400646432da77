// common.h: the helpers several kernel files share: the fixed-order threadgroup sum, the
// RMSNorm1p row steps built on it, and sigmoid. A kernel file includes it with #include
// "common.h"; the host inlines the embedded header there when it builds a library (Metal compiles
// from source text, with no include path), the emulator's mslc finds it next to the file.
// Reductions run in a fixed order: each thread sums its strided elements in index order, simd_sum
// per simdgroup, then the simdgroup partials in simdgroup order, so every kernel that normalises
// a row the same way (rms_norm, gr_norm_h4, gr_norm_h_moec, gr_norm_h_stream_out, ple_gate)
// produces the same bits for it. All assume 32-lane simdgroups (the host checks
// threadExecutionWidth).
#ifndef STRATA_COMMON_H
#define STRATA_COMMON_H
#include <metal_stdlib>
using namespace metal;

// Sum of v over the threadgroup, the same value in every thread. part holds one float per
// simdgroup; the trailing barrier lets the caller reuse part at once.
static inline float tg_sum(float v, threadgroup float* part, uint tid, uint ntg) {
    float s = simd_sum(v);
    if (tid % 32 == 0) {
        part[tid / 32] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float tot = 0.0f;
    uint nsg = (ntg + 31) / 32;
    for (uint i = 0; i < nsg; ++i) {
        tot += part[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return tot;
}

// Sum of squares of one row of D elements (thread-strided, then tg_sum).
static inline float row_ss(const device float* x, uint D, threadgroup float* part, uint tid, uint ntg) {
    float ss = 0.0f;
    for (uint d = tid; d < D; d += ntg) {
        float v = x[d];
        ss = fma(v, v, ss);
    }
    return tg_sum(ss, part, tid, ntg);
}

// y = x * rsqrt(ss / D + eps) * (1 + w) for one row.
static inline void row_scale1p(device float* y, const device float* x, const device float* w, float ss,
                               uint D, float eps, uint tid, uint ntg) {
    float r = rsqrt(ss / float(D) + eps);
    for (uint d = tid; d < D; d += ntg) {
        y[d] = x[d] * r * (1.0f + w[d]);
    }
}

static inline float sigmoid1(float x) {
    return 1.0f / (1.0f + exp(-x));
}

#endif // STRATA_COMMON_H
