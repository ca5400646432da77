#include <metal_stdlib>
using namespace metal;

kernel void bad(constant ScaleParams& p [[buffer(0)]], device float* y [[buffer(1)]],
                uint i [[thread_position_in_grid]]) {
  float    v   =  SCALE_OF(p);  /* comment */  thread float* q =   y;
  if (i > p.n) goto out;
  y[i] = v + *q;
out:
  return;
}
