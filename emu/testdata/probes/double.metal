// MSL 2.1: Metal has no double type.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  double d = y[i]; // error: double is not supported
  y[i] = float(d);
}
