// y = x W^T for a few rows of x (a linear layer at batch 1-8: bound by
// reading W) with W [n, k] stored once as panels of W^T: panel p holds
// W[16 p : 16 p + 16, :] transposed, [k][16] (the last one zero-padded).
// A share of the outputs (whole panels) or of the inputs (rows of every
// panel) is then read front to back, a vector at a time, with no horizontal
// sums (AVX-512): on this machine 128 outputs x 784 inputs take 3.5 us against 4.0 us
// for Eigen's matrix-vector product on W itself, near the 3.6 us it takes
// to stream those bytes from L2.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "parallel.hpp"
#include "vec.hpp"

namespace frost::cpu {

inline constexpr std::int64_t kGemvPanel = 16;  // outputs per panel: parts of the outputs start at multiples of it
inline constexpr std::int64_t kGemvRows = 8;    // products of at most this many rows of x take the panels

namespace gemv_detail {
template <class T>
inline constexpr int kPanelVecs = kGemvPanel * sizeof(T) / sizeof(SimdVec<T>);  // vectors a panel row
/// Panels a block of 1 row of x: 8 (R rows: 8 / R), eight vector sums a
/// block (sixteen for double) with AVX-512's 32 registers; with 16, eight
/// vector sums whatever T.
template <class T>
inline constexpr int kBlockPanels = kVecRegs >= 32 ? 8 : 8 / kPanelVecs<T>;
/// The most rows of x (4, 2 or 1) a gemv block takes: R sums a panel
/// vector, R broadcasts of x and a panel vector fit in the registers.
template <class T>
inline constexpr int kGemvBlockRows = 4 * kPanelVecs<T> + 5 <= kVecRegs ? 4 : 2 * kPanelVecs<T> + 3 <= kVecRegs ? 2 : 1;
/// gemm_panels' row block: 8 rows x 3 panels (24 sums) with AVX-512 (8 x 1
/// for double); with 16 registers the panel's vectors and a broadcast
/// leave room for 6 rows of float (12 sums) or 2 of double (8).
template <class T>
inline constexpr int kGemmPanels = kVecRegs >= 32 && sizeof(T) == 4 ? 3 : 1;
template <class T>
inline constexpr int kGemmBlockRows = kVecRegs >= 32 ? 8 : std::max(1, (kVecRegs - kPanelVecs<T> - 1) / kPanelVecs<T>);
}  // namespace gemv_detail

template <class T>
std::int64_t gemv_panels_size(std::int64_t n, std::int64_t k) {
  return n <= 0 || k <= 0 ? 0 : (n + kGemvPanel - 1) / kGemvPanel * kGemvPanel * k;
}

/// panels = W [n, k] (row-major) as gemv_panels reads it.
template <class T>
void gemv_pack(const T* w, std::int64_t n, std::int64_t k, T* panels) {
  for (std::int64_t p = 0; p * kGemvPanel < n; ++p)
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = 0; j < kGemvPanel; ++j) {
        const std::int64_t o = p * kGemvPanel + j;
        panels[(p * k + i) * kGemvPanel + j] = o < n ? w[o * k + i] : T(0);
      }
}

