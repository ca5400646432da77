// MSL 6.8: simdgroup_load reads elements of the matrix's own type.
#include <metal_stdlib>
using namespace metal;
kernel void k(device const half* a [[buffer(0)]], device float* y [[buffer(1)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, a, 8); // error: simdgroup_load: the source's element type must be the matrix's element type
  simdgroup_store(m, y, 8);
}
