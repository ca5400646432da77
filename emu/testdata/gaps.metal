#include <metal_stdlib>
using namespace metal;

// bool vectors from comparisons, their logic and swizzles; bfloat vector swizzles.
// x[0] = (1, 5, -2, 7), x[1] = (3, 4, -1, 7).
kernel void bool_bfloat(device const float4* x [[buffer(0)]],
                        device float* out [[buffer(1)]]) {
  float4 a = x[0], b = x[1];
  bool4 lt = a < b;                  // (1, 0, 1, 0)
  bool4 le = a <= b;                 // (1, 0, 1, 1)
  bool2 wy = lt.wy;                  // (0, 0)
  bool4 m = lt;
  m.yw = bool2(true);                // (1, 1, 1, 1)
  bool3 n = !lt.xyz || le.zzz;       // (1, 1, 1)
  out[0] = all(m) ? 1 : 0;
  out[1] = any(wy) ? 1 : 0;
  out[2] = all(n) ? 1 : 0;
  float4 s = select(a, b, lt);       // (3, 5, -1, 7)
  out[3] = s.x; out[4] = s.y; out[5] = s.z; out[6] = s.w;
  out[7] = (lt == le).w ? 1 : 0;     // 0
  out[8] = lt.x && !lt.y ? 1 : 0;    // 1
  bfloat4 bf = bfloat4(a);
  bfloat2 zw = bf.zw;                // (-2, 7)
  bf.xy = bf.wz;                     // (7, -2, -2, 7)
  float4 back = float4(bf);
  out[9] = back.x; out[10] = back.y; out[11] = back.z; out[12] = back.w;
  out[13] = bf.x * 0.5f + float(zw.y);  // 10.5
  bfloat e = bf.w;
  out[14] = float(e);                // 7
  bf.y = bfloat(1.5f);
  out[15] = float(bf.y);             // 1.5
  half4 h = half4(a);
  bool4 hm = h > half4(b);           // (0, 1, 0, 0)
  out[16] = float(hm.y) + 2 * float(hm.x);  // 1
}

#define NQ 11
// Quadgroup functions; threads at and past n return first (inactive).
kernel void quads(device const float* x [[buffer(0)]],
                  device float* out [[buffer(1)]],
                  constant uint& n [[buffer(2)]],
                  uint i [[thread_position_in_grid]],
                  ushort lane [[thread_index_in_simdgroup]]) {
  if (i >= n) return;
  float v = x[i];
  device float* o = out + i * NQ;
  o[0] = quad_sum(v);
  o[1] = quad_max(v);
  o[2] = quad_prefix_exclusive_sum(v);
  o[3] = quad_shuffle(v, 3 - (lane & 3));
  o[4] = quad_shuffle_xor(v, 1);
  o[5] = quad_shuffle_down(v, 1);
  o[6] = quad_broadcast(v, 0);
  o[7] = float(uint(static_cast<quad_vote::vote_t>(quad_ballot(v > 3))));
  o[8] = quad_all(v >= 1) ? 1 : 0;
  o[9] = quad_any(v > 6) ? 1 : 0;
  o[10] = quad_is_first() ? 1 : 0;
}

constant half hscale [[function_constant(0)]];

// y = hscale * x in half.
kernel void hconst(device const float* x [[buffer(0)]],
                   device float* y [[buffer(1)]],
                   uint i [[thread_position_in_grid]]) {
  y[i] = float(hscale * half(x[i]));
}

// Casts through typedefs convert; packed vectors and matrices follow MSL's layout and algebra.
typedef float4 vec4_t;
typedef uint4 uvec4_t;
struct Packed {
  float a;
  packed_float2 b;
};
kernel void casts_layout(device const Packed* ps [[buffer(0)]],
                         device float* out [[buffer(1)]]) {
  uvec4_t u = uvec4_t(7, 8, 9, 10);
  vec4_t f = (vec4_t)u;                       // (7, 8, 9, 10), not the bits of u
  int2 t = static_cast<int2>(float2(2.75f, -1.5f));  // (2, -1)
  out[0] = f.x; out[1] = f.w;
  out[2] = float(t.x); out[3] = float(t.y);
  out[4] = float(sizeof(Packed));             // 12
  out[5] = ps[1].a; out[6] = ps[1].b.y;       // element 1 starts at byte 12
  packed_float3 p3 = packed_float3(1.0f, 2.0f, 3.0f);
  float3 q = p3 * 2.0f;                       // (2, 4, 6)
  out[7] = q.z;
  float2x2 m = float2x2(float2(1, 2), float2(3, 4));  // columns (1, 2), (3, 4)
  float2 mv = m * float2(1, 1);               // (4, 6)
  float2 vm = float2(1, 1) * m;               // (3, 7)
  float2x2 mm = m * m;                        // columns (7, 10), (15, 22)
  out[8] = mv.y; out[9] = vm.y; out[10] = mm[1][0]; out[11] = determinant(m);  // -2
  out[12] = float(transpose(m)[0][1]);        // 3
}
