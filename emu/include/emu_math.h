// metal:: math, integer, common, geometric and relational functions on scalars and vectors,
// element-wise, computed in float (half results round the float result). fast:: and precise::
// name the same functions: the emulator has one precision.
//
// As in Metal's headers, the functions are overloads for each concrete type (float, half and
// their 2-, 3- and 4-element vectors; the integer types and their vectors), so that arguments
// convert as they do on Metal: pow(2, x) is pow(float, float) for a float x, min(int, uint) and
// max(float, 0) are ambiguous, and a bfloat argument converts to float. min, max, fmin, fmax,
// clamp, mix, step and smoothstep also take a vector with scalars of its element type. The
// element-wise work is done by the templates of namespace emu_impl.
#pragma once
#include "emu_types.h"

namespace metal {
namespace emu_impl {
using namespace emu_detail;
}
namespace emu_detail {
template <class T, class F>
inline T map1(T x, F f) {
  if constexpr (vt<T>::n == 1) {
    return static_cast<T>(f(x));
  } else {
    T r = x;
    for (int i = 0; i < vt<T>::n; i++) r[i] = static_cast<typename vt<T>::elem>(f(x[i]));
    return r;
  }
}
template <class T, class F>
inline T map2(T x, T y, F f) {
  if constexpr (vt<T>::n == 1) {
    return static_cast<T>(f(x, y));
  } else {
    T r = x;
    for (int i = 0; i < vt<T>::n; i++) r[i] = static_cast<typename vt<T>::elem>(f(x[i], y[i]));
    return r;
  }
}
template <class T, class F>
inline T map3(T x, T y, T z, F f) {
  if constexpr (vt<T>::n == 1) {
    return static_cast<T>(f(x, y, z));
  } else {
    T r = x;
    for (int i = 0; i < vt<T>::n; i++) r[i] = static_cast<typename vt<T>::elem>(f(x[i], y[i], z[i]));
    return r;
  }
}
// An operand of type S combined with T: S is T, or T is a vector and S its element type.
template <class T, class S>
constexpr bool operand_ok = is_same_v<plain_t<S>, plain_t<T>> || (vt<T>::n > 1 && is_same_v<plain_t<S>, typename vt<T>::elem>);
// Brings such an operand to the type T.
template <class T, class S>
inline T bring(S s) {
  if constexpr (is_same_v<plain_t<S>, plain_t<T>>) return s;
  else return make<T>(s);
}
template <class T>
constexpr bool gentype = (is_floating_point_v<typename vt<T>::elem> || is_integral_v<typename vt<T>::elem>) &&
                         !is_same_v<typename vt<T>::elem, bool>;
template <class T>
constexpr bool genfloat = is_floating_point_v<typename vt<T>::elem>;
template <class T>
constexpr bool genint = is_integral_v<typename vt<T>::elem> && !is_same_v<typename vt<T>::elem, bool>;
template <class E>
constexpr bool is_int = is_integral_v<E>;
// The bool vector of T's width (bool for scalars).
template <class T>
using bool_of = typename svec_of<bool, vt<T>::n>::type;
template <class T, class F>
inline bool_of<T> test1(T x, F f) {
  if constexpr (vt<T>::n == 1) return f(float(x));
  else {
    bool_of<T> r;
    for (int i = 0; i < vt<T>::n; i++) r[i] = f(float(x[i]));
    return r;
  }
}
}  // namespace emu_detail

namespace emu_impl {
#define EMU_REQ(...) class = enable_if_t<(__VA_ARGS__)>

#define EMU_F1(name, expr)                                                           \
  template <class T, EMU_REQ(emu_detail::genfloat<T>)>                                  \
  inline T name(T x) {                                                        \
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
EMU_F1(sinpi, __builtin_sinf(a * 3.14159265358979323846f))
EMU_F1(cospi, __builtin_cosf(a * 3.14159265358979323846f))
EMU_F1(tanpi, __builtin_tanf(a * 3.14159265358979323846f))
EMU_F1(asin, __builtin_asinf(a))
EMU_F1(acos, __builtin_acosf(a))
EMU_F1(atan, __builtin_atanf(a))
EMU_F1(sinh, __builtin_sinhf(a))
EMU_F1(cosh, __builtin_coshf(a))
EMU_F1(tanh, __builtin_tanhf(a))
EMU_F1(asinh, __builtin_asinhf(a))
EMU_F1(acosh, __builtin_acoshf(a))
EMU_F1(atanh, __builtin_atanhf(a))
EMU_F1(floor, __builtin_floorf(a))
EMU_F1(ceil, __builtin_ceilf(a))
EMU_F1(round, __builtin_roundf(a))
EMU_F1(rint, __builtin_rintf(a))
EMU_F1(trunc, __builtin_truncf(a))
EMU_F1(fract, __builtin_fminf(a - __builtin_floorf(a), 0x1.fffffep-1f))
EMU_F1(saturate, __builtin_fminf(__builtin_fmaxf(a, 0.0f), 1.0f))
EMU_F1(fabs, __builtin_fabsf(a))
#undef EMU_F1

template <class T, EMU_REQ(emu_detail::gentype<T>)>
inline T abs(T x) {
  return emu_detail::map1(x, [](auto v) {
    if constexpr (emu_detail::is_int<plain_t<decltype(v)>>) return v < 0 ? -v : v;
    else return __builtin_fabsf((float)v);
  });
}
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline T sign(T x) {
  return emu_detail::map1(x, [](auto v) { float a = (float)v; return a > 0 ? 1.0f : a < 0 ? -1.0f : a; });
}

#define EMU_F2(name, expr)                                                                       \
  template <class T, class U, EMU_REQ(emu_detail::genfloat<T> && emu_detail::operand_ok<T, U>)>    \
  inline T name(T x, U y) {                                                        \
    return emu_detail::map2(x, emu_detail::bring<T>(y), [](auto v, auto w) {                     \
      float a = (float)v, b = (float)w; return (expr); });                                       \
  }
EMU_F2(pow, __builtin_powf(a, b))
EMU_F2(powr, __builtin_powf(a, b))
EMU_F2(atan2, __builtin_atan2f(a, b))
EMU_F2(fmod, __builtin_fmodf(a, b))
EMU_F2(fmin, __builtin_fminf(a, b))
EMU_F2(fmax, __builtin_fmaxf(a, b))
EMU_F2(fdim, __builtin_fdimf(a, b))
EMU_F2(copysign, __builtin_copysignf(a, b))
EMU_F2(nextafter, __builtin_nextafterf(a, b))
#undef EMU_F2
template <class T, class U, EMU_REQ(emu_detail::genfloat<T> && emu_detail::operand_ok<T, U>)>
inline T step(U edge, T x) {
  return emu_detail::map2(emu_detail::bring<T>(edge), x, [](auto e, auto v) { return (float)v < (float)e ? 0.0f : 1.0f; });
}

template <class T, class U, EMU_REQ(emu_detail::gentype<T> && emu_detail::operand_ok<T, U>)>
inline T min(T x, U y) {
  return emu_detail::map2(x, emu_detail::bring<T>(y), [](auto v, auto w) {
    if constexpr (emu_detail::is_int<plain_t<decltype(v)>>) return w < v ? w : v;
    else return plain_t<decltype(v)>(__builtin_fminf((float)v, (float)w));
  });
}
template <class T, class U, EMU_REQ(emu_detail::gentype<T> && emu_detail::operand_ok<T, U>)>
inline T max(T x, U y) {
  return emu_detail::map2(x, emu_detail::bring<T>(y), [](auto v, auto w) {
    if constexpr (emu_detail::is_int<plain_t<decltype(v)>>) return v < w ? w : v;
    else return plain_t<decltype(v)>(__builtin_fmaxf((float)v, (float)w));
  });
}
template <class T, class U, class V, EMU_REQ(emu_detail::gentype<T> && emu_detail::operand_ok<T, U> && emu_detail::operand_ok<T, V>)>
inline T clamp(T x, U lo, V hi) {
  return min(max(x, emu_detail::bring<T>(lo)), emu_detail::bring<T>(hi));
}
template <class T, EMU_REQ(emu_detail::gentype<T>)>
inline T min3(T x, T y, T z) { return min(min(x, y), z); }
template <class T, EMU_REQ(emu_detail::gentype<T>)>
inline T max3(T x, T y, T z) { return max(max(x, y), z); }
template <class T, EMU_REQ(emu_detail::gentype<T>)>
inline T median3(T x, T y, T z) { return max(min(x, y), min(max(x, y), z)); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline T fmin3(T x, T y, T z) { return fmin(fmin(x, y), z); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline T fmax3(T x, T y, T z) { return fmax(fmax(x, y), z); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline T fmedian3(T x, T y, T z) { return fmax(fmin(x, y), fmin(fmax(x, y), z)); }
template <class T, class U, class V, EMU_REQ(emu_detail::genfloat<T> && emu_detail::operand_ok<T, U> && emu_detail::operand_ok<T, V>)>
inline T fma(T x, U y, V z) {
  return emu_detail::map3(x, emu_detail::bring<T>(y), emu_detail::bring<T>(z),
                          [](auto a, auto b, auto c) { return __builtin_fmaf((float)a, (float)b, (float)c); });
}
template <class T, class U, EMU_REQ(emu_detail::genfloat<T> && emu_detail::operand_ok<T, U>)>
inline T mix(T x, T y, U a) {
  T t = emu_detail::bring<T>(a);
  return x + (y - x) * t;
}
template <class T, class U, class V, EMU_REQ(emu_detail::genfloat<T> && emu_detail::operand_ok<T, U> && emu_detail::operand_ok<T, V>)>
inline T smoothstep(U e0, V e1, T x) {
  typedef typename emu_detail::vt<T>::elem E;
  T t = clamp((x - emu_detail::bring<T>(e0)) / (emu_detail::bring<T>(e1) - emu_detail::bring<T>(e0)), E(0), E(1));
  return t * t * (T(E(3)) - T(E(2)) * t);
}
template <class T, class U, EMU_REQ(emu_detail::genfloat<T> && emu_detail::operand_ok<T, U>)>
inline T divide(T x, U y) { return x / emu_detail::bring<T>(y); }
template <class T, class I, EMU_REQ(emu_detail::genfloat<T>)>
inline T ldexp(T x, I k) {
  if constexpr (emu_detail::vt<T>::n == 1) return T(__builtin_ldexpf(float(x), int(k)));
  else {
    T r = x;
    for (int i = 0; i < emu_detail::vt<T>::n; i++) r[i] = __builtin_ldexpf(float(x[i]), int(k[i]));
    return r;
  }
}
template <class T, class I, EMU_REQ(emu_detail::genfloat<T>)>
inline T frexp(T x, I& e) {
  if constexpr (emu_detail::vt<T>::n == 1) {
    int k;
    T r = T(__builtin_frexpf(float(x), &k));
    e = k;
    return r;
  } else {
    T r = x;
    for (int i = 0; i < emu_detail::vt<T>::n; i++) {
      int k;
      r[i] = __builtin_frexpf(float(x[i]), &k);
      e[i] = k;
    }
    return r;
  }
}
template <class T, class P, EMU_REQ(emu_detail::genfloat<T>)>
inline T modf(T x, P& ip) {
  T t = trunc(x);
  ip = t;
  return x - t;
}
template <class T, class P, EMU_REQ(emu_detail::genfloat<T>)>
inline T sincos(T x, P& c) {
  c = cos(x);
  return sin(x);
}

// ---- geometric -------------------------------------------------------------------------------
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto dot(T a, T b) {
  typename emu_detail::vt<T>::elem s = 0;
  for (int i = 0; i < emu_detail::vt<T>::n; i++) s += a[i] * b[i];
  return s;
}
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto length(T a) { return sqrt(dot(a, a)); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto length_squared(T a) { return dot(a, a); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto distance(T a, T b) { return length(a - b); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto distance_squared(T a, T b) { return dot(a - b, a - b); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline T normalize(T a) { return a * rsqrt(dot(a, a)); }
template <class T, EMU_REQ(emu_detail::genfloat<T> && emu_detail::vt<T>::n == 3)>
inline T cross(T a, T b) { return T{a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x}; }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline T reflect(T i, T n) { return i - 2 * dot(n, i) * n; }

// ---- relational ------------------------------------------------------------------------------
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto isnan(T x) { return emu_detail::test1(x, [](float a) { return __builtin_isnan(a) != 0; }); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto isinf(T x) { return emu_detail::test1(x, [](float a) { return __builtin_isinf(a) != 0; }); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto isfinite(T x) { return emu_detail::test1(x, [](float a) { return __builtin_isfinite(a) != 0; }); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto isnormal(T x) { return emu_detail::test1(x, [](float a) { return __builtin_isnormal(a) != 0; }); }
template <class T, EMU_REQ(emu_detail::genfloat<T>)>
inline auto signbit(T x) { return emu_detail::test1(x, [](float a) { return __builtin_signbit(a) != 0; }); }

// all/any on vector masks (comparison results are -1/0 integer vectors on clang) and bools.
template <class T>
inline bool all(T m) {
  if constexpr (emu_detail::vt<T>::n == 1) return m;
  else {
    for (int i = 0; i < emu_detail::vt<T>::n; i++)
      if (!m[i]) return false;
    return true;
  }
}
template <class T>
inline bool any(T m) {
  if constexpr (emu_detail::vt<T>::n == 1) return m;
  else {
    for (int i = 0; i < emu_detail::vt<T>::n; i++)
      if (m[i]) return true;
    return false;
  }
}
// select(a, b, c): c ? b : a, element-wise.
template <class T, class C>
inline T select(T a, T b, C c) {
  if constexpr (emu_detail::vt<T>::n == 1) return c ? b : a;
  else {
    static_assert(emu_detail::vt<C>::n == 1 || emu_detail::vt<C>::n == emu_detail::vt<T>::n,
                  "select: the condition must be a bool or a bool vector of the operands' width");
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

// ---- integer ---------------------------------------------------------------------------------
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T popcount(T x) {
  return emu_detail::map1(x, [](auto v) { return __builtin_popcountll((unsigned long long)v & ((2ull << (8 * sizeof(v) - 1)) - 1)); });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T clz(T x) {
  return emu_detail::map1(x, [](auto v) {
    unsigned long long u = (unsigned long long)v & ((2ull << (8 * sizeof(v) - 1)) - 1);
    return u ? __builtin_clzll(u) - (64 - 8 * (int)sizeof(v)) : 8 * (int)sizeof(v);
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T ctz(T x) {
  return emu_detail::map1(x, [](auto v) {
    unsigned long long u = (unsigned long long)v & ((2ull << (8 * sizeof(v) - 1)) - 1);
    return u ? __builtin_ctzll(u) : 8 * (int)sizeof(v);
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T mulhi(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) {
    if constexpr (sizeof(a) == 8) return (plain_t<decltype(a)>)(((__int128)a * (__int128)b) >> 64);
    else return (plain_t<decltype(a)>)(((long long)a * (long long)b) >> (8 * sizeof(a)));
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T absdiff(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) { return (plain_t<decltype(a)>)(a > b ? a - b : b - a); });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T hadd(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) { return (plain_t<decltype(a)>)(((__int128)a + (__int128)b) >> 1); });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T rhadd(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) { return (plain_t<decltype(a)>)(((__int128)a + (__int128)b + 1) >> 1); });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T addsat(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) {
    typedef plain_t<decltype(a)> E;
    __int128 s = (__int128)a + (__int128)b;
    return (E)(s > (__int128)numeric_limits<E>::max() ? numeric_limits<E>::max() : s < (__int128)numeric_limits<E>::min() ? numeric_limits<E>::min() : (E)s);
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T subsat(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) {
    typedef plain_t<decltype(a)> E;
    __int128 s = (__int128)a - (__int128)b;
    return (E)(s > (__int128)numeric_limits<E>::max() ? numeric_limits<E>::max() : s < (__int128)numeric_limits<E>::min() ? numeric_limits<E>::min() : (E)s);
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T rotate(T x, T y) {
  return emu_detail::map2(x, y, [](auto a, auto b) {
    typedef plain_t<decltype(a)> E;
    typedef make_unsigned_t<E> U;
    constexpr unsigned w = 8 * sizeof(E);
    unsigned s = (unsigned)(U)b % w;
    return (E)(s ? (U)((U)a << s | (U)a >> (w - s)) : (U)a);
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T reverse_bits(T x) {
  return emu_detail::map1(x, [](auto a) {
    typedef plain_t<decltype(a)> E;
    typedef make_unsigned_t<E> U;
    U u = (U)a, r = 0;
    for (unsigned i = 0; i < 8 * sizeof(E); i++) r = (U)(r << 1 | (u >> i & 1));
    return (E)r;
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T extract_bits(T x, uint offset, uint bits) {
  return emu_detail::map1(x, [=](auto a) {
    typedef plain_t<decltype(a)> E;
    typedef make_unsigned_t<E> U;
    constexpr unsigned w = 8 * sizeof(E);
    if (bits == 0) return E(0);
    U v = (U)((U)a << (w - offset - bits));
    if constexpr (is_signed_v<E>) return (E)((E)v >> (w - bits));
    else return (E)(v >> (w - bits));
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T insert_bits(T base, T insert, uint offset, uint bits) {
  return emu_detail::map2(base, insert, [=](auto a, auto b) {
    typedef plain_t<decltype(a)> E;
    typedef make_unsigned_t<E> U;
    U mask = bits >= 8 * sizeof(E) ? (U)~U(0) : (U)(((U)1 << bits) - 1);
    return (E)(((U)a & ~(U)(mask << offset)) | (((U)b & mask) << offset));
  });
}
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T mad24(T x, T y, T z) { return x * y + z; }
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T mul24(T x, T y) { return x * y; }
template <class T, EMU_REQ(emu_detail::genint<T>)>
inline T madhi(T x, T y, T z) { return mulhi(x, y) + z; }

#undef EMU_REQ
}  // namespace emu_impl

// ---- the concrete overloads ------------------------------------------------------------------
// (Each is a template of no deducible parameter, so that a body is instantiated only when called.)
#define EMU_FT(X, ...) X(float, float, __VA_ARGS__) X(float2, float, __VA_ARGS__) X(float3, float, __VA_ARGS__) \
  X(float4, float, __VA_ARGS__) X(half, half, __VA_ARGS__) X(half2, half, __VA_ARGS__) X(half3, half, __VA_ARGS__) \
  X(half4, half, __VA_ARGS__)
#define EMU_FV(X, ...) X(float2, float, __VA_ARGS__) X(float3, float, __VA_ARGS__) X(float4, float, __VA_ARGS__) \
  X(half2, half, __VA_ARGS__) X(half3, half, __VA_ARGS__) X(half4, half, __VA_ARGS__)
#define EMU_IT1(X, S, ...) X(S, S, __VA_ARGS__) X(S##2, S, __VA_ARGS__) X(S##3, S, __VA_ARGS__) X(S##4, S, __VA_ARGS__)
#define EMU_IT(X, ...) EMU_IT1(X, char, __VA_ARGS__) EMU_IT1(X, uchar, __VA_ARGS__) EMU_IT1(X, short, __VA_ARGS__) \
  EMU_IT1(X, ushort, __VA_ARGS__) EMU_IT1(X, int, __VA_ARGS__) EMU_IT1(X, uint, __VA_ARGS__) EMU_IT1(X, long, __VA_ARGS__) \
  EMU_IT1(X, ulong, __VA_ARGS__)
#define EMU_IV1(X, S, ...) X(S##2, S, __VA_ARGS__) X(S##3, S, __VA_ARGS__) X(S##4, S, __VA_ARGS__)
#define EMU_IV(X, ...) EMU_IV1(X, char, __VA_ARGS__) EMU_IV1(X, uchar, __VA_ARGS__) EMU_IV1(X, short, __VA_ARGS__) \
  EMU_IV1(X, ushort, __VA_ARGS__) EMU_IV1(X, int, __VA_ARGS__) EMU_IV1(X, uint, __VA_ARGS__) EMU_IV1(X, long, __VA_ARGS__) \
  EMU_IV1(X, ulong, __VA_ARGS__)

#define EMU_O1(T, E, f) template <class = void> inline T f(T x) { return emu_impl::f(x); }
#define EMU_O2(T, E, f) template <class = void> inline T f(T x, T y) { return emu_impl::f(x, y); }
#define EMU_O3(T, E, f) template <class = void> inline T f(T x, T y, T z) { return emu_impl::f(x, y, z); }
#define EMU_O2S(T, E, f) template <class = void> inline T f(T x, E y) { return emu_impl::f(x, y); }
#define EMU_O3S(T, E, f) template <class = void> inline T f(T x, E y, E z) { return emu_impl::f(x, y, z); }
#define EMU_EACH(M, f) M(f)
#define EMU_F1S(f) EMU_FT(EMU_O1, f)
EMU_F1S(exp) EMU_F1S(exp2) EMU_F1S(exp10) EMU_F1S(log) EMU_F1S(log2) EMU_F1S(log10) EMU_F1S(sqrt) EMU_F1S(rsqrt)
EMU_F1S(sin) EMU_F1S(cos) EMU_F1S(tan) EMU_F1S(sinpi) EMU_F1S(cospi) EMU_F1S(tanpi) EMU_F1S(asin) EMU_F1S(acos)
EMU_F1S(atan) EMU_F1S(sinh) EMU_F1S(cosh) EMU_F1S(tanh) EMU_F1S(asinh) EMU_F1S(acosh) EMU_F1S(atanh) EMU_F1S(floor)
EMU_F1S(ceil) EMU_F1S(round) EMU_F1S(rint) EMU_F1S(trunc) EMU_F1S(fract) EMU_F1S(saturate) EMU_F1S(fabs) EMU_F1S(sign)
EMU_F1S(abs)
#define EMU_F2S(f) EMU_FT(EMU_O2, f)
EMU_F2S(pow) EMU_F2S(powr) EMU_F2S(atan2) EMU_F2S(fmod) EMU_F2S(fdim) EMU_F2S(copysign) EMU_F2S(nextafter) EMU_F2S(divide)
EMU_F2S(fmin) EMU_F2S(fmax) EMU_F2S(min) EMU_F2S(max) EMU_F2S(step)
EMU_FV(EMU_O2S, fmin) EMU_FV(EMU_O2S, fmax) EMU_FV(EMU_O2S, min) EMU_FV(EMU_O2S, max)
#define EMU_F3S(f) EMU_FT(EMU_O3, f)
EMU_F3S(fma) EMU_F3S(fmin3) EMU_F3S(fmax3) EMU_F3S(fmedian3) EMU_F3S(min3) EMU_F3S(max3) EMU_F3S(median3) EMU_F3S(clamp)
EMU_F3S(mix) EMU_F3S(smoothstep)
EMU_FV(EMU_O3S, clamp)
#define EMU_MIXS(T, E, f) template <class = void> inline T mix(T x, T y, E a) { return emu_impl::mix(x, y, a); }
EMU_FV(EMU_MIXS, _)
#define EMU_STEPS(T, E, f) template <class = void> inline T step(E edge, T x) { return emu_impl::step(edge, x); } \
  template <class = void> inline T smoothstep(E e0, E e1, T x) { return emu_impl::smoothstep(e0, e1, x); }
EMU_FV(EMU_STEPS, _)
#define EMU_LDEXP(T, E, f) template <class = void> inline T ldexp(T x, typename emu_detail::svec_of<int, emu_detail::vt<T>::n>::type k) { return emu_impl::ldexp(x, k); } \
  template <class = void> inline T frexp(T x, typename emu_detail::svec_of<int, emu_detail::vt<T>::n>::type& e) { return emu_impl::frexp(x, e); } \
  template <class = void> inline T modf(T x, T& ip) { return emu_impl::modf(x, ip); } \
  template <class = void> inline T sincos(T x, T& c) { return emu_impl::sincos(x, c); }
EMU_FT(EMU_LDEXP, _)
#define EMU_REL(T, E, f) template <class = void> inline emu_detail::bool_of<T> f(T x) { return emu_impl::f(x); }
EMU_FT(EMU_REL, isnan) EMU_FT(EMU_REL, isinf) EMU_FT(EMU_REL, isfinite) EMU_FT(EMU_REL, isnormal) EMU_FT(EMU_REL, signbit)
#define EMU_GEO(T, E, f) template <class = void> inline E dot(T a, T b) { return emu_impl::dot(a, b); } \
  template <class = void> inline E length(T a) { return emu_impl::length(a); } template <class = void> inline E length_squared(T a) { return emu_impl::length_squared(a); } \
  template <class = void> inline E distance(T a, T b) { return emu_impl::distance(a, b); } \
  template <class = void> inline E distance_squared(T a, T b) { return emu_impl::distance_squared(a, b); } \
  template <class = void> inline T normalize(T a) { return emu_impl::normalize(a); } template <class = void> inline T reflect(T i, T n) { return emu_impl::reflect(i, n); }
EMU_FV(EMU_GEO, _)
template <class = void> inline float3 cross(float3 a, float3 b) { return emu_impl::cross(a, b); }
template <class = void> inline half3 cross(half3 a, half3 b) { return emu_impl::cross(a, b); }
#define EMU_I1S(f) EMU_IT(EMU_O1, f)
EMU_I1S(abs) EMU_I1S(popcount) EMU_I1S(clz) EMU_I1S(ctz) EMU_I1S(reverse_bits)
#define EMU_I2S(f) EMU_IT(EMU_O2, f)
EMU_I2S(min) EMU_I2S(max) EMU_I2S(mulhi) EMU_I2S(absdiff) EMU_I2S(hadd) EMU_I2S(rhadd) EMU_I2S(addsat) EMU_I2S(subsat)
EMU_I2S(rotate) EMU_I2S(mul24)
EMU_IV(EMU_O2S, min) EMU_IV(EMU_O2S, max)
#define EMU_I3S(f) EMU_IT(EMU_O3, f)
EMU_I3S(clamp) EMU_I3S(min3) EMU_I3S(max3) EMU_I3S(median3) EMU_I3S(mad24) EMU_I3S(madhi)
EMU_IV(EMU_O3S, clamp)
#define EMU_BITS(T, E, f) template <class = void> inline T extract_bits(T x, uint o, uint b) { return emu_impl::extract_bits(x, o, b); } \
  template <class = void> inline T insert_bits(T x, T y, uint o, uint b) { return emu_impl::insert_bits(x, y, o, b); }
EMU_IT(EMU_BITS, _)
using emu_impl::all;
using emu_impl::any;
using emu_impl::select;
#undef EMU_FT
#undef EMU_FV
#undef EMU_IT1
#undef EMU_IT
#undef EMU_IV1
#undef EMU_IV
#undef EMU_O1
#undef EMU_O2
#undef EMU_O3
#undef EMU_O2S
#undef EMU_O3S
#undef EMU_EACH
#undef EMU_F1S
#undef EMU_F2S
#undef EMU_F3S
#undef EMU_MIXS
#undef EMU_STEPS
#undef EMU_LDEXP
#undef EMU_REL
#undef EMU_GEO
#undef EMU_I1S
#undef EMU_I2S
#undef EMU_I3S
#undef EMU_BITS

// fast:: and precise:: declare the functions themselves (using-declarations), so that a kernel's
// own overloads in these namespaces (MLX adds bfloat ones) join them rather than hide them.
#define EMU_FP_NAMES                                                                                 \
  using metal::abs; using metal::acos; using metal::asin; using metal::atan; using metal::atan2;    \
  using metal::ceil; using metal::clamp; using metal::cos; using metal::cosh; using metal::exp;     \
  using metal::exp10; using metal::exp2; using metal::fabs; using metal::floor; using metal::fmax;  \
  using metal::fmin; using metal::fmod; using metal::fract; using metal::length; using metal::log;  \
  using metal::log10; using metal::log2; using metal::max; using metal::min; using metal::normalize; \
  using metal::pow; using metal::powr; using metal::rint; using metal::round; using metal::rsqrt;   \
  using metal::saturate; using metal::sign; using metal::sin; using metal::sinh; using metal::sqrt; \
  using metal::tan; using metal::tanh; using metal::trunc; using metal::divide; using metal::asinh; \
  using metal::acosh; using metal::atanh; using metal::sinpi; using metal::cospi; using metal::tanpi; \
  using metal::fdim; using metal::fma; using metal::distance; using metal::dot; using metal::sincos; \
  using metal::fmin3; using metal::fmax3; using metal::fmedian3; using metal::step; using metal::smoothstep; \
  using metal::mix; using metal::ldexp; using metal::frexp; using metal::modf; using metal::copysign;    \
  using metal::nextafter; using metal::isnan; using metal::isinf; using metal::isfinite; using metal::signbit;
namespace fast {
EMU_FP_NAMES
}  // namespace fast
namespace precise {
EMU_FP_NAMES
}  // namespace precise
#undef EMU_FP_NAMES
}  // namespace metal

// The compiler intrinsics the metal headers are built on, as MLX and ggml call them directly:
// math functions with a trailing fast-math flag, and lane queries.
#define EMU_I1(name) template <class T> inline T __metal_##name(T x, int = 0) { return ::metal::name(x); }
#define EMU_I2(name) template <class T> inline T __metal_##name(T x, T y, int = 0) { return ::metal::name(x, y); }
#define EMU_I3(name) template <class T> inline T __metal_##name(T x, T y, T z, int = 0) { return ::metal::name(x, y, z); }
EMU_I1(fabs) EMU_I1(acos) EMU_I1(acosh) EMU_I1(asin) EMU_I1(asinh) EMU_I1(atan) EMU_I1(atanh) EMU_I1(ceil)
EMU_I1(cos) EMU_I1(cosh) EMU_I1(cospi) EMU_I1(exp) EMU_I1(exp10) EMU_I1(exp2) EMU_I1(floor) EMU_I1(fract)
EMU_I1(log) EMU_I1(log10) EMU_I1(log2) EMU_I1(rint) EMU_I1(round) EMU_I1(rsqrt) EMU_I1(sin) EMU_I1(sinh)
EMU_I1(sinpi) EMU_I1(sqrt) EMU_I1(tan) EMU_I1(tanh) EMU_I1(tanpi) EMU_I1(trunc)
EMU_I2(atan2) EMU_I2(divide) EMU_I2(fmax) EMU_I2(fmin) EMU_I2(fmod) EMU_I2(pow) EMU_I2(powr) EMU_I2(nextafter) EMU_I2(fdim)
EMU_I3(fma) EMU_I3(fmax3) EMU_I3(fmin3) EMU_I3(fmedian3)
#undef EMU_I1
#undef EMU_I2
#undef EMU_I3
template <class T, class I>
inline T __metal_ldexp(T x, I k, int = 0) { return ::metal::ldexp(x, k); }
template <class T, class I>
inline T __metal_frexp(T x, I* e, int = 0) { return ::metal::frexp(x, *e); }
