// MSL 4.2 / 1.5.4: no static variables in functions.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  static int calls = 0; // error: static variables in functions are not supported
  y[i] = calls++;
}
