// The Metal 4 tensor subset of <metal_tensor> and MetalPerformancePrimitives: extents, tensor
// views over device/threadgroup memory, execution scopes, mpp::tensor_ops::matmul2d with tensor or
// cooperative_tensor destinations, reduce_rows / reduce_columns. Included (with C++20, for the
// class-type template argument of matmul2d) when a source includes <metal_tensor> or
// <MetalPerformancePrimitives/MetalPerformancePrimitives.h>.
//
// Coordinates follow Metal: a rank-2 tensor is indexed (x, y) = (column, row), extent(0) is the
// innermost dimension, element (x, y) lives at data[x * stride(0) + y * stride(1)]. A is M x K
// (extents (K, M), or (M, K) with transpose_left), B is K x N (extents (N, K), or (K, N) with
// transpose_right), the destination is M x N (extents (N, M)).
//
// Cooperative tensors: Apple leaves the distribution of elements over the threads of the execution
// scope implementation-defined. The emulator draws a random permutation of the tile's elements over
// the scope's slots from Options.Seed (the same in every threadgroup of a run), so a kernel that
// assumes a layout breaks under some seed. Storage is poisoned (all-ones, NaN) on construction.
// Products are computed once per scope in float with k ascending (fma), then rounded to the
// destination type; relaxed_precision changes nothing.
#pragma once
#include "emu_simd.h"

extern "C" void* malloc(size_t);
extern "C" void free(void*);

#define EMU_TAT ::metal::emu_detail::site(emu_line, emu_col)

namespace metal {

constexpr size_t dynamic_extent = ~size_t(0);


template <class I, size_t... E>
struct extents {
  typedef I index_type;
  static constexpr size_t rank() { return sizeof...(E); }
  static constexpr size_t rank_dynamic() { return ((E == dynamic_extent ? 1 : 0) + ... + 0); }
  static constexpr size_t static_extent(size_t r) {
    constexpr size_t s[] = {E...};
    return s[r];
  }
  I e[sizeof...(E)];
  constexpr extents() : e{I(E == dynamic_extent ? 0 : E)...} {}
  // All extents, or only the dynamic ones in order.
  template <class... J, class = enable_if_t<(sizeof...(J) > 0) && (is_integral_v<J> && ...)>>
  constexpr extents(J... js) : e{I(E == dynamic_extent ? 0 : E)...} {
    static_assert(sizeof...(J) == sizeof...(E) || sizeof...(J) == rank_dynamic(), "extents: wrong number of arguments");
    I a[] = {I(js)...};
    if constexpr (sizeof...(J) == sizeof...(E)) {
      for (size_t r = 0; r < rank(); r++) e[r] = a[r];
    } else {
      size_t k = 0;
      for (size_t r = 0; r < rank(); r++)
        if (static_extent(r) == dynamic_extent) e[r] = a[k++];
    }
  }
  constexpr I extent(size_t r) const { return e[r]; }
};

namespace emu_detail {
template <class I, size_t R, size_t... E>
struct dext {
  typedef typename dext<I, R - 1, dynamic_extent, E...>::type type;
};
template <class I, size_t... E>
struct dext<I, 0, E...> {
  typedef extents<I, E...> type;
};
}  // namespace emu_detail
template <class I, size_t R>
using dextents = typename emu_detail::dext<I, R>::type;

// Tensor descriptor tags: the emulator treats them alike.
struct tensor_inline {};
struct tensor_offset {};
struct tensor_handle {};

template <class T, class Ext, class Desc = tensor_inline>
struct tensor {
  typedef T element_type;
  typedef emu_detail::plain_t<T> value_type;
  typedef typename Ext::index_type index_type;
  typedef Ext extents_type;
  static constexpr int R = (int)Ext::rank();

  T* ptr;
  Ext ext;
  array<index_type, R> str;
  // lim[r]: elements from this view's origin to the end of the tensor it was cut from. A static
  // slice may claim more (ext > lim): an access between lim and ext is out of bounds.
  long lim[R];

