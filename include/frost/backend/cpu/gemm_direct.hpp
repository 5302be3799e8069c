// M [O, P] = U [O, C] V [C, P], all row-major, with no packing: for the
// Winograd GEMMs (36 per block of images, each a few hundred KFLOP) that
// Eigen's GEMM would pack both operands of, and zero M before, on every
// call. With AVX-512's 32 registers, 8 rows of M x 3 vectors of its
// columns stay in 24 registers while C steps past: per step 3 vector loads
// of a row of V, 8 broadcasts from U and 24 multiply-adds. With 16
// registers the block is 6 rows x 2 vectors (12 sums, 2 of V's vectors and
// the broadcast). V's rows are read from where they lie (a block of vectors
// by C rows stays in L1 across the row blocks).
#pragma once
#include <algorithm>
#include <cstdint>

#include "vec.hpp"

namespace frost::cpu {

namespace gemm_direct_detail {
inline constexpr std::int64_t kRows = kVecRegs >= 32 ? 8 : 6;  // rows of M a block
inline constexpr int kCols = kVecRegs >= 32 ? 3 : 2;             // vectors of its columns a block

/// M rows [o0, o0 + kRows), columns [q0, q0 + QB vectors).
template <int QB, class T>
void block(std::int64_t C, const T* U, std::int64_t ldu, const T* V, std::int64_t ldv, T* M, std::int64_t ldm,
           std::int64_t o0, std::int64_t q0) {
  constexpr std::int64_t L = kVecLanes<T>;
  SimdVec<T> acc[kRows][QB];
  for (int f = 0; f < kRows; ++f)
    for (int b = 0; b < QB; ++b) acc[f][b] = SimdVec<T>{};
  const T* u = U + o0 * ldu;
  for (std::int64_t c = 0; c < C; ++c) {
    SimdVec<T> v[QB];
    for (int b = 0; b < QB; ++b) {
      load_vec(v[b], V + c * ldv + q0 + b * L);
      in_register(v[b]);
    }
    for (int f = 0; f < kRows; ++f) {
      const T w = u[f * ldu + c];
      for (int b = 0; b < QB; ++b) acc[f][b] += w * v[b];
    }
  }
  for (int f = 0; f < kRows; ++f)
    for (int b = 0; b < QB; ++b) store_vec(M + (o0 + f) * ldm + q0 + b * L, acc[f][b]);
}
}  // namespace gemm_direct_detail

/// True when gemm_direct takes an M of O rows.
inline bool gemm_direct_fits(std::int64_t O) { return O >= gemm_direct_detail::kRows; }

/// M = U V for O >= kRows rows and the columns [0, cols) rounded up to whole
/// vectors: V's and M's rows must hold that many (what V holds past cols
/// goes into M past cols). Rows in blocks of kRows, the last block overlapping
/// the one before (the same sums again).
template <class T>
void gemm_direct(std::int64_t O, std::int64_t C, std::int64_t cols, const T* U, std::int64_t ldu, const T* V,
                 std::int64_t ldv, T* M, std::int64_t ldm) {
  using namespace gemm_direct_detail;
  constexpr std::int64_t L = kVecLanes<T>;
  const std::int64_t vecs = (cols + L - 1) / L;
  for (std::int64_t ob = 0; ob < O; ob += kRows) {
    const std::int64_t o0 = std::min(ob, O - kRows);
    std::int64_t q = 0;
    for (; q + kCols <= vecs; q += kCols) block<kCols>(C, U, ldu, V, ldv, M, ldm, o0, q * L);
    if (kCols > 2 && vecs - q == 2) block<2>(C, U, ldu, V, ldv, M, ldm, o0, q * L);
    else if (vecs - q == 1) block<1>(C, U, ldu, V, ldv, M, ldm, o0, q * L);
  }
}

}  // namespace frost::cpu
