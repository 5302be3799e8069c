// Winograd F(4x4, 3x3) for the forward convolution: each 4x4 output tile
// is A^T [(G g G^T) . (B^T d B)] A over a 6x6 input tile, so the channel
// sums become 36 GEMMs [O, C] x [C, tiles] with 4x fewer multiplications
// than the direct sum (F(2x2, 3x3) saves 2.25x). The points 0, +-1, +-2 and
// infinity (Lavin & Gray) keep the transforms' factors small (at most 8), so
// float results stay within about ten ulp of the direct sum's rounding on
// inputs of one scale.
//
// The input transform works as F(2x2, 3x3)'s: tiles numbered q = ty (tw +
// 1) + tx, one spare tile per tile row, and the input plane split into 16
// phase planes by row and column modulo 4, zero-padded, so that patch
// element (i, j) of every tile is one contiguous array: phase plane
// (i % 4, j % 4) shifted by i / 4 rows and j / 4 columns of tiles. What it
// hands on (V, then M and the output transform) holds the real tiles only,
// q = ty tw + tx: at 16x16 outputs the spare tiles would be a fifth of the
// GEMMs' columns.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include <Eigen/Core>

#include "../../core/functors.hpp"
#include "conv_common.hpp"
#include "gemm.hpp"
#include "gemm_direct.hpp"
#include "vec.hpp"

namespace frost::cpu::conv_detail {

/// Worth it over F(2x2, 3x3) once a plane holds a few 4x4 tiles each way
/// and the batch gives the GEMMs 64+ columns (one 16x16 image has 20 tiles:
/// its GEMMs are then too narrow to pay for 2.25x more weight transforms).
inline bool use_winograd4(const Conv2dParams& p) {
  return p.out_h >= 8 && p.out_w >= 8 && p.batch * winograd_shape(p, 4).tiles >= 64;
}

/// U[k][o][c] = (G g G^T)[k] for the 36 positions k of a 6x6 tile, through
/// a buffer of filter blocks as winograd_weights (the 36 rows of U are often
/// a power of two apart).
template <class T>
void winograd4_weights(const T* w, std::int64_t O, std::int64_t Cg, T* U) {
  constexpr std::int64_t kBlock = 32;
  const std::int64_t n = O * Cg;
  T buf[36 * kBlock];
  // G's rows: (1/4, 0, 0), -(1, 1, 1)/6, -(1, -1, 1)/6, (1/24, 1/12, 1/6), (1/24, -1/12, 1/6), (0, 0, 1).
  const T q4 = T(1) / T(4), q6 = T(1) / T(6), q12 = T(1) / T(12), q24 = T(1) / T(24);
  auto g6 = [&](T a, T b, T c, T* u, std::int64_t st) {
    u[0] = q4 * a;
    u[st] = -q6 * (a + b + c);
    u[2 * st] = -q6 * (a - b + c);
    u[3 * st] = q24 * a + q12 * b + q6 * c;
    u[4 * st] = q24 * a - q12 * b + q6 * c;
    u[5 * st] = c;
  };
  for (std::int64_t f0 = 0; f0 < n; f0 += kBlock) {
    const std::int64_t nb = std::min(kBlock, n - f0);
    FROST_SIMD for (std::int64_t j = 0; j < nb; ++j) {
      const T* g = w + (f0 + j) * 9;
      T h[18];  // G g: h[r * 3 + c], each column of g transformed
      for (int c = 0; c < 3; ++c) g6(g[c], g[3 + c], g[6 + c], h + c, 3);
      for (int r = 0; r < 6; ++r) g6(h[r * 3], h[r * 3 + 1], h[r * 3 + 2], buf + r * 6 * kBlock + j, kBlock);  // (G g) G^T
    }
    for (int k = 0; k < 36; ++k) std::copy_n(buf + k * kBlock, nb, U + k * n + f0);
  }
}

/// dst[0, n) = src[0, n) for the short runs of a tile row (n = 4 at 16
/// columns): whole 4-element moves, the last one overlapping, rather than
/// an element loop or a call.
template <class T>
inline void copy_run(const T* src, std::int64_t n, T* dst) {
  if (n < 4) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (std::int64_t i = 0; i < n - 4; i += 4) std::memcpy(dst + i, src + i, 4 * sizeof(T));
  std::memcpy(dst + n - 4, src + n - 4, 4 * sizeof(T));
}

#if defined(__AVX512F__)
/// The real tiles of rows of all tiles (tile q = ty row + tx, the spare one
/// at tx = tw), 16 at a time: one two-vector permute a block instead of a
/// 4-element copy a tile row (144 copies a channel at 16x16 outputs). A
/// block's 16 tiles lie within 31 of its first, so two loads hold them.
class TileCompactor {
 public:
  static constexpr std::int64_t kMaxBlocks = 16;  // planes of up to 256 real tiles (64x64 outputs)
  static bool fits(const WinogradShape& s) { return s.th * s.tw <= 16 * kMaxBlocks; }
  // Made on every winograd4_inputs call (each image): real tile r's place
  // q = ty row + tx counted along, no division a tile.
  explicit TileCompactor(const WinogradShape& s) : n_(s.th * s.tw) {
    // Lanes [0, 16) of a load from `from` that stay inside the row (the last row ends the buffer).
    auto lanes = [&](std::int64_t from) {
      return static_cast<__mmask16>((1u << std::clamp<std::int64_t>(s.tiles - from, 0, 16)) - 1);
    };
    std::int64_t q = 0, tx = 0;
    for (std::int64_t b = 0; b * 16 < n_; ++b) {
      base_[b] = q;
      alignas(64) std::int32_t at[16] = {};
      for (std::int64_t l = 0; l < 16 && 16 * b + l < n_; ++l) {
        at[l] = static_cast<std::int32_t>(q - base_[b]);
        if (++tx < s.tw) ++q;
        else tx = 0, q += s.row - s.tw + 1;  // past the spare tile
      }
      idx_[b] = _mm512_load_si512(at);
      lo_[b] = lanes(base_[b]);
      hi_[b] = lanes(base_[b] + 16);
      out_[b] = static_cast<__mmask16>((1u << std::min<std::int64_t>(16, n_ - 16 * b)) - 1);
    }
  }
  /// dst[0, n) = the real tiles of src (one row of all tiles).
  void operator()(const float* src, float* dst) const {
    for (std::int64_t b = 0; b * 16 < n_; ++b) {
      const float* p = src + base_[b];
      const __m512 v =
          _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo_[b], p), idx_[b], _mm512_maskz_loadu_ps(hi_[b], p + 16));
      _mm512_mask_storeu_ps(dst + 16 * b, out_[b], v);
    }
  }

 private:
  std::int64_t n_;
  std::int64_t base_[kMaxBlocks];
  __m512i idx_[kMaxBlocks];
  __mmask16 lo_[kMaxBlocks], hi_[kMaxBlocks], out_[kMaxBlocks];
};
#endif

