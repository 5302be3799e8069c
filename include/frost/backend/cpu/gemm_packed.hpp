// y = x W^T with W packed once into the panels Eigen's GEMM kernel reads
// (what every Eigen GEMM call otherwise makes of W again: for a classifier's
// 16 MiB weight, a third of the product's time). Frozen plans pack their
// constant linear weights at freeze; the panel layout depends on this
// build's SIMD width, so plans recompute it on load instead of saving it.
//
// In Eigen's column-major terms y^T [n x m] = W [n x k] x^T [k x m]: W is
// the left operand, packed per block of kRows rows and kDepth columns (each
// block 64-byte aligned); x^T is packed per depth block on every call (it is
// small: m x kDepth).
#pragma once
#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

#include "conv_common.hpp"
#include "parallel.hpp"

namespace frost::cpu {

namespace gemm_packed_detail {
using Index = std::int64_t;
template <class T>
using Traits = Eigen::internal::gebp_traits<T, T>;
template <class T>
using WMapper = Eigen::internal::const_blas_data_mapper<T, Index, Eigen::RowMajor>;  // W [n, k] row-major
template <class T>
using XMapper = Eigen::internal::const_blas_data_mapper<T, Index, Eigen::ColMajor>;  // x^T: x [m, k] row-major
template <class T>
using YMapper = Eigen::internal::blas_data_mapper<T, Index, Eigen::ColMajor>;  // y^T: y [m, n] row-major

constexpr Index kRows = 128, kDepth = 256;  // W's blocks: 128 KiB of floats, in L2 while the kernel sweeps x

inline Index round64(Index elems, Index bytes_per) { return (elems * bytes_per + 63) / 64 * 64 / bytes_per; }
/// Elements before W's block (row block r, depth block d).
template <class T>
Index block_offset(Index r, Index d, Index n, Index k) {
  // A full row block: its whole depth blocks (64-byte multiples already), then the short last one.
  const Index full = k / kDepth * kRows * kDepth + round64(kRows * (k % kDepth), sizeof(T));
  return r * full + d * round64(std::min(kRows, n - r * kRows) * kDepth, sizeof(T));
}
}  // namespace gemm_packed_detail

/// Elements of W's packed form ([n, k] weights).
template <class T>
std::int64_t gemm_packed_size(std::int64_t n, std::int64_t k) {
  if (n <= 0 || k <= 0) return 0;
  return gemm_packed_detail::block_offset<T>((n + gemm_packed_detail::kRows - 1) / gemm_packed_detail::kRows, 0, n, k);
}

/// packed = W [n, k] (row-major) in Eigen's left-operand panels; `packed` 64-byte aligned.
template <class T>
void gemm_pack(const T* w, std::int64_t n, std::int64_t k, T* packed) {
  using namespace gemm_packed_detail;
  using Tr = Traits<T>;
  Eigen::internal::gemm_pack_lhs<T, Index, WMapper<T>, Tr::mr, Tr::LhsProgress, typename Tr::LhsPacket4Packing,
                                 Eigen::RowMajor>
      pack;
  const WMapper<T> lhs(w, k);
  for (Index i2 = 0; i2 < n; i2 += kRows)
    for (Index k2 = 0; k2 < k; k2 += kDepth)
      pack(packed + block_offset<T>(i2 / kRows, k2 / kDepth, n, k), lhs.getSubMapper(i2, k2), std::min(kDepth, k - k2),
           std::min(kRows, n - i2));
}

/// y [m, n] (row stride ldy) = x [m, k] (row stride ldx) W^T, W packed by
/// gemm_pack. W's row blocks are split over the threads; each packs x^T
/// one depth block at a time.
template <class T>
void gemm_packed(std::int64_t m, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx, const T* packed, T* y,
                 std::int64_t ldy) {
  using namespace gemm_packed_detail;
  using Tr = Traits<T>;
  if (m <= 0 || n <= 0) return;
  const Index blocks = (n + kRows - 1) / kRows;
  auto work = [&](Index b0, Index b1) {
    for (Index i = 0; i < m; ++i) std::fill(y + i * ldy + b0 * kRows, y + i * ldy + std::min(n, b1 * kRows), T(0));
    if (k == 0) return;
    Eigen::internal::gemm_pack_rhs<T, Index, XMapper<T>, Tr::nr, Eigen::ColMajor> pack_x;
    Eigen::internal::gebp_kernel<T, T, Index, YMapper<T>, Tr::mr, Tr::nr> kernel;
    conv_detail::Scratch<T> xp(kDepth * m);
    const XMapper<T> xm(x, ldx);
    const YMapper<T> ym(y, ldy);
    for (Index k2 = 0; k2 < k; k2 += kDepth) {
      const Index kc = std::min(kDepth, k - k2);
      pack_x(xp.get(), xm.getSubMapper(k2, 0), kc, m);
      for (Index b = b0; b < b1; ++b)
        kernel(ym.getSubMapper(b * kRows, 0), packed + block_offset<T>(b, k2 / kDepth, n, k), xp.get(),
               std::min(kRows, n - b * kRows), kc, m, T(1));
    }
  };
  parallel_for(blocks, 1, work);
}

}  // namespace frost::cpu
