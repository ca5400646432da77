// MSL 1.5.4: no delete operator (a deleted function is fine).
#include <metal_stdlib>
using namespace metal;
struct NoCopy {
  NoCopy() = default;
  NoCopy(const thread NoCopy&) = delete;
};
void release(thread float* p) {
  delete p; // error: the delete operator is not supported
}
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = 1; }
