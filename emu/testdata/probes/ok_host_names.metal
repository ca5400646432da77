// Legal: host names built from adjacent string literals; [[threadgroup(n)]] on a helper's parameter.
#include <metal_stdlib>
using namespace metal;
#define instantiate(name, T) template [[host_name("copy_" #name "_v" "2")]] [[kernel]] decltype(copy<T>) copy<T>;
void stage(threadgroup float* t [[threadgroup(0)]], float v, uint i) { t[i] = v; }
template <typename T>
kernel void copy(device const T* x [[buffer(0)]], device T* y [[buffer(1)]], threadgroup float* t [[threadgroup(0)]],
                 uint i [[thread_index_in_threadgroup]]) {
  stage(t, float(x[i]), i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[i] = T(t[i]);
}
instantiate(f32, float)
instantiate(f16, half)
