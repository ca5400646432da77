// MSL 5.1.3: kernel functions return void.
#include <metal_stdlib>
using namespace metal;
kernel float k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { // error: a kernel function must return void
  return y[i];
}
