// MSL 1.5.4: no goto.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i > 4) goto done; // error: the goto statement is not supported
  y[i] = 1;
done:
  return;
}
