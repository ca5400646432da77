// MSL 1.5.4: no thread_local storage.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  thread_local float t = 0; // error: the thread_local storage class is not supported
  y[i] = t;
}