namespace gemv_detail {
/// R rows of x against Q panels from `pan`, inputs [k0, k1): the sums stay
/// in R * Q vector registers while the panels stream past. Outputs from
/// col0, those before n1 stored (with `add`, added to what y holds).
template <int R, int Q, class T>
void block(std::int64_t k, std::int64_t k0, std::int64_t k1, const T* x, std::int64_t ldx, const T* pan, T* y,
           std::int64_t ldy, std::int64_t col0, std::int64_t n1, bool add = false) {
  // The sums as GCC vector types: one register each, whatever T's width.
  using Vec = SimdVec<T>;
  constexpr int VP = kPanelVecs<T>;
  const std::int64_t cols = std::min<std::int64_t>(Q * kGemvPanel, n1 - col0);
  Vec acc[R][Q][VP];
  if (!add) {
    FROST_UNROLL
    for (int r = 0; r < R; ++r)
      FROST_UNROLL
      for (int q = 0; q < Q; ++q)
        FROST_UNROLL
        for (int v = 0; v < VP; ++v) acc[r][q][v] = Vec{};
  } else if (cols == Q * kGemvPanel) {
    FROST_UNROLL
    for (int r = 0; r < R; ++r)
      FROST_UNROLL
      for (int q = 0; q < Q; ++q)
        FROST_UNROLL
        for (int v = 0; v < VP; ++v) load_vec(acc[r][q][v], y + r * ldy + col0 + (q * VP + v) * kVecLanes<T>);
  } else {  // a short last panel: y has no room past n1
    // Vector by vector, never acc's bytes as a whole: an array whose
    // address is taken (a memcpy) stays in memory, every sum a load and a
    // store per multiply-add (3x slower with AVX2).
    T in[R][Q * kGemvPanel] = {};
    for (int r = 0; r < R; ++r) std::copy_n(y + r * ldy + col0, cols, in[r]);
    FROST_UNROLL
    for (int r = 0; r < R; ++r)
      FROST_UNROLL
      for (int q = 0; q < Q; ++q)
        FROST_UNROLL
        for (int v = 0; v < VP; ++v) load_vec(acc[r][q][v], in[r] + (q * VP + v) * kVecLanes<T>);
  }
  auto step = [&](Vec(&a)[R][Q][VP], std::int64_t i) {
    // Whichever of x's R broadcasts and the Q panels' vectors are fewer stay
    // in registers while the others pass (AVX-512: the broadcasts, which its
    // multiply-adds can also take from memory).
    if constexpr (kVecRegs >= 32 || R <= Q * VP) {
      Vec xr[R];
      FROST_UNROLL
      for (int r = 0; r < R; ++r) splat(xr[r], x[r * ldx + i]);
      FROST_UNROLL
      for (int q = 0; q < Q; ++q) {
        FROST_UNROLL
        for (int v = 0; v < VP; ++v) {
          Vec w;
          load_vec(w, pan + (q * k + i) * kGemvPanel + v * (kGemvPanel / VP));
          in_register(w);  // one load for the R multiply-adds, not one each
          FROST_UNROLL
          for (int r = 0; r < R; ++r) a[r][q][v] += xr[r] * w;
        }
      }
    } else {
      Vec w[Q][VP];
      FROST_UNROLL
      for (int q = 0; q < Q; ++q) {
        FROST_UNROLL
        for (int v = 0; v < VP; ++v) {
          load_vec(w[q][v], pan + (q * k + i) * kGemvPanel + v * (kGemvPanel / VP));
          in_register(w[q][v]);
        }
      }
      FROST_UNROLL
      for (int r = 0; r < R; ++r) {
        Vec xr;
        splat(xr, x[r * ldx + i]);
        FROST_UNROLL
        for (int q = 0; q < Q; ++q) {
          FROST_UNROLL
          for (int v = 0; v < VP; ++v) a[r][q][v] += xr * w[q][v];
        }
      }
    }
  };
  // Fewer than 4 sums would wait on each multiply-add's latency (4 cycles):
  // a small block (a 10-output last layer) keeps U sets, over alternate inputs.
  constexpr int U = R * Q * VP >= 4 ? 1 : 4 / (R * Q * VP);
  std::int64_t i = k0;
  if constexpr (U > 1) {
    Vec more[U - 1][R][Q][VP] = {};
    for (; i + U <= k1; i += U) {
      step(acc, i);
      FROST_UNROLL
      for (int u = 1; u < U; ++u) step(more[u - 1], i + u);
    }
    FROST_UNROLL
    for (int u = 0; u < U - 1; ++u)
      FROST_UNROLL
      for (int r = 0; r < R; ++r)
        FROST_UNROLL
        for (int q = 0; q < Q; ++q)
          FROST_UNROLL
          for (int v = 0; v < VP; ++v) acc[r][q][v] += more[u][r][q][v];
  }
  for (; i < k1; ++i) step(acc, i);
  if (cols == Q * kGemvPanel) {
    FROST_UNROLL
    for (int r = 0; r < R; ++r)
      FROST_UNROLL
      for (int q = 0; q < Q; ++q)
        FROST_UNROLL
        for (int v = 0; v < VP; ++v) store_vec(y + r * ldy + col0 + (q * VP + v) * kVecLanes<T>, acc[r][q][v]);
    return;
  }
  T out[R][Q * kGemvPanel];
  FROST_UNROLL
  for (int r = 0; r < R; ++r)
    FROST_UNROLL
    for (int q = 0; q < Q; ++q)
      FROST_UNROLL
      for (int v = 0; v < VP; ++v) store_vec(out[r] + (q * VP + v) * kVecLanes<T>, acc[r][q][v]);
  FROST_UNROLL
  for (int r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < cols; ++c) y[r * ldy + col0 + c] = out[r][c];
}

/// Outputs [n0, n1) for R rows: groups of Q panels (kBlockPanels'), then
/// single panels.
template <int R, class T>
void rows(std::int64_t n0, std::int64_t n1, std::int64_t k, std::int64_t k0, std::int64_t k1, const T* x, std::int64_t ldx,
          const T* panels, T* y, std::int64_t ldy) {
  constexpr int Q = R >= kBlockPanels<T> ? 1 : kBlockPanels<T> / R;
  const std::int64_t p1 = (n1 + kGemvPanel - 1) / kGemvPanel;
  std::int64_t p = n0 / kGemvPanel;
  for (; p + Q <= p1; p += Q) block<R, Q>(k, k0, k1, x, ldx, panels + p * k * kGemvPanel, y, ldy, p * kGemvPanel, n1);
  for (; p < p1; ++p) block<R, 1>(k, k0, k1, x, ldx, panels + p * k * kGemvPanel, y, ldy, p * kGemvPanel, n1);
}
}  // namespace gemv_detail

