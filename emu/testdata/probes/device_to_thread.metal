// MSL 4: a device pointer does not convert to a thread pointer.
#include <metal_stdlib>
using namespace metal;
float first(thread const float* p) { return p[0]; }
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = first(y); // error: distinct address spaces
}
