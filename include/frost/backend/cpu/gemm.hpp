// CPU GEMM through Eigen. Row-major operands map without copies; a
// transposed operand is the same memory read column-major. Eigen's GEMM
// uses all OpenMP threads on large products; many small ones are spread over
// the batch instead.
#pragma once
#include <cstdint>

#include <Eigen/Core>

#include "parallel.hpp"

namespace frost::cpu {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using Stride = Eigen::OuterStride<>;

// op(A) is m x k: stored row-major (m x k, ld) or, when transposed, as the
// row-major k x m matrix, which is the column-major m x k matrix with that ld.
template <class T, class LhsMap, class RhsMap>
void gemm_one(const LhsMap& A, const RhsMap& B, T alpha, T beta, T* c, std::int64_t m, std::int64_t n,
              std::int64_t ldc) {
  Eigen::Map<RowMat<T>, 0, Stride> C(c, m, n, Stride(ldc));
  if (beta == T(0)) {
    if (alpha == T(1)) C.noalias() = A * B;
    else C.noalias() = alpha * (A * B);
  } else {
    if (beta != T(1)) C *= beta;
    C.noalias() += alpha * (A * B);
  }
}

template <class T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta, T* c, std::int64_t ldc,
          std::int64_t sc, std::int64_t batch) {
  if (m == 0 || n == 0) return;
  auto one = [&](std::int64_t i) {
    const T* ap = a + i * sa;
    const T* bp = b + i * sb;
    T* cp = c + i * sc;
    if (k == 0) {
      Eigen::Map<RowMat<T>, 0, Stride> C(cp, m, n, Stride(ldc));
      if (beta == T(0)) C.setZero();
      else C *= beta;
      return;
    }
    using CR = Eigen::Map<const RowMat<T>, 0, Stride>;
    using CC = Eigen::Map<const ColMat<T>, 0, Stride>;
    if (!ta && !tb) gemm_one(CR(ap, m, k, Stride(lda)), CR(bp, k, n, Stride(ldb)), alpha, beta, cp, m, n, ldc);
    else if (!ta && tb) gemm_one(CR(ap, m, k, Stride(lda)), CC(bp, k, n, Stride(ldb)), alpha, beta, cp, m, n, ldc);
    else if (ta && !tb) gemm_one(CC(ap, m, k, Stride(lda)), CR(bp, k, n, Stride(ldb)), alpha, beta, cp, m, n, ldc);
    else gemm_one(CC(ap, m, k, Stride(lda)), CC(bp, k, n, Stride(ldb)), alpha, beta, cp, m, n, ldc);
  };
  const std::int64_t work = m * n * k;
  if (batch > 1 && work < 64 * 64 * 64) {
    parallel_for(batch, std::max<std::int64_t>(1, 64 * 64 * 64 / (work > 0 ? work : 1)),
                 [&](std::int64_t lo, std::int64_t hi) {
                   for (std::int64_t i = lo; i < hi; ++i) one(i);
                 });
  } else {
    for (std::int64_t i = 0; i < batch; ++i) one(i);
  }
}

}  // namespace frost::cpu
