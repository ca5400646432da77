// Legal: atomics in device and threadgroup memory.
#include <metal_stdlib>
using namespace metal;
kernel void k(device atomic_uint* count [[buffer(0)]], device atomic_float* sum [[buffer(1)]],
              device metal::atomic_int* lo [[buffer(2)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup atomic_uint local_count;
  if (i == 0) atomic_store_explicit(&local_count, 0u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&local_count, 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(sum, 0.25f, memory_order_relaxed);
  atomic_fetch_min_explicit(lo, int(i) - 3, memory_order_relaxed);
}
