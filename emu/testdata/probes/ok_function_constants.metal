// Legal: function constant indices above 63 and written as constant expressions; a buffer that
// exists only when a function constant is true.
#include <metal_stdlib>
using namespace metal;
#define FC_BASE 700
constant bool has_bias [[function_constant(FC_BASE + 1)]];
constant int shift [[function_constant(00)]];
kernel void k(device float* y [[buffer(0)]], device const float* bias [[buffer(1), function_constant(has_bias)]],
              uint i [[thread_position_in_grid]]) {
  y[i] = y[i] * 2 + shift + (has_bias ? bias[i] : 0);
}
