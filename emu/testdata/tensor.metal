#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

// C = A B (+ C with ACC) with one simdgroup per 16x8 tile of C. A is M x K row-major, or stored
// transposed (K x M) with TL; B is K x N row-major, or stored transposed (N x K) with TR; C is
// M x N row-major. mnk = (M, N, K); edge tiles are clipped by the dynamic slices.
template <bool ACC, bool TL, bool TR>
kernel void mm_simd(device const float* a [[buffer(0)]],
                    device const float* b [[buffer(1)]],
                    device float* c [[buffer(2)]],
                    constant uint3& mnk [[buffer(3)]],
                    uint2 tg [[threadgroup_position_in_grid]]) {
  int M = mnk.x, N = mnk.y, K = mnk.z;
  auto A = tensor(a, dextents<int, 2>(TL ? M : K, TL ? K : M));
  auto B = tensor(b, dextents<int, 2>(TR ? K : N, TR ? N : K));
  auto C = tensor(c, dextents<int, 2>(N, M));
  auto tA = TL ? A.slice(tg.y * 16, 0) : A.slice(0, tg.y * 16);
  auto tB = TR ? B.slice(0, tg.x * 8) : B.slice(tg.x * 8, 0);
  auto tC = C.slice(tg.x * 8, tg.y * 16);
  constexpr auto desc = matmul2d_descriptor(16, 8, static_cast<int>(dynamic_extent), TL, TR, false,
                                            ACC ? matmul2d_descriptor::mode::multiply_accumulate
                                                : matmul2d_descriptor::mode::multiply);
  matmul2d<desc, execution_simdgroup> op;
  op.run(tA, tB, tC);
}
template [[host_name("mm_simd")]] [[kernel]] decltype(mm_simd<false, false, false>) mm_simd<false, false, false>;
template [[host_name("mm_simd_acc")]] [[kernel]] decltype(mm_simd<true, false, false>) mm_simd<true, false, false>;
template [[host_name("mm_simd_tl")]] [[kernel]] decltype(mm_simd<false, true, false>) mm_simd<false, true, false>;
template [[host_name("mm_simd_tr")]] [[kernel]] decltype(mm_simd<false, false, true>) mm_simd<false, false, true>;

// One 32x16 tile per threadgroup of 128 threads (scope S) into a cooperative tensor: with ACC the
// tensor starts from C (load) and the op accumulates; then each element becomes 2 * v + its column
// within the tile, and the tile is stored to C. A is M x K half, B is K x N half, row-major.
template <bool ACC, typename S>
kernel void mm_coop(device const half* a [[buffer(0)]],
                    device const half* b [[buffer(1)]],
                    device float* c [[buffer(2)]],
                    constant uint3& mnk [[buffer(3)]],
                    uint2 tg [[threadgroup_position_in_grid]]) {
  int M = mnk.x, N = mnk.y, K = mnk.z;
  auto A = tensor<device const half, dextents<int32_t, 2>, tensor_inline>(a, dextents<int32_t, 2>(K, M));
  auto B = tensor<device const half, dextents<int32_t, 2>, tensor_inline>(b, dextents<int32_t, 2>(N, K));
  auto C = tensor<device float, dextents<int32_t, 2>, tensor_inline>(c, dextents<int32_t, 2>(N, M));
  auto tA = A.slice(0, tg.y * 32);
  auto tB = B.slice(tg.x * 16, 0);
  auto tC = C.slice(tg.x * 16, tg.y * 32);
  constexpr auto desc = matmul2d_descriptor(32, 16, static_cast<int>(dynamic_extent), false, false, false,
                                            ACC ? matmul2d_descriptor::mode::multiply_accumulate
                                                : matmul2d_descriptor::mode::multiply);
  matmul2d<desc, S> op;
  auto cT = op.template get_destination_cooperative_tensor<decltype(tA), decltype(tB), float>();
  if (ACC) cT.load(tC);
  op.run(tA, tB, cT);
  for (uint16_t i = 0; i < cT.get_capacity(); ++i) {
    if (cT.is_valid_element(i)) {
      auto idx = cT.get_multidimensional_index(i);
      cT[i] = 2 * cT[i] + float(idx[0]);
    }
  }
  cT.store(tC);
}
template [[host_name("mm_coop_sg4")]] [[kernel]] decltype(mm_coop<false, execution_simdgroups<4>>) mm_coop<false, execution_simdgroups<4>>;
template [[host_name("mm_coop_sg4_acc")]] [[kernel]] decltype(mm_coop<true, execution_simdgroups<4>>) mm_coop<true, execution_simdgroups<4>>;
template [[host_name("mm_coop_tg")]] [[kernel]] decltype(mm_coop<false, execution_threadgroup>) mm_coop<false, execution_threadgroup>;

