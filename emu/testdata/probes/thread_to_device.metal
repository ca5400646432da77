// MSL 4: a thread pointer does not convert to a device pointer.
#include <metal_stdlib>
using namespace metal;
void put(device float* d, float v) { d[0] = v; }
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float local_v = 1;
  put(&local_v, y[i]); // error: distinct address spaces
}