/// y[:, n0:n1] = x[:, k0:k1] W[n0:n1, k0:k1]^T for m <= kGemvRows rows of x
/// (row stride ldx) into y (row stride ldy; both point at column 0), W as
/// gemv_pack left it. n0 is a multiple of kGemvPanel. Splitting the inputs
/// gives partial sums that the caller adds up.
template <class T>
void gemv_panels(std::int64_t m, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx, const T* panels, T* y,
                 std::int64_t ldy, std::int64_t n0, std::int64_t n1, std::int64_t k0, std::int64_t k1) {
  (void)n;
  using namespace gemv_detail;
  for (std::int64_t r = 0; r < m;) {
    const std::int64_t left = m - r;
    const T* xr = x + r * ldx;
    T* yr = y + r * ldy;
    if (kGemvBlockRows<T> >= 4 && left >= 4) rows<4>(n0, n1, k, k0, k1, xr, ldx, panels, yr, ldy), r += 4;
    else if (kGemvBlockRows<T> >= 2 && left >= 2) rows<2>(n0, n1, k, k0, k1, xr, ldx, panels, yr, ldy), r += 2;
    else rows<1>(n0, n1, k, k0, k1, xr, ldx, panels, yr, ldy), r += 1;
  }
}

/// y [m, n] (row stride ldy) = x [m, k] (row stride ldx) W^T for any m, W as
/// gemv_pack left it: blocks of kGemmBlockRows rows x kGemmPanels panels
/// (24 vector sums in registers with AVX-512) over depth blocks of kGemmDepth inputs, so
/// that a block of the panels stays in L1 while the row blocks pass; y holds
/// the running sums between depth blocks. The panels are split over the
/// threads. Against Eigen's GEMM on W packed at freeze: 3.0-3.3 ms against
/// 3.5-4.0 for 64 x 8192 -> 512 here.
inline constexpr std::int64_t kGemmDepth = 128;
/// gemm_panels on the calling thread, for panels [p0, p1) (outputs 16 p0 on).
template <class T>
void gemm_panels_part(std::int64_t m, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx, const T* panels, T* y,
                      std::int64_t ldy, std::int64_t p0, std::int64_t p1) {
  using namespace gemv_detail;
  constexpr int Q = kGemmPanels<T>, RB = kGemmBlockRows<T>;
  for (std::int64_t k0 = 0; k0 < k; k0 += kGemmDepth) {
    const std::int64_t k1 = std::min(k, k0 + kGemmDepth);
    for (std::int64_t p = p0; p < p1;) {
      const std::int64_t q = std::min<std::int64_t>(Q, p1 - p);
      const T* pan = panels + p * k * kGemvPanel;
      const std::int64_t col0 = p * kGemvPanel;
      auto run = [&]<int R>(std::integral_constant<int, R>, std::int64_t r) {
        if (q == Q) block<R, Q>(k, k0, k1, x + r * ldx, ldx, pan, y + r * ldy, ldy, col0, n, k0 > 0);
        else block<R, 1>(k, k0, k1, x + r * ldx, ldx, pan, y + r * ldy, ldy, col0, n, k0 > 0);
      };
      for (std::int64_t r = 0; r < m;) {
        const std::int64_t left = m - r;
        if (left >= RB) run(std::integral_constant<int, RB>(), r), r += RB;
        else if (RB > 4 && left >= 4) run(std::integral_constant<int, 4>(), r), r += 4;
        else if (left >= 2) run(std::integral_constant<int, 2>(), r), r += 2;
        else run(std::integral_constant<int, 1>(), r), r += 1;
      }
      p += q == Q ? Q : 1;
    }
  }
}

template <class T>
void gemm_panels(std::int64_t m, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx, const T* panels, T* y,
                 std::int64_t ldy) {
  if (k == 0) {
    for (std::int64_t r = 0; r < m; ++r) std::fill_n(y + r * ldy, n, T(0));
    return;
  }
  const std::int64_t np = (n + kGemvPanel - 1) / kGemvPanel;
  // Small products stay on the calling thread: waking another costs more.
  const std::int64_t grain = m * n * k < (std::int64_t{1} << 18) ? np : 1;
  parallel_for(np, grain, [&](std::int64_t p0, std::int64_t p1) { gemm_panels_part(m, n, k, x, ldx, panels, y, ldy, p0, p1); });
}

}  // namespace frost::cpu
