// MSL 4: a constant pointer does not convert to a device pointer.
#include <metal_stdlib>
using namespace metal;
kernel void k(constant float* c [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  device const float* d = c; // error: distinct address spaces
  y[i] = d[i];
}
