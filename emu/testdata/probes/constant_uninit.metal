// MSL 4.2: a program-scope constant must be initialized.
#include <metal_stdlib>
using namespace metal;
constant float k0; // error: a program-scope constant must be initialized
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = k0; }
