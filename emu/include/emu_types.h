// Scalar, vector, packed-vector and matrix types of MSL: ext_vector_type vectors (swizzles,
// splats, operators), OpenCL's half, a bfloat struct, struct vectors of bool and bfloat, packed
// vectors laid out as MSL lays them out (N elements, the element's alignment), matrix<T, C, R>,
// numeric_limits, and the conversion helpers the pre-pass rewrites vector constructors and vector
// casts into.
#pragma once
#include "emu_base.h"

// bfloat: IEEE-754 binary32 truncated to 16 bits; conversions round to nearest even. bfloat
// converts implicitly to float, and from the arithmetic types (as MLX's kernels, which compile on
// Apple GPUs, convert it); bfloat op bfloat and bfloat op integer are bfloat, bfloat op float or
// half float (computed in float, rounded for a bfloat result).
//
// C++ for OpenCL gives a class's implicit copy constructor a generic source, which excludes the
// constant address space: bfloat declares a constructor and an assignment from a constant-space
// bfloat (templates, so that bfloat stays trivially copyable) and constructors for objects in
// constant memory.
struct bfloat;
namespace metal {
template <> struct is_floating_point<bfloat> : true_type {};
template <> struct is_floating_point<const bfloat> : true_type {};
template <> struct is_arithmetic<bfloat> : true_type {};
template <> struct is_signed<bfloat> : true_type {};
namespace emu_detail {
template <class B> constexpr bool is_bf = is_same_v<B, bfloat>;
template <class F> constexpr bool is_num = is_arithmetic_v<F> && !is_same_v<F, bfloat>;
template <class F> constexpr bool is_fp = is_floating_point_v<F> && !is_same_v<F, bfloat>;
}  // namespace emu_detail
}  // namespace metal
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  bfloat(const bfloat&) = default;
  bfloat(const bfloat&) __constant = default;
  bfloat& operator=(const bfloat&) = default;
  template <class B, class = metal::enable_if_t<metal::emu_detail::is_bf<B>>>
  constexpr bfloat(const __constant B& o) : bits(o.bits) {}
  template <class B, class = metal::enable_if_t<metal::emu_detail::is_bf<B>>>
  constexpr bfloat(const __constant B& o) __constant : bits(o.bits) {}
  template <class B, class = metal::enable_if_t<metal::emu_detail::is_bf<B>>>
  bfloat& operator=(const __constant B& o) {
    bits = o.bits;
    return *this;
  }
  template <class F, class = metal::enable_if_t<metal::emu_detail::is_num<F>>>
  constexpr bfloat(F f) : bits(from_float(float(f))) {}
  // From a class that converts to bfloat or an arithmetic type (bfloat is arithmetic in MSL).
  template <class F, class = metal::enable_if_t<__is_class(F) && !metal::emu_detail::is_bf<F> &&
                                                (__is_convertible_to(F, float) || __is_convertible_to(F, bfloat))>, class = void>
  explicit constexpr bfloat(F f) : bits(conv(f)) {}
  // Assigned from a class that converts to an arithmetic type (MLX: bfloat = _NoMask, whose
  // operator bool MSL then converts to bfloat).
  template <class F, class = metal::enable_if_t<__is_class(F) && !metal::emu_detail::is_bf<metal::remove_addrspace_t<F>>>,
            class = decltype(float(*(const F*)nullptr))>
  bfloat& operator=(const F& f) {
    bits = from_float(float(f));
    return *this;
  }
  template <class F>
  static constexpr uint16_t conv(F& f) {
    if constexpr (__is_convertible_to(F, bfloat)) return f.operator bfloat().bits;
    else return from_float(float(f));
  }
  template <class F, class = metal::enable_if_t<metal::emu_detail::is_num<F>>>
  constexpr bfloat(F f) __constant : bits(from_float(float(f))) {}
  constexpr operator float() const { return __builtin_bit_cast(float, (uint32_t)bits << 16); }
  constexpr operator float() const __constant { return __builtin_bit_cast(float, (uint32_t)bits << 16); }
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
constexpr bfloat operator-(bfloat a) { return bfloat(-float(a)); }
constexpr bfloat operator+(bfloat a) { return a; }
#define EMU_BFOP(op)                                                                                        \
  constexpr bfloat operator op(bfloat a, bfloat b) { return bfloat(float(a) op float(b)); }                 \
  template <class I, class = metal::enable_if_t<metal::is_integral_v<I>>>                                   \
  constexpr bfloat operator op(bfloat a, I b) { return bfloat(float(a) op float(b)); }                      \
  template <class I, class = metal::enable_if_t<metal::is_integral_v<I>>>                                   \
  constexpr bfloat operator op(I a, bfloat b) { return bfloat(float(a) op float(b)); }                      \
  template <class F, class = metal::enable_if_t<metal::emu_detail::is_fp<F>>, class = void>                 \
  constexpr float operator op(bfloat a, F b) { return float(a) op float(b); }                              \
  template <class F, class = metal::enable_if_t<metal::emu_detail::is_fp<F>>, class = void>                 \
  constexpr float operator op(F a, bfloat b) { return float(a) op float(b); }
EMU_BFOP(+)
EMU_BFOP(-)
EMU_BFOP(*)
EMU_BFOP(/)
#undef EMU_BFOP

