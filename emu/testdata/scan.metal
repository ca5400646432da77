#include <metal_stdlib>
using namespace metal;

// Inclusive prefix sum of one threadgroup's block of n values: simd prefix sums, then the
// simdgroup totals scanned through threadgroup memory.
kernel void block_scan(device const uint* x [[buffer(0)]],
                       device uint* y [[buffer(1)]],
                       constant uint& n [[buffer(2)]],
                       uint gid [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint tpg [[threads_per_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup uint totals[32];
  uint i = gid * tpg + tid;
  uint v = i < n ? x[i] : 0;
  uint p = simd_prefix_inclusive_sum(v);
  if (lane == 31) totals[sg] = p;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    uint t = lane < (tpg + 31) / 32 ? totals[lane] : 0;
    totals[lane] = simd_prefix_exclusive_sum(t);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (i < n) y[i] = p + totals[sg];
}
