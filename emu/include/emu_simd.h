// Barriers, atomics and simdgroup collectives. Collectives deposit each lane's operand and yield to
// the fiber scheduler; the runtime runs the resolver once every live lane of the simdgroup waits
// at the same call site (line and column). Lanes that returned are inactive; lanes waiting at
// different sites are a fault.
#pragma once
#include "emu_math.h"
#include "emu_rt.h"

namespace metal {

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4, mem_threadgroup_imageblock = 8, mem_object_data = 16 };
constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(int(a) | int(b)); }
enum class thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };

namespace emu_detail {

constexpr uint32_t site(unsigned line, unsigned col) { return (line << 12) | (col & 0xfff); }
}  // namespace emu_detail

#define EMU_SITE unsigned emu_line = __builtin_LINE(), unsigned emu_col = __builtin_COLUMN()
#define EMU_AT emu_detail::site(emu_line, emu_col)

inline void threadgroup_barrier(mem_flags = mem_flags::mem_none, EMU_SITE) {
  emu_wait_barrier(EMU_AT, "threadgroup_barrier");
}

// ---- atomics -------------------------------------------------------------------------------
// Memory orders: the emulator runs the threads of a threadgroup one at a time and threadgroups on
// separate OS threads; every atomic is sequentially consistent at the level of these operations.
enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel, memory_order_seq_cst };
template <class T>
struct atomic {
  static_assert(is_same_v<T, int> || is_same_v<T, uint> || is_same_v<T, float> || is_same_v<T, bool> ||
                    is_same_v<T, ulong> || is_same_v<T, long>,
                "MSL atomic<T>: T must be int, uint, bool, float, ulong or long (MSL 6.15)");
  T v;
};
typedef atomic<ulong> atomic_ulong;
typedef atomic<long> atomic_long;
inline void atomic_thread_fence(mem_flags, memory_order, thread_scope = thread_scope::thread_scope_device) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
typedef atomic<bool> atomic_bool;

#define EMU_ATOMIC_RMW(name, builtin)                                                    \
  template <class A, class V>                                                           \
  inline auto atomic_fetch_##name##_explicit(A* p, V x, memory_order = memory_order_relaxed) { \
    typedef emu_detail::plain_t<decltype(p->v)> T;                                         \
    return builtin(&p->v, (T)x, __ATOMIC_RELAXED);                                  \
  }
EMU_ATOMIC_RMW(and, __atomic_fetch_and)
EMU_ATOMIC_RMW(or, __atomic_fetch_or)
EMU_ATOMIC_RMW(xor, __atomic_fetch_xor)
#undef EMU_ATOMIC_RMW