namespace metal {
using ::bfloat;

template <int N>
struct bvec;
template <int N>
struct boolvec;
template <class E, int N>
struct packed_vec;
template <int N>
struct hvec;

namespace emu_detail {
template <class E, int K>
struct svec_of;
}
// vec<T, N>: the vector type of N elements of T (bfloat and bool vectors are structs).
template <class T, int N>
using vec = typename emu_detail::svec_of<T, N>::type;

namespace emu_detail {
// The value type of an object in any address space.
template <class T>
using plain_t = remove_cv_t<remove_addrspace_t<remove_cv_t<T>>>;
// The vector of k elements of E (k = 1: E itself): ext vectors for arithmetic E, struct vectors
// for bfloat and bool.
template <class E, int K>
struct svec_of {
  typedef E type __attribute__((ext_vector_type(K)));
};
template <class E>
struct svec_of<E, 1> {
  typedef E type;
};
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
// half vectors of 2, 3 and 4 elements are struct vectors: C++ for OpenCL refuses a float scalar
// with a half vector (half4 * 0.5f), which MSL converts to half.
template <>
struct svec_of<half, 2> {
  typedef hvec<2> type;
};
template <>
struct svec_of<half, 3> {
  typedef hvec<3> type;
};
template <>
struct svec_of<half, 4> {
  typedef hvec<4> type;
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
  template <class X, class = decltype(R(declval<X>()))>
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
  template <class F = E, class = enable_if_t<is_same_v<F, bfloat>>>
  operator float() const { return float(v[I]); }
  swz1& operator=(E x) {
    v[I] = x;
    return *this;
  }
  swz1& operator=(const swz1& o) { return *this = E(o); }
  swz1& operator+=(E x) { return *this = E(v[I] + x); }
  swz1& operator-=(E x) { return *this = E(v[I] - x); }
  swz1& operator*=(E x) { return *this = E(v[I] * x); }
  swz1& operator/=(E x) { return *this = E(v[I] / x); }
};
// sstore<E, N>: the elements of a struct vector and its swizzles, members of one union.
// (8 and 16 elements: no swizzles.)
template <class E, int N>
struct sstore {
  E v[N];
};
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
  bvec(const bvec& o) { __builtin_memcpy((void*)this, (const void*)&o, sizeof o); }
  bvec& operator=(const bvec& o) {
    __builtin_memcpy((void*)this, (const void*)&o, sizeof o);
    return *this;
  }
  bvec(float s) { for (int i = 0; i < N; i++) v[i] = bfloat(s); }
  template <class... A, class = enable_if_t<sizeof...(A) == N && (N > 1) && (is_arithmetic_v<A> && ...)>, class = void>
  bvec(A... a) {
    bfloat t[N] = {bfloat(a)...};
    for (int i = 0; i < N; i++) v[i] = t[i];
  }
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
  boolvec(const boolvec& o) { __builtin_memcpy((void*)this, (const void*)&o, sizeof o); }
  boolvec& operator=(const boolvec& o) {
    __builtin_memcpy((void*)this, (const void*)&o, sizeof o);
    return *this;
  }
  boolvec(bool s) { for (int i = 0; i < N; i++) v[i] = s; }
  template <class... A, class = enable_if_t<sizeof...(A) == N && (N > 1) && (is_arithmetic_v<A> && ...)>>
  boolvec(A... a) {
    bool t[N] = {bool(a)...};
    for (int i = 0; i < N; i++) v[i] = t[i];
  }
  template <class X, class = enable_if_t<!is_arithmetic_v<X>>, class = decltype(__builtin_convertvector(X(), int __attribute__((ext_vector_type(N)))))>
  boolvec(X x) {
    for (int i = 0; i < N; i++) v[i] = x[i] != 0;
  }
};


// half vectors (2 to 4 elements): element storage with MSL's operators (elementwise in half,
// rounded after every operation as half vectors are; a scalar of any arithmetic type converts
// to half), comparisons giving bool vectors, swizzles (x, y, z, w) and conversion to and from
// clang's half vectors (which the math functions compute on).
template <int N>
struct alignas(N == 3 ? 8 : 2 * N) hvec : emu_detail::sstore<half, N> {
  using emu_detail::sstore<half, N>::v;
  typedef half ext __attribute__((ext_vector_type(N)));
  half& operator[](int i) { return v[i]; }
  const half& operator[](int i) const { return v[i]; }
  hvec() = default;
  hvec(const hvec& o) { __builtin_memcpy((void*)this, (const void*)&o, sizeof o); }
  hvec(const hvec& o) __constant { for (int i = 0; i < N; i++) v[i] = o.v[i]; }
  template <class B, class = enable_if_t<is_same_v<B, hvec>>>
  hvec(const __constant B& o) { for (int i = 0; i < N; i++) v[i] = o.v[i]; }
  hvec& operator=(const hvec& o) {
    __builtin_memcpy((void*)this, (const void*)&o, sizeof o);
    return *this;
  }
  template <class B, class = enable_if_t<is_same_v<B, hvec>>>
  hvec& operator=(const __constant B& o) {
    for (int i = 0; i < N; i++) v[i] = o.v[i];
    return *this;
  }
  template <class S, class = enable_if_t<is_arithmetic_v<S> && !is_same_v<S, bfloat>>>
  hvec(S s) { for (int i = 0; i < N; i++) v[i] = half(s); }
  template <class S, class = enable_if_t<is_arithmetic_v<S> && !is_same_v<S, bfloat>>>
  hvec(S s) __constant { for (int i = 0; i < N; i++) v[i] = half(s); }
  // A bfloat converts to half implicitly, not to a half vector (else isnan(bfloat) would be
  // ambiguous between the half vector and float overloads).
  explicit hvec(bfloat s) { for (int i = 0; i < N; i++) v[i] = half(float(s)); }
  template <class... A, class = enable_if_t<sizeof...(A) == N && ((is_arithmetic_v<A> || __is_convertible(A, half)) && ...)>, class = void>
  hvec(A... a) {
    half t[N] = {half(a)...};
    for (int i = 0; i < N; i++) v[i] = t[i];
  }
  template <class... A, class = enable_if_t<sizeof...(A) == N && ((is_arithmetic_v<A> || __is_convertible(A, half)) && ...)>, class = void>
  hvec(A... a) __constant {
    half t[N] = {half(a)...};
    for (int i = 0; i < N; i++) v[i] = t[i];
  }
  hvec(ext e) { for (int i = 0; i < N; i++) v[i] = e[i]; }
  operator ext() const {
    ext e;
    for (int i = 0; i < N; i++) e[i] = v[i];
    return e;
  }
  template <class X> hvec& operator+=(const X& x) { return *this = *this + x; }
  template <class X> hvec& operator-=(const X& x) { return *this = *this - x; }
  template <class X> hvec& operator*=(const X& x) { return *this = *this * x; }
  template <class X> hvec& operator/=(const X& x) { return *this = *this / x; }
};

namespace emu_detail {
// hv<T>::n: the width of a half vector or half swizzle, 0 for an arithmetic scalar, -1 otherwise.
template <class T>
struct hv {
  static constexpr int n = is_arithmetic_v<T> && !is_same_v<T, bfloat> ? 0 : -1;
};
template <int N>
struct hv<hvec<N>> {
  static constexpr int n = N;
};
template <int M, int... I>
struct hv<swz<half, M, I...>> {
  static constexpr int n = sizeof...(I);
};
template <int M, int I>
struct hv<swz1<half, M, I>> {
  static constexpr int n = 0;
};
template <class A, class B, class = void>
struct hv_common {};
template <class A, class B>
struct hv_common<A, B, enable_if_t<(hv<plain_t<A>>::n > 0 || hv<plain_t<B>>::n > 0) && hv<plain_t<A>>::n >= 0 && hv<plain_t<B>>::n >= 0 &&
                                     (hv<plain_t<A>>::n == 0 || hv<plain_t<B>>::n == 0 || hv<plain_t<A>>::n == hv<plain_t<B>>::n)>> {
  static constexpr int n = hv<plain_t<A>>::n > 0 ? hv<plain_t<A>>::n : hv<plain_t<B>>::n;
  typedef hvec<n> type;
};
template <int N, class X>
inline half hget(const X& x, int i) {
  if constexpr (hv<plain_t<X>>::n == 0) return half(x);
  else return hvec<N>(x).v[i];
}
}  // namespace emu_detail
#define EMU_HOP(op)                                                                                     \
  template <class A, class B, class C = emu_detail::hv_common<A, B>>                                 \
  inline typename C::type operator op(const A& a, const B& b) {                                       \
    typename C::type r;                                                                               \
    for (int i = 0; i < C::n; i++) r.v[i] = half(emu_detail::hget<C::n>(a, i) op emu_detail::hget<C::n>(b, i)); \
    return r;                                                                                         \
  }
EMU_HOP(+)
EMU_HOP(-)
EMU_HOP(*)
EMU_HOP(/)
#undef EMU_HOP
#define EMU_HCMP(op)                                                                                    \
  template <class A, class B, class C = emu_detail::hv_common<A, B>>                                 \
  inline boolvec<C::n> operator op(const A& a, const B& b) {                                          \
    boolvec<C::n> r;                                                                                  \
    for (int i = 0; i < C::n; i++) r[i] = emu_detail::hget<C::n>(a, i) op emu_detail::hget<C::n>(b, i); \
    return r;                                                                                         \
  }
EMU_HCMP(<)
EMU_HCMP(>)
EMU_HCMP(<=)
EMU_HCMP(>=)
EMU_HCMP(==)
EMU_HCMP(!=)
#undef EMU_HCMP
namespace emu_detail {
// An element of a half vector (h.x) is a half in arithmetic and comparisons (C++'s built-in
// operators would find it ambiguous among the promoted arithmetic types, half not being one).
template <int N, int I>
inline half operator-(const swz1<half, N, I>& a) { return -half(a); }
template <int N, int I>
inline half operator+(const swz1<half, N, I>& a) { return half(a); }
#define EMU_H1OP(op)                                                                                  \
  template <int N, int I, class B, class = enable_if_t<is_arithmetic_v<B>>>                        \
  inline auto operator op(const swz1<half, N, I>& a, B b) { return half(a) op b; }                 \
  template <int N, int I, class A, class = enable_if_t<is_arithmetic_v<A>>>                        \
  inline auto operator op(A a, const swz1<half, N, I>& b) { return a op half(b); }                 \
  template <int N, int I, int M, int J>                                                             \
  inline auto operator op(const swz1<half, N, I>& a, const swz1<half, M, J>& b) { return half(a) op half(b); }
EMU_H1OP(+)
EMU_H1OP(-)
EMU_H1OP(*)
EMU_H1OP(/)
EMU_H1OP(<)
EMU_H1OP(>)
EMU_H1OP(<=)
EMU_H1OP(>=)
EMU_H1OP(==)
EMU_H1OP(!=)
#undef EMU_H1OP
}  // namespace emu_detail
template <int N>
inline hvec<N> operator-(const hvec<N>& a) {
  hvec<N> r;
  for (int i = 0; i < N; i++) r.v[i] = -a.v[i];
  return r;
}
template <int N>
inline hvec<N> operator+(const hvec<N>& a) { return a; }
}  // namespace metal

