// MSL 4.4: threadgroup variables take no initializer.
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* y [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float acc = 0; // error: a threadgroup variable cannot be initialized in its declaration
  y[i] = acc;
}
