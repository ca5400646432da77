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

// bfloat vectors: element storage with conversions to and from float vectors (no swizzles).
template <int N>
struct alignas(N == 3 ? 8 : 2 * N) bvec {
  bfloat v[N];
  bfloat& operator[](int i) { return v[i]; }
  const bfloat& operator[](int i) const { return v[i]; }
  typedef float fv __attribute__((ext_vector_type(N)));
  bvec() = default;
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
EMU_VECS(bool)
#undef EMU_VECS
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
