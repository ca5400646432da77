// Legal: packed vectors (MSL layout), matrices, numeric_limits, the h suffix, vector casts through
// typedefs, nested threadgroup arrays, uniform<T>, logging.
#include <metal_stdlib>
#include <metal_logging>
using namespace metal;
struct P {
  float a;
  packed_float2 b;
};
static_assert(sizeof(P) == 12, "float + packed_float2 is 12 bytes in MSL");
static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4, "packed_float3");
static_assert(sizeof(float3) == 16, "float3");
typedef float4 vec4_t;
constant float kTab[2] = {1.5h, 2.5f};
kernel void k(device float* y [[buffer(0)]], device const P* ps [[buffer(1)]], uint i [[thread_index_in_threadgroup]]) {
  float4x4 m(1.0f);
  float4 v = m * float4(1, 2, 3, 4);
  half2x4 hm;
  hm[0] = half4(1.0h);
  uint4 u = uint4(7, 8, 9, 10);
  vec4_t f = (vec4_t)u;  // converts
  uniform<float> s = make_uniform(0.5f);
  float lo = numeric_limits<half>::lowest() + numeric_limits<int>::max() * 0.0f;
  {
    threadgroup float nested[32];
    nested[i % 32] = ps[0].b.y + kTab[1];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[i] = nested[(i + 1) % 32] + v.x + f.w + float(hm[0].x) + s + lo;
  }
}
constant os_log probe_log("strata", "probes");
kernel void logs(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (y[i] < 0) probe_log.log_error("negative y[%u] = %f", i, y[i]);
}
