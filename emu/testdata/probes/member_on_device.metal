// MSL 4: a member function of thread objects cannot be called on a constant object.
#include <metal_stdlib>
using namespace metal;
struct Params {
  float s;
  float scale() const { return s; }
};
kernel void k(constant Params& p [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = p.scale(); // error: must be declared with that address space
}
