// MSL has no printf; it logs with os_log.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  printf("%f\n", y[i]); // error: printf is not available in MSL
}