// MSL's vector type names exist at global scope (vector_floatN and floatN; kernels use them before
// `using namespace metal`) and in metal.
#define EMU_VECS(T, S)                                          \
  typedef T vector_##S##2 __attribute__((ext_vector_type(2)));  \
  typedef T vector_##S##3 __attribute__((ext_vector_type(3)));  \
  typedef T vector_##S##4 __attribute__((ext_vector_type(4)));  \
  typedef T vector_##S##8 __attribute__((ext_vector_type(8)));  \
  typedef T vector_##S##16 __attribute__((ext_vector_type(16))); \
  typedef vector_##S##2 S##2;                                   \
  typedef vector_##S##3 S##3;                                   \
  typedef vector_##S##4 S##4;                                   \
  typedef vector_##S##8 S##8;                                   \
  typedef vector_##S##16 S##16;                                 \
  namespace metal {                                             \
  typedef vector_##S##2 S##2;                                   \
  typedef vector_##S##3 S##3;                                   \
  typedef vector_##S##4 S##4;                                   \
  typedef vector_##S##8 S##8;                                   \
  typedef vector_##S##16 S##16;                                 \
  }
EMU_VECS(float, float)
typedef metal::hvec<2> vector_half2;
typedef metal::hvec<3> vector_half3;
typedef metal::hvec<4> vector_half4;
typedef half vector_half8 __attribute__((ext_vector_type(8)));
typedef half vector_half16 __attribute__((ext_vector_type(16)));
typedef vector_half2 half2;
typedef vector_half3 half3;
typedef vector_half4 half4;
typedef vector_half8 half8;
typedef vector_half16 half16;
namespace metal {
typedef vector_half2 half2;
typedef vector_half3 half3;
typedef vector_half4 half4;
typedef vector_half8 half8;
typedef vector_half16 half16;
}
EMU_VECS(int, int)
EMU_VECS(unsigned int, uint)
EMU_VECS(short, short)
EMU_VECS(unsigned short, ushort)
EMU_VECS(char, char)
EMU_VECS(unsigned char, uchar)
EMU_VECS(long, long)
EMU_VECS(unsigned long, ulong)
#undef EMU_VECS

