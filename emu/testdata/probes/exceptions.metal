// MSL 1.5.4: no exceptions.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (y[i] < 0) throw 1; // error: exceptions (throw) are not supported
}
