// MSL 4.2: the constant address space is read-only.
#include <metal_stdlib>
using namespace metal;
kernel void k(constant float* c [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  c[i] = 1.0f; // error: the constant address space is read-only
  y[i] = c[i];
}
