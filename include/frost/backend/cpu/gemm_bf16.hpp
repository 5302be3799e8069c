// bfloat16 GEMM on AVX-512 BF16: C = alpha op(A) op(B) + beta C with
// bfloat16 operands, float32 sums and one rounding into C (PyTorch's rule
// for a bfloat16 matmul).
//
// The kernel is in dot-product form: vdpbf16ps multiplies 32 bfloat16 pairs
// of a row of op(A) and a column of op(B), both contiguous along k, into 16
// float lanes; a tile of 4 rows x 4 columns keeps 16 such sums in registers
// (8 loads feed 16 vdpbf16ps, so it is bound by the multiplies, not the
// loads), and each is reduced across its lanes once, at the end of k. That
// is the layout a linear layer has as it is (x [m, k] times W [n, k]
// transposed), so its forward packs nothing; other operand layouts are
// first copied into it. As the instruction does, bfloat16 subnormals count
// as zero in the products (values below 1.2e-38; the float path keeps
// them). Elsewhere (no AVX512_BF16 at compile time) frost widens to float
// (widened.hpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../../core/half.hpp"
#include "parallel.hpp"

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define FROST_HAVE_BF16_GEMM 1
#endif

namespace frost::cpu {

#ifdef FROST_HAVE_BF16_GEMM
namespace bf16gemm {

/// The rows of op(X) [rows, k] contiguous along k: X itself when it is so
/// laid out (leading dim ld), else a copy into `buf`.
inline const bfloat16* rows_along_k(bool trans, std::int64_t rows, std::int64_t k, const bfloat16* x,
                                    std::int64_t ld, std::vector<bfloat16>& buf, std::int64_t& ld_out) {
  if (!trans) {
    ld_out = ld;
    return x;
  }
  // x is stored [k, rows]: transpose it.
  buf.resize(static_cast<std::size_t>(rows * k));
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(k, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t r = lo; r < hi; ++r)
                   for (std::int64_t j = 0; j < k; ++j) buf[static_cast<std::size_t>(r * k + j)] = x[j * ld + r];
               });
  ld_out = k;
  return buf.data();
}

/// The 32 bfloat16 of row + j (fewer at the end of k: zeros past it).
inline __m512bh load32(const bfloat16* row, std::int64_t j, std::int64_t k) {
  const std::int64_t left = k - j;
  if (left >= 32) return (__m512bh)_mm512_loadu_si512(row + j);
  const __mmask32 m = static_cast<__mmask32>((std::uint64_t{1} << left) - 1);
  return (__m512bh)_mm512_maskz_loadu_epi16(m, row + j);
}

/// sums[r][c] = sum_j a[r][j] b[c][j] for a tile of MR rows and NR columns.
template <int MR, int NR>
inline void tile(const bfloat16* a, std::int64_t lda, const bfloat16* b, std::int64_t ldb, std::int64_t k,
                 float (&sums)[4][4]) {
  __m512 acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  for (std::int64_t j = 0; j < k; j += 32) {
    __m512bh av[MR], bv[NR];
    for (int r = 0; r < MR; ++r) av[r] = load32(a + r * lda, j, k);
    for (int c = 0; c < NR; ++c) bv[c] = load32(b + c * ldb, j, k);
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av[r], bv[c]);
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) sums[r][c] = _mm512_reduce_add_ps(acc[r][c]);
}

template <int MR>
inline void tile_rows(int nr, const bfloat16* a, std::int64_t lda, const bfloat16* b, std::int64_t ldb,
                      std::int64_t k, float (&sums)[4][4]) {
  switch (nr) {
    case 4: return tile<MR, 4>(a, lda, b, ldb, k, sums);
    case 3: return tile<MR, 3>(a, lda, b, ldb, k, sums);
    case 2: return tile<MR, 2>(a, lda, b, ldb, k, sums);
    default: return tile<MR, 1>(a, lda, b, ldb, k, sums);
  }
}

/// One matrix: c [m, n] = alpha a b^T + beta c, a [m, k] and b [n, k] along k.
inline void gemm_nt(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const bfloat16* a,
                    std::int64_t lda, const bfloat16* b, std::int64_t ldb, float beta, bfloat16* c,
                    std::int64_t ldc) {
  const std::int64_t row_tiles = (m + 3) / 4, col_tiles = (n + 3) / 4;
  // Columns outermost: a thread's tiles share their columns of b (the weight).
  const std::int64_t grain = std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(1, 16 * k));
  parallel_for(row_tiles * col_tiles, grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t i0 = (t % row_tiles) * 4, j0 = (t / row_tiles) * 4;
      const int mr = static_cast<int>(std::min<std::int64_t>(4, m - i0));
      const int nr = static_cast<int>(std::min<std::int64_t>(4, n - j0));
      float s[4][4];
      const bfloat16* at = a + i0 * lda;
      const bfloat16* bt = b + j0 * ldb;
      switch (mr) {
        case 4: tile_rows<4>(nr, at, lda, bt, ldb, k, s); break;
        case 3: tile_rows<3>(nr, at, lda, bt, ldb, k, s); break;
        case 2: tile_rows<2>(nr, at, lda, bt, ldb, k, s); break;
        default: tile_rows<1>(nr, at, lda, bt, ldb, k, s); break;
      }
      for (int r = 0; r < mr; ++r)
        for (int q = 0; q < nr; ++q) {
          bfloat16& out = c[(i0 + r) * ldc + j0 + q];
          // beta = 0 ignores C's old values (NaN included), as BLAS.
          out = bfloat16(beta == 0.0f ? alpha * s[r][q] : alpha * s[r][q] + beta * float(out));
        }
    }
  });
}

}  // namespace bf16gemm

/// The backend's gemm (backend.hpp) for bfloat16 operands.
inline void gemm_bf16(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const bfloat16* a, std::int64_t lda, std::int64_t sa, const bfloat16* b, std::int64_t ldb,
                      std::int64_t sb, float beta, bfloat16* c, std::int64_t ldc, std::int64_t sc,
                      std::int64_t batch) {
  std::vector<bfloat16> abuf, bbuf;
  for (std::int64_t i = 0; i < batch; ++i) {
    std::int64_t la = 0, lb = 0;
    // op(A) as rows along k; op(B)^T likewise (B stored [n, k] when transposed).
    const bfloat16* ar = bf16gemm::rows_along_k(ta, m, k, a + i * sa, lda, abuf, la);
    const bfloat16* br = bf16gemm::rows_along_k(!tb, n, k, b + i * sb, ldb, bbuf, lb);
    bf16gemm::gemm_nt(m, n, k, alpha, ar, la, br, lb, beta, c + i * sc, ldc);
  }
}
#endif  // FROST_HAVE_BF16_GEMM

}  // namespace frost::cpu
