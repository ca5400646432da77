// <metal_logging>: os_log (MSL 3.2, section 6.19). Messages use printf conversions; the emulator
// formats them and writes one line per call to standard error, tagged with the subsystem,
// category, level, kernel, threadgroup and thread.
#pragma once
#include "emu_types.h"

extern "C" {
// One argument of a log message: kind 'i' (signed), 'u' (unsigned), 'f' (floating point, the
// bits of a float), 'p' (pointer) or 's' (a constant-space string).
struct emu_log_arg {
  int kind;
  uint64_t bits;
};
void emu_log(EMU_STR subsystem, EMU_STR category, int level, EMU_STR fmt, const struct emu_log_arg* args, int n);
}

namespace metal {
enum class log_type { debug, info, default_level, error, fault };
namespace emu_detail {
template <class T>
inline emu_log_arg log_arg(T x) {
  typedef plain_t<T> P;
  if constexpr (is_pointer_v<P>) return {'p', (uint64_t)(uintptr_t)x};
  else if constexpr (is_floating_point_v<P>) return {'f', __builtin_bit_cast(uint32_t, float(x))};
  else if constexpr (is_signed_v<P>) return {'i', (uint64_t)(int64_t)x};
  else return {'u', (uint64_t)x};
}
inline emu_log_arg log_arg(EMU_STR s) { return {'s', (uint64_t)(uintptr_t)s}; }
template <class... A>
inline void log(EMU_STR subsystem, EMU_STR category, int level, EMU_STR fmt, A... a) {
  emu_log_arg args[sizeof...(A) + 1] = {log_arg(a)..., {0, 0}};
  emu_log(subsystem, category, level, fmt, args, (int)sizeof...(A));
}
}  // namespace emu_detail

#define EMU_OSLOG_METHODS(Q)                                                                           \
  template <class... A> void log(EMU_STR fmt, A... a) const Q { emu_detail::log(subsystem, category, 2, fmt, a...); } \
  template <class... A> void log_debug(EMU_STR fmt, A... a) const Q { emu_detail::log(subsystem, category, 0, fmt, a...); } \
  template <class... A> void log_info(EMU_STR fmt, A... a) const Q { emu_detail::log(subsystem, category, 1, fmt, a...); } \
  template <class... A> void log_error(EMU_STR fmt, A... a) const Q { emu_detail::log(subsystem, category, 3, fmt, a...); } \
  template <class... A> void log_fault(EMU_STR fmt, A... a) const Q { emu_detail::log(subsystem, category, 4, fmt, a...); } \
  template <class... A> void log_with_type(log_type t, EMU_STR fmt, A... a) const Q {                   \
    emu_detail::log(subsystem, category, (int)t, fmt, a...);                                          \
  }

struct os_log {
  EMU_STR subsystem;
  EMU_STR category;
  constexpr os_log(EMU_STR s, EMU_STR c) : subsystem(s), category(c) {}
  constexpr os_log(EMU_STR s, EMU_STR c) __constant : subsystem(s), category(c) {}
  EMU_OSLOG_METHODS()
  EMU_OSLOG_METHODS(__constant)
};
#undef EMU_OSLOG_METHODS
constexpr constant os_log os_log_default("", "");
}  // namespace metal