  tensor() = default;
  tensor(T* p, Ext e) : ptr(p), ext(e) {
    index_type s = 1;
    for (int r = 0; r < R; r++) {
      str[r] = s;
      s *= e.e[r];
      lim[r] = (long)e.e[r];
    }
  }
  template <class J>
  tensor(T* p, Ext e, array<J, R> strides) : ptr(p), ext(e) {
    for (int r = 0; r < R; r++) {
      str[r] = (index_type)strides[r];
      lim[r] = (long)e.e[r];
    }
  }
  template <class T2, class D2, class = enable_if_t<is_convertible_v<T2*, T*>>>
  tensor(const tensor<T2, Ext, D2>& o) : ptr(o.ptr), ext(o.ext), str(o.str) {
    for (int r = 0; r < R; r++) lim[r] = o.lim[r];
  }

  static constexpr size_t get_rank() { return R; }
  Ext extents() const { return ext; }
  index_type get_extent(int r) const { return ext.e[r]; }
  index_type extent(int r) const { return ext.e[r]; }
  array<index_type, R> strides() const { return str; }
  index_type get_stride(int r) const { return str[r]; }
  T* data() const { return ptr; }

  // slice(o...): the view from origin o to the end of this view (tensor_offset, dynamic extents).
  template <class... O, class = enable_if_t<sizeof...(O) == R>>
  tensor<T, dextents<index_type, R>, tensor_offset> slice(O... o) const {
    long off[] = {(long)o...};
    tensor<T, dextents<index_type, R>, tensor_offset> t;
    t.ptr = ptr;
    for (int r = 0; r < R; r++) {
      t.ptr += off[r] * (long)str[r];
      t.str[r] = str[r];
      long rem = (long)ext.e[r] - off[r];
      t.ext.e[r] = (index_type)(rem < 0 ? 0 : rem);
      t.lim[r] = lim[r] - off[r];
    }
    return t;
  }
  // slice<E...>(o...): a view of static extents E (dynamic_extent: to the end) at origin o.
  template <size_t... E, class... O, class = enable_if_t<sizeof...(E) == R && sizeof...(O) == R>>
  tensor<T, ::metal::extents<index_type, E...>, tensor_offset> slice(O... o) const {
    long off[] = {(long)o...};
    size_t se[] = {E...};
    tensor<T, ::metal::extents<index_type, E...>, tensor_offset> t;
    t.ptr = ptr;
    for (int r = 0; r < R; r++) {
      t.ptr += off[r] * (long)str[r];
      t.str[r] = str[r];
      long rem = (long)ext.e[r] - off[r];
      t.ext.e[r] = se[r] == dynamic_extent ? (index_type)(rem < 0 ? 0 : rem) : (index_type)se[r];
      t.lim[r] = lim[r] - off[r];
    }
    return t;
  }
  template <size_t... E, class... O>
  auto static_slice(O... o) const { return slice<E...>(o...); }
};

template <class T, class Ext>
tensor(T*, Ext) -> tensor<T, Ext, tensor_inline>;
template <class T, class Ext, class J, size_t R>
tensor(T*, Ext, array<J, R>) -> tensor<T, Ext, tensor_inline>;

namespace emu_detail {
// Reads element (x, y) of a view (y ignored for rank 1): zero past its extents, a fault past the
// tensor it was cut from.
template <class TT, class TE, class TD>
inline float tensor_read(const tensor<TT, TE, TD>& t, long x, long y) {
  constexpr int R = tensor<TT, TE, TD>::R;
  long c[2] = {x, y};
  long off = 0;
  for (int r = 0; r < R; r++) {
    if (c[r] < 0 || c[r] >= (long)t.ext.e[r]) return 0.0f;
    if (c[r] >= t.lim[r])
      emu_fail("tensor op reads element (%ld, %ld) past the end of the tensor (a static slice larger than what remains)", x, y);
    off += c[r] * (long)t.str[r];
  }
  return float(t.ptr[off]);
}
template <class TT, class TE, class TD>
inline void tensor_write(const tensor<TT, TE, TD>& t, long x, long y, float val) {
  constexpr int R = tensor<TT, TE, TD>::R;
  long c[2] = {x, y};
  long off = 0;
  for (int r = 0; r < R; r++) {
    if (c[r] < 0 || c[r] >= (long)t.ext.e[r]) return;
    if (c[r] >= t.lim[r])
      emu_fail("tensor op writes element (%ld, %ld) past the end of the tensor (a static slice larger than what remains)", x, y);
    off += c[r] * (long)t.str[r];
  }
  t.ptr[off] = (emu_detail::plain_t<TT>)val;
}
}  // namespace emu_detail

// Execution scopes of tensor ops.
struct execution_thread {
  static constexpr int kind = 0, simdgroups = 0;
};
struct execution_simdgroup {
  static constexpr int kind = 1, simdgroups = 1;
};
template <int N>
struct execution_simdgroups {
  static_assert(N > 0, "execution_simdgroups<N>: N must be positive");
  static constexpr int kind = 2, simdgroups = N;
};
// Every thread of the threadgroup.
struct execution_threadgroup {
  static constexpr int kind = 3, simdgroups = 0;
};

namespace emu_detail {
template <class T>
struct is_tensor_impl : false_type {};
template <class T, class E, class D>
struct is_tensor_impl<tensor<T, E, D>> : true_type {};
template <class T>
struct is_tensor : is_tensor_impl<plain_t<T>> {};

// Threads in the scope and the calling thread's rank in it.
template <class S>
inline uint32_t scope_threads() {
  if constexpr (S::kind == 0) return 1;
  else if constexpr (S::kind == 1 || S::kind == 2) return 32u * S::simdgroups;
  else {
    const emu_lane_info* i = emu_info();
    return i->tptg[0] * i->tptg[1] * i->tptg[2];
  }
}
template <class S>
inline uint32_t scope_rank() {
  if constexpr (S::kind == 0) return 0;
  else if constexpr (S::kind == 1) return emu_info()->simd_lane;
  else return emu_info()->tiitg;
}

// Runs op's resolver once per scope: directly for one thread, as a simdgroup collective, or as a
// threadgroup collective. The resolver sees in[rank] for every thread of the scope.
template <class S>
struct scope_check {
  static void simd(void* const* in, void* const* out, uint32_t active, void (*run)(void* const*, uint32_t)) {
    const emu_lane_info* i = emu_info();
    uint32_t n = i->tptg[0] * i->tptg[1] * i->tptg[2];
    uint32_t lo = i->simd_group * 32, cnt = n - lo < 32 ? n - lo : 32;
    uint32_t full = cnt == 32 ? 0xffffffffu : (1u << cnt) - 1;
    if (cnt != 32) emu_fail("execution_simdgroup tensor op in a simdgroup of %u threads (needs 32)", cnt);
    if (active != full) emu_fail("execution_simdgroup tensor op with inactive lanes (active mask 0x%08x)", active);
    (void)out;
    run(in, 32);
  }
  static void group(void* const* in, void* const* out, uint32_t n, void (*run)(void* const*, uint32_t)) {
    (void)out;
    for (uint32_t t = 0; t < n; t++)
      if (!in[t]) emu_fail("threadgroup-scope tensor op: thread %u returned before it", t);
    if constexpr (S::kind == 2) {
      if (n != 32u * S::simdgroups)
        emu_fail("execution_simdgroups<%d> tensor op in a threadgroup of %u threads (needs %d)", S::simdgroups, n,
                 32 * S::simdgroups);
    }
    run(in, n);
  }
};
template <class S, auto RUN>
void scope_simd_res(void* const* in, void* const* out, uint32_t active) {
  scope_check<S>::simd(in, out, active, RUN);
}
template <class S, auto RUN>
void scope_group_res(void* const* in, void* const* out, uint32_t n) {
  scope_check<S>::group(in, out, n, RUN);
}
template <class S, auto RUN>
inline void scope_collective(const void* in, uint32_t at, EMU_STR what) {
  char out = 0;
  if constexpr (S::kind == 0) {
    void* ins[1] = {(void*)in};
    RUN(ins, 1);
  } else if constexpr (S::kind == 1) {
    emu_wait_simd(at, what, scope_simd_res<S, RUN>, in, &out);
  } else {
    emu_wait_group(at, what, scope_group_res<S, RUN>, in, &out);
  }
}

// Layout of a cooperative tensor: KIND 0 is an M x N tile (a destination), 1 its row reduction
// (M), 2 its column reduction (N), 3 a left operand (M x N = the op's M x K), 4 a right operand
// (M x N = the op's K x N). Slot s of the scope (thread s / cap, element s % cap) holds element
// perm[s] of the tile (row-major), or nothing when perm[s] >= elems.
template <int KIND, int M, int N, class S>
struct coop_layout {
  typedef S scope;
  static constexpr int m = M, n = N, kind = KIND;
  static constexpr uint32_t elems = KIND == 1 ? M : KIND == 2 ? N : M * N;
  static constexpr uint32_t min_threads = S::kind == 0 ? 1 : S::kind == 3 ? 32 : 32 * S::simdgroups;
  static constexpr uint32_t storage = (elems + min_threads - 1) / min_threads;
  static uint32_t threads() { return scope_threads<S>(); }
  static uint32_t cap() {
    uint32_t p = threads();
    uint32_t c = (elems + p - 1) / p;
    if (c > storage) emu_fail("cooperative tensor of an execution_threadgroup op needs at least 32 threads");
    return c;
  }
  static const uint32_t* perm(uint32_t p, uint32_t c) {
    uint64_t key = (uint64_t)KIND << 60 ^ (uint64_t)M << 40 ^ (uint64_t)N << 20 ^ p;
    return emu_layout(key, p * c);
  }
  // Element held in slot i of the calling thread, or elems.
  static uint32_t element(uint32_t i) {
    uint32_t p = threads(), c = cap();
    uint32_t r = scope_rank<S>();
    if (r >= p) emu_fail("thread %u is outside the tensor op's execution scope of %u threads", r, p);
    uint32_t e = perm(p, c)[r * c + i];
    return e < elems ? e : elems;
  }
};
}  // namespace emu_detail

template <class T, class Ext, class Layout>
struct cooperative_tensor {
  typedef T element_type;
  typedef T value_type;
  typedef Ext extents_type;
  typedef Layout layout;
  typedef typename Ext::index_type index_type;
  static constexpr int R = (int)Ext::rank();
  T v[Layout::storage];

