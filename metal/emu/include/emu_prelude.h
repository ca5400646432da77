// Included first by every translation unit the pre-pass generates: the stand-in for
// <metal_stdlib>, the launcher helpers, and MSL's address-space keywords (empty on the CPU).
#pragma once
#include "emu_matrix.h"

namespace metal {
// Numeric constants of metal_math.
constexpr float MAXFLOAT = 0x1.fffffep127f;
constexpr float INFINITY = __builtin_inff();
constexpr float NAN = __builtin_nanf("");
constexpr float M_PI_F = 3.14159265358979323846f;
constexpr float M_LOG2E_F = 1.44269504088896340736f;
constexpr float M_LN2_F = 0.693147180559945309417f;
constexpr float M_SQRT2_F = 1.41421356237309504880f;
constexpr float FLT_MAX = 0x1.fffffep127f;
constexpr float FLT_MIN = 0x1p-126f;
constexpr float FLT_EPSILON = 0x1p-23f;
constexpr half HALF_MAX = 65504.0f16;

template <class T>
struct numeric_limits;
template <>
struct numeric_limits<float> {
  static constexpr float max() { return 0x1.fffffep127f; }
  static constexpr float lowest() { return -0x1.fffffep127f; }
  static constexpr float min() { return 0x1p-126f; }
  static constexpr float infinity() { return __builtin_inff(); }
  static constexpr float epsilon() { return 0x1p-23f; }
};
template <>
struct numeric_limits<half> {
  static constexpr half max() { return 65504.0f16; }
  static constexpr half lowest() { return -65504.0f16; }
  static constexpr half infinity() { return (half)__builtin_inff(); }
  static constexpr half epsilon() { return 0x1p-10f16; }
};
template <>
struct numeric_limits<int> {
  static constexpr int max() { return 0x7fffffff; }
  static constexpr int lowest() { return -0x7fffffff - 1; }
  static constexpr int min() { return -0x7fffffff - 1; }
};
template <>
struct numeric_limits<uint> {
  static constexpr uint max() { return 0xffffffffu; }
  static constexpr uint lowest() { return 0; }
  static constexpr uint min() { return 0; }
};
}  // namespace metal

namespace emu {
// Kernel argument proxies: the launcher passes them for each parameter and the parameter's own
// type (pointer or reference, possibly dependent on template arguments) picks the conversion.
struct buf_arg {
  void* p;
  template <class T>
  operator T*() const { return (T*)p; }
  template <class T>
  operator T&() const { return *(T*)p; }
};
inline buf_arg buffer(int i) { return {emu_buffer(i)}; }
inline buf_arg tg_dynamic(int i) { return {emu_tg_dynamic(i)}; }
struct pos_arg {
  uint32_t v[3];
  template <class T>
  operator T() const {
    typedef metal::emu_detail::vt<T> V;
    if constexpr (V::n == 1) return T(v[0]);
    else {
      T r;
      for (int i = 0; i < V::n; i++) r[i] = typename V::elem(i < 3 ? v[i] : 0);
      return r;
    }
  }
};
inline pos_arg pos3(const uint32_t* p) { return {{p[0], p[1], p[2]}}; }
inline pos_arg pos1(uint32_t x) { return {{x, 0, 0}}; }
// Kernel-scope threadgroup variable of type T (array types included), same address in every
// thread of the threadgroup.
template <class T>
inline T& tg_static() { return *(T*)emu_tg_static(sizeof(T), alignof(T) < 16 ? 16 : alignof(T)); }
// Function constant accessors.
template <class T>
inline T fc(int i) {
  int def;
  uint32_t bits = emu_fc(i, &def);
  if constexpr (std::is_same_v<T, bool>) return bits != 0;
  else if constexpr (std::is_same_v<T, float>) return __builtin_bit_cast(float, bits);
  // half constants are given as float (mtl.Float) and rounded to half.
  else if constexpr (std::is_same_v<T, metal::half>) return (metal::half)__builtin_bit_cast(float, bits);
  else return (T)bits;
}
inline bool fc_defined(int i) {
  int def;
  emu_fc(i, &def);
  return def != 0;
}
inline bool sizing() { return emu_sizing() != 0; }
}  // namespace emu

#define device
#define constant
#define threadgroup
#define thread
#define threadgroup_imageblock
#define ray_data
#define object_data
#define METAL_FUNC inline __attribute__((always_inline))