namespace emu_detail {
template <class T, class F>
inline plain_t<T> atomic_update(T* p, F f) {
  typedef plain_t<T> V;
  typedef conditional_t<sizeof(V) == 8, uint64_t, conditional_t<sizeof(V) == 4, uint32_t, uint16_t>> B;
  auto* q = (copy_as_t<T, B>*)p;  // the same address space
  B old = __atomic_load_n(q, __ATOMIC_RELAXED);
  for (;;) {
    B nv = __builtin_bit_cast(B, V(f(__builtin_bit_cast(V, old))));
    if (__atomic_compare_exchange_n(q, &old, nv, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return __builtin_bit_cast(V, old);
  }
}
}  // namespace emu_detail

template <class A, class V>
inline auto atomic_fetch_add_explicit(A* p, V x, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  if constexpr (is_integral_v<T>) return __atomic_fetch_add(&p->v, (T)x, __ATOMIC_RELAXED);
  else return emu_detail::atomic_update(&p->v, [&](T o) { return T(o + (T)x); });
}
template <class A, class V>
inline auto atomic_fetch_sub_explicit(A* p, V x, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  if constexpr (is_integral_v<T>) return __atomic_fetch_sub(&p->v, (T)x, __ATOMIC_RELAXED);
  else return emu_detail::atomic_update(&p->v, [&](T o) { return T(o - (T)x); });
}
template <class A, class V>
inline auto atomic_fetch_max_explicit(A* p, V x, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  return emu_detail::atomic_update(&p->v, [&](T o) { return o < (T)x ? (T)x : o; });
}
template <class A, class V>
inline auto atomic_fetch_min_explicit(A* p, V x, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  return emu_detail::atomic_update(&p->v, [&](T o) { return (T)x < o ? (T)x : o; });
}
namespace emu_detail {
// The bits of an atomic's value: floats are loaded, stored and exchanged as integers.
template <class A>
using atomic_bits_t = conditional_t<sizeof(plain_t<decltype(declval<A>().v)>) == 8, uint64_t, uint32_t>;
template <class A>
inline auto atomic_bits(A* p) { return (copy_as_t<A, atomic_bits_t<A>>*)&p->v; }
}  // namespace emu_detail
template <class A>
inline auto atomic_load_explicit(A* p, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  return __builtin_bit_cast(T, __atomic_load_n(emu_detail::atomic_bits(p), __ATOMIC_SEQ_CST));
}
template <class A, class V>
inline void atomic_store_explicit(A* p, V x, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  __atomic_store_n(emu_detail::atomic_bits(p), __builtin_bit_cast(emu_detail::atomic_bits_t<A>, T(x)), __ATOMIC_SEQ_CST);
}
template <class A, class V>
inline auto atomic_exchange_explicit(A* p, V x, memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  return __builtin_bit_cast(T, __atomic_exchange_n(emu_detail::atomic_bits(p), __builtin_bit_cast(emu_detail::atomic_bits_t<A>, T(x)), __ATOMIC_SEQ_CST));
}
// On failure *expected receives the value found; weak and strong behave alike here.
template <class A, class E, class V>
inline bool atomic_compare_exchange_weak_explicit(A* p, E* expected, V desired, memory_order = memory_order_relaxed,
                                                  memory_order = memory_order_relaxed) {
  typedef emu_detail::plain_t<decltype(p->v)> T;
  typedef emu_detail::atomic_bits_t<A> B;
  B old = __builtin_bit_cast(B, T(*expected));
  bool ok = __atomic_compare_exchange_n(emu_detail::atomic_bits(p), &old, __builtin_bit_cast(B, T(desired)), false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  *expected = __builtin_bit_cast(T, old);
  return ok;
}
template <class A, class E, class V>
inline bool atomic_compare_exchange_strong_explicit(A* p, E* expected, V desired, memory_order m = memory_order_relaxed,
                                                    memory_order f = memory_order_relaxed) {
  return atomic_compare_exchange_weak_explicit(p, expected, desired, m, f);
}

// ---- simdgroup collectives ------------------------------------------------------------------
namespace emu_detail {
template <class Out, class In>
inline Out collective(const In& in, emu_resolver r, uint32_t at, EMU_STR what) {
  Out out;
  __builtin_memset(&out, 0xff, sizeof out);  // a lane reading an inactive lane sees all-ones (NaN)
  emu_wait_simd(at, what, r, &in, &out);
  return out;
}
template <class T>
inline const T& IN(void* const* in, int i) { return *(const T*)in[i]; }
template <class T>
inline T& OUT(void* const* out, int i) { return *(T*)out[i]; }

// and, or, xor: of the bits for floating-point operands (as Metal's intrinsics take them).
template <int OP, class T>
inline T bitop(T a, T b) {
  if constexpr (is_floating_point_v<typename vt<T>::elem>) {
    typedef conditional_t<sizeof(T) == 2, uint16_t, conditional_t<sizeof(T) == 4, uint32_t, uint64_t>> B;
    static_assert(sizeof(B) == sizeof(T), "bitwise collective of a floating-point vector");
    B x = __builtin_bit_cast(B, a), y = __builtin_bit_cast(B, b);
    return __builtin_bit_cast(T, B(OP == 4 ? x & y : OP == 5 ? x | y : x ^ y));
  } else {
    return OP == 4 ? T(a & b) : OP == 5 ? T(a | b) : T(a ^ b);
  }
}
template <class T, int OP>
void reduce_res(void* const* in, void* const* out, uint32_t active) {
  T acc{};
  bool first = true;
  for (int i = 0; i < 32; i++) {
    if (!(active >> i & 1)) continue;
    const T& x = IN<T>(in, i);
    if (first) acc = x, first = false;
    else if constexpr (OP == 0) acc = acc + x;
    else if constexpr (OP == 1) acc = acc * x;
    else if constexpr (OP == 2) acc = metal::max(acc, x);
    else if constexpr (OP == 3) acc = metal::min(acc, x);
    else if constexpr (OP >= 4) acc = bitop<OP>(acc, x);
  }
  for (int i = 0; i < 32; i++)
    if (active >> i & 1) OUT<T>(out, i) = acc;
}
// Prefix over active lanes in lane order; OP 0 sum, 1 product; INCL inclusive.
template <class T, int OP, bool INCL>
void prefix_res(void* const* in, void* const* out, uint32_t active) {
  T acc = T(OP == 0 ? 0 : 1);
  for (int i = 0; i < 32; i++) {
    if (!(active >> i & 1)) continue;
    const T x = IN<T>(in, i);
    if (!INCL) OUT<T>(out, i) = acc;
    acc = OP == 0 ? T(acc + x) : T(acc * x);
    if (INCL) OUT<T>(out, i) = acc;
  }
}
template <class T>
struct shuf {
  T v;
  uint32_t arg;
};
// Shuffle kinds: 0 index, 1 xor, 2 up, 3 down, 4 rotate up, 5 rotate down.
template <class T, int KIND>
void shuffle_res(void* const* in, void* const* out, uint32_t active) {
  for (int i = 0; i < 32; i++) {
    if (!(active >> i & 1)) continue;
    const shuf<T>& s = IN<shuf<T>>(in, i);
    int src;
    switch (KIND) {
      case 0: src = (int)s.arg; break;
      case 1: src = i ^ (int)s.arg; break;
      case 2: src = i - (int)s.arg < 0 ? i : i - (int)s.arg; break;
      case 3: src = i + (int)s.arg > 31 ? i : i + (int)s.arg; break;
      case 4: src = (i - (int)s.arg) & 31; break;
      default: src = (i + (int)s.arg) & 31; break;
    }
    if (src >= 0 && src < 32 && (active >> src & 1)) OUT<T>(out, i) = IN<shuf<T>>(in, src).v;
  }
}
template <class T>
void first_res(void* const* in, void* const* out, uint32_t active) {
  int f = __builtin_ctz(active);
  for (int i = 0; i < 32; i++)
    if (active >> i & 1) OUT<T>(out, i) = IN<T>(in, f);
}
inline void ballot_res(void* const* in, void* const* out, uint32_t active) {
  uint64_t m = 0;
  for (int i = 0; i < 32; i++)
    if ((active >> i & 1) && IN<bool>(in, i)) m |= 1ull << i;
  for (int i = 0; i < 32; i++)
    if (active >> i & 1) OUT<uint64_t>(out, i) = m;
}
inline void active_res(void* const*, void* const* out, uint32_t active) {
  for (int i = 0; i < 32; i++)
    if (active >> i & 1) OUT<uint64_t>(out, i) = active;
}
inline void none_res(void* const*, void* const*, uint32_t) {}
}  // namespace emu_detail

inline void simdgroup_barrier(mem_flags = mem_flags::mem_none, EMU_SITE) {
  char in = 0;
  (void)emu_detail::collective<char>(in, emu_detail::none_res, EMU_AT, "simdgroup_barrier");
}

#define EMU_REDUCE(name, op)                                                                  \
  template <class T>                                                                          \
  inline T name(T x, EMU_SITE) {                                                              \
    return emu_detail::collective<T>(x, emu_detail::reduce_res<T, op>, EMU_AT, #name);        \
  }
EMU_REDUCE(simd_sum, 0)
EMU_REDUCE(simd_product, 1)
EMU_REDUCE(simd_max, 2)
EMU_REDUCE(simd_min, 3)
EMU_REDUCE(simd_and, 4)
EMU_REDUCE(simd_or, 5)
EMU_REDUCE(simd_xor, 6)
#undef EMU_REDUCE

#define EMU_PREFIX(name, op, incl)                                                            \
  template <class T>                                                                          \
  inline T name(T x, EMU_SITE) {                                                              \
    return emu_detail::collective<T>(x, emu_detail::prefix_res<T, op, incl>, EMU_AT, #name);  \
  }
EMU_PREFIX(simd_prefix_inclusive_sum, 0, true)
EMU_PREFIX(simd_prefix_exclusive_sum, 0, false)
EMU_PREFIX(simd_prefix_inclusive_product, 1, true)
EMU_PREFIX(simd_prefix_exclusive_product, 1, false)
#undef EMU_PREFIX

#define EMU_SHUFFLE(name, kind)                                                               \
  template <class T>                                                                          \
  inline T name(T x, ushort arg, EMU_SITE) {                                                  \
    emu_detail::shuf<T> s{x, arg};                                                            \
    return emu_detail::collective<T>(s, emu_detail::shuffle_res<T, kind>, EMU_AT, #name);     \
  }
EMU_SHUFFLE(simd_shuffle, 0)
EMU_SHUFFLE(simd_broadcast, 0)
EMU_SHUFFLE(simd_shuffle_xor, 1)
EMU_SHUFFLE(simd_shuffle_up, 2)
EMU_SHUFFLE(simd_shuffle_down, 3)
EMU_SHUFFLE(simd_shuffle_rotate_up, 4)
EMU_SHUFFLE(simd_shuffle_rotate_down, 5)
#undef EMU_SHUFFLE

// simd_shuffle_and_fill_up/down(data, filling, delta[, modulo]): lanes are grouped by modulo (32
// when absent); within a group, lane l reads data of lane l - delta (up) or l + delta (down), and
// where that leaves the group, filling of lane l + modulo - delta (up) or l + delta - modulo (down).
namespace emu_detail {
template <class T>
struct fill {
  T v, f;
  uint32_t delta, mod;
};
template <class T, bool UP>
void fill_res(void* const* in, void* const* out, uint32_t active) {
  for (int i = 0; i < 32; i++) {
    if (!(active >> i & 1)) continue;
    const fill<T>& s = IN<fill<T>>(in, i);
    int w = (int)s.mod, d = (int)s.delta;
    if (w <= 0 || w > 32) emu_fail("simd_shuffle_and_fill: modulo %d outside [1, 32]", w);
    int base = i - i % w, l = i % w, src;
    bool filling;
    if (UP) filling = l < d, src = filling ? base + l + w - d : base + l - d;
    else filling = l + d >= w, src = filling ? base + l + d - w : base + l + d;
    if (src < 0 || src >= 32 || !(active >> src & 1)) continue;
    const fill<T>& o = IN<fill<T>>(in, src);
    OUT<T>(out, i) = filling ? o.f : o.v;
  }
}
}  // namespace emu_detail
template <class T>
inline T simd_shuffle_and_fill_up(T data, T filling, ushort delta, ushort modulo, EMU_SITE) {
  emu_detail::fill<T> s{data, filling, delta, modulo};
  return emu_detail::collective<T>(s, emu_detail::fill_res<T, true>, EMU_AT, "simd_shuffle_and_fill_up");
}
template <class T>
inline T simd_shuffle_and_fill_up(T data, T filling, ushort delta, EMU_SITE) {
  emu_detail::fill<T> s{data, filling, delta, 32};
  return emu_detail::collective<T>(s, emu_detail::fill_res<T, true>, EMU_AT, "simd_shuffle_and_fill_up");
}
template <class T>
inline T simd_shuffle_and_fill_down(T data, T filling, ushort delta, ushort modulo, EMU_SITE) {
  emu_detail::fill<T> s{data, filling, delta, modulo};
  return emu_detail::collective<T>(s, emu_detail::fill_res<T, false>, EMU_AT, "simd_shuffle_and_fill_down");
}
template <class T>
inline T simd_shuffle_and_fill_down(T data, T filling, ushort delta, EMU_SITE) {
  emu_detail::fill<T> s{data, filling, delta, 32};
  return emu_detail::collective<T>(s, emu_detail::fill_res<T, false>, EMU_AT, "simd_shuffle_and_fill_down");
}

template <class T>
inline T simd_broadcast_first(T x, EMU_SITE) {
  return emu_detail::collective<T>(x, emu_detail::first_res<T>, EMU_AT, "simd_broadcast_first");
}

// simd_vote: a 64-bit mask of lanes (bit i = lane i).
struct simd_vote {
  typedef uint64_t vote_t;
  vote_t v;
  explicit constexpr operator vote_t() const { return v; }
  bool all() const { return v == 0xffffffffull; }
  bool any() const { return v != 0; }
};
inline simd_vote simd_ballot(bool b, EMU_SITE) {
  return {emu_detail::collective<uint64_t>(b, emu_detail::ballot_res, EMU_AT, "simd_ballot")};
}
inline simd_vote simd_active_threads_mask(EMU_SITE) {
  char in = 0;
  return {emu_detail::collective<uint64_t>(in, emu_detail::active_res, EMU_AT, "simd_active_threads_mask")};
}
// simd_all / simd_any consider active lanes only.
inline bool simd_all(bool b, EMU_SITE) {
  uint64_t m = emu_detail::collective<uint64_t>(b, emu_detail::ballot_res, EMU_AT, "simd_all");
  char in = 0;
  uint64_t a = emu_detail::collective<uint64_t>(in, emu_detail::active_res, EMU_AT, "simd_all");
  return m == a;
}
inline bool simd_any(bool b, EMU_SITE) {
  return emu_detail::collective<uint64_t>(b, emu_detail::ballot_res, EMU_AT, "simd_any") != 0;
}
inline bool simd_is_first(EMU_SITE) {
  char in = 0;
  uint64_t a = emu_detail::collective<uint64_t>(in, emu_detail::active_res, EMU_AT, "simd_is_first");
  return (int)emu_info()->simd_lane == __builtin_ctzll(a);
}


// ---- quadgroup functions: collectives over the 4 lanes (4q .. 4q+3) of each quad ------------------
namespace emu_detail {
template <class T, int OP>
void quad_reduce_res(void* const* in, void* const* out, uint32_t active) {
  for (int q = 0; q < 32; q += 4) {
    T acc{};
    bool first = true;
    for (int i = q; i < q + 4; i++) {
      if (!(active >> i & 1)) continue;
      const T& x = IN<T>(in, i);
      if (first) acc = x, first = false;
      else if constexpr (OP == 0) acc = acc + x;
      else if constexpr (OP == 1) acc = acc * x;
      else if constexpr (OP == 2) acc = metal::max(acc, x);
      else if constexpr (OP == 3) acc = metal::min(acc, x);
      else if constexpr (OP >= 4) acc = bitop<OP>(acc, x);
    }
    for (int i = q; i < q + 4; i++)
      if (active >> i & 1) OUT<T>(out, i) = acc;
  }
}
template <class T, int OP, bool INCL>
void quad_prefix_res(void* const* in, void* const* out, uint32_t active) {
  for (int q = 0; q < 32; q += 4) {
    T acc = T(OP == 0 ? 0 : 1);
    for (int i = q; i < q + 4; i++) {
      if (!(active >> i & 1)) continue;
      const T x = IN<T>(in, i);
      if (!INCL) OUT<T>(out, i) = acc;
      acc = OP == 0 ? T(acc + x) : T(acc * x);
      if (INCL) OUT<T>(out, i) = acc;
    }
  }
}
// Shuffle kinds as for simdgroups (0 index, 1 xor, 2 up, 3 down, 4 rotate up, 5 rotate down),
// with lane indices taken within the quad.
template <class T, int KIND>
void quad_shuffle_res(void* const* in, void* const* out, uint32_t active) {
  for (int i = 0; i < 32; i++) {
    if (!(active >> i & 1)) continue;
    const shuf<T>& s = IN<shuf<T>>(in, i);
    int q = i & ~3, l = i & 3, a = (int)s.arg, src;
    switch (KIND) {
      case 0: src = a; break;
      case 1: src = l ^ a; break;
      case 2: src = l - a < 0 ? l : l - a; break;
      case 3: src = l + a > 3 ? l : l + a; break;
      case 4: src = (l - a) & 3; break;
      default: src = (l + a) & 3; break;
    }
    if (src >= 0 && src < 4 && (active >> (q + src) & 1)) OUT<T>(out, i) = IN<shuf<T>>(in, q + src).v;
  }
}
inline void quad_ballot_res(void* const* in, void* const* out, uint32_t active) {
  for (int i = 0; i < 32; i++) {
    if (!(active >> i & 1)) continue;
    uint64_t m = 0;
    for (int k = 0; k < 4; k++) {
      int j = (i & ~3) + k;
      if ((active >> j & 1) && IN<bool>(in, j)) m |= 1ull << k;
    }
    OUT<uint64_t>(out, i) = m;
  }
}
inline void quad_active_res(void* const*, void* const* out, uint32_t active) {
  for (int i = 0; i < 32; i++)
    if (active >> i & 1) OUT<uint64_t>(out, i) = (active >> (i & ~3)) & 15;
}
}  // namespace emu_detail

#define EMU_QREDUCE(name, op)                                                                  \
  template <class T>                                                                           \
  inline T name(T x, EMU_SITE) {                                                               \
    return emu_detail::collective<T>(x, emu_detail::quad_reduce_res<T, op>, EMU_AT, #name);    \
  }
EMU_QREDUCE(quad_sum, 0)
EMU_QREDUCE(quad_product, 1)
EMU_QREDUCE(quad_max, 2)
EMU_QREDUCE(quad_min, 3)
EMU_QREDUCE(quad_and, 4)
EMU_QREDUCE(quad_or, 5)
EMU_QREDUCE(quad_xor, 6)
#undef EMU_QREDUCE

#define EMU_QPREFIX(name, op, incl)                                                               \
  template <class T>                                                                              \
  inline T name(T x, EMU_SITE) {                                                                  \
    return emu_detail::collective<T>(x, emu_detail::quad_prefix_res<T, op, incl>, EMU_AT, #name); \
  }
EMU_QPREFIX(quad_prefix_inclusive_sum, 0, true)
EMU_QPREFIX(quad_prefix_exclusive_sum, 0, false)
EMU_QPREFIX(quad_prefix_inclusive_product, 1, true)
EMU_QPREFIX(quad_prefix_exclusive_product, 1, false)
#undef EMU_QPREFIX

#define EMU_QSHUFFLE(name, kind)                                                                \
  template <class T>                                                                            \
  inline T name(T x, ushort arg, EMU_SITE) {                                                    \
    emu_detail::shuf<T> s{x, arg};                                                              \
    return emu_detail::collective<T>(s, emu_detail::quad_shuffle_res<T, kind>, EMU_AT, #name);  \
  }
EMU_QSHUFFLE(quad_shuffle, 0)
EMU_QSHUFFLE(quad_broadcast, 0)
EMU_QSHUFFLE(quad_shuffle_xor, 1)
EMU_QSHUFFLE(quad_shuffle_up, 2)
EMU_QSHUFFLE(quad_shuffle_down, 3)
EMU_QSHUFFLE(quad_shuffle_rotate_up, 4)
EMU_QSHUFFLE(quad_shuffle_rotate_down, 5)
#undef EMU_QSHUFFLE

// quad_vote: a mask of the quad's lanes (bit k = lane k of the quad).
struct quad_vote {
  typedef uint64_t vote_t;
  vote_t v;
  explicit constexpr operator vote_t() const { return v; }
  bool all() const { return v == 15; }
  bool any() const { return v != 0; }
};
inline quad_vote quad_ballot(bool b, EMU_SITE) {
  return {emu_detail::collective<uint64_t>(b, emu_detail::quad_ballot_res, EMU_AT, "quad_ballot")};
}
inline quad_vote quad_active_threads_mask(EMU_SITE) {
  char in = 0;
  return {emu_detail::collective<uint64_t>(in, emu_detail::quad_active_res, EMU_AT, "quad_active_threads_mask")};
}
// quad_all / quad_any consider active lanes only.
inline bool quad_all(bool b, EMU_SITE) {
  uint64_t m = emu_detail::collective<uint64_t>(b, emu_detail::quad_ballot_res, EMU_AT, "quad_all");
  char in = 0;
  uint64_t a = emu_detail::collective<uint64_t>(in, emu_detail::quad_active_res, EMU_AT, "quad_all");
  return m == a;
}
inline bool quad_any(bool b, EMU_SITE) {
  return emu_detail::collective<uint64_t>(b, emu_detail::quad_ballot_res, EMU_AT, "quad_any") != 0;
}
inline bool quad_is_first(EMU_SITE) {
  char in = 0;
  uint64_t a = emu_detail::collective<uint64_t>(in, emu_detail::quad_active_res, EMU_AT, "quad_is_first");
  return (int)(emu_info()->simd_lane & 3) == __builtin_ctzll(a);
}

// uniform<T>: a value the same in every thread (a hint on Apple GPUs, a plain wrapper here).
template <class T>
struct uniform {
  T v;
  uniform() = default;
  constexpr uniform(T x) : v(x) {}
  constexpr uniform(T x) __constant : v(x) {}
  constexpr operator T() const { return v; }
  constexpr operator T() const __constant { return v; }
  template <class U> uniform& operator+=(const U& x) { v += x; return *this; }
  template <class U> uniform& operator-=(const U& x) { v -= x; return *this; }
  template <class U> uniform& operator*=(const U& x) { v *= x; return *this; }
  template <class U> uniform& operator/=(const U& x) { v /= x; return *this; }
};
template <class T>
constexpr uniform<T> make_uniform(T x) { return uniform<T>(x); }

}  // namespace metal

// Intrinsics behind the simdgroup functions, as MLX calls them for its bfloat overloads.
#define EMU_IS1(name) template <class T> inline T __metal_##name(T x, EMU_SITE) { return ::metal::name(x, emu_line, emu_col); }
#define EMU_IS2(name) template <class T> inline T __metal_##name(T x, ushort a, EMU_SITE) { return ::metal::name(x, a, emu_line, emu_col); }
EMU_IS1(simd_sum) EMU_IS1(simd_product) EMU_IS1(simd_max) EMU_IS1(simd_min) EMU_IS1(simd_and) EMU_IS1(simd_or)
EMU_IS1(simd_xor) EMU_IS1(simd_prefix_inclusive_sum) EMU_IS1(simd_prefix_exclusive_sum)
EMU_IS1(simd_prefix_inclusive_product) EMU_IS1(simd_prefix_exclusive_product) EMU_IS1(simd_broadcast_first)
EMU_IS2(simd_shuffle) EMU_IS2(simd_broadcast) EMU_IS2(simd_shuffle_xor) EMU_IS2(simd_shuffle_up)
EMU_IS2(simd_shuffle_down) EMU_IS2(simd_shuffle_rotate_up) EMU_IS2(simd_shuffle_rotate_down)
#undef EMU_IS1
#undef EMU_IS2
template <class T>
inline T __metal_simd_shuffle_and_fill_up(T x, T f, ushort d, ushort m, EMU_SITE) {
  return ::metal::simd_shuffle_and_fill_up(x, f, d, m, emu_line, emu_col);
}
template <class T>
inline T __metal_simd_shuffle_and_fill_down(T x, T f, ushort d, ushort m, EMU_SITE) {
  return ::metal::simd_shuffle_and_fill_down(x, f, d, m, emu_line, emu_col);
}
template <class T>
inline T __metal_get_thread_index_in_simdgroup(T) { return T(emu_info()->simd_lane); }
template <class T>
inline T __metal_get_simdgroup_size(T) { return T(emu_info()->simd_width); }