  cooperative_tensor() { __builtin_memset((void*)v, 0xff, sizeof v); }

  uint16_t get_capacity() const { return (uint16_t)Layout::cap(); }
  bool is_valid_element(uint16_t i) const { return i < Layout::cap() && Layout::element(i) < Layout::elems; }
  bool get_mask(uint16_t i) const { return is_valid_element(i); }
  T& operator[](uint16_t i) {
    if (i >= Layout::cap()) emu_fail("cooperative tensor element %u beyond the capacity %u", i, Layout::cap());
    return v[i];
  }
  const T& operator[](uint16_t i) const {
    if (i >= Layout::cap()) emu_fail("cooperative tensor element %u beyond the capacity %u", i, Layout::cap());
    return v[i];
  }
  // Coordinates of element i: (column, row) of the tile, (row) or (column) of a reduction.
  array<index_type, R> get_multidimensional_index(uint16_t i) const {
    uint32_t e = Layout::element(i);
    array<index_type, R> c;
    if constexpr (R == 2) {
      c[0] = (index_type)(e % Layout::n);
      c[1] = (index_type)(e / Layout::n);
    } else {
      c[0] = (index_type)e;
    }
    return c;
  }
  // Loads this thread's elements from a tensor view of the same shape (edges read as zero).
  template <class TT, class TE, class TD>
  void load(const tensor<TT, TE, TD>& t) {
    static_assert(tensor<TT, TE, TD>::R == R, "cooperative_tensor::load: rank differs");
    uint32_t c = Layout::cap();
    for (uint32_t i = 0; i < c; i++) {
      uint32_t e = Layout::element(i);
      if (e >= Layout::elems) continue;
      v[i] = T(float(emu_detail::tensor_read(t, coord(e, 0), coord(e, 1))));
    }
  }
  // Stores this thread's elements to a tensor view (elements past its extents are dropped).
  template <class TT, class TE, class TD>
  void store(const tensor<TT, TE, TD>& t) const {
    static_assert(tensor<TT, TE, TD>::R == R, "cooperative_tensor::store: rank differs");
    uint32_t c = Layout::cap();
    for (uint32_t i = 0; i < c; i++) {
      uint32_t e = Layout::element(i);
      if (e >= Layout::elems) continue;
      emu_detail::tensor_write(t, coord(e, 0), coord(e, 1), float(v[i]));
    }
  }

