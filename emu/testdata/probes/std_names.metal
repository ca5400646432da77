// MSL 1.5.4: there is no C++ standard library.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = std::max(y[i], 0.0f); // error: std:: is not available
}
