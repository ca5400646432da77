// MSL 1.5.4: no new operator.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  thread float* p = new float; // error: the new operator is not supported
  y[i] = *p;
}