 private:
  static long coord(uint32_t e, int d) {
    if constexpr (R == 2) return d == 0 ? (long)(e % Layout::n) : (long)(e / Layout::n);
    else return d == 0 ? (long)e : 0;
  }
};

namespace emu_detail {
template <class T>
struct is_coop_impl : false_type {};
template <class T, class E, class L>
struct is_coop_impl<cooperative_tensor<T, E, L>> : true_type {};
template <class T>
struct is_coop : is_coop_impl<plain_t<T>> {};

template <class A, class B>
inline bool same_view(const A& a, const B& b) {
  if (a.ptr != b.ptr) return false;
  for (int r = 0; r < A::R; r++)
    if (a.ext.e[r] != b.ext.e[r] || a.str[r] != b.str[r]) return false;
  return true;
}
}  // namespace emu_detail
}  // namespace metal

namespace mpp {
namespace tensor_ops {
using ::metal::dynamic_extent;

enum class reduction_operation { sum, max, min };

struct matmul2d_descriptor {
  enum class mode { multiply, multiply_accumulate };
  int m, n, k;
  bool transpose_left, transpose_right;
  bool relaxed_precision;
  mode matmul_mode;
  constexpr matmul2d_descriptor(int m_, int n_, int k_ = static_cast<int>(::metal::dynamic_extent), bool tl = false,
                                bool tr = false, bool relaxed = false, mode md = mode::multiply)
      : m(m_), n(n_), k(k_), transpose_left(tl), transpose_right(tr), relaxed_precision(relaxed), matmul_mode(md) {}
};
// The descriptor as one integer template argument: m, n, k + 1 in 20 bits each (dynamic_extent,
// -1 as an int, is 0), then the three flags and the mode.
typedef unsigned long long emu_desc_t;
constexpr emu_desc_t emu_pack(matmul2d_descriptor d) {
  return (emu_desc_t)(unsigned)(d.m + 1) | (emu_desc_t)(unsigned)(d.n + 1) << 20 | (emu_desc_t)(unsigned)(d.k + 1) << 40 |
         (emu_desc_t)d.transpose_left << 60 | (emu_desc_t)d.transpose_right << 61 | (emu_desc_t)d.relaxed_precision << 62 |
         (emu_desc_t)(d.matmul_mode == matmul2d_descriptor::mode::multiply_accumulate) << 63;
}
constexpr matmul2d_descriptor emu_unpack(emu_desc_t p) {
  return matmul2d_descriptor((int)(p & 0xfffff) - 1, (int)(p >> 20 & 0xfffff) - 1, (int)(p >> 40 & 0xfffff) - 1, (p >> 60 & 1) != 0,
                             (p >> 61 & 1) != 0, (p >> 62 & 1) != 0,
                             (p >> 63 & 1) ? matmul2d_descriptor::mode::multiply_accumulate : matmul2d_descriptor::mode::multiply);
}

// Identities of the reductions. reduce_rows / reduce_columns default to sum_identity whatever the
// operation: a max over a row of negative numbers with the default identity is 0.
template <class T>
struct reduction_operation_identity {
  static constexpr T sum_identity = T(0);
  static constexpr T max_identity = ::metal::numeric_limits<T>::lowest();
  static constexpr T min_identity = ::metal::numeric_limits<T>::max();
};

namespace emu_mm {
using namespace ::metal;
using namespace ::metal::emu_detail;

template <class C, bool = is_coop<C>::value>
struct coop_of {
  typedef typename C::layout layout;
};
template <class C>
struct coop_of<C, false> {
  typedef coop_layout<0, 1, 1, execution_thread> layout;
};

template <emu_desc_t P, class S, class A, class B, class C>
struct run_args {
  const A* a;
  const B* b;
  C* c;
};

// Element (row r, column c) of an operand: a tensor view (read as the op reads it) or a cooperative
// operand gathered from every thread of the scope.
template <class X>
struct operand {
  float* v = nullptr;
  long cols = 0;
  void gather(void* const* in, uint32_t p, const X* (*pick)(const void*), long rows, long cs) {
    typedef typename X::layout L;
    cols = cs;
    v = (float*)malloc(sizeof(float) * (rows * cs > 0 ? rows * cs : 1));
    uint32_t cap = L::cap();
    const uint32_t* perm = L::perm(p, cap);
    for (long e = 0; e < rows * cs; e++) v[e] = 0.0f;
    for (uint32_t s = 0; s < p * cap; s++)
      if (perm[s] < L::elems) v[perm[s]] = float(pick(in[s / cap])->v[s % cap]);
  }
  ~operand() { free(v); }
};

template <emu_desc_t P, class S, class A, class B, class C>
void run_op(void* const* in, uint32_t p) {
  constexpr matmul2d_descriptor D = emu_unpack(P);
  typedef run_args<P, S, A, B, C> args;
  const args& x = *(const args*)in[0];
  constexpr bool coop = is_coop<C>::value, coopa = is_coop<A>::value, coopb = is_coop<B>::value;
  for (uint32_t t = 1; t < p; t++) {
    const args& y = *(const args*)in[t];
    bool same = true;
    if constexpr (!coopa) same = same && same_view(*x.a, *y.a);
    if constexpr (!coopb) same = same && same_view(*x.b, *y.b);
    if constexpr (!coop) same = same && same_view(*x.c, *y.c);
    if (!same) emu_fail("matmul2d::run: threads %u and 0 of the execution scope pass different tensors", t);
  }
  constexpr int M = D.m, N = D.n;
  long K = D.k;
  if constexpr (!coopa) {
    if (D.k == static_cast<int>(dynamic_extent)) K = D.transpose_left ? x.a->ext.e[1] : x.a->ext.e[0];
  } else {
    static_assert(D.k > 0, "matmul2d: a cooperative left operand needs a static k");
  }
  constexpr bool acc = D.matmul_mode == matmul2d_descriptor::mode::multiply_accumulate;
  float* c = (float*)malloc(sizeof(float) * M * N);
  float* av = (float*)malloc(sizeof(float) * M * (K > 0 ? K : 1));
  float* bv = (float*)malloc(sizeof(float) * (K > 0 ? K : 1) * N);
  if constexpr (coopa) {
    typedef typename A::layout LA;
    static_assert(LA::kind == 3 && LA::m == M && LA::n == D.k && is_same_v<typename LA::scope, S>,
                  "matmul2d::run: the left operand is not this op's left input cooperative tensor");
    operand<A> o;
    o.gather(in, p, [](const void* a) { return ((const args*)a)->a; }, M, K);
    for (long e = 0; e < M * K; e++) av[e] = o.v[e];
  } else {
    const A& a = *x.a;
    for (long m = 0; m < M; m++)
      for (long k = 0; k < K; k++) av[m * K + k] = D.transpose_left ? tensor_read(a, m, k) : tensor_read(a, k, m);
  }
  if constexpr (coopb) {
    typedef typename B::layout LB;
    static_assert(LB::kind == 4 && LB::m == D.k && LB::n == N && is_same_v<typename LB::scope, S>,
                  "matmul2d::run: the right operand is not this op's right input cooperative tensor");
    operand<B> o;
    o.gather(in, p, [](const void* a) { return ((const args*)a)->b; }, K, N);
    for (long e = 0; e < K * N; e++) bv[e] = o.v[e];
  } else {
    const B& b = *x.b;
    for (long k = 0; k < K; k++)
      for (long n = 0; n < N; n++) bv[k * N + n] = D.transpose_right ? tensor_read(b, k, n) : tensor_read(b, n, k);
  }
  typedef typename coop_of<C>::layout L;
  const uint32_t* perm = nullptr;
  uint32_t cap = 0;
  if constexpr (coop) {
    static_assert(L::kind == 0 && L::m == M && L::n == N, "matmul2d::run: destination is not this op's destination cooperative tensor");
    static_assert(is_same_v<typename L::scope, S>, "matmul2d::run: destination cooperative tensor of another scope");
    cap = L::cap();
    perm = L::perm(p, cap);
  }
  if (acc) {
    if constexpr (coop) {
      for (uint32_t s = 0; s < p * cap; s++)
        if (perm[s] < L::elems) c[perm[s]] = float(((const args*)in[s / cap])->c->v[s % cap]);
    } else {
      for (long m = 0; m < M; m++)
        for (long n = 0; n < N; n++) c[m * N + n] = tensor_read(*x.c, n, m);
    }
  }
  for (long m = 0; m < M; m++)
    for (long n = 0; n < N; n++) {
      float s = acc ? c[m * N + n] : 0.0f;
      for (long k = 0; k < K; k++) s = __builtin_fmaf(av[m * K + k], bv[k * N + n], s);
      c[m * N + n] = s;
    }
  if constexpr (coop) {
    typedef typename C::element_type T;
    for (uint32_t s = 0; s < p * cap; s++)
      if (perm[s] < L::elems) ((const args*)in[s / cap])->c->v[s % cap] = T(c[perm[s]]);
  } else {
    for (long m = 0; m < M; m++)
      for (long n = 0; n < N; n++) tensor_write(*x.c, n, m, c[m * N + n]);
  }
  free(c);
  free(av);
  free(bv);
}

template <int ROWS, class T, class SE, class DE, class SL, class DL>
struct red {
  struct args {
    const cooperative_tensor<T, SE, SL>* src;
    cooperative_tensor<T, DE, DL>* dst;
    reduction_operation op;
    T identity;
  };
};
// (A free function: C++ for OpenCL gives static member functions a qualifier function pointers lack.)
template <int ROWS, class T, class SE, class DE, class SL, class DL>
void red_run(void* const* in, uint32_t p) {
    typedef typename red<ROWS, T, SE, DE, SL, DL>::args args;
    const args& x = *(const args*)in[0];
    constexpr int M = SL::m, N = SL::n;
    uint32_t cs = SL::cap(), cd = DL::cap();
    const uint32_t* ps = SL::perm(p, cs);
    const uint32_t* pd = DL::perm(p, cd);
    float* v = (float*)malloc(sizeof(float) * M * N);
    for (uint32_t s = 0; s < p * cs; s++)
      if (ps[s] < SL::elems) v[ps[s]] = float(((const args*)in[s / cs])->src->v[s % cs]);
    constexpr int OUT = ROWS ? M : N, LEN = ROWS ? N : M;
    float res[OUT];
    for (int o = 0; o < OUT; o++) {
      float a = float(x.identity);
      for (int j = 0; j < LEN; j++) {
        float e = ROWS ? v[o * N + j] : v[j * N + o];
        switch (x.op) {
          case reduction_operation::sum: a = a + e; break;
          case reduction_operation::max: a = __builtin_fmaxf(a, e); break;
          default: a = __builtin_fminf(a, e); break;
        }
      }
      res[o] = a;
    }
    for (uint32_t s = 0; s < p * cd; s++)
      if (pd[s] < DL::elems) ((const args*)in[s / cd])->dst->v[s % cd] = T(res[pd[s]]);
    free(v);
}

template <int ROWS, class T, class SE, class DE, class SL, class DL>
inline void reduce(const cooperative_tensor<T, SE, SL>& src, cooperative_tensor<T, DE, DL>& dst, reduction_operation op,
                   T identity, uint32_t at, EMU_STR what) {
  static_assert(SL::kind == 0, "reduce_rows/reduce_columns: the source must be a matmul2d destination cooperative tensor");
  static_assert(DL::kind == (ROWS ? 1 : 2) && DL::m == SL::m && DL::n == SL::n && is_same_v<typename SL::scope, typename DL::scope>,
                "reduce_rows/reduce_columns: the destination is not the matching reduction cooperative tensor of the same op");
  typedef red<ROWS, T, SE, DE, SL, DL> R;
  typename R::args a{&src, &dst, op, identity};
  scope_collective<typename SL::scope, red_run<ROWS, T, SE, DE, SL, DL>>(&a, at, what);
}
}  // namespace emu_mm

// matmul2d<emu_pack(descriptor), Scope>: the pre-pass writes matmul2d<d, S> so.
template <emu_desc_t Packed, class Scope, class... Args>
class matmul2d {
  static constexpr matmul2d_descriptor Descriptor = emu_unpack(Packed);
  static_assert(Descriptor.m > 0 && Descriptor.n > 0, "matmul2d: the emulator needs static m and n");

