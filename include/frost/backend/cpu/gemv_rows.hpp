// y = x W^T for one row x (a linear layer at batch 1: bound by reading W),
// W [n, k] stored once as W^T in groups of kilobyte rows: group g holds
// outputs [g G, g G + G) of every input, [k][G] (G = 256 floats or 128
// doubles; the last group only as wide as the outputs left, padded to 16).
// An input's weights for a group are then one contiguous kilobyte, so an
// input that is exactly zero (a quarter to a half of them after a ReLU, or a
// max pool of one) is skipped whole: its kilobyte is never read. Skipping
// one in gemv_panels.hpp's panels of 16 outputs leaves a 64-byte hole in each
// panel's stream, which the hardware prefetchers fetch anyway: for the
// ResearchModel's 8192 -> 512 classifier at batch 1, its input 26% zeros, 2
// threads: 307 us dense, 276 us skipping in panels, 244 us skipping here.
// Skipping is exact (0 * w adds nothing to a sum) only while every weight
// is finite, so a flag after the rows says whether they are; when not, the
// zeros are read too, and 0 * inf gives eager's NaN.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "gemv_panels.hpp"
#include "vec.hpp"

namespace frost::cpu {

/// Outputs a group (a kilobyte of T): 16 vectors of sums in registers with
/// AVX-512 (two or four passes of 8 with 16 registers).
template <class T>
inline constexpr std::int64_t kGemvGroup = 1024 / sizeof(T);

template <class T>
std::int64_t gemv_rows_size(std::int64_t n, std::int64_t k) {
  return n <= 0 || k <= 0 ? 0 : gemv_panels_size<T>(n, k) + 1;  // + the all-finite flag
}

/// rows = W [n, k] (row-major) as gemv_rows reads it.
template <class T>
void gemv_rows_pack(const T* w, std::int64_t n, std::int64_t k, T* rows) {
  const std::int64_t np = (n + kGemvPanel - 1) / kGemvPanel * kGemvPanel;
  bool finite = true;
  for (std::int64_t g0 = 0; g0 < np; g0 += kGemvGroup<T>) {
    const std::int64_t wg = std::min(kGemvGroup<T>, np - g0);
    T* group = rows + g0 * k;
    // Blocks of 64 inputs: W read along its rows, the group written 64 rows at a time.
    for (std::int64_t i0 = 0; i0 < k; i0 += 64)
      for (std::int64_t j = 0; j < wg; ++j)
        for (std::int64_t i = i0; i < std::min(k, i0 + 64); ++i) {
          const T v = g0 + j < n ? w[(g0 + j) * k + i] : T(0);
          finite = finite && std::isfinite(v);
          group[i * wg + j] = v;
        }
  }
  rows[np * k] = finite ? T(1) : T(0);
}

namespace gemv_rows_detail {
inline constexpr std::int64_t kChunk = 1024;  // inputs listed at a time (4 KiB of indices)

/// idx[0, count) = the inputs of x[0, n) to read (n <= kChunk), relative to
/// x: the nonzero ones, or all of them when `all`. idx has kChunk + 16 slots.
template <class T>
std::int64_t inputs_to_read(const T* x, std::int64_t n, bool all, std::int32_t* idx) {
  std::int64_t count = 0, i = 0;
  if (all) {
    for (; i < n; ++i) idx[i] = static_cast<std::int32_t>(i);
    return n;
  }
#if defined(__AVX512F__)
  // 16 inputs at a time: a mask of the nonzero ones packs their indices (a
  // branchless scalar loop takes 2 cycles an input: 5 us at 8192). The mask
  // stays a __mmask16 and is counted through a general register (kmovw
  // zero-extends): GCC 12 at -O1 with sanitizers spilled a mask with a
  // narrower store than the load it popcounted, its top bits garbage.
  __m512i at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  for (; i + 16 <= n; i += 16, at = _mm512_add_epi32(at, step)) {
    __mmask16 m;  // NaN counts as nonzero
    if constexpr (sizeof(T) == 4) {
      m = _mm512_cmpneq_ps_mask(_mm512_loadu_ps(x + i), _mm512_setzero_ps());
    } else {  // two 8-bit masks joined (kunpckbw reads only their low bytes)
      const __m512d z = _mm512_setzero_pd();
      m = _mm512_kunpackb(_mm512_cmpneq_pd_mask(_mm512_loadu_pd(x + i + 8), z), _mm512_cmpneq_pd_mask(_mm512_loadu_pd(x + i), z));
    }
    _mm512_storeu_si512(idx + count, _mm512_maskz_compress_epi32(m, at));
    count += __builtin_popcount(_cvtmask16_u32(m));
  }
#endif
  for (; i < n; ++i) {
    idx[count] = static_cast<std::int32_t>(i);
    count += x[i] != T(0);  // NaN counts as nonzero
  }
  return count;
}

/// acc[v] += x[i] * rows[i * ld + v vectors] for the listed inputs i.
template <int V, class T>
void accumulate(const T* rows, std::int64_t ld, const T* x, const std::int32_t* idx, std::int64_t count,
                SimdVec<T> (&acc)[V]) {
  for (std::int64_t j = 0; j < count; ++j) {
    const std::int64_t i = idx[j];
    SimdVec<T> xi;
    splat(xi, x[i]);
    const T* r = rows + i * ld;
    for (int v = 0; v < V; ++v) {
      SimdVec<T> w;
      load_vec(w, r + v * kVecLanes<T>);
      acc[v] += xi * w;
    }
  }
}

/// y[c, c + V vectors) (those before n1) = x[k0, k1) times the group's
/// columns from c (`rows` points at column c of the group's row 0).
template <int V, class T>
void columns(const T* rows, std::int64_t ld, const T* x, std::int64_t k0, std::int64_t k1, bool all, T* y,
             std::int64_t c, std::int64_t n1) {
  SimdVec<T> acc[V];
  for (auto& a : acc) a = SimdVec<T>{};
  alignas(64) std::int32_t idx[kChunk + 16];
  for (std::int64_t i0 = k0; i0 < k1; i0 += kChunk) {
    const std::int64_t count = inputs_to_read(x + i0, std::min(kChunk, k1 - i0), all, idx);
    accumulate<V>(rows + i0 * ld, ld, x + i0, idx, count, acc);
  }
  const std::int64_t cols = std::min<std::int64_t>(V * kVecLanes<T>, n1 - c);
  if (cols == V * kVecLanes<T>) {
    for (int v = 0; v < V; ++v) store_vec(y + c + v * kVecLanes<T>, acc[v]);
    return;
  }
  T out[V * kVecLanes<T>];  // vector by vector: acc's address never taken (gemv_panels.hpp's block says why)
  for (int v = 0; v < V; ++v) store_vec(out + v * kVecLanes<T>, acc[v]);
  std::copy_n(out, cols, y + c);
}
}  // namespace gemv_rows_detail

/// y[n0:n1] = x[k0:k1] W[n0:n1, k0:k1]^T for one row x, W as gemv_rows_pack
/// left it (y and x at column 0). n0 is a multiple of kGemvPanel; outputs
/// outside [n0, n1) are left alone. Splitting the inputs gives partial sums
/// that the caller adds up.
template <class T>
void gemv_rows(std::int64_t n, std::int64_t k, const T* x, const T* rows, T* y, std::int64_t n0, std::int64_t n1,
               std::int64_t k0, std::int64_t k1) {
  using namespace gemv_rows_detail;
  constexpr std::int64_t L = kVecLanes<T>;
  const std::int64_t np = (n + kGemvPanel - 1) / kGemvPanel * kGemvPanel;
  const bool all = rows[np * k] == T(0);  // a weight is not finite: zeros must be read
  for (std::int64_t g0 = n0 / kGemvGroup<T> * kGemvGroup<T>; g0 < n1; g0 += kGemvGroup<T>) {
    const std::int64_t wg = std::min(kGemvGroup<T>, np - g0);
    const std::int64_t c1 = std::min(g0 + wg, (n1 + L - 1) / L * L);
    // Normally one pass of 16 vectors over the inputs with AVX-512 (a
    // thread's share of 256 floats), passes of 8 with 16 registers; a part
    // that ends inside a group takes smaller ones.
    for (std::int64_t c = std::max(n0, g0); c < c1;) {
      const T* at = rows + g0 * k + (c - g0);
      const std::int64_t left = (c1 - c) / L;
      if (kVecRegs >= 32 && left >= 16) columns<16>(at, wg, x, k0, k1, all, y, c, n1), c += 16 * L;
      else if (left >= 8) columns<8>(at, wg, x, k0, k1, all, y, c, n1), c += 8 * L;
      else if (left >= 4) columns<4>(at, wg, x, k0, k1, all, y, c, n1), c += 4 * L;
      else if (left >= 2) columns<2>(at, wg, x, k0, k1, all, y, c, n1), c += 2 * L;
      else columns<1>(at, wg, x, k0, k1, all, y, c, n1), c += L;
    }
  }
}

}  // namespace frost::cpu
