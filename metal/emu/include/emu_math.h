// metal:: math on scalars and vectors, element-wise, computed in float (half and bfloat round the
// float result). fast:: and precise:: name the same functions: the emulator has one precision.
#pragma once
#include "emu_types.h"

namespace metal {
namespace emu_detail {
template <class T, class F>
inline T map1(const T& x, F f) {
  if constexpr (vt<T>::n == 1) {
    return static_cast<T>(f(x));
  } else {
    T r = x;
    for (int i = 0; i < vt<T>::n; i++) r[i] = static_cast<typename vt<T>::elem>(f(x[i]));
    return r;
  }
}
template <class T, class F>
inline T map2(const T& x, const T& y, F f) {
  if constexpr (vt<T>::n == 1) {
    return static_cast<T>(f(x, y));
  } else {
    T r = x;
    for (int i = 0; i < vt<T>::n; i++) r[i] = static_cast<typename vt<T>::elem>(f(x[i], y[i]));
    return r;
  }
}
template <class T, class F>
inline T map3(const T& x, const T& y, const T& z, F f) {
  if constexpr (vt<T>::n == 1) {
    return static_cast<T>(f(x, y, z));
  } else {
    T r = x;
    for (int i = 0; i < vt<T>::n; i++) r[i] = static_cast<typename vt<T>::elem>(f(x[i], y[i], z[i]));
    return r;
  }
}
// Brings a scalar operand to the vector type of the other operand (MSL allows max(float4, float)).
template <class T, class S>
inline T bring(const S& s) {
  if constexpr (std::is_same_v<T, S>) return s;
  else return make<T>(s);
}
template <class E>
constexpr bool is_int = std::is_integral_v<E>;
}  // namespace emu_detail

#define EMU_F1(name, expr)                                                           \
  template <class T>                                                                 \
  inline T name(const T& x) {                                                        \
    return emu_detail::map1(x, [](auto v) { float a = (float)v; return (expr); });   \
  }
EMU_F1(exp, __builtin_expf(a))
EMU_F1(exp2, __builtin_exp2f(a))
EMU_F1(exp10, __builtin_powf(10.0f, a))
EMU_F1(log, __builtin_logf(a))
EMU_F1(log2, __builtin_log2f(a))
EMU_F1(log10, __builtin_log10f(a))
EMU_F1(sqrt, __builtin_sqrtf(a))
EMU_F1(rsqrt, 1.0f / __builtin_sqrtf(a))
EMU_F1(sin, __builtin_sinf(a))
EMU_F1(cos, __builtin_cosf(a))
EMU_F1(tan, __builtin_tanf(a))
EMU_F1(asin, __builtin_asinf(a))
EMU_F1(acos, __builtin_acosf(a))
EMU_F1(atan, __builtin_atanf(a))
EMU_F1(sinh, __builtin_sinhf(a))
EMU_F1(cosh, __builtin_coshf(a))
EMU_F1(tanh, __builtin_tanhf(a))
EMU_F1(floor, __builtin_floorf(a))
EMU_F1(ceil, __builtin_ceilf(a))
EMU_F1(round, __builtin_roundf(a))
EMU_F1(rint, __builtin_rintf(a))
EMU_F1(trunc, __builtin_truncf(a))
EMU_F1(fract, __builtin_fminf(a - __builtin_floorf(a), 0x1.fffffep-1f))
EMU_F1(saturate, __builtin_fminf(__builtin_fmaxf(a, 0.0f), 1.0f))
EMU_F1(fabs, __builtin_fabsf(a))
EMU_F1(erf, __builtin_erff(a))
#undef EMU_F1

template <class T>
inline T abs(const T& x) {
  return emu_detail::map1(x, [](auto v) {
    if constexpr (emu_detail::is_int<decltype(v)>) return v < 0 ? -v : v;
    else return __builtin_fabsf((float)v);
  });
}
template <class T>
inline T sign(const T& x) {
  return emu_detail::map1(x, [](auto v) { float a = (float)v; return a > 0 ? 1.0f : a < 0 ? -1.0f : a; });
}

#define EMU_F2(name, expr)                                                                       \
  template <class T, class U>                                                                    \
  inline T name(const T& x, const U& y) {                                                        \
    return emu_detail::map2(x, emu_detail::bring<T>(y), [](auto v, auto w) {                     \
      float a = (float)v, b = (float)w; return (expr); });                                       \
  }
EMU_F2(pow, __builtin_powf(a, b))
EMU_F2(powr, __builtin_powf(a, b))
EMU_F2(atan2, __builtin_atan2f(a, b))
EMU_F2(fmod, __builtin_fmodf(a, b))
EMU_F2(fmin, __builtin_fminf(a, b))
EMU_F2(fmax, __builtin_fmaxf(a, b))
EMU_F2(copysign, __builtin_copysignf(a, b))
EMU_F2(step, b < a ? 0.0f : 1.0f)
#undef EMU_F2

template <class T, class U>
inline T min(const T& x, const U& y) {
  return emu_detail::map2(x, emu_detail::bring<T>(y), [](auto v, auto w) {
    if constexpr (emu_detail::is_int<decltype(v)>) return w < v ? w : v;
    else return decltype(v)(__builtin_fminf((float)v, (float)w));
  });
}
template <class T, class U>
inline T max(const T& x, const U& y) {
  return emu_detail::map2(x, emu_detail::bring<T>(y), [](auto v, auto w) {
    if constexpr (emu_detail::is_int<decltype(v)>) return v < w ? w : v;
    else return decltype(v)(__builtin_fmaxf((float)v, (float)w));
  });
}
template <class T, class U, class V>
inline T clamp(const T& x, const U& lo, const V& hi) {
  return min(max(x, emu_detail::bring<T>(lo)), emu_detail::bring<T>(hi));
}
template <class T, class U, class V>
inline T fma(const T& x, const U& y, const V& z) {
  return emu_detail::map3(x, emu_detail::bring<T>(y), emu_detail::bring<T>(z),
                          [](auto a, auto b, auto c) { return __builtin_fmaf((float)a, (float)b, (float)c); });
}
template <class T, class U>
inline T mix(const T& x, const T& y, const U& a) {
  T t = emu_detail::bring<T>(a);
  return x + (y - x) * t;
}
template <class T, class U, class V>
inline T smoothstep(const U& e0, const V& e1, const T& x) {
  T t = clamp((x - emu_detail::bring<T>(e0)) / (emu_detail::bring<T>(e1) - emu_detail::bring<T>(e0)), 0, 1);
  return t * t * (T(3) - T(2) * t);
}

template <class T>
inline auto dot(const T& a, const T& b) {
  typename emu_detail::vt<T>::elem s = 0;
  for (int i = 0; i < emu_detail::vt<T>::n; i++) s += a[i] * b[i];
  return s;
}
template <class T>
inline auto length(const T& a) { return sqrt(dot(a, a)); }
template <class T>
inline auto distance(const T& a, const T& b) { return length(a - b); }
template <class T>
inline T normalize(const T& a) { return a * rsqrt(dot(a, a)); }

template <class T>
inline bool isnan(const T& x) { return __builtin_isnan((float)x); }
template <class T>
inline bool isinf(const T& x) { return __builtin_isinf((float)x); }
template <class T>
inline bool isfinite(const T& x) { return __builtin_isfinite((float)x); }
template <class T>
inline bool signbit(const T& x) { return __builtin_signbit((float)x); }

// all/any on vector masks (comparison results are -1/0 integer vectors on clang) and bools.
template <class T>
inline bool all(const T& m) {
  if constexpr (emu_detail::vt<T>::n == 1) return m;
  else {
    for (int i = 0; i < emu_detail::vt<T>::n; i++)
      if (!m[i]) return false;
    return true;
  }
}
template <class T>
inline bool any(const T& m) {
  if constexpr (emu_detail::vt<T>::n == 1) return m;
  else {
    for (int i = 0; i < emu_detail::vt<T>::n; i++)
      if (m[i]) return true;
    return false;
  }
}
// select(a, b, c): c ? b : a, element-wise.
template <class T, class C>
inline T select(const T& a, const T& b, const C& c) {
  if constexpr (emu_detail::vt<T>::n == 1) return c ? b : a;
  else {
    T r = a;
    for (int i = 0; i < emu_detail::vt<T>::n; i++) {
      bool on;
      if constexpr (emu_detail::vt<C>::n == 1) on = bool(c);
      else on = bool(c[i]);
      if (on) r[i] = b[i];
    }
    return r;
  }
}

template <class T>
inline T popcount(const T& x) {
  return emu_detail::map1(x, [](auto v) { return __builtin_popcountll((unsigned long long)v & ((2ull << (8 * sizeof(v) - 1)) - 1)); });
}
template <class T>
inline T clz(const T& x) {
  return emu_detail::map1(x, [](auto v) {
    unsigned long long u = (unsigned long long)v & ((2ull << (8 * sizeof(v) - 1)) - 1);
    return u ? __builtin_clzll(u) - (64 - 8 * (int)sizeof(v)) : 8 * (int)sizeof(v);
  });
}
template <class T>
inline T ctz(const T& x) {
  return emu_detail::map1(x, [](auto v) {
    unsigned long long u = (unsigned long long)v & ((2ull << (8 * sizeof(v) - 1)) - 1);
    return u ? __builtin_ctzll(u) : 8 * (int)sizeof(v);
  });
}
template <class T>
inline T mulhi(const T& x, const T& y) {
  return emu_detail::map2(x, y, [](auto a, auto b) {
    return (decltype(a))(((long long)a * (long long)b) >> (8 * sizeof(a)));
  });
}

template <class T, class U>
inline T divide(const T& x, const U& y) { return x / emu_detail::bring<T>(y); }

namespace fast {
using metal::abs; using metal::acos; using metal::asin; using metal::atan; using metal::atan2;
using metal::ceil; using metal::clamp; using metal::cos; using metal::cosh; using metal::exp;
using metal::exp10; using metal::exp2; using metal::fabs; using metal::floor; using metal::fmax;
using metal::fmin; using metal::fmod; using metal::fract; using metal::length; using metal::log;
using metal::log10; using metal::log2; using metal::max; using metal::min; using metal::normalize;
using metal::pow; using metal::powr; using metal::rint; using metal::round; using metal::rsqrt;
using metal::saturate; using metal::sign; using metal::sin; using metal::sinh; using metal::sqrt;
using metal::tan; using metal::tanh; using metal::trunc; using metal::divide;
}  // namespace fast
namespace precise {
using namespace metal::fast;
}  // namespace precise
}  // namespace metal
