// Legal: function pointers, as values and as template arguments.
#include <metal_stdlib>
using namespace metal;
float twice(float x) { return 2 * x; }
float square(float x) { return x * x; }
template <float (*F)(float)>
float apply(float x) { return F(x); }
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float (*f)(float) = (i & 1) ? twice : square;
  y[i] = f(y[i]) + apply<square>(1.5f);
}