 public:
  static constexpr matmul2d_descriptor descriptor = Descriptor;
  typedef Scope scope;
  template <class E>
  using dest_t = ::metal::cooperative_tensor<E, ::metal::extents<int, Descriptor.n, Descriptor.m>,
                                             ::metal::emu_detail::coop_layout<0, Descriptor.m, Descriptor.n, Scope>>;

  matmul2d() = default;

  template <class L, class R, class D>
  void run(const L& left, const R& right, D& dest, EMU_SITE) const {
    typedef ::metal::emu_detail::plain_t<L> PL;
    typedef ::metal::emu_detail::plain_t<R> PR;
    typedef ::metal::emu_detail::plain_t<D> DD;
    static_assert((::metal::emu_detail::is_tensor<PL>::value && PL::R == 2) || ::metal::emu_detail::is_coop<PL>::value,
                  "matmul2d::run: the left operand must be a rank-2 tensor or the op's left input cooperative tensor");
    static_assert((::metal::emu_detail::is_tensor<PR>::value && PR::R == 2) || ::metal::emu_detail::is_coop<PR>::value,
                  "matmul2d::run: the right operand must be a rank-2 tensor or the op's right input cooperative tensor");
    emu_mm::run_args<Packed, Scope, PL, PR, DD> a{(const PL*)&left, (const PR*)&right, (DD*)&dest};
    ::metal::emu_detail::scope_collective<Scope, emu_mm::run_op<Packed, Scope, PL, PR, DD>>(&a, EMU_TAT, "matmul2d::run");
  }
  template <class L, class R, class D>
  void run(const L& left, const R& right, const D& dest, EMU_SITE) const {
    static_assert(::metal::emu_detail::is_tensor<D>::value, "matmul2d::run: a cooperative destination must not be const");
    D d = dest;
    run(left, right, d, emu_line, emu_col);
  }

