// MSL 5.2.1: kernel pointer arguments are in the device, constant or threadgroup address space.
#include <metal_stdlib>
using namespace metal;
kernel void k(float* y [[buffer(0)]], // error: must be a pointer or reference in the device or constant address space
              uint i [[thread_position_in_grid]]) {
  y[i] = 1;
}
