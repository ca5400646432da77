// Legal: buffers without [[buffer(n)]] take the next index (as MLX's NAX kernels declare them).
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(const device float* x, device float* y, const constant int& n,
                  uint i [[thread_position_in_grid]]) {
  if (int(i) < n) y[i] = x[i];
}
