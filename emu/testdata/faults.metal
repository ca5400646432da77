#include <metal_stdlib>
using namespace metal;

// Reverses a block through threadgroup memory. SYNC selects whether the barrier is there.
template <bool SYNC>
kernel void reverse(device const float* x [[buffer(0)]],
                    device float* y [[buffer(1)]],
                    uint tid [[thread_index_in_threadgroup]],
                    uint n [[threads_per_threadgroup]]) {
  threadgroup float tile[256];
  tile[tid] = x[tid];
  if (SYNC) threadgroup_barrier(mem_flags::mem_threadgroup);
  y[tid] = tile[n - 1 - tid];
}
template [[host_name("reverse_barrier")]] [[kernel]] decltype(reverse<true>) reverse<true>;
template [[host_name("reverse_no_barrier")]] [[kernel]] decltype(reverse<false>) reverse<false>;

// Half of each simdgroup waits at a barrier, the other half at a simd_sum.
kernel void divergent(device float* y [[buffer(0)]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint tid [[thread_index_in_threadgroup]]) {
  if (lane < 16) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  } else {
    y[tid] = simd_sum(1.0f);
  }
}

// 33 KiB of threadgroup memory.
kernel void too_big(device float* y [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float big[33 * 256];
  big[tid] = 1;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[tid] = big[(tid + 1) % 32];
}

// 16 KiB of static threadgroup memory plus dynamic memory set by the host.
kernel void half_tg(device float* y [[buffer(0)]], threadgroup float* dyn [[threadgroup(0)]],
                    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float a[4096];
  a[tid] = 1;
  dyn[tid] = 2;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[tid] = a[tid] + dyn[tid];
}

// Writes one element per thread with no bounds check.
kernel void unchecked_write(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(i);
}

// Kernel inputs that fault on a CPU: they must fail the command buffer, not the process.
kernel void div_by(device int* y [[buffer(0)]], constant int& d [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = 100 / d;
}

// A float4 store 4 bytes past a 16-byte boundary.
kernel void misaligned(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  device float4* p = (device float4*)(y + 1);
  p[i] = float4(1.0f);
}

// A store through an address read from a buffer.
kernel void wild(device float* y [[buffer(0)]], constant ulong& addr [[buffer(1)]]) {
  device float* p = (device float*)addr;
  p[0] = y[0];
}

// Recursion n levels deep (each level keeps a local array live).
uint depth(uint n) {
  uint buf[64];
  for (uint k = 0; k < 64; k++) buf[k] = n + k;
  return n == 0 ? 0 : buf[n % 64] - n + depth(n - 1);
}
kernel void deep(device uint* y [[buffer(0)]], constant uint& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = depth(n);
}
