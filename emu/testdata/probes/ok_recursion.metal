// Legal: recursive functions (MSL 2.4 and later).
#include <metal_stdlib>
using namespace metal;
uint fib(uint n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
kernel void k(device uint* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = fib(i % 12); }
