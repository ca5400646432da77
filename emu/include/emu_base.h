// Foundation of the stand-in headers. Kernels compile as C++ for OpenCL 2021 (clang's -x clcpp),
// which gives MSL's address spaces as real, checked types: device = __global, threadgroup =
// __local, thread = __private, constant = __constant const (read-only). Pointer conversions
// between them are errors, member functions overload on the address space of the object, and the
// implicit special members are generic (a struct copies from and to any address space). An
// unqualified pointer is generic there; the pre-pass qualifies the unqualified pointers it can
// (those to non-dependent types) as thread, which is what MSL makes of them.
//
// This header provides MSL's scalar type names, the <metal_type_traits> subset, declval and the
// fixed-width integer types; nothing of the C++ standard library is available (as in MSL).
#pragma once
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable

#define device __global
#define constant __constant const
#define threadgroup __local
#define thread __private
#define threadgroup_imageblock __local
#define ray_data __private
#define object_data __global
#define METAL_FUNC inline __attribute__((always_inline))
#define __METAL_MAYBE_FAST_MATH__ 0
#define __METAL_FAST_MATH__ 1
#define __METAL_PRECISE_MATH__ 0
#define __METAL_MEMORY_SCOPE_DEVICE__ 2
#define __METAL_MEMORY_SCOPE_THREADGROUP__ 1
#define __METAL_MEMORY_SCOPE_SYSTEM__ 3
#define __METAL_MEMORY_ORDER_RELAXED__ 0

typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

#include "emu_rt.h"