/// winograd4_inputs' work: 4 row phase planes, B^T d (6 rows of 4 columns a
/// tile) and the transformed tiles with the spare ones (36 rows).
inline std::int64_t winograd4_inputs_work(const WinogradShape& s) {
  return 16 * (s.th + 1) * s.row + 60 * s.tiles;
}

/// V[k][c][base + q] = (B^T d_q B)[k] for every real tile q = ty tw + tx of
/// one image's planes (ks: the stride between positions k, cs: between
/// channels). `work` holds winograd4_inputs_work(s) elements.
template <class T>
void winograd4_inputs(const Conv2dParams& p, const WinogradShape& s, const T* x, T* V, std::int64_t ks,
                      std::int64_t cs, T* work) {
  const std::int64_t H = p.in_h, W = p.in_w, L = s.tiles, Wp = 4 * s.row, psize = (s.th + 1) * Wp;
  // Row phase planes: R[rp][r4][col] = padded x[4 r4 + rp][col]. A row of
  // tiles is 4 row = Wp columns wide, so tile q's column j sits at 4 q + j
  // of any array of tile rows, whatever the tile row.
  T* R = work;
  T* Tr = work + 4 * psize;  // Tr[a][4 q + j]: row a of B^T d, patch column j of tile q
  T* Vt = Tr + 24 * L;       // Vt[k][q]: q over the tiles with the spare ones
  const std::int64_t left = std::min(p.pad_w, Wp), width = std::clamp<std::int64_t>(Wp - p.pad_w, 0, W);
#if defined(__AVX512F__)
  std::optional<TileCompactor> compact;
  if constexpr (std::is_same_v<T, float>)
    if (TileCompactor::fits(s)) compact.emplace(s);
#endif
  for (std::int64_t c = 0; c < p.in_channels; ++c) {
    const T* xc = x + c * H * W;
    // The next plane, while this one is transformed: its rows are read in
    // phase order (4 apart), which the hardware prefetchers do not follow.
    if (c + 1 < p.in_channels)
      for (std::int64_t b = 0; b < H * W * std::int64_t(sizeof(T)); b += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(xc + H * W) + b);
    for (int rp = 0; rp < 4; ++rp)
      for (std::int64_t r4 = 0; r4 <= s.th; ++r4) {
        const std::int64_t iy = 4 * r4 + rp - p.pad_h;
        T* r = R + rp * psize + r4 * Wp;
        if (iy < 0 || iy >= H) {
          std::fill_n(r, Wp, T(0));
          continue;
        }
        std::fill_n(r, left, T(0));
        const T* xr = xc + iy * W;
        T* rl = r + left;
        FROST_SIMD for (std::int64_t k = 0; k < width; ++k) rl[k] = xr[k];  // inline: a call costs more at this length
        std::fill(rl + width, r + Wp, T(0));
      }
    // B^T d over the patch rows i = 0..5: row phase i % 4, i / 4 tile rows down.
    // B^T's rows: (4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
    // (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1).
    {
      const std::int64_t n = 4 * L;
      const T *d0 = R, *d1 = R + psize, *d2 = R + 2 * psize, *d3 = R + 3 * psize, *d4 = d0 + Wp, *d5 = d1 + Wp;
      FROST_SIMD for (std::int64_t f = 0; f < n; ++f) {
        const T a = d4[f] - T(4) * d2[f], b = d3[f] - T(4) * d1[f];
        const T e = T(2) * (d3[f] - d1[f]), g = d4[f] - d2[f];
        Tr[f] = T(4) * d0[f] - T(5) * d2[f] + d4[f];
        Tr[n + f] = a + b;
        Tr[2 * n + f] = a - b;
        Tr[3 * n + f] = g + e;
        Tr[4 * n + f] = g - e;
        Tr[5 * n + f] = T(4) * d1[f] - T(5) * d3[f] + d5[f];
      }
    }
    // (B^T d) B over the patch columns j = 0..5 of each tile: 4 q + j, into
    // Vt[k][q] (all tiles, the spare ones too: one vector loop), then each
    // tile row's real tiles to V, so the GEMMs and the output transform
    // never see a spare tile (a fifth of the columns at 4 tiles a row).
    for (int a = 0; a < 6; ++a) {
      const T* e = Tr + a * 4 * L;
      T* v = Vt + (a * 6) * L;
      FROST_SIMD for (std::int64_t q = 0; q < L - 1; ++q) {
        const T e0 = e[4 * q], e1 = e[4 * q + 1], e2 = e[4 * q + 2], e3 = e[4 * q + 3], e4 = e[4 * q + 4],
                e5 = e[4 * q + 5];
        const T u = e4 - T(4) * e2, w = e3 - T(4) * e1, g = T(2) * (e3 - e1), h = e4 - e2;
        v[q] = T(4) * e0 - T(5) * e2 + e4;
        v[L + q] = u + w;
        v[2 * L + q] = u - w;
        v[3 * L + q] = h + g;
        v[4 * L + q] = h - g;
        v[5 * L + q] = T(4) * e1 - T(5) * e3 + e5;
      }
    }
    T* vc = V + c * cs;
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>)
      if (compact) {  // float only
        for (int k = 0; k < 36; ++k) (*compact)(Vt + k * L, vc + k * ks);
        continue;
      }
#endif
    for (int k = 0; k < 36; ++k)
      for (std::int64_t ty = 0; ty < s.th; ++ty) copy_run(Vt + k * L + ty * s.row, s.tw, vc + k * ks + ty * s.tw);
  }
}

