// Included first by every translation unit the pre-pass generates: the stand-in for
// <metal_stdlib> and the launcher helpers (kernel arguments, kernel-scope threadgroup variables,
// function constants).
#pragma once
#include "emu_matrix.h"
#include "emu_logging.h"

namespace emu {
// Kernel argument proxies: the launcher passes them for each parameter and the parameter's own
// type (pointer or reference in its address space, possibly dependent on template arguments)
// picks the conversion.
struct buf_arg {
  uintptr_t p;
  template <class T>
  operator T*() const { return (T*)p; }
  template <class T>
  operator T&() const { return *(T*)p; }
};
inline buf_arg buffer(int i) { return {emu_buffer(i)}; }
inline buf_arg tg_dynamic(int i) { return {emu_tg_dynamic(i)}; }
// A buffer guarded by a function constant: bound only when the constant is defined and true,
// else absent (emu_absent_arg).
inline buf_arg buffer_if(int i, int slot) {
  int def;
  uint32_t bits = emu_fc(slot, &def);
  return {def && bits ? emu_buffer(i) : emu_absent_arg()};
}
inline buf_arg tg_dynamic_if(int i, int slot) {
  int def;
  uint32_t bits = emu_fc(slot, &def);
  return {def && bits ? emu_tg_dynamic(i) : 0};
}
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

// Kernel-scope threadgroup variables. Each one is a static record (kernel instance, declaration
// number, size, alignment) in section emu_tg, emitted by the compiler when the kernel instance is;
// the runtime lays out the records of each kernel when the library is first used and so knows a
// pipeline's static threadgroup memory without running it. K is the kernel instance's address.
template <auto K>
struct kanchor {
  static char a;
};
template <auto K>
char kanchor<K>::a;
template <auto K, int V, class T>
struct tg_var {
  static emu_tg_rec rec;
  static __local T& ref() { return *(__local T*)(emu_tg_base() + rec.off); }
};
template <auto K, int V, class T>
__attribute__((used, section("emu_tg"))) emu_tg_rec tg_var<K, V, T>::rec = {
    &kanchor<K>::a, (uint32_t)V, (uint32_t)sizeof(T), (uint32_t)(alignof(T) < 16 ? 16 : alignof(T)), 0};

// Function constant accessors; slot is the library's own number of the constant.
template <class T>
inline T fc(int slot) {
  int def;
  uint32_t bits = emu_fc(slot, &def);
  if constexpr (metal::is_same_v<T, bool>) return bits != 0;
  else if constexpr (metal::is_same_v<T, float>) return __builtin_bit_cast(float, bits);
  // half constants are given as float (mtl.Float) and rounded to half.
  else if constexpr (metal::is_same_v<T, half>) return (half)__builtin_bit_cast(float, bits);
  else return (T)bits;
}
inline bool fc_defined(int slot) {
  int def;
  emu_fc(slot, &def);
  return def != 0;
}
}  // namespace emu
