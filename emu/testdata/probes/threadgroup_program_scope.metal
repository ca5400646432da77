// MSL 4.4: no threadgroup variables at program scope.
#include <metal_stdlib>
using namespace metal;
threadgroup float shared_buf[64]; // error: a threadgroup variable cannot be declared at program scope
kernel void k(device float* y [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) { y[i] = shared_buf[i]; }
