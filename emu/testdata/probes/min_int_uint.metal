// MSL 6: the operands of min have one type.
#include <metal_stdlib>
using namespace metal;
kernel void k(device int* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = min(y[i], i); // error: the operands of a math function have one type
}
