// MSL 4.2: program-scope variables are in the constant address space.
#include <metal_stdlib>
using namespace metal;
float scale = 2.0f; // error: a program-scope variable must be declared in the constant address space
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = scale; }