namespace winograd4_detail {
/// Row r of the 4x4 outputs of tiles [q, q + lanes of V) from A^T m
/// (t[(r * 6 + j) * L + q]): A^T's columns applied, then the bias and the
/// activation (kAct: 0 none, 1 relu, 2 act through fn::unary, V scalar).
/// V is T or a SimdVec<T> of consecutive tiles: the same sums either way.
template <int kAct, class V, class T>
inline void tile_row(const T* t, std::int64_t L, std::int64_t q, int r, T bo, UnaryOp act, V (&v)[4]) {
  V e[6];
  for (int j = 0; j < 6; ++j) {
    if constexpr (std::is_same_v<V, T>) e[j] = t[(r * 6 + j) * L + q];
    else load_vec(e[j], t + (r * 6 + j) * L + q);
  }
  const V a = e[1] + e[2], b = e[1] - e[2], c = e[3] + e[4], d = e[3] - e[4];
  v[0] = e[0] + a + c + bo, v[1] = b + T(2) * d + bo, v[2] = a + T(4) * c + bo, v[3] = b + T(8) * d + e[5] + bo;
  for (V& x : v) {
    if constexpr (kAct == 1) x = x > V{} ? x : V{};  // NaN -> 0, as fn::unary's relu
    if constexpr (kAct == 2) x = fn::unary(act, x, T(0), T(0));  // before the max: act need not be monotonic
  }
}

/// l = the max of l and r, NaN winning as in max_pool2d (T or SimdVec<T>;
/// by reference: a 64-byte vector returned by value has another ABI
/// without AVX-512).
template <class V>
inline void nan_max(V& l, const V& r) {
  l = ((l > r) | (l != l)) ? l : r;
}

/// Windows (wr, 0) and (wr, 1) of tiles [q, q + lanes of V) into p0, p1.
template <int kAct, class V, class T>
inline void pool_row(const T* t, std::int64_t L, std::int64_t q, int wr, T bo, UnaryOp act, T* p0, T* p1) {
  V u[4], w[4];  // output rows 2 wr and 2 wr + 1
  tile_row<kAct>(t, L, q, 2 * wr, bo, act, u);
  tile_row<kAct>(t, L, q, 2 * wr + 1, bo, act, w);
  for (int c = 0; c < 4; c += 2) {  // window (wr, c / 2): columns c and c + 1 of both rows
    nan_max(u[c], u[c + 1]);
    nan_max(w[c], w[c + 1]);
    nan_max(u[c], w[c]);
  }
  if constexpr (std::is_same_v<V, T>) {
    p0[q] = u[0], p1[q] = u[2];
  } else {
    store_vec(p0 + q, u[0]), store_vec(p1 + q, u[2]);
  }
}

/// pool_tiles for one kind of activation (kAct as tile_row's): whole
/// vectors of tiles, then the rest one by one.
template <int kAct, class T>
void pool_tiles(const T* t, std::int64_t L, T bo, UnaryOp act, T* pooled) {
  constexpr std::int64_t V = kAct == 2 ? 0 : kVecLanes<T>;
  for (int wr = 0; wr < 2; ++wr) {
    T* p0 = pooled + (2 * wr) * L;
    T* p1 = p0 + L;
    std::int64_t q = 0;
    if constexpr (V > 0)
      for (; q + V <= L; q += V) pool_row<kAct, SimdVec<T>>(t, L, q, wr, bo, act, p0, p1);
    for (; q < L; ++q) pool_row<kAct, T>(t, L, q, wr, bo, act, p0, p1);
  }
}
}  // namespace winograd4_detail

