#include <metal_stdlib>
using namespace metal;

kernel void scale(constant ScaleParams& p [[buffer(0)]], device float* y [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  if (i < p.n) y[i] *= SCALE_OF(p);
}