namespace metal {
typedef boolvec<2> bool2;
typedef boolvec<3> bool3;
typedef boolvec<4> bool4;
typedef bvec<2> bfloat2;
typedef bvec<3> bfloat3;
typedef bvec<4> bfloat4;

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
struct bv_common<A, B, enable_if_t<is_same_v<typename as_boolvec<A>::type, typename as_boolvec<B>::type>>> {
  typedef typename as_boolvec<A>::type type;
};
}  // namespace emu_detail
template <class A, class V = typename emu_detail::as_boolvec<emu_detail::plain_t<A>>::type>
inline V operator!(const A& a) {
  V x = V(a), r;
  for (int i = 0; i < emu_detail::as_boolvec<V>::n; i++) r[i] = !x[i];
  return r;
}
#define EMU_BOOLOP(op)                                                                                          \
  template <class A, class B, class V = typename emu_detail::bv_common<emu_detail::plain_t<A>, emu_detail::plain_t<B>>::type> \
  inline V operator op(const A& a, const B& b) {                                                                \
    V x = V(a), y = V(b), r;                                                                                    \
    for (int i = 0; i < emu_detail::as_boolvec<V>::n; i++) r[i] = x[i] op y[i];                                  \
    return r;                                                                                                   \
  }
EMU_BOOLOP(&&)
EMU_BOOLOP(||)
EMU_BOOLOP(&)
EMU_BOOLOP(|)
EMU_BOOLOP(^)
EMU_BOOLOP(==)
EMU_BOOLOP(!=)
#undef EMU_BOOLOP

// Packed vectors: N elements of E with E's alignment (packed_float3 is 12 bytes, a struct of a
// float and a packed_float2 is 12 bytes), element access, swizzles (to unpacked vectors), and
// arithmetic through the unpacked vector type.
template <class E, int N>
struct packed_vec : emu_detail::sstore<E, N> {
  using emu_detail::sstore<E, N>::v;
  typedef typename emu_detail::svec_of<E, N>::type V;
  packed_vec() = default;
  packed_vec(const packed_vec& o) { __builtin_memcpy((void*)this, (const void*)&o, sizeof o); }
  packed_vec& operator=(const packed_vec& o) {
    __builtin_memcpy((void*)this, (const void*)&o, sizeof o);
    return *this;
  }
  packed_vec(const V& x) {
    for (int i = 0; i < N; i++) v[i] = x[i];
  }
  template <class... A, class = enable_if_t<sizeof...(A) == N && N != 1>>
  packed_vec(A... a) {
    E t[N] = {E(a)...};
    for (int i = 0; i < N; i++) v[i] = t[i];
  }
  operator V() const {
    V r;
    for (int i = 0; i < N; i++) r[i] = v[i];
    return r;
  }
  E& operator[](int i) { return v[i]; }
  const E& operator[](int i) const { return v[i]; }
  template <class X> packed_vec& operator+=(const X& x) { return *this = V(V(*this) + x); }
  template <class X> packed_vec& operator-=(const X& x) { return *this = V(V(*this) - x); }
  template <class X> packed_vec& operator*=(const X& x) { return *this = V(V(*this) * x); }
  template <class X> packed_vec& operator/=(const X& x) { return *this = V(V(*this) / x); }
};
namespace emu_detail {
template <class T>
struct unpack {
  typedef T type;
};
template <class E, int N>
struct unpack<packed_vec<E, N>> {
  typedef typename packed_vec<E, N>::V type;
};
template <class A, class B>
constexpr bool any_packed = !is_same_v<typename unpack<A>::type, A> || !is_same_v<typename unpack<B>::type, B>;
}  // namespace emu_detail
#define EMU_PACKEDOP(op)                                                                                      \
  template <class A, class B, class PA = emu_detail::plain_t<A>, class PB = emu_detail::plain_t<B>,          \
            class = enable_if_t<emu_detail::any_packed<PA, PB>>>                                             \
  inline auto operator op(const A& a, const B& b)                                                             \
      -> decltype(typename emu_detail::unpack<PA>::type(a) op typename emu_detail::unpack<PB>::type(b)) {     \
    return typename emu_detail::unpack<PA>::type(a) op typename emu_detail::unpack<PB>::type(b);            \
  }
EMU_PACKEDOP(+)
EMU_PACKEDOP(-)
EMU_PACKEDOP(*)
EMU_PACKEDOP(/)
#undef EMU_PACKEDOP

#define EMU_PACKED(S, T)                  \
  typedef packed_vec<T, 2> packed_##S##2; \
  typedef packed_vec<T, 3> packed_##S##3; \
  typedef packed_vec<T, 4> packed_##S##4;
EMU_PACKED(float, float)
EMU_PACKED(half, half)
EMU_PACKED(int, int)
EMU_PACKED(uint, uint)
EMU_PACKED(short, short)
EMU_PACKED(ushort, ushort)
EMU_PACKED(char, char)
EMU_PACKED(uchar, uchar)
EMU_PACKED(long, long)
EMU_PACKED(ulong, ulong)
EMU_PACKED(bfloat, bfloat)
#undef EMU_PACKED

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
template <class T>
struct array<T, 0> {
  static constexpr size_t size() { return 0; }
};