/// The 2x2 max pools of every tile's output (bias and act applied first):
/// pooled[(wr * 2 + wc) * L + q] is window (wr, wc) of tile q, from A^T m
/// (t[(r * 6 + j) * L + q]), a vector of tiles at a time: the windows
/// never leave the registers before their max.
template <class T>
void pool_tiles(const T* t, std::int64_t L, T bo, UnaryOp act, T* pooled) {
  if (act == UnaryOp::relu) winograd4_detail::pool_tiles<1>(t, L, bo, act, pooled);
  else if (act == UnaryOp::copy) winograd4_detail::pool_tiles<0>(t, L, bo, act, pooled);
  else winograd4_detail::pool_tiles<2>(t, L, bo, act, pooled);
}

/// y = A^T m A + bias (then the activation) for `images` images' planes
/// from M[k][o][q] (ks: the stride between positions k, os: between
/// channels; q = ty tw + tx over the real tiles, each image's after the
/// previous one's, so the transforms run over all of them at once).
/// Outputs past the plane's edge are dropped. `work` holds 40 rows of
/// images x tiles.
/// With `pool2`, y is the plane max-pooled 2x2 with stride 2 (floor): each
/// window lies inside one 4x4 tile, so the windows are pooled in registers
/// (pool_tiles) and the full plane is never written.
template <class T>
void winograd4_outputs(const Conv2dParams& p, const WinogradShape& s, std::int64_t images, const T* M,
                       std::int64_t ks, std::int64_t os, const T* bias, UnaryOp act, T* y, T* work, bool pool2 = false) {
  const std::int64_t OH = p.out_h, OW = p.out_w, tiles = s.th * s.tw, L = images * tiles;
  const std::int64_t PH = OH / 2, PW = OW / 2;
  T* t = work;             // A^T m: t[(r * 6 + j) * L + q], r = 0..3
  T* out = work + 24 * L;  // out[(r * 4) * L + 4 q + c]
  const bool relu = act == UnaryOp::relu;
  // A^T's rows: (1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1).
  for (std::int64_t o = 0; o < p.out_channels; ++o) {
    const T* mo = M + o * os;
    for (int j = 0; j < 6; ++j) {
      const T *m0 = mo + j * ks, *m1 = mo + (6 + j) * ks, *m2 = mo + (12 + j) * ks, *m3 = mo + (18 + j) * ks,
              *m4 = mo + (24 + j) * ks, *m5 = mo + (30 + j) * ks;
      T* tj = t + j * L;
      FROST_SIMD for (std::int64_t q = 0; q < L; ++q) {
        const T a = m1[q] + m2[q], b = m1[q] - m2[q], c = m3[q] + m4[q], d = m3[q] - m4[q];
        tj[q] = m0[q] + a + c;
        tj[6 * L + q] = b + T(2) * d;
        tj[12 * L + q] = a + T(4) * c;
        tj[18 * L + q] = b + T(8) * d + m5[q];
      }
    }
    const T bo = bias ? bias[o] : T(0);
    if (pool2) {
      pool_tiles(t, L, bo, act, out);
      for (std::int64_t i = 0; i < images; ++i) {
        T* yo = y + (i * p.out_channels + o) * PH * PW;
        for (std::int64_t py = 0; py < PH; ++py) {
          // Pooled row py: window row py % 2 of tile row py / 2, its two windows a tile in turn.
          const T* w0 = out + (2 * (py % 2)) * L + i * tiles + (py / 2) * s.tw;
          const T* w1 = w0 + L;
          T* dst = yo + py * PW;
          for (std::int64_t tx = 0; 2 * tx < PW; ++tx) {
            dst[2 * tx] = w0[tx];
            if (2 * tx + 1 < PW) dst[2 * tx + 1] = w1[tx];
          }
        }
      }
      continue;
    }
    for (int r = 0; r < 4; ++r) {
      // Row r of every tile, its four columns interleaved (out[4 q + c]) so
      // that a tile row of the output plane is one contiguous run.
      const T *t0 = t + (r * 6) * L, *t1 = t0 + L, *t2 = t1 + L, *t3 = t2 + L, *t4 = t3 + L, *t5 = t4 + L;
      T* out_r = out + (r * 4) * L;
      FROST_SIMD for (std::int64_t q = 0; q < L; ++q) {
        const T a = t1[q] + t2[q], b = t1[q] - t2[q], c = t3[q] + t4[q], d = t3[q] - t4[q];
        const T v0 = t0[q] + a + c + bo, v1 = b + T(2) * d + bo, v2 = a + T(4) * c + bo, v3 = b + T(8) * d + t5[q] + bo;
        out_r[4 * q] = relu ? (v0 > T(0) ? v0 : T(0)) : v0;  // NaN -> 0, as fn::unary's relu
        out_r[4 * q + 1] = relu ? (v1 > T(0) ? v1 : T(0)) : v1;
        out_r[4 * q + 2] = relu ? (v2 > T(0) ? v2 : T(0)) : v2;
        out_r[4 * q + 3] = relu ? (v3 > T(0) ? v3 : T(0)) : v3;
      }
    }
    for (std::int64_t i = 0; i < images; ++i) {
      T* yo = y + (i * p.out_channels + o) * OH * OW;
      for (std::int64_t ty = 0; ty < s.th; ++ty)
        for (int r = 0; r < 4 && 4 * ty + r < OH; ++r) {
          const T* src = out + (r * 4) * L + 4 * (i * tiles + ty * s.tw);
          T* dst = yo + (4 * ty + r) * OW;
          FROST_SIMD for (std::int64_t k = 0; k < OW; ++k) dst[k] = src[k];
        }
      if (act != UnaryOp::copy && act != UnaryOp::relu)
        for (std::int64_t k = 0; k < OH * OW; ++k) yo[k] = fn::unary(act, yo[k], T(0), T(0));
    }
  }
}