  template <class L, class R, class E, class CoordType = int, class... CoopArgs>
  ::metal::cooperative_tensor<E, ::metal::extents<CoordType, Descriptor.n, Descriptor.m>,
                              ::metal::emu_detail::coop_layout<0, Descriptor.m, Descriptor.n, Scope>>
  get_destination_cooperative_tensor() const {
    return {};
  }
  template <class L, class R, class E, class CoordType = int, class... CoopArgs>
  ::metal::cooperative_tensor<E, ::metal::extents<CoordType, Descriptor.m>,
                              ::metal::emu_detail::coop_layout<1, Descriptor.m, Descriptor.n, Scope>>
  get_row_reduction_destination_cooperative_tensor() const {
    return {};
  }
  template <class L, class R, class E, class CoordType = int, class... CoopArgs>
  ::metal::cooperative_tensor<E, ::metal::extents<CoordType, Descriptor.n>,
                              ::metal::emu_detail::coop_layout<2, Descriptor.m, Descriptor.n, Scope>>
  get_column_reduction_destination_cooperative_tensor() const {
    return {};
  }
  // Operands held in the scope's registers: the left operand M x K, the right operand K x N
  // (element types as the template arguments name them; k must be static).
  // (k for the types of cooperative operands; they need a static k.)
  static constexpr int K = Descriptor.k > 0 ? Descriptor.k : 1;
  template <class A, class B, class C, class CoordType = int, class... CoopArgs>
  ::metal::cooperative_tensor<A, ::metal::extents<CoordType, K, Descriptor.m>, ::metal::emu_detail::coop_layout<3, Descriptor.m, K, Scope>>
  get_left_input_cooperative_tensor() const {
    static_assert(Descriptor.k > 0, "matmul2d: a cooperative left operand needs a static k");
    return {};
  }
  template <class A, class B, class C, class CoordType = int, class... CoopArgs>
  ::metal::cooperative_tensor<B, ::metal::extents<CoordType, Descriptor.n, K>, ::metal::emu_detail::coop_layout<4, K, Descriptor.n, Scope>>
  get_right_input_cooperative_tensor() const {
    static_assert(Descriptor.k > 0, "matmul2d: a cooperative right operand needs a static k");
    return {};
  }
};

// destination[r] = identity (op) source[r, 0] (op) source[r, 1] ... over the tile's columns.
template <class T, class SE, class DE, class SL, class DL>
inline void reduce_rows(const ::metal::cooperative_tensor<T, SE, SL>& source, ::metal::cooperative_tensor<T, DE, DL>& destination,
                        reduction_operation op = reduction_operation::sum,
                        T identity = reduction_operation_identity<T>::sum_identity, EMU_SITE) {
  emu_mm::reduce<1>(source, destination, op, identity, EMU_TAT, "reduce_rows");
}
// destination[c] = identity (op) source[0, c] (op) source[1, c] ... over the tile's rows.
template <class T, class SE, class DE, class SL, class DL>
inline void reduce_columns(const ::metal::cooperative_tensor<T, SE, SL>& source, ::metal::cooperative_tensor<T, DE, DL>& destination,
                           reduction_operation op = reduction_operation::sum,
                           T identity = reduction_operation_identity<T>::sum_identity, EMU_SITE) {
  emu_mm::reduce<0>(source, destination, op, identity, EMU_TAT, "reduce_columns");
}

// The emulator's cooperative layouts are random and unrelated: iterators never map between them.
template <class T1, class T2, class E1, class E2, class L1, class L2>
inline bool is_iterator_compatible(const ::metal::cooperative_tensor<T1, E1, L1>&, const ::metal::cooperative_tensor<T2, E2, L2>&) {
  return false;
}
}  // namespace tensor_ops
}  // namespace mpp