namespace emu_detail {
// vt<T>: element type and width of a scalar (n = 1) or vector type, in any address space.
template <class T>
struct vt_impl {
  typedef T elem;
  static constexpr int n = 1;
};
template <class T, int N>
struct vt_impl<T __attribute__((ext_vector_type(N)))> {
  typedef T elem;
  static constexpr int n = N;
};
template <int N>
struct vt_impl<boolvec<N>> {
  typedef bool elem;
  static constexpr int n = N;
};
template <int N>
struct vt_impl<bvec<N>> {
  typedef bfloat elem;
  static constexpr int n = N;
};
template <int N>
struct vt_impl<hvec<N>> {
  typedef half elem;
  static constexpr int n = N;
};
template <class E, int N>
struct vt_impl<packed_vec<E, N>> {
  typedef E elem;
  static constexpr int n = N;
};
template <class E, int N, int... I>
struct vt_impl<swz<E, N, I...>> {
  typedef E elem;
  static constexpr int n = sizeof...(I);
};
template <class E, int N, int I>
struct vt_impl<swz1<E, N, I>> {
  typedef E elem;
  static constexpr int n = 1;
};
template <class T>
struct vt : vt_impl<plain_t<T>> {};

// ref_cast<R&>(x): reinterpret_cast<R&>(x) (the pre-pass writes it), through a pointer cast.
template <class R, class T>
constexpr R ref_cast(T&& x) {
  typedef remove_reference_t<R> E;
  return *(E*)(&x);
}

// velem_t<V>: the element type of vector type V (the vector forwarders' deduced parameter).
template <class V>
using velem_t = typename vt<V>::elem;

template <class E, class X>
inline void put(E* out, int& i, int cap, X x) {
  constexpr int n = vt<X>::n;
  if constexpr (n == 1) {
    if (i < cap) out[i] = static_cast<E>(x);
    i++;
  } else {
    typename svec_of<typename vt<X>::elem, n>::type y = x;
    for (int k = 0; k < n; k++) {
      if (i < cap) out[i] = static_cast<E>(y[k]);
      i++;
    }
  }
}

// make<V>(args...): MSL vector constructor semantics: one scalar splats, one vector of the same
// width converts element-wise, otherwise the arguments' elements are concatenated and converted.
template <class W, class... A>
inline plain_t<W> make(A... a) {
  typedef plain_t<W> V;
  typedef typename vt<V>::elem E;
  constexpr int N = vt<V>::n;
  static_assert(sizeof...(A) == 0 || sizeof...(A) == 1 || (vt<A>::n + ... + 0) == N,
                "MSL vector constructor: the arguments must supply exactly the vector's elements");
  E tmp[N];
  int i = 0;
  if constexpr (sizeof...(A) == 0) {
    for (int k = 0; k < N; k++) tmp[k] = E(0);
  } else if constexpr (sizeof...(A) == 1 && ((vt<A>::n == 1) && ...)) {
    for (int k = 0; k < N; k++) put(tmp, i, N, a...);
  } else {
    static_assert(sizeof...(A) > 1 || ((vt<A>::n == N) && ...),
                  "MSL vector constructor: a vector argument must have the vector's width");
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

// cmp(c): a comparison's result as MSL has it, bool or a bool vector (clang's vector comparisons
// give -1/0 integer vectors); the pre-pass wraps comparisons converted to vectors in it, so that
// float4(a < b) is 1.0 where a < b.
inline bool cmp(bool b) { return b; }
template <class V, class = enable_if_t<(vt<V>::n > 1) && is_integral_v<typename vt<V>::elem>>>
inline boolvec<vt<V>::n> cmp(V m) {
  boolvec<vt<V>::n> r;
  for (int i = 0; i < vt<V>::n; i++) r[i] = m[i] != 0;
  return r;
}
template <int N>
inline boolvec<N> cmp(boolvec<N> b) { return b; }

// make_list<V>(args...): `V v = {args...}`: the arguments' elements in order, fewer than V's
// allowed (the rest are zero).
template <class W, class... A>
inline plain_t<W> make_list(A... a) {
  typedef plain_t<W> V;
  typedef typename vt<V>::elem E;
  constexpr int N = vt<V>::n;
  static_assert((vt<A>::n + ... + 0) <= N, "vector initializer list: more elements than the vector has");
  E tmp[N];
  for (int k = 0; k < N; k++) tmp[k] = E(0);
  int i = 0;
  (put(tmp, i, N, a), ...);
  V r;
  for (int k = 0; k < N; k++) r[k] = tmp[k];
  return r;
}

// ilist(args...): a braced list passed as a function argument, f({x, y, z}); it converts to the
// parameter's type: a vector (make_list) or a class built from the elements.
template <class... E>
struct tup {};
template <class H, class... T>
struct tup<H, T...> {
  H h;
  tup<T...> t;
};
template <size_t I, class H, class... T>
inline auto tget(const tup<H, T...>& x) {
  if constexpr (I == 0) return x.h;
  else return tget<I - 1>(x.t);
}
inline tup<> mktup() { return {}; }
template <class H, class... T>
inline tup<H, T...> mktup(H h, T... t) { return tup<H, T...>{h, mktup(t...)}; }
template <class... E>
struct ilist_t {
  tup<E...> t;
  template <class V, size_t... I>
  V vec(index_sequence<I...>) const { return make_list<V>(tget<I>(t)...); }
  template <class C, size_t... I>
  C agg(index_sequence<I...>) const { return C{tget<I>(t)...}; }
  template <class V, class = enable_if_t<(vt<V>::n > 1) && ((vt<E>::n + ... + 0) <= vt<V>::n)>>
  operator V() const { return vec<V>(make_index_sequence<sizeof...(E)>()); }
  template <class C, class = enable_if_t<__is_class(C) && vt<C>::n == 1>, class = decltype(C{declval<E>()...}), class = void>
  operator C() const { return agg<C>(make_index_sequence<sizeof...(E)>()); }
};
template <class... E>
inline ilist_t<E...> ilist(E... e) { return {mktup(e...)}; }

// caster<V>() ->* x is the rewrite of the C cast (V)x: a value conversion, never a bit-cast, for
// vector destinations; any other destination casts as C++ does.
template <class V, class Inner = void>
struct caster {
  template <class X>
  plain_t<V> operator->*(X x) const {
    if constexpr (!is_void_v<Inner>) return caster<V>()->*(Inner()->*x);
    else if constexpr (vt<V>::n > 1) return make<V>(x);
    else return (plain_t<V>)x;
  }
  template <class W, class I2>
  caster<V, caster<W, I2>> operator->*(caster<W, I2>) const { return {}; }
};
}  // namespace emu_detail

// p += c and p -= c for a pointer p and a class c that converts to an integer (clang's built-in
// candidates miss pointers in an address space).
template <class P, class C, class = enable_if_t<__is_class(C) && __is_convertible_to(C, long)>>
inline P*& operator+=(P*& p, const C& c) { return p = p + (long)c; }
template <class P, class C, class = enable_if_t<__is_class(C) && __is_convertible_to(C, long)>>
inline P*& operator-=(P*& p, const C& c) { return p = p - (long)c; }

// as_type<T>(x): reinterprets the bits of x; sizes must match.
namespace emu_detail {
// The value a swizzle proxy stands for (an element or a vector); other types are themselves.
template <class T>
struct value_of {
  typedef T type;
};
template <class E, int N, int I>
struct value_of<swz1<E, N, I>> {
  typedef E type;
};
template <class E, int N, int... I>
struct value_of<swz<E, N, I...>> {
  typedef typename svec_of<E, sizeof...(I)>::type type;
};
// cond_op(x): an operand of a conditional expression (the pre-pass wraps them). A class operand
// is taken as a value of its type in no address space (a swizzle as its vector), so that
// `c ? tg_vals[i] : op.init` has one type as in MSL; others as their value (a vector element
// binds to no reference).
template <class T, enable_if_t<!__is_class(T), int> = 0>
constexpr T cond_op(T x) { return x; }
// cond_lit<O>(v): a number literal operand against an operand of type O.
template <class O, class V>
constexpr auto cond_lit(V v) {
  if constexpr (__is_class(plain_t<remove_reference_t<O>>)) return plain_t<remove_reference_t<O>>(v);
  else return v;
}
template <class T, enable_if_t<__is_class(remove_reference_t<T>), int> = 0>
constexpr typename value_of<plain_t<remove_reference_t<T>>>::type cond_op(T&& x) { return x; }
}  // namespace emu_detail
template <class T, class Y, class X = typename emu_detail::value_of<emu_detail::plain_t<Y>>::type>
inline T as_type(Y y) {
  X x = y;
  static_assert(sizeof(T) == sizeof(X), "as_type: the source and destination types must have the same size (MSL 2.4)");
  if constexpr (__is_trivially_copyable(T) && __is_trivially_copyable(X)) return __builtin_bit_cast(T, x);
  else {
    T r;
    __builtin_memcpy((void*)&r, (const void*)&x, sizeof r);
    return r;
  }
}

// ---- matrices: matrix<T, Cols, Rows>, column-major columns[Cols] of vec<T, Rows> ------------------
template <class T, int C, int R>
struct matrix {
  typedef typename emu_detail::svec_of<T, R>::type column_type;
  column_type columns[C];
  matrix() = default;
  // A diagonal matrix with d on the diagonal.
  explicit matrix(T d) {
    for (int c = 0; c < C; c++)
      for (int r = 0; r < R; r++) columns[c][r] = c == r ? d : T(0);
  }
  template <class... A, class = enable_if_t<sizeof...(A) == C && C != 1 && (is_convertible_v<A, column_type> && ...)>>
  matrix(const A&... cols) : columns{column_type(cols)...} {}
  template <class... A, class = enable_if_t<sizeof...(A) == C * R && C * R != C && (is_arithmetic_v<A> && ...)>, class = void>
  matrix(A... s) {
    T t[C * R] = {T(s)...};
    for (int c = 0; c < C; c++)
      for (int r = 0; r < R; r++) columns[c][r] = t[c * R + r];
  }
  template <class U, class = enable_if_t<!is_same_v<U, T>>>
  explicit matrix(const matrix<U, C, R>& o) {
    for (int c = 0; c < C; c++)
      for (int r = 0; r < R; r++) columns[c][r] = T(o.columns[c][r]);
  }
  column_type& operator[](int c) { return columns[c]; }
  const column_type& operator[](int c) const { return columns[c]; }
  matrix& operator+=(const matrix& o) { for (int c = 0; c < C; c++) columns[c] += o.columns[c]; return *this; }
  matrix& operator-=(const matrix& o) { for (int c = 0; c < C; c++) columns[c] -= o.columns[c]; return *this; }
  matrix& operator*=(T s) { for (int c = 0; c < C; c++) columns[c] *= s; return *this; }
};
template <class T, int C, int R>
inline matrix<T, C, R> operator+(matrix<T, C, R> a, const matrix<T, C, R>& b) { return a += b; }
template <class T, int C, int R>
inline matrix<T, C, R> operator-(matrix<T, C, R> a, const matrix<T, C, R>& b) { return a -= b; }
template <class T, int C, int R>
inline matrix<T, C, R> operator-(matrix<T, C, R> a) { for (int c = 0; c < C; c++) a.columns[c] = -a.columns[c]; return a; }
template <class T, int C, int R>
inline matrix<T, C, R> operator*(matrix<T, C, R> a, T s) { return a *= s; }
template <class T, int C, int R>
inline matrix<T, C, R> operator*(T s, matrix<T, C, R> a) { return a *= s; }
// matrix * column vector.
template <class T, int C, int R>
inline typename matrix<T, C, R>::column_type operator*(const matrix<T, C, R>& m, const typename emu_detail::svec_of<T, C>::type& v) {
  typename matrix<T, C, R>::column_type r = m.columns[0] * v[0];
  for (int c = 1; c < C; c++) r += m.columns[c] * v[c];
  return r;
}
// row vector * matrix.
template <class T, int C, int R>
inline typename emu_detail::svec_of<T, C>::type operator*(const typename matrix<T, C, R>::column_type& v, const matrix<T, C, R>& m) {
  typename emu_detail::svec_of<T, C>::type r;
  for (int c = 0; c < C; c++) {
    T s = T(0);
    for (int k = 0; k < R; k++) s += v[k] * m.columns[c][k];
    r[c] = s;
  }
  return r;
}
template <class T, int K, int R, int C>
inline matrix<T, C, R> operator*(const matrix<T, K, R>& a, const matrix<T, C, K>& b) {
  matrix<T, C, R> r;
  for (int c = 0; c < C; c++) r.columns[c] = a * b.columns[c];
  return r;
}
template <class T, int C, int R>
inline matrix<T, R, C> transpose(const matrix<T, C, R>& m) {
  matrix<T, R, C> t;
  for (int c = 0; c < C; c++)
    for (int r = 0; r < R; r++) t.columns[r][c] = m.columns[c][r];
  return t;
}
template <class T>
inline T determinant(const matrix<T, 2, 2>& m) { return m[0][0] * m[1][1] - m[1][0] * m[0][1]; }
template <class T>
inline T determinant(const matrix<T, 3, 3>& m) {
  return m[0][0] * (m[1][1] * m[2][2] - m[2][1] * m[1][2]) - m[1][0] * (m[0][1] * m[2][2] - m[2][1] * m[0][2]) +
         m[2][0] * (m[0][1] * m[1][2] - m[1][1] * m[0][2]);
}
template <class T>
inline T determinant(const matrix<T, 4, 4>& m) {
  T d = T(0);
  for (int c = 0; c < 4; c++) {
    matrix<T, 3, 3> s;
    for (int cc = 0, k = 0; cc < 4; cc++) {
      if (cc == c) continue;
      for (int r = 1; r < 4; r++) s.columns[k][r - 1] = m[cc][r];
      k++;
    }
    d += (c % 2 ? T(-1) : T(1)) * m[c][0] * determinant(s);
  }
  return d;
}
#define EMU_MATS(T)                                                                     \
  typedef matrix<T, 2, 2> T##2x2; typedef matrix<T, 2, 3> T##2x3; typedef matrix<T, 2, 4> T##2x4; \
  typedef matrix<T, 3, 2> T##3x2; typedef matrix<T, 3, 3> T##3x3; typedef matrix<T, 3, 4> T##3x4; \
  typedef matrix<T, 4, 2> T##4x2; typedef matrix<T, 4, 3> T##4x3; typedef matrix<T, 4, 4> T##4x4;
EMU_MATS(float)
EMU_MATS(half)
#undef EMU_MATS

// ---- numeric_limits ------------------------------------------------------------------------------
template <class T>
struct numeric_limits {
  static constexpr bool is_specialized = false;
};
namespace emu_detail {
template <class T, T MIN, T MAX, int DIGITS>
struct int_limits {
  static constexpr bool is_specialized = true, is_integer = true, is_exact = true, has_infinity = false,
                        has_quiet_NaN = false, has_signaling_NaN = false, is_iec559 = false, is_bounded = true;
  static constexpr bool is_signed = MIN != 0;
  static constexpr int digits = DIGITS, digits10 = DIGITS * 301 / 1000, max_digits10 = 0, radix = 2;
  static constexpr int min_exponent = 0, min_exponent10 = 0, max_exponent = 0, max_exponent10 = 0;
  static constexpr T min() { return MIN; }
  static constexpr T max() { return MAX; }
  static constexpr T lowest() { return MIN; }
  static constexpr T epsilon() { return 0; }
  static constexpr T round_error() { return 0; }
  static constexpr T infinity() { return 0; }
  static constexpr T quiet_NaN() { return 0; }
  static constexpr T signaling_NaN() { return 0; }
  static constexpr T denorm_min() { return 0; }
};
template <class T, class B, B MAXB, B MINB, B DENB, B EPSB, B INFB, B NANB, B SNANB, int DIG, int MINE, int MAXE>
struct float_limits {
  static constexpr bool is_specialized = true, is_integer = false, is_exact = false, has_infinity = true,
                        has_quiet_NaN = true, has_signaling_NaN = true, is_iec559 = true, is_bounded = true,
                        is_signed = true;
  static constexpr int digits = DIG, radix = 2, min_exponent = MINE, max_exponent = MAXE;
  static constexpr int digits10 = (DIG - 1) * 301 / 1000, max_digits10 = 2 + DIG * 301 / 1000;
  static constexpr int min_exponent10 = (MINE - 1) * 301 / 1000, max_exponent10 = MAXE * 301 / 1000;
  static constexpr T max() { return __builtin_bit_cast(T, MAXB); }
  static constexpr T lowest() { return __builtin_bit_cast(T, B(MAXB | (B(1) << (8 * sizeof(B) - 1)))); }
  static constexpr T min() { return __builtin_bit_cast(T, MINB); }
  static constexpr T denorm_min() { return __builtin_bit_cast(T, DENB); }
  static constexpr T epsilon() { return __builtin_bit_cast(T, EPSB); }
  static constexpr T round_error() { return T(0.5f); }
  static constexpr T infinity() { return __builtin_bit_cast(T, INFB); }
  static constexpr T quiet_NaN() { return __builtin_bit_cast(T, NANB); }
  static constexpr T signaling_NaN() { return __builtin_bit_cast(T, SNANB); }
};
}  // namespace emu_detail
template <> struct numeric_limits<bool> : emu_detail::int_limits<bool, false, true, 1> {};
template <> struct numeric_limits<char> : emu_detail::int_limits<char, -128, 127, 7> {};
template <> struct numeric_limits<signed char> : emu_detail::int_limits<signed char, -128, 127, 7> {};
template <> struct numeric_limits<unsigned char> : emu_detail::int_limits<unsigned char, 0, 255, 8> {};
template <> struct numeric_limits<short> : emu_detail::int_limits<short, -32768, 32767, 15> {};
template <> struct numeric_limits<unsigned short> : emu_detail::int_limits<unsigned short, 0, 65535, 16> {};
template <> struct numeric_limits<int> : emu_detail::int_limits<int, -2147483647 - 1, 2147483647, 31> {};
template <> struct numeric_limits<unsigned int> : emu_detail::int_limits<unsigned int, 0, 4294967295u, 32> {};
template <> struct numeric_limits<long> : emu_detail::int_limits<long, -9223372036854775807l - 1, 9223372036854775807l, 63> {};
template <> struct numeric_limits<unsigned long> : emu_detail::int_limits<unsigned long, 0, 18446744073709551615ul, 64> {};
template <> struct numeric_limits<long long> : emu_detail::int_limits<long long, -9223372036854775807ll - 1, 9223372036854775807ll, 63> {};
template <> struct numeric_limits<unsigned long long> : emu_detail::int_limits<unsigned long long, 0, 18446744073709551615ull, 64> {};
template <> struct numeric_limits<float>
    : emu_detail::float_limits<float, uint32_t, 0x7f7fffffu, 0x00800000u, 1u, 0x34000000u, 0x7f800000u, 0x7fc00000u,
                               0x7fa00000u, 24, -125, 128> {};
template <> struct numeric_limits<half>
    : emu_detail::float_limits<half, uint16_t, 0x7bff, 0x0400, 1, 0x1400, 0x7c00, 0x7e00, 0x7d00, 11, -13, 16> {};
template <> struct numeric_limits<bfloat>
    : emu_detail::float_limits<bfloat, uint16_t, 0x7f7f, 0x0080, 1, 0x3c00, 0x7f80, 0x7fc0, 0x7fa0, 8, -125, 128> {};
template <class T> struct numeric_limits<const T> : numeric_limits<T> {};

// Vector traits of <metal_type_traits>.
template <class T> struct is_vector : bool_constant<(emu_detail::vt<remove_cv_t<T>>::n > 1)> {};
template <class T> constexpr bool is_vector_v = is_vector<T>::value;
template <class T> struct vec_elements : integral_constant<int, emu_detail::vt<remove_cv_t<T>>::n> {};
template <class T> constexpr int vec_elements_v = vec_elements<T>::value;
template <class T> struct make_scalar { typedef typename emu_detail::vt<remove_cv_t<T>>::elem type; };
template <class T> using make_scalar_t = typename make_scalar<T>::type;
template <class T> struct is_scalar_vec : bool_constant<is_arithmetic_v<T>> {};
}  // namespace metal

// The constants of <metal_math> and <metal_limits> (macros in MSL).
#define EMU_K(T, name, v) constexpr constant T name = v;
EMU_K(float, MAXFLOAT, 0x1.fffffep127f)
EMU_K(float, HUGE_VALF, __builtin_inff())
EMU_K(float, INFINITY, __builtin_inff())
EMU_K(float, NAN, __builtin_nanf(""))
EMU_K(float, M_E_F, 2.71828182845904523536f)
EMU_K(float, M_LOG2E_F, 1.44269504088896340736f)
EMU_K(float, M_LOG10E_F, 0.434294481903251827651f)
EMU_K(float, M_LN2_F, 0.693147180559945309417f)
EMU_K(float, M_LN10_F, 2.30258509299404568402f)
EMU_K(float, M_PI_F, 3.14159265358979323846f)
EMU_K(float, M_PI_2_F, 1.57079632679489661923f)
EMU_K(float, M_PI_4_F, 0.785398163397448309616f)
EMU_K(float, M_1_PI_F, 0.318309886183790671538f)
EMU_K(float, M_2_PI_F, 0.636619772367581343076f)
EMU_K(float, M_2_SQRTPI_F, 1.12837916709551257390f)
EMU_K(float, M_SQRT2_F, 1.41421356237309504880f)
EMU_K(float, M_SQRT1_2_F, 0.707106781186547524401f)
EMU_K(float, FLT_MAX, 0x1.fffffep127f)
EMU_K(float, FLT_MIN, 0x1p-126f)
EMU_K(float, FLT_EPSILON, 0x1p-23f)
EMU_K(int, FLT_DIG, 6)
EMU_K(int, FLT_MANT_DIG, 24)
EMU_K(int, FLT_MAX_EXP, 128)
EMU_K(int, FLT_MIN_EXP, -125)
EMU_K(int, FLT_RADIX, 2)
EMU_K(half, HALF_MAX, 65504.0h)
EMU_K(half, HALF_MIN, 0x1p-14h)
EMU_K(half, HALF_EPSILON, 0x1p-10h)
EMU_K(half, MAXHALF, 65504.0h)
EMU_K(half, M_PI_H, 3.140625h)
EMU_K(half, M_E_H, 2.71875h)
EMU_K(half, M_LN2_H, 0.69287109375h)
EMU_K(half, M_SQRT2_H, 1.4140625h)
EMU_K(int, CHAR_BIT, 8)
EMU_K(signed char, SCHAR_MAX, 127)
EMU_K(signed char, SCHAR_MIN, -128)
EMU_K(unsigned char, UCHAR_MAX, 255)
EMU_K(char, CHAR_MAX, 127)
EMU_K(char, CHAR_MIN, -128)
EMU_K(short, SHRT_MAX, 32767)
EMU_K(short, SHRT_MIN, -32768)
EMU_K(unsigned short, USHRT_MAX, 65535)
EMU_K(int, INT_MAX, 2147483647)
EMU_K(int, INT_MIN, -2147483647 - 1)
EMU_K(unsigned int, UINT_MAX, 4294967295u)
EMU_K(long, LONG_MAX, 9223372036854775807l)
EMU_K(long, LONG_MIN, -9223372036854775807l - 1)
EMU_K(unsigned long, ULONG_MAX, 18446744073709551615ul)
#undef EMU_K