/// M[k] = U[k] V[k] for the 36 positions and each group, as winograd_gemms,
/// by gemm_direct where the groups have enough filters (gemm_direct_fits):
/// V's columns past `used` (up to whole vectors, within P) are zeroed
/// first, as gemm_direct reads them.
template <class T>
void winograd4_gemms(const T* U, std::int64_t u_ks, T* V, T* M, std::int64_t C, std::int64_t O, std::int64_t G,
                     std::int64_t P, std::int64_t used) {
  const std::int64_t Cg = C / G, Og = O / G;
  if (!gemm_direct_fits(Og)) return winograd_gemms(36, U, u_ks, V, M, C, O, G, P, used);
  const std::int64_t padded = std::min(P, (used + kVecLanes<T> - 1) / kVecLanes<T> * kVecLanes<T>);
  if (padded > used)
    for (std::int64_t r = 0; r < 36 * C; ++r) std::fill(V + r * P + used, V + r * P + padded, T(0));
  for (int k = 0; k < 36; ++k)
    for (std::int64_t g = 0; g < G; ++g)
      gemm_direct(Og, Cg, used, U + k * u_ks + g * Og * Cg, Cg, V + (k * C + g * Cg) * P, P, M + (k * O + g * Og) * P, P);
}

/// The forward convolution (use_winograd and use_winograd4 hold); `U`
/// (k-stride u_ks), when given, is w already transformed by winograd4_weights.
/// With `pool2`, y is its output max-pooled 2x2 with stride 2 (winograd4_outputs).
template <class T>
void conv2d_winograd4(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, UnaryOp act,
                      const T* U = nullptr, std::int64_t u_ks = 0, bool pool2 = false) {
  const std::int64_t G = p.groups, C = p.in_channels, O = p.out_channels, Cg = C / G;
  const WinogradShape s = winograd_shape(p, 4);
  // Each thread takes an equal share of the images, in chunks of about 128
  // tiles per GEMM (whole row blocks of the GEMM kernel where they fit, else
  // equal chunks): wide GEMMs, while V and M stay near the cache.
  const std::int64_t tiles = s.th * s.tw;  // V's and M's columns: the real tiles only
  const int threads = image_threads(p.batch, 2 * 36 * O * Cg * tiles);
  const std::int64_t share = ceil_div(p.batch, threads), whole = whole_block_images<T>(tiles, 128);
  const std::int64_t chunk = whole > 0 ? std::min(whole, share)
                                       : ceil_div(share, ceil_div(share, std::max<std::int64_t>(128 / tiles, 1)));
  const std::int64_t P = (chunk * tiles + kVecLanes<T> - 1) / kVecLanes<T> * kVecLanes<T>;  // gemm_direct's whole vectors
  Scratch<T> own(U ? 0 : 36 * O * Cg);
  if (!U) {
    winograd4_weights(w, O, Cg, own.get());
    U = own.get();
    u_ks = O * Cg;
  }
  const std::int64_t work = std::max(winograd4_inputs_work(s), 40 * P);  // inputs', outputs' work
  const std::int64_t per_thread = 36 * (C + O) * P + work;
  Scratch<T> scratch(threads * per_thread);
  over_images(threads, p.batch, [&](int t, std::int64_t b, std::int64_t e) {
    T* V = scratch.get() + t * per_thread;  // V[k][c][P]
    T* M = V + 36 * C * P;                  // M[k][o][P]
    T* wk = M + 36 * O * P;
    for (std::int64_t n0 = b; n0 < e; n0 += chunk) {
      const std::int64_t images = std::min(chunk, e - n0);
      const std::int64_t used = images * tiles;  // the last chunk may be short
      for (std::int64_t i = 0; i < images; ++i)
        winograd4_inputs(p, s, x + (n0 + i) * C * p.in_h * p.in_w, V + i * tiles, C * P, P, wk);
      winograd4_gemms(U, u_ks, V, M, C, O, G, P, used);
      const std::int64_t plane = pool2 ? (p.out_h / 2) * (p.out_w / 2) : p.out_h * p.out_w;
      winograd4_outputs(p, s, images, M, O * P, P, bias, act, y + n0 * O * plane, wk, pool2);
    }
  });
}

}  // namespace frost::cpu::conv_detail
