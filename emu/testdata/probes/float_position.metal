// MSL 5.2.3.6: position attributes are unsigned integers.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]],
              float i [[thread_position_in_grid]]) { // error: must be of type uint, ushort
  y[uint(i)] = 1;
}
