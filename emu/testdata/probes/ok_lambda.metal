// Legal: lambdas (used by MLX's kernels).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float s = 2;
  auto scale = [&](float v) { return v * s; };
  y[i] = scale(y[i]);
}
