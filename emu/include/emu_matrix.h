// simdgroup_matrix<T, 8, 8>: each lane holds two elements. Lane bits b4..b0 give row (b4,b2,b1)
// and column (b3,b0,j) for element j, the map of MLX's steel fragments; kernels must not depend
// on it beyond thread_elements() of their own matrices. Loads and stores are per lane;
// multiply-accumulate is one collective computed in float with k ascending.
#pragma once
#include "emu_simd.h"

namespace metal {
namespace emu_detail {
inline int frag_row(uint32_t lane) { return (int)(((lane >> 4) & 1) << 2 | ((lane >> 2) & 1) << 1 | ((lane >> 1) & 1)); }
inline int frag_col(uint32_t lane, int j) { return (int)(((lane >> 3) & 1) << 2 | (lane & 1) << 1 | j); }
template <class T>
struct elem2 {
  typedef T type __attribute__((ext_vector_type(2)));
};
template <>
struct elem2<bfloat> {
  typedef bvec<2> type;
};
}  // namespace emu_detail

template <class T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "the emulator supports 8x8 simdgroup matrices");
  typedef typename emu_detail::elem2<T>::type elems_t;
  elems_t e;
  simdgroup_matrix() = default;
  // Diagonal matrix with d on the diagonal (Metal's scalar constructor).
  explicit simdgroup_matrix(T d) {
    uint32_t lane = emu_info()->simd_lane;
    for (int j = 0; j < 2; j++)
      e[j] = emu_detail::frag_row(lane) == emu_detail::frag_col(lane, j) ? d : T(0.0f);
  }
  thread elems_t& thread_elements() thread { return e; }
  const thread elems_t& thread_elements() const thread { return e; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <class T, int C, int R = C>
inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, C, R> m;
  m.e[0] = v;
  m.e[1] = v;
  return m;
}

template <class T, class S>
inline void simdgroup_load(thread simdgroup_matrix<T, 8, 8>& m, const S* src, size_t elements_per_row = 8,
                           ulong2 matrix_origin = ulong2(0), bool transpose_matrix = false) {
  static_assert(is_same_v<emu_detail::plain_t<S>, T>,
                "simdgroup_load: the source's element type must be the matrix's element type (MSL 6.8)");
  uint32_t lane = emu_info()->simd_lane;
  int r = emu_detail::frag_row(lane);
  for (int j = 0; j < 2; j++) {
    int c = emu_detail::frag_col(lane, j);
    size_t row = transpose_matrix ? c : r, col = transpose_matrix ? r : c;
    m.e[j] = T(float(src[(matrix_origin.y + row) * elements_per_row + matrix_origin.x + col]));
  }
}

template <class T, class S>
inline void simdgroup_store(const thread simdgroup_matrix<T, 8, 8>& m, S* dst, size_t elements_per_row = 8,
                            ulong2 matrix_origin = ulong2(0), bool transpose_matrix = false) {
  static_assert(is_same_v<emu_detail::plain_t<S>, T>,
                "simdgroup_store: the destination's element type must be the matrix's element type (MSL 6.8)");
  uint32_t lane = emu_info()->simd_lane;
  int r = emu_detail::frag_row(lane);
  for (int j = 0; j < 2; j++) {
    int c = emu_detail::frag_col(lane, j);
    size_t row = transpose_matrix ? c : r, col = transpose_matrix ? r : c;
    dst[(matrix_origin.y + row) * elements_per_row + matrix_origin.x + col] = S(float(m.e[j]));
  }
}

namespace emu_detail {
template <class A, class B, class C>
struct mma_in {
  const A* a;
  const B* b;
  const C* c;  // null: multiply only
};
template <class D, class A, class B, class C>
void mma_res(void* const* in, void* const* out, uint32_t active) {
  if (active != 0xffffffffu) emu_fail("simdgroup matrix multiply with inactive lanes (active mask 0x%08x)", active);
  float a[8][8], b[8][8], c[8][8];
  for (uint32_t l = 0; l < 32; l++) {
    const mma_in<A, B, C>& x = IN<mma_in<A, B, C>>(in, l);
    int r = frag_row(l);
    for (int j = 0; j < 2; j++) {
      int col = frag_col(l, j);
      a[r][col] = float(x.a->e[j]);
      b[r][col] = float(x.b->e[j]);
      c[r][col] = x.c ? float(x.c->e[j]) : 0.0f;
    }
  }
  for (uint32_t l = 0; l < 32; l++) {
    int r = frag_row(l);
    auto& d = OUT<typename D::elems_t>(out, l);
    for (int j = 0; j < 2; j++) {
      int col = frag_col(l, j);
      float acc = c[r][col];
      for (int k = 0; k < 8; k++) acc = __builtin_fmaf(a[r][k], b[k][col], acc);
      d[j] = remove_reference_t<decltype(d[j])>(acc);
    }
  }
}
}  // namespace emu_detail

// d = a * b + c.
template <class TD, class TA, class TB, class TC>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                                          const simdgroup_matrix<TB, 8, 8>& b, const simdgroup_matrix<TC, 8, 8>& c,
                                          EMU_SITE) {
  typedef simdgroup_matrix<TD, 8, 8> D;
  typedef simdgroup_matrix<TA, 8, 8> A;
  typedef simdgroup_matrix<TB, 8, 8> B;
  typedef simdgroup_matrix<TC, 8, 8> C;
  emu_detail::mma_in<A, B, C> in{&a, &b, &c};
  d.e = emu_detail::collective<typename D::elems_t>(in, emu_detail::mma_res<D, A, B, C>, EMU_AT,
                                                    "simdgroup_multiply_accumulate");
}
// d = a * b.
template <class TD, class TA, class TB>
inline void simdgroup_multiply(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                               const simdgroup_matrix<TB, 8, 8>& b, EMU_SITE) {
  typedef simdgroup_matrix<TD, 8, 8> D;
  typedef simdgroup_matrix<TA, 8, 8> A;
  typedef simdgroup_matrix<TB, 8, 8> B;
  emu_detail::mma_in<A, B, D> in{&a, &b, nullptr};
  d.e = emu_detail::collective<typename D::elems_t>(in, emu_detail::mma_res<D, A, B, D>, EMU_AT,
                                                    "simdgroup_multiply");
}

// a * b of 8x8 simdgroup matrices: simdgroup_multiply (a collective; its call site is the
// operator's, shared by every product a kernel writes this way).
template <class T>
inline simdgroup_matrix<T, 8, 8> operator*(const simdgroup_matrix<T, 8, 8>& a, const simdgroup_matrix<T, 8, 8>& b) {
  simdgroup_matrix<T, 8, 8> d;
  simdgroup_multiply(d, a, b);
  return d;
}

}  // namespace metal
