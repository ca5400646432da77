// MSL 4.4: threadgroup variables are declared in kernel functions only.
#include <metal_stdlib>
using namespace metal;
float reduce32(float v, uint lane) {
  threadgroup float part[32]; // error: a threadgroup variable can only be declared in a kernel function
  part[lane] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return part[0];
}
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = reduce32(y[i], i % 32); }