namespace metal {
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;
typedef ::size_t size_t;
typedef ::ptrdiff_t ptrdiff_t;
typedef ::int8_t int8_t;
typedef ::int16_t int16_t;
typedef ::int32_t int32_t;
typedef ::int64_t int64_t;
typedef ::uint8_t uint8_t;
typedef ::uint16_t uint16_t;
typedef ::uint32_t uint32_t;
typedef ::uint64_t uint64_t;
typedef ::intptr_t intptr_t;
typedef ::uintptr_t uintptr_t;

// ---- <metal_type_traits> --------------------------------------------------------------------
template <class T, T V>
struct integral_constant {
  static constexpr T value = V;
  typedef T value_type;
  typedef integral_constant type;
  constexpr operator value_type() const { return V; }
  constexpr value_type operator()() const { return V; }
};
template <bool B>
using bool_constant = integral_constant<bool, B>;
typedef bool_constant<true> true_type;
typedef bool_constant<false> false_type;

template <class A, class B>
struct is_same : bool_constant<__is_same(A, B)> {};
template <class A, class B>
constexpr bool is_same_v = __is_same(A, B);
template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> {
  typedef T type;
};
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;
template <bool B, class T, class F>
struct conditional {
  typedef T type;
};
template <class T, class F>
struct conditional<false, T, F> {
  typedef F type;
};
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;

template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct remove_volatile { typedef T type; };
template <class T> struct remove_volatile<volatile T> { typedef T type; };
template <class T> struct remove_cv { typedef typename remove_volatile<typename remove_const<T>::type>::type type; };
template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T&> { typedef T type; };
template <class T> struct remove_reference<T&&> { typedef T type; };
template <class T> struct remove_pointer { typedef T type; };
template <class T> struct remove_pointer<T*> { typedef T type; };
template <class T> struct remove_pointer<T* const> { typedef T type; };
template <class T> struct remove_extent { typedef T type; };
template <class T> struct remove_extent<T[]> { typedef T type; };
template <class T, size_t N> struct remove_extent<T[N]> { typedef T type; };
template <class T> struct remove_addrspace { typedef T type; };
template <class T> struct remove_addrspace<__global T> { typedef T type; };
template <class T> struct remove_addrspace<__local T> { typedef T type; };
template <class T> struct remove_addrspace<__private T> { typedef T type; };
template <class T> struct remove_addrspace<__constant T> { typedef T type; };
template <class T> struct remove_addrspace<__generic T> { typedef T type; };
// copy_as<T, U>: U in the address space of T.
template <class T, class U> struct copy_as { typedef U type; };
template <class T, class U> struct copy_as<__global T, U> { typedef __global U type; };
template <class T, class U> struct copy_as<__local T, U> { typedef __local U type; };
template <class T, class U> struct copy_as<__private T, U> { typedef __private U type; };
template <class T, class U> struct copy_as<__constant T, U> { typedef __constant U type; };
template <class T, class U> struct copy_as<__generic T, U> { typedef __generic U type; };
template <class T, class U> using copy_as_t = typename copy_as<T, U>::type;
template <class T> struct add_const { typedef const T type; };
template <class T> struct add_pointer { typedef typename remove_reference<T>::type* type; };
template <class T> struct add_lvalue_reference { typedef T& type; };
template <class T> struct add_rvalue_reference { typedef T&& type; };
template <class T> using remove_const_t = typename remove_const<T>::type;
template <class T> using remove_volatile_t = typename remove_volatile<T>::type;
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> using remove_reference_t = typename remove_reference<T>::type;
template <class T> using remove_cvref_t = remove_cv_t<remove_reference_t<T>>;
template <class T> using remove_pointer_t = typename remove_pointer<T>::type;
template <class T> using remove_extent_t = typename remove_extent<T>::type;
template <class T> using remove_addrspace_t = typename remove_addrspace<T>::type;
template <class T> using add_const_t = typename add_const<T>::type;
template <class T> using add_pointer_t = typename add_pointer<T>::type;
template <class T> using add_lvalue_reference_t = T&;
template <class T> using add_rvalue_reference_t = T&&;

template <class T>
add_rvalue_reference_t<T> declval() noexcept;

template <class T> struct is_const : false_type {};
template <class T> struct is_const<const T> : true_type {};
template <class T> struct is_volatile : false_type {};
template <class T> struct is_volatile<volatile T> : true_type {};
template <class T> struct is_pointer_helper : false_type {};
template <class T> struct is_pointer_helper<T*> : true_type {};
template <class T> struct is_pointer : is_pointer_helper<remove_cv_t<T>> {};
template <class T> struct is_reference : false_type {};
template <class T> struct is_reference<T&> : true_type {};
template <class T> struct is_reference<T&&> : true_type {};
template <class T> struct is_lvalue_reference : false_type {};
template <class T> struct is_lvalue_reference<T&> : true_type {};
template <class T> struct is_array : false_type {};
template <class T> struct is_array<T[]> : true_type {};
template <class T, size_t N> struct is_array<T[N]> : true_type {};
template <class T> struct is_void : is_same<remove_cv_t<T>, void> {};

// Arithmetic types: the integer types, bool, half, float and bfloat (a class on the emulator,
// arithmetic in MSL; its trait specialisations live in emu_types.h).
namespace emu_detail {
template <class T> struct int_kind : integral_constant<int, 0> {};  // 0 none, 1 signed, 2 unsigned
template <> struct int_kind<bool> : integral_constant<int, 2> {};
template <> struct int_kind<char> : integral_constant<int, 1> {};
template <> struct int_kind<signed char> : integral_constant<int, 1> {};
template <> struct int_kind<unsigned char> : integral_constant<int, 2> {};
template <> struct int_kind<short> : integral_constant<int, 1> {};
template <> struct int_kind<unsigned short> : integral_constant<int, 2> {};
template <> struct int_kind<int> : integral_constant<int, 1> {};
template <> struct int_kind<unsigned int> : integral_constant<int, 2> {};
template <> struct int_kind<long> : integral_constant<int, 1> {};
template <> struct int_kind<unsigned long> : integral_constant<int, 2> {};
template <> struct int_kind<long long> : integral_constant<int, 1> {};
template <> struct int_kind<unsigned long long> : integral_constant<int, 2> {};
template <class T> struct float_kind : false_type {};
template <> struct float_kind<half> : true_type {};
template <> struct float_kind<float> : true_type {};
}  // namespace emu_detail
template <class T> struct is_integral : bool_constant<(emu_detail::int_kind<remove_cv_t<T>>::value > 0)> {};
template <class T> struct is_floating_point : emu_detail::float_kind<remove_cv_t<T>> {};
template <class T> struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <class T> struct is_signed : bool_constant<emu_detail::int_kind<remove_cv_t<T>>::value == 1 || is_floating_point<T>::value> {};
template <class T> struct is_unsigned : bool_constant<emu_detail::int_kind<remove_cv_t<T>>::value == 2> {};
template <class T> struct is_enum : bool_constant<__is_enum(T)> {};
template <class T> struct is_class : bool_constant<__is_class(T)> {};
template <class T> struct is_union : bool_constant<__is_union(T)> {};
template <class T> struct is_trivially_copyable : bool_constant<__is_trivially_copyable(T)> {};
template <class T> struct is_trivial : bool_constant<__is_trivial(T)> {};
template <class T> struct is_standard_layout : bool_constant<__is_standard_layout(T)> {};
template <class B, class D> struct is_base_of : bool_constant<__is_base_of(B, D)> {};
template <class F, class T> struct is_convertible : bool_constant<__is_convertible_to(F, T)> {};
template <class T, class... A> struct is_constructible : bool_constant<__is_constructible(T, A...)> {};
template <class T> struct is_default_constructible : bool_constant<__is_constructible(T)> {};
template <class T, class U> struct is_assignable : bool_constant<__is_assignable(T, U)> {};
template <class T> struct is_scalar : bool_constant<is_arithmetic<T>::value || is_enum<T>::value || is_pointer<T>::value> {};
template <class T> struct is_function : bool_constant<__is_function(T)> {};
template <class T> struct underlying_type { typedef __underlying_type(T) type; };
template <class T> using underlying_type_t = typename underlying_type<T>::type;

template <class T> constexpr bool is_const_v = is_const<T>::value;
template <class T> constexpr bool is_volatile_v = is_volatile<T>::value;
template <class T> constexpr bool is_pointer_v = is_pointer<T>::value;
template <class T> constexpr bool is_reference_v = is_reference<T>::value;
template <class T> constexpr bool is_array_v = is_array<T>::value;
template <class T> constexpr bool is_void_v = is_void<T>::value;
template <class T> constexpr bool is_integral_v = is_integral<T>::value;
template <class T> constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T> constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T> constexpr bool is_signed_v = is_signed<T>::value;
template <class T> constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T> constexpr bool is_enum_v = is_enum<T>::value;
template <class T> constexpr bool is_class_v = is_class<T>::value;
template <class T> constexpr bool is_union_v = is_union<T>::value;
template <class T> constexpr bool is_scalar_v = is_scalar<T>::value;
template <class T> constexpr bool is_function_v = is_function<T>::value;
template <class T> constexpr bool is_trivially_copyable_v = is_trivially_copyable<T>::value;
template <class T> constexpr bool is_trivial_v = is_trivial<T>::value;
template <class T> constexpr bool is_standard_layout_v = is_standard_layout<T>::value;
template <class B, class D> constexpr bool is_base_of_v = is_base_of<B, D>::value;
template <class F, class T> constexpr bool is_convertible_v = is_convertible<F, T>::value;
template <class T, class... A> constexpr bool is_constructible_v = is_constructible<T, A...>::value;
template <class T> constexpr bool is_default_constructible_v = is_default_constructible<T>::value;
template <class T, class U> constexpr bool is_assignable_v = is_assignable<T, U>::value;

template <class... B> struct conjunction : true_type {};
template <class B> struct conjunction<B> : B {};
template <class B, class... R> struct conjunction<B, R...> : conditional_t<bool(B::value), conjunction<R...>, B> {};
template <class... B> struct disjunction : false_type {};
template <class B> struct disjunction<B> : B {};
template <class B, class... R> struct disjunction<B, R...> : conditional_t<bool(B::value), B, disjunction<R...>> {};
template <class B> struct negation : bool_constant<!bool(B::value)> {};
template <class... B> constexpr bool conjunction_v = conjunction<B...>::value;
template <class... B> constexpr bool disjunction_v = disjunction<B...>::value;
template <class B> constexpr bool negation_v = negation<B>::value;
// The internal names of Apple's headers, which kernels reach under #pragma METAL internals.
template <class... B> using _conjunction = conjunction<B...>;
template <class... B> using _disjunction = disjunction<B...>;
template <class B> using _negation = negation<B>;

namespace emu_detail {
template <class T> struct sign_pair { typedef T s; typedef T u; };
template <> struct sign_pair<char> { typedef signed char s; typedef unsigned char u; };
template <> struct sign_pair<signed char> { typedef signed char s; typedef unsigned char u; };
template <> struct sign_pair<unsigned char> { typedef signed char s; typedef unsigned char u; };
template <> struct sign_pair<short> { typedef short s; typedef unsigned short u; };
template <> struct sign_pair<unsigned short> { typedef short s; typedef unsigned short u; };
template <> struct sign_pair<int> { typedef int s; typedef unsigned int u; };
template <> struct sign_pair<unsigned int> { typedef int s; typedef unsigned int u; };
template <> struct sign_pair<long> { typedef long s; typedef unsigned long u; };
template <> struct sign_pair<unsigned long> { typedef long s; typedef unsigned long u; };
template <> struct sign_pair<long long> { typedef long long s; typedef unsigned long long u; };
template <> struct sign_pair<unsigned long long> { typedef long long s; typedef unsigned long long u; };
}  // namespace emu_detail
template <class T> struct make_signed { typedef typename emu_detail::sign_pair<remove_cv_t<T>>::s type; };
template <class T> struct make_unsigned { typedef typename emu_detail::sign_pair<remove_cv_t<T>>::u type; };
template <class T> using make_signed_t = typename make_signed<T>::type;
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;

template <class T> struct decay { typedef remove_cv_t<remove_reference_t<T>> type; };
template <class T> using decay_t = typename decay<T>::type;

template <class T> struct extent_of : integral_constant<size_t, 0> {};
template <class T, size_t N> struct extent_of<T[N]> : integral_constant<size_t, N> {};

constexpr bool is_constant_evaluated() noexcept { return __builtin_is_constant_evaluated(); }

template <class T, T... I>
struct integer_sequence {
  typedef T value_type;
  static constexpr size_t size() noexcept { return sizeof...(I); }
};
template <size_t... I>
using index_sequence = integer_sequence<size_t, I...>;
template <class T, T N>
using make_integer_sequence = __make_integer_seq<integer_sequence, T, N>;
template <size_t N>
using make_index_sequence = make_integer_sequence<size_t, N>;

template <class T>
constexpr T&& forward(remove_reference_t<T>& t) noexcept { return static_cast<T&&>(t); }
template <class T>
constexpr T&& forward(remove_reference_t<T>&& t) noexcept { return static_cast<T&&>(t); }
template <class T>
constexpr remove_reference_t<T>&& move(T&& t) noexcept { return static_cast<remove_reference_t<T>&&>(t); }
}  // namespace metal

// The emulator's own code reaches the traits as metal:: names; emu:: is the launcher namespace.
namespace emu {
using namespace ::metal;
}
