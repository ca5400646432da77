// MSL 1.5.4: no run-time type information.
#include <metal_stdlib>
using namespace metal;
struct A { int x; };
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  A a{1};
  y[i] = sizeof(typeid(a)); // error: MSL has no run-time type information
}