// S = A B for an 8x16 tile (A 8 x 4, B 4 x 16, row-major float) on one simdgroup, then its row
// and column reductions stored to out: [0, 8) row sums, [8, 16) row max with the default identity,
// [16, 24) row max with max_identity, [24, 40) column sums, [40, 56) column max with max_identity,
// [56, 64) row min with min_identity.
kernel void reduce(device const float* a [[buffer(0)]],
                   device const float* b [[buffer(1)]],
                   device float* out [[buffer(2)]]) {
  auto A = tensor(a, extents<int, 4, 8>());
  auto B = tensor(b, extents<int, 16, 4>());
  constexpr auto desc = matmul2d_descriptor(8, 16, 4);
  matmul2d<desc, execution_simdgroup> op;
  auto s = op.get_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  op.run(A, B, s);
  auto rsum = op.get_row_reduction_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  auto rmax0 = op.get_row_reduction_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  auto rmax = op.get_row_reduction_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  auto rmin = op.get_row_reduction_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  auto csum = op.get_column_reduction_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  auto cmax = op.get_column_reduction_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  reduce_rows(s, rsum);
  reduce_rows(s, rmax0, reduction_operation::max);
  reduce_rows(s, rmax, reduction_operation::max, reduction_operation_identity<float>::max_identity);
  reduce_rows(s, rmin, reduction_operation::min, reduction_operation_identity<float>::min_identity);
  reduce_columns(s, csum, reduction_operation::sum);
  reduce_columns(s, cmax, reduction_operation::max, reduction_operation_identity<float>::max_identity);
  rsum.store(tensor(out, dextents<int, 1>(8)));
  rmax0.store(tensor(out + 8, dextents<int, 1>(8)));
  rmax.store(tensor(out + 16, dextents<int, 1>(8)));
  csum.store(tensor(out + 24, dextents<int, 1>(16)));
  cmax.store(tensor(out + 40, dextents<int, 1>(16)));
  // Element-wise access to a reduction: each row's entry is held by one thread.
  for (uint16_t i = 0; i < rmin.get_capacity(); ++i)
    if (rmin.is_valid_element(i)) out[56 + rmin.get_multidimensional_index(i)[0]] = rmin[i];
}

// Wrong on purpose: assumes lane l holds row-major elements l * cap ... of the 16x16 tile instead of
// asking get_multidimensional_index. C is 16 x 16 row-major.
kernel void assumes_layout(device const float* a [[buffer(0)]],
                           device const float* b [[buffer(1)]],
                           device float* c [[buffer(2)]],
                           ushort lane [[thread_index_in_simdgroup]]) {
  auto A = tensor(a, extents<int, 8, 16>());
  auto B = tensor(b, extents<int, 16, 8>());
  constexpr auto desc = matmul2d_descriptor(16, 16, 8);
  matmul2d<desc, execution_simdgroup> op;
  auto s = op.get_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  op.run(A, B, s);
  uint cap = s.get_capacity();
  for (uint16_t i = 0; i < cap; ++i) c[lane * cap + i] = s[i];
}

// A static slice of 16 rows cut 8 rows before the end of a 12-row tensor.
kernel void static_slice_past_end(device const float* a [[buffer(0)]],
                                  device float* c [[buffer(1)]]) {
  auto A = tensor(a, dextents<int, 2>(4, 12));
  auto B = tensor(a, dextents<int, 2>(8, 4));
  auto C = tensor(c, dextents<int, 2>(8, 16));
  constexpr auto desc = matmul2d_descriptor(16, 8, 4);
  matmul2d<desc, execution_simdgroup> op;
  auto tA = A.slice<4, 16>(0, 4);
  op.run(tA, B, C);
}
