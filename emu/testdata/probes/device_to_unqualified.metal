// MSL 4: an unqualified pointer in a function is a thread pointer; a device pointer does not
// convert to it.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float* p = y + i; // error: distinct address spaces
  *p = 1;
}
