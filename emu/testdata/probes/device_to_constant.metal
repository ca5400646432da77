// MSL 4: a device pointer does not convert to a constant pointer.
#include <metal_stdlib>
using namespace metal;
float sum2(constant float* c) { return c[0] + c[1]; }
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = sum2(y); // error: distinct address spaces
}
