#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

#define NOPS 16

// Every simdgroup collective on x (one value per thread): out[i * NOPS + op].
kernel void simd_ops(device const float* x [[buffer(0)]],
                     device uint* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]],
                     ushort lane [[thread_index_in_simdgroup]]) {
  float v = x[i];
  device uint* o = out + i * NOPS;
  o[0] = uint(simd_sum(v));
  o[1] = uint(simd_max(v));
  o[2] = uint(simd_min(v));
  o[3] = uint(simd_prefix_inclusive_sum(v));
  o[4] = uint(simd_prefix_exclusive_sum(v));
  o[5] = uint(simd_shuffle(v, 31 - lane));
  o[6] = uint(simd_shuffle_xor(v, 1));
  o[7] = uint(simd_shuffle_up(v, 1));
  o[8] = uint(simd_shuffle_down(v, 2));
  o[9] = uint(simd_broadcast(v, 3));
  o[10] = uint(simd_broadcast_first(v));
  o[11] = uint(static_cast<simd_vote::vote_t>(simd_ballot(v > 8)));
  o[12] = simd_all(v >= 0) ? 1 : 0;
  o[13] = simd_any(v > 30) ? 1 : 0;
  o[14] = simd_is_first() ? 1 : 0;
  o[15] = simd_sum(uint(v) & 1u) + 100 * simd_max(int(lane));
}

// Threads at and past n return before the collectives: they are inactive.
kernel void early_return(device const float* x [[buffer(0)]],
                         device float* out [[buffer(1)]],
                         constant uint& n [[buffer(2)]],
                         uint i [[thread_position_in_grid]]) {
  if (i >= n) return;
  float s = simd_sum(x[i]);
  float p = simd_prefix_exclusive_sum(x[i]);
  out[2 * i] = s;
  out[2 * i + 1] = p;
}

// D = A * B + C with 8x8 simdgroup matrices of T; A, B row-major T, C and D float.
template <typename T>
kernel void mma8(device const T* a [[buffer(0)]],
                 device const T* b [[buffer(1)]],
                 device const float* c [[buffer(2)]],
                 device float* d [[buffer(3)]],
                 device T* e [[buffer(4)]]) {
  simdgroup_matrix<T, 8, 8> A, B;
  simdgroup_float8x8 C;
  simdgroup_load(A, a, 8);
  simdgroup_load(B, b, 8);
  simdgroup_load(C, c, 8);
  simdgroup_multiply_accumulate(C, A, B, C);
  simdgroup_store(C, d, 8);
  // e = A^T * B through a transposed load and simdgroup_multiply into a T matrix.
  simdgroup_matrix<T, 8, 8> At, P;
  simdgroup_load(At, a, 8, ulong2(0, 0), true);
  simdgroup_multiply(P, At, B);
  simdgroup_store(P, e, 8);
}

#define instantiate_mma(name, T) \
  template [[host_name(#name)]] [[kernel]] decltype(mma8<T>) mma8<T>;
instantiate_mma(mma8_float, float)
instantiate_mma(mma8_half, half)
instantiate_mma(mma8_bfloat, bfloat)

// Vector constructors, conversions, casts, swizzles, as_type; out has 32 uints.
kernel void vectors(device const float4* x [[buffer(0)]],
                    device uint* out [[buffer(1)]]) {
  float4 f = x[0];                     // (1.5, -2.25, 3.75, 8)
  float2 ab = float2(f.x, f.y);
  float4 g = float4(ab, f.zw);          // concatenation
  float4 h = float4(f.z, ab.yx, 1);     // scalars and a swizzle
  half4 hf = half4(f);                  // element-wise conversion
  uint4 u = (uint4)(f + 10.0f);         // value conversion, not a bit-cast
  int2 ti = static_cast<int2>(float2(-2.75f, 2.75f));
  float4 s = float4(2);                 // splat
  s.yx = float2(5, 6);                  // swizzle assignment
  bfloat bf = bfloat(f.y);
  bfloat4 b4 = bfloat4(f);
  float4 back = float4(b4);
  out[0] = as_type<uint>(g.w);
  out[1] = as_type<uint>(h.y);
  out[2] = as_type<uint>(h.w);
  out[3] = as_type<ushort>(hf.z);
  out[4] = u.x; out[5] = u.y + 100; out[6] = u.z; out[7] = u.w;
  out[8] = uint(ti.x + 10); out[9] = uint(ti.y);
  out[10] = as_type<uint>(s.x); out[11] = as_type<uint>(s.y);
  out[12] = as_type<uint>(float(bf));
  out[13] = as_type<uint>(back.z);
  out[14] = as_type<uint2>(hf).x;
  out[15] = uint(dot(f, float4(1)) * 4);
  out[16] = uint(max(f, 2.0f).x * 4);
  out[17] = uint(clamp(f.w, 0.0f, 5.0f));
  out[18] = as_type<uint>(fma(f.x, f.y, f.z));
  out[19] = select(0u, 7u, f.x > 1);
  out[20] = all(f > float4(-3)) ? 1 : 0;
  out[21] = any(f > float4(9)) ? 1 : 0;
  out[22] = as_type<uint>(float(half(f.x) * half(f.y)));
}

// Device and threadgroup atomics: count threads per threadgroup and in total.
kernel void atomics(device atomic_uint* total [[buffer(0)]],
                    device uint* per_group [[buffer(1)]],
                    device atomic_float* fsum [[buffer(2)]],
                    uint tid [[thread_index_in_threadgroup]],
                    uint gid [[threadgroup_position_in_grid]]) {
  threadgroup atomic_uint count;
  if (tid == 0) atomic_store_explicit(&count, 0u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&count, 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(total, 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(fsum, 0.5f, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) per_group[gid] = atomic_load_explicit(&count, memory_order_relaxed);
}

constant int offset [[function_constant(2)]];
constant uint scale [[function_constant(0)]];
constant bool use_bias [[function_constant(1)]];
constant bool has_offset = is_function_constant_defined(offset);

// y = x * scale + (use_bias ? 100 : 0) + (offset if defined).
kernel void fconst(device const uint* x [[buffer(0)]],
                   device int* y [[buffer(1)]],
                   uint i [[thread_position_in_grid]]) {
  int v = int(x[i] * scale);
  if (use_bias) v += 100;
  if (has_offset) v += offset;
  y[i] = v;
}

// Dynamic threadgroup memory and 2-D positions: each threadgroup reverses its block of
// positions, encoded as x * 1000 + y.
kernel void grid2d(device uint* out [[buffer(0)]],
                   threadgroup uint* shm [[threadgroup(0)]],
                   uint2 pos [[thread_position_in_grid]],
                   uint2 grid [[threads_per_grid]],
                   uint2 tpt [[threads_per_threadgroup]],
                   ushort2 lpos [[thread_position_in_threadgroup]],
                   uint li [[thread_index_in_threadgroup]],
                   uint nsg [[simdgroups_per_threadgroup]]) {
  uint n = tpt.x * tpt.y;
  shm[li] = pos.x * 1000 + pos.y;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[pos.y * grid.x + pos.x] = shm[n - 1 - li] + (lpos.x == 0 ? 0 : 0) + 0 * nsg;
}
