// Scalar and vector types of MSL on clang: ext_vector_type vectors (swizzles, splats, operators),
// _Float16 as half, a bfloat struct, and the conversion helpers the pre-pass rewrites vector
// constructors and same-size casts into.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

namespace metal {

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;
typedef _Float16 half;

// bfloat: IEEE-754 binary32 truncated to 16 bits; conversions round to nearest even.
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  constexpr bfloat(float f) : bits(from_float(f)) {}
  constexpr operator float() const { return __builtin_bit_cast(float, (uint32_t)bits << 16); }
  static constexpr uint16_t from_float(float f) {
    uint32_t u = __builtin_bit_cast(uint32_t, f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
  bfloat& operator+=(float o) { return *this = bfloat(float(*this) + o); }
  bfloat& operator-=(float o) { return *this = bfloat(float(*this) - o); }
  bfloat& operator*=(float o) { return *this = bfloat(float(*this) * o); }
  bfloat& operator/=(float o) { return *this = bfloat(float(*this) / o); }
};

template <int N>
struct bvec;
template <int N>
struct boolvec;

namespace emu_detail {
// The struct vector of k elements of E (k = 1: E itself).
template <class E, int K>
struct svec_of;
template <int K>
struct svec_of<bfloat, K> {
  typedef bvec<K> type;
};
template <>
struct svec_of<bfloat, 1> {
  typedef bfloat type;
};
template <int K>
struct svec_of<bool, K> {
  typedef boolvec<K> type;
};
template <>
struct svec_of<bool, 1> {
  typedef bool type;
};
// Swizzle proxies of the struct vectors: they share the vector's storage (members of one union).
template <class E, int N, int... I>
struct swz {
  E v[N];
  typedef typename svec_of<E, sizeof...(I)>::type R;
  operator R() const {
    R r;
    int k = 0;
    ((r[k++] = v[I]), ...);
    return r;
  }
  template <class X, class = decltype(R(std::declval<X>()))>
  swz& operator=(const X& x) {
    R r = R(x);
    int k = 0;
    ((v[I] = r[k++]), ...);
    return *this;
  }
  swz& operator=(const swz& o) { return *this = R(o); }
};
template <class E, int N, int I>
struct swz1 {
  E v[N];
  operator E() const { return v[I]; }
  template <class F = E, class = std::enable_if_t<std::is_same_v<F, bfloat>>>
  operator float() const { return float(v[I]); }
  swz1& operator=(E x) {
    v[I] = x;
    return *this;
  }
  swz1& operator=(const swz1& o) { return *this = E(o); }
};
// sstore<E, N>: the elements of a struct vector and its swizzles, members of one union.
template <class E, int N>
struct sstore;
}  // namespace emu_detail
}  // namespace metal
#include "emu_swizzle.h"
namespace metal {
namespace emu_detail {
template <class E>
struct sstore<E, 2> {
  union {
    E v[2];
    EMU_SWIZZLES_2(E)
  };
};
template <class E>
struct sstore<E, 3> {
  union {
    E v[3];
    EMU_SWIZZLES_3(E)
  };
};
template <class E>
struct sstore<E, 4> {
  union {
    E v[4];
    EMU_SWIZZLES_4(E)
  };
};
}  // namespace emu_detail

// bfloat vectors: element storage with conversions to and from float vectors and swizzles (x, y,
// z, w; not rgba).
template <int N>
struct alignas(N == 3 ? 8 : 2 * N) bvec : emu_detail::sstore<bfloat, N> {
  using emu_detail::sstore<bfloat, N>::v;
  bfloat& operator[](int i) { return v[i]; }
  const bfloat& operator[](int i) const { return v[i]; }
  typedef float fv __attribute__((ext_vector_type(N)));
  bvec() = default;
  bvec(const bvec& o) { memcpy((void*)this, (const void*)&o, sizeof o); }
  bvec& operator=(const bvec& o) {
    memcpy((void*)this, (const void*)&o, sizeof o);
    return *this;
  }
  bvec(float s) { for (int i = 0; i < N; i++) v[i] = bfloat(s); }
  template <class V, class = decltype(__builtin_convertvector(V(), fv))>
  bvec(V x) {
    fv f = __builtin_convertvector(x, fv);
    for (int i = 0; i < N; i++) v[i] = bfloat(f[i]);
  }
  template <class V, class = decltype(__builtin_convertvector(fv(), V))>
  operator V() const {
    fv f;
    for (int i = 0; i < N; i++) f[i] = float(v[i]);
    return __builtin_convertvector(f, V);
  }
};

// bool vectors: MSL's comparison results. Built from the -1/0 integer vectors clang's vector
// comparisons give, with logical operators and swizzles (x, y, z, w).
template <int N>
struct boolvec : emu_detail::sstore<bool, N> {
  using emu_detail::sstore<bool, N>::v;
  bool& operator[](int i) { return v[i]; }
  const bool& operator[](int i) const { return v[i]; }
  boolvec() = default;
  boolvec(const boolvec& o) { memcpy((void*)this, (const void*)&o, sizeof o); }
  boolvec& operator=(const boolvec& o) {
    memcpy((void*)this, (const void*)&o, sizeof o);
    return *this;
  }
  boolvec(bool s) { for (int i = 0; i < N; i++) v[i] = s; }
  template <class X, class = std::enable_if_t<!std::is_arithmetic_v<X>>, class = decltype(__builtin_convertvector(X(), int __attribute__((ext_vector_type(N)))))>
  boolvec(const X& x) {
    for (int i = 0; i < N; i++) v[i] = x[i] != 0;
  }
};

#define EMU_VECS(T)                                      \
  typedef T T##2 __attribute__((ext_vector_type(2)));    \
  typedef T T##3 __attribute__((ext_vector_type(3)));    \
  typedef T T##4 __attribute__((ext_vector_type(4)));    \
  typedef T T##8 __attribute__((ext_vector_type(8)));    \
  typedef T T##16 __attribute__((ext_vector_type(16)));
EMU_VECS(float)
EMU_VECS(half)
EMU_VECS(int)
EMU_VECS(uint)
EMU_VECS(short)
EMU_VECS(ushort)
EMU_VECS(char)
EMU_VECS(uchar)
EMU_VECS(long)
EMU_VECS(ulong)
#undef EMU_VECS
typedef boolvec<2> bool2;
typedef boolvec<3> bool3;
typedef boolvec<4> bool4;

// Logical operators of bool vectors and their swizzles (templates, so that files without bool
// vectors instantiate nothing).
namespace emu_detail {
template <class T>
struct as_boolvec {};
template <int N>
struct as_boolvec<boolvec<N>> {
  typedef boolvec<N> type;
  static constexpr int n = N;
};
template <int N, int... I>
struct as_boolvec<swz<bool, N, I...>> {
  typedef boolvec<sizeof...(I)> type;
  static constexpr int n = sizeof...(I);
};
template <class A, class B, class = void>
struct bv_common {};
template <class A, class B>
struct bv_common<A, B, std::enable_if_t<std::is_same_v<typename as_boolvec<A>::type, typename as_boolvec<B>::type>>> {
  typedef typename as_boolvec<A>::type type;
};
}  // namespace emu_detail
template <class A, class V = typename emu_detail::as_boolvec<A>::type>
inline V operator!(const A& a) {
  V x = V(a), r;
  for (int i = 0; i < emu_detail::as_boolvec<V>::n; i++) r[i] = !x[i];
  return r;
}
#define EMU_BOOLOP(op)                                                          \
  template <class A, class B, class V = typename emu_detail::bv_common<A, B>::type> \
  inline V operator op(const A& a, const B& b) {                                \
    V x = V(a), y = V(b), r;                                                    \
    for (int i = 0; i < emu_detail::as_boolvec<V>::n; i++) r[i] = x[i] op y[i];  \
    return r;                                                                   \
  }
EMU_BOOLOP(&&)
EMU_BOOLOP(||)
EMU_BOOLOP(&)
EMU_BOOLOP(|)
EMU_BOOLOP(^)
EMU_BOOLOP(==)
EMU_BOOLOP(!=)
#undef EMU_BOOLOP
typedef bvec<2> bfloat2;
typedef bvec<3> bfloat3;
typedef bvec<4> bfloat4;

// packed_T3: three elements without the padding of T3.
template <class T, class V>
struct packed3 {
  T x, y, z;
  packed3() = default;
  packed3(V v) : x(v.x), y(v.y), z(v.z) {}
  operator V() const { return V{x, y, z}; }
  T& operator[](int i) { return (&x)[i]; }
  const T& operator[](int i) const { return (&x)[i]; }
};
typedef packed3<float, float3> packed_float3;
typedef packed3<half, half3> packed_half3;
typedef packed3<int, int3> packed_int3;
typedef packed3<uint, uint3> packed_uint3;
typedef float2 packed_float2;
typedef float4 packed_float4;
typedef half2 packed_half2;
typedef half4 packed_half4;

template <class T, int N>
using vec = T __attribute__((ext_vector_type(N)));

// metal::array: a fixed-size aggregate array.
template <class T, size_t N>
struct array {
  T elems_[N];
  T& operator[](size_t i) { return elems_[i]; }
  constexpr const T& operator[](size_t i) const { return elems_[i]; }
  static constexpr size_t size() { return N; }
  T* begin() { return elems_; }
  T* end() { return elems_ + N; }
  const T* begin() const { return elems_; }
  const T* end() const { return elems_ + N; }
};

namespace emu_detail {
// vt<T>: element type and width of a scalar (n = 1) or vector type.
template <class T>
struct vt {
  typedef T elem;
  static constexpr int n = 1;
};
template <class T, int N>
struct vt<T __attribute__((ext_vector_type(N)))> {
  typedef T elem;
  static constexpr int n = N;
};
template <int N>
struct vt<boolvec<N>> {
  typedef bool elem;
  static constexpr int n = N;
};
template <int N>
struct vt<bvec<N>> {
  typedef bfloat elem;
  static constexpr int n = N;
};
template <class T, class V>
struct vt<packed3<T, V>> {
  typedef T elem;
  static constexpr int n = 3;
};

template <class E, class X>
inline void put(E* out, int& i, int cap, const X& x) {
  constexpr int n = vt<X>::n;
  if constexpr (n == 1) {
    if (i < cap) out[i] = static_cast<E>(x);
    i++;
  } else {
    for (int k = 0; k < n; k++) {
      if (i < cap) out[i] = static_cast<E>(x[k]);
      i++;
    }
  }
}

// make<V>(args...): MSL vector constructor semantics: one scalar splats, one vector of the same
// width converts element-wise, otherwise the arguments' elements are concatenated and converted.
template <class V, class... A>
inline V make(const A&... a) {
  typedef typename vt<V>::elem E;
  constexpr int N = vt<V>::n;
  E tmp[N];
  int i = 0;
  if constexpr (sizeof...(A) == 1 && ((vt<A>::n == 1) && ...)) {
    for (int k = 0; k < N; k++) put(tmp, i, N, a...);
  } else {
    (put(tmp, i, N, a), ...);
  }
  V r;
  if constexpr (N == 1) {
    r = tmp[0];
  } else {
    for (int k = 0; k < N; k++) r[k] = tmp[k];
  }
  return r;
}

// caster<V>() ->* x is the rewrite of the C cast (V)x: a value conversion, never a bit-cast.
// ->* binds tighter than every binary operator and looser than unary ones, like a cast.
template <class V, class Inner = void>
struct caster {
  template <class X>
  V operator->*(const X& x) const {
    if constexpr (std::is_void_v<Inner>) return make<V>(x);
    else return make<V>(Inner()->*x);
  }
  template <class W, class I2>
  caster<V, caster<W, I2>> operator->*(caster<W, I2>) const { return {}; }
};
}  // namespace emu_detail

// as_type<T>(x): reinterprets the bits of x; sizes must match.
template <class T, class X>
inline T as_type(const X& x) {
  static_assert(sizeof(T) == sizeof(X), "as_type: sizes differ");
  T r;
  memcpy(&r, &x, sizeof r);
  return r;
}

}  // namespace metal
