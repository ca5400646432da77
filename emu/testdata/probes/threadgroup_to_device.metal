// MSL 4: a threadgroup pointer does not convert to a device pointer.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], threadgroup float* t [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
  device float* d = t; // error: distinct address spaces
  d[i] = y[i];
}
