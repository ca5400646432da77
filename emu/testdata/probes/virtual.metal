// MSL 1.5.4: no virtual functions.
#include <metal_stdlib>
using namespace metal;
struct Op {
  virtual float apply(float x) const { return x; } // error: virtual functions are not supported
};
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = 1; }
