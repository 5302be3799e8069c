// CPU GEMM through Eigen. Row-major operands map without copies; a
// transposed operand is the same memory read column-major. A large product
// is split across the OpenMP threads by blocks of C (each block one
// single-threaded Eigen GEMM); many small ones are spread over the batch.
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
  // C[i][r0:r1, c0:c1] from the matching rows of op(A) and columns of op(B).
  auto block = [&](std::int64_t i, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    const std::int64_t mm = r1 - r0, nn = c1 - c0;
    const T* ap = a + i * sa + (ta ? r0 : r0 * lda);
    const T* bp = b + i * sb + (tb ? c0 * ldb : c0);
    T* cp = c + i * sc + r0 * ldc + c0;
    if (k == 0) {
      Eigen::Map<RowMat<T>, 0, Stride> C(cp, mm, nn, Stride(ldc));
      if (beta == T(0)) C.setZero();
      else C *= beta;
      return;
    }
    using CR = Eigen::Map<const RowMat<T>, 0, Stride>;
    using CC = Eigen::Map<const ColMat<T>, 0, Stride>;
    if (!ta && !tb) gemm_one(CR(ap, mm, k, Stride(lda)), CR(bp, k, nn, Stride(ldb)), alpha, beta, cp, mm, nn, ldc);
    else if (!ta && tb) gemm_one(CR(ap, mm, k, Stride(lda)), CC(bp, k, nn, Stride(ldb)), alpha, beta, cp, mm, nn, ldc);
    else if (ta && !tb) gemm_one(CC(ap, mm, k, Stride(lda)), CR(bp, k, nn, Stride(ldb)), alpha, beta, cp, mm, nn, ldc);
    else gemm_one(CC(ap, mm, k, Stride(lda)), CC(bp, k, nn, Stride(ldb)), alpha, beta, cp, mm, nn, ldc);
  };
  const std::int64_t work = m * n * k;
  if (batch > 1 && work < 64 * 64 * 64) {
    parallel_for(batch, std::max<std::int64_t>(1, 64 * 64 * 64 / (work > 0 ? work : 1)),
                 [&](std::int64_t lo, std::int64_t hi) {
                   for (std::int64_t i = lo; i < hi; ++i) block(i, 0, m, 0, n);
                 });
    return;
  }
  // One large product: split the larger side of C across the threads
  // ourselves. Eigen's own split leaves a thread idle when one side is short
  // (a classifier's [64, 8192] x [8192, 512] ran on one core).
  // Square-ish products stay with Eigen, whose threads share packed panels
  // (its split is ~1.5x faster at 1024^3).
  const bool split = work >= (std::int64_t{1} << 22) && std::min(m, n) <= 128 && std::max(m, n) >= 32;
  for (std::int64_t i = 0; i < batch; ++i) {
    if (!split) {
      block(i, 0, m, 0, n);
    } else if (m >= n) {
      parallel_for(m, 16, [&](std::int64_t lo, std::int64_t hi) { block(i, lo, hi, 0, n); });
    } else {
      parallel_for(n, 16, [&](std::int64_t lo, std::int64_t hi) { block(i, 0, m, lo, hi); });
    }
  }
}

}  // namespace frost::cpu
