// CPU convolution: im2col + Eigen GEMM per image, with the bias and the
// activation applied to each image's output while it is still in cache;
// 3x3 stride-1 convolutions with 16+ channels (forward, input and weight
// gradients) take Winograd F(2x2, 3x3) instead, which needs 2.25x fewer
// multiplications, and the forward pass and input gradient of large enough
// planes F(4x4, 3x3) (conv_winograd4.hpp: 4x fewer). 3x3 stride-1
// forward convolutions of 1-5 input channels (an RGB stem) run as direct
// sums in registers (conv_direct.hpp), pooled there when a 2x2 max pool
// follows in a frozen plan.
// Batches are split across OpenMP threads (one single-threaded GEMM per
// image); a batch too small to split leaves the threading to Eigen's GEMM.
// 1x1 stride-1 unpadded convolutions read the input as the GEMM operand
// directly.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <Eigen/Core>

#include "../../core/allocator.hpp"
#include "../../core/functors.hpp"
#include "../backend.hpp"
#include "conv_common.hpp"
#include "conv_direct.hpp"
#include "conv_winograd4.hpp"
#include "pool.hpp"
#include "gemm.hpp"
#include "parallel.hpp"

namespace frost::cpu {

namespace conv_detail {

/// The output columns [lo, hi) whose input column ox * stride + off lies in [0, in).
inline void valid_range(std::int64_t off, std::int64_t stride, std::int64_t in, std::int64_t out, std::int64_t& lo,
                        std::int64_t& hi) {
  lo = off >= 0 ? 0 : ceil_div(-off, stride);
  hi = off >= in ? 0 : std::min(out, ceil_div(in - off, stride));
  lo = std::min(lo, hi);
}

/// col[(c kh + i) kw + j][oy ow + ox] = x[c][oy sh - ph + i dh][ox sw - pw + j dw], 0 outside the input.
template <class T>
void im2col(const T* x, std::int64_t channels, const Conv2dParams& p, T* col) {
  const std::int64_t H = p.in_h, W = p.in_w, OH = p.out_h, OW = p.out_w;
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t i = 0; i < p.kernel_h; ++i)
      for (std::int64_t j = 0; j < p.kernel_w; ++j) {
        T* row = col + ((c * p.kernel_h + i) * p.kernel_w + j) * OH * OW;
        const std::int64_t off = j * p.dilation_w - p.pad_w;
        std::int64_t lo, hi;
        valid_range(off, p.stride_w, W, OW, lo, hi);
        for (std::int64_t oy = 0; oy < OH; ++oy) {
          T* r = row + oy * OW;
          const std::int64_t iy = oy * p.stride_h - p.pad_h + i * p.dilation_h;
          if (iy < 0 || iy >= H) {
            std::fill(r, r + OW, T(0));
            continue;
          }
          const T* xr = x + (c * H + iy) * W;  // input column of output column ox: off + ox * stride
          std::fill(r, r + lo, T(0));
          if (p.stride_w == 1) std::memcpy(r + lo, xr + off + lo, static_cast<std::size_t>(hi - lo) * sizeof(T));
          else
            for (std::int64_t ox = lo; ox < hi; ++ox) r[ox] = xr[off + ox * p.stride_w];
          std::fill(r + hi, r + OW, T(0));
        }
      }
}

/// The adjoint of im2col: dx[c][iy][ix] += col[...] (dx must start zeroed).
template <class T>
void col2im(const T* col, std::int64_t channels, const Conv2dParams& p, T* dx) {
  const std::int64_t H = p.in_h, W = p.in_w, OH = p.out_h, OW = p.out_w;
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t i = 0; i < p.kernel_h; ++i)
      for (std::int64_t j = 0; j < p.kernel_w; ++j) {
        const T* row = col + ((c * p.kernel_h + i) * p.kernel_w + j) * OH * OW;
        const std::int64_t off = j * p.dilation_w - p.pad_w;
        std::int64_t lo, hi;
        valid_range(off, p.stride_w, W, OW, lo, hi);
        for (std::int64_t oy = 0; oy < OH; ++oy) {
          const std::int64_t iy = oy * p.stride_h - p.pad_h + i * p.dilation_h;
          if (iy < 0 || iy >= H) continue;
          const T* r = row + oy * OW;
          T* xr = dx + (c * H + iy) * W;
          if (p.stride_w == 1)
            Arr<T>(xr + off + lo, hi - lo) += ConstArr<T>(r + lo, hi - lo);
          else
            for (std::int64_t ox = lo; ox < hi; ++ox) xr[off + ox * p.stride_w] += r[ox];
        }
      }
}

/// True when the input itself is the im2col matrix (1x1 kernel, stride 1, no padding).
inline bool reads_input_directly(const Conv2dParams& p) {
  return p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0 && p.out_h == p.in_h && p.out_w == p.in_w;
}

/// y[o] = act(y[o] + bias[o]) over one image's [out_channels, hw] block.
template <class T>
void bias_activation(T* y, const T* bias, std::int64_t channels, std::int64_t hw, UnaryOp act) {
  if (!bias && act == UnaryOp::copy) return;
  for (std::int64_t o = 0; o < channels; ++o) {
    Arr<T> r(y + o * hw, hw);
    const T b = bias ? bias[o] : T(0);
    if (act == UnaryOp::copy) r += b;
    else if (act == UnaryOp::relu) r = (r + b).max(T(0));
    else
      for (std::int64_t i = 0; i < hw; ++i) r[i] = fn::unary(act, r[i] + b, T(0), T(0));
  }
}

// ---- Winograd F(2x2, 3x3) ----------------------------------------------------
// A 3x3 stride-1 convolution computed on 4x4 input tiles: each 2x2 output
// tile is A^T [(G w G^T) . (B^T d B)] A, so the channel sums become 16 GEMMs
// [O, C] x [C, tiles] with 2.25x fewer multiplications than im2col's. The
// transforms only add and halve, so float results stay within a few ulp of
// the direct sum's error.
//
// Layout: a plane's tiles are numbered q = ty (tw + 1) + tx, one spare tile
// per tile row, so that every transform is an elementwise operation on
// contiguous arrays of all the plane's tiles (vectorised by Eigen at any -O).
// The input plane is first split into four quarter planes by row and column
// parity, zero-padded: the patch element (i, j) of every tile is then one
// contiguous array.

/// Worth it when the GEMMs stay large: enough channels on both sides.
inline bool use_winograd(const Conv2dParams& p) {
  return p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 &&
         p.dilation_w == 1 && p.in_channels / p.groups >= 16 && p.out_channels / p.groups >= 16 && p.out_h >= 2 &&
         p.out_w >= 2;
}

/// u[0], u[n], u[2n], u[3n] = G (a, b, c): one row or column of G g G^T.
template <class T>
inline void winograd_g(T a, T b, T c, T* u, std::int64_t n) {
  u[0] = a;
  u[n] = T(0.5) * (a + b + c);
  u[2 * n] = T(0.5) * (a - b + c);
  u[3 * n] = c;
}

/// U[k][o][c] = (G w[o][c] G^T)[k] for the 16 positions k of a 4x4 tile.
/// Filters go in blocks through a small buffer: the 16 rows of U are often a
/// power of two apart, and storing each filter straight to all 16 of them
/// made every store conflict in the L1 cache (200 us for 128 x 64 filters).
constexpr std::int64_t kFilterBlock = 64;  // filters per block of the weight transforms
template <class T>
void winograd_weights(const T* w, std::int64_t O, std::int64_t Cg, T* U) {
  constexpr std::int64_t kBlock = kFilterBlock;
  const std::int64_t n = O * Cg;
  T buf[16 * kBlock];
  for (std::int64_t f0 = 0; f0 < n; f0 += kBlock) {
    const std::int64_t nb = std::min(kBlock, n - f0);
    FROST_SIMD for (std::int64_t j = 0; j < nb; ++j) {
      const T* g = w + (f0 + j) * 9;
      const T g0 = g[0], g1 = g[1], g2 = g[2], g3 = g[3], g4 = g[4], g5 = g[5], g6 = g[6], g7 = g[7], g8 = g[8];
      // G g: the rows (g0 g1 g2), (g0 + g3 + g6) / 2, (g0 - g3 + g6) / 2, (g6 g7 g8).
      const T h0 = T(0.5) * (g0 + g3 + g6), h1 = T(0.5) * (g1 + g4 + g7), h2 = T(0.5) * (g2 + g5 + g8);
      const T k0 = T(0.5) * (g0 - g3 + g6), k1 = T(0.5) * (g1 - g4 + g7), k2 = T(0.5) * (g2 - g5 + g8);
      T* u = buf + j;  // (G g) G^T: each row's columns transformed
      winograd_g(g0, g1, g2, u, kBlock);
      winograd_g(h0, h1, h2, u + 4 * kBlock, kBlock);
      winograd_g(k0, k1, k2, u + 8 * kBlock, kBlock);
      winograd_g(g6, g7, g8, u + 12 * kBlock, kBlock);
    }
    for (int k = 0; k < 16; ++k) std::copy_n(buf + k * kBlock, nb, U + k * n + f0);
  }
}

/// V[k][c][base + q] = (B^T d_q B)[k] for every tile q of one image's planes
/// (ks: the stride between positions k, cs: between channels). `work` holds
/// 4 quarter planes and 8 rows of tiles.
template <class T>
void winograd_inputs(const Conv2dParams& p, const WinogradShape& s, const T* x, T* V, std::int64_t ks, std::int64_t cs,
                     T* work) {
  const std::int64_t H = p.in_h, W = p.in_w, L = s.tiles, qsize = (s.th + 1) * s.row;
  T* Q = work;               // Q[(rp * 2 + cp) * qsize + r2 * row + m] = padded x[2 r2 + rp][2 m + cp]
  T* Tr = work + 4 * qsize;  // 8 rows of L: B^T d for the even (0..3) and odd (4..7) patch columns
  for (std::int64_t c = 0; c < p.in_channels; ++c) {
    const T* xc = x + c * H * W;
    for (int rp = 0; rp < 2; ++rp)
      for (std::int64_t r2 = 0; r2 <= s.th; ++r2) {
        const std::int64_t iy = 2 * r2 + rp - p.pad_h;
        T* qe = Q + (rp * 2) * qsize + r2 * s.row;
        T* qo = qe + qsize;
        if (iy < 0 || iy >= H) {
          std::fill(qe, qe + s.row, T(0));
          std::fill(qo, qo + s.row, T(0));
          continue;
        }
        const T* xr = xc + iy * W;
        auto edge = [&](std::int64_t m) {
          const std::int64_t ix = 2 * m - p.pad_w;
          qe[m] = ix >= 0 && ix < W ? xr[ix] : T(0);
          qo[m] = ix + 1 >= 0 && ix + 1 < W ? xr[ix + 1] : T(0);
        };
        // Columns [lo, hi) read both inputs inside the row: no checks, so the
        // compiler vectorises the split.
        const std::int64_t lo = std::min(s.row, (p.pad_w + 1) / 2);
        const std::int64_t hi = std::clamp<std::int64_t>(ceil_div(W - 1 + p.pad_w, 2), lo, s.row);
        for (std::int64_t m = 0; m < lo; ++m) edge(m);
        FROST_SIMD for (std::int64_t m = lo; m < hi; ++m) {
          qe[m] = xr[2 * m - p.pad_w];
          qo[m] = xr[2 * m + 1 - p.pad_w];
        }
        for (std::int64_t m = hi; m < s.row; ++m) edge(m);
      }
    // B^T d: patch rows i = 0..3 are quarter plane (i % 2) shifted by (i / 2)
    // rows. Plain loops, four outputs each: at one plane's length Eigen's
    // scalar heads and tails cost more than the vector bodies.
    for (int cp = 0; cp < 2; ++cp) {
      const T* d0 = Q + cp * qsize;
      const T* d1 = Q + (2 + cp) * qsize;
      const T *d2 = d0 + s.row, *d3 = d1 + s.row;
      T* t = Tr + cp * 4 * L;
      FROST_SIMD for (std::int64_t q = 0; q < L; ++q) {
        t[q] = d0[q] - d2[q];
        t[L + q] = d1[q] + d2[q];
        t[2 * L + q] = d2[q] - d1[q];
        t[3 * L + q] = d1[q] - d3[q];
      }
    }
    // (B^T d) B: patch columns 0, 1, 2, 3 are (even, odd) at tile column tx, then at tx + 1.
    T* vc = V + c * cs;
    for (int i = 0; i < 4; ++i) {
      const T *e = Tr + i * L, *o = Tr + (4 + i) * L;
      T* v = vc + (i * 4) * ks;
      FROST_SIMD for (std::int64_t q = 0; q < L - 1; ++q) {
        v[q] = e[q] - e[q + 1];
        v[ks + q] = o[q] + e[q + 1];
        v[2 * ks + q] = e[q + 1] - o[q];
        v[3 * ks + q] = o[q] - o[q + 1];
      }
      for (int k = 0; k < 4; ++k) v[k * ks + L - 1] = T(0);  // the last spare tile
    }
  }
}

/// y = A^T m A + bias (then the activation) for one image's planes from
/// M[k][o][base + q]; spare tiles and the rows / columns past an odd output
/// are dropped. `work` holds 12 rows of tiles.
template <class T>
void winograd_outputs(const Conv2dParams& p, const WinogradShape& s, const T* M, std::int64_t ks, std::int64_t os,
                      const T* bias, UnaryOp act, T* y, T* work) {
  const std::int64_t OH = p.out_h, OW = p.out_w, L = s.tiles;
  T* t = work;            // A^T m: t[r * 4 + j], r = 0, 1
  T* out = work + 8 * L;  // out[r * 2 + j]
  const bool relu = act == UnaryOp::relu;
  for (std::int64_t o = 0; o < p.out_channels; ++o) {
    const T* mo = M + o * os;
    // Plain loops over the plane's tiles, as in winograd_inputs.
    for (int j = 0; j < 4; ++j) {
      const T *m0 = mo + j * ks, *m1 = mo + (4 + j) * ks, *m2 = mo + (8 + j) * ks, *m3 = mo + (12 + j) * ks;
      T *t0 = t + j * L, *t1 = t + (4 + j) * L;
      FROST_SIMD for (std::int64_t q = 0; q < L; ++q) {
        t0[q] = m0[q] + m1[q] + m2[q];
        t1[q] = m1[q] - m2[q] - m3[q];
      }
    }
    const T b = bias ? bias[o] : T(0);
    for (int r = 0; r < 2; ++r) {
      const T* tr = t + r * 4 * L;
      T *o0 = out + (r * 2) * L, *o1 = o0 + L;
      FROST_SIMD for (std::int64_t q = 0; q < L; ++q) {
        const T v0 = tr[q] + tr[L + q] + tr[2 * L + q] + b, v1 = tr[L + q] - tr[2 * L + q] - tr[3 * L + q] + b;
        o0[q] = relu ? (v0 > T(0) ? v0 : T(0)) : v0;  // NaN -> 0, as fn::unary's relu
        o1[q] = relu ? (v1 > T(0) ? v1 : T(0)) : v1;
      }
    }
    T* yo = y + o * OH * OW;
    for (std::int64_t ty = 0; ty < s.th; ++ty)
      for (int r = 0; r < 2 && 2 * ty + r < OH; ++r) {
        T* yr = yo + (2 * ty + r) * OW;
        const T* a = out + (r * 2) * L + ty * s.row;
        const T* c = out + (r * 2 + 1) * L + ty * s.row;
        const std::int64_t pairs = OW / 2;
        for (std::int64_t tx = 0; tx < pairs; ++tx) {
          yr[2 * tx] = a[tx];
          yr[2 * tx + 1] = c[tx];
        }
        if (OW % 2) yr[OW - 1] = a[pairs];
      }
    if (act != UnaryOp::copy && act != UnaryOp::relu)
      for (std::int64_t i = 0; i < OH * OW; ++i) yo[i] = fn::unary(act, yo[i], T(0), T(0));
  }
}

/// The forward convolution; `U` (k-stride u_ks), when given, is w already
/// transformed by winograd_weights (a frozen plan's).
template <class T>
void conv2d_winograd(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, UnaryOp act,
                     const T* U = nullptr, std::int64_t u_ks = 0) {
  const std::int64_t G = p.groups, C = p.in_channels, O = p.out_channels, Cg = C / G;
  const WinogradShape s = winograd_shape(p);
  // Images per GEMM: about 256 tiles, so the GEMMs are wide while the
  // transformed tiles stay near the cache.
  const std::int64_t chunk = std::clamp<std::int64_t>(256 / s.tiles, 1, p.batch);
  const std::int64_t chunks = ceil_div(p.batch, chunk), P = chunk * s.tiles;
  Scratch<T> own(U ? 0 : 16 * O * Cg);
  if (!U) {
    winograd_weights(w, O, Cg, own.get());
    U = own.get();
    u_ks = O * Cg;
  }
  const int threads = image_threads(chunks, 2 * 16 * O * Cg * P);
  const std::int64_t work = std::max(4 * (s.th + 1) * s.row + 8 * s.tiles, 12 * s.tiles);
  const std::int64_t per_thread = 16 * (C + O) * P + work;
  Scratch<T> scratch(threads * per_thread);
  over_images(threads, chunks, [&](int t, std::int64_t b, std::int64_t e) {
    T* V = scratch.get() + t * per_thread;  // V[k][c][P]
    T* M = V + 16 * C * P;                  // M[k][o][P]
    T* wk = M + 16 * O * P;
    for (std::int64_t ch = b; ch < e; ++ch) {
      const std::int64_t n0 = ch * chunk, images = std::min(chunk, p.batch - n0);
      const std::int64_t used = images * s.tiles;  // the last chunk may be short
      for (std::int64_t i = 0; i < images; ++i)
        winograd_inputs(p, s, x + (n0 + i) * C * p.in_h * p.in_w, V + i * s.tiles, C * P, P, wk);
      winograd_gemms(16, U, u_ks, V, M, C, O, G, P, used);
      for (std::int64_t i = 0; i < images; ++i)
        winograd_outputs(p, s, M + i * s.tiles, O * P, P, bias, act, y + (n0 + i) * O * p.out_h * p.out_w, wk);
    }
  });
}

// The weight gradient on the same tiles. With M = sum_c U . V (so that
// y = A^T M A), dM = A dy A^T for each tile and dU[k] = dM[k] V[k]^T summed
// over the tiles: 16 GEMMs [O, tiles] x [tiles, C], then dw = G^T dU G.

/// dM[k][o][q] = (A dy_q A^T)[k] for every tile q of one image's output
/// gradient (ks: the stride between positions k); spare tiles and positions
/// past an odd output are zero. Channels go in blocks, so that each
/// combination is one long array operation over the block's tiles.
/// `work` holds 4 rows of kWinogradBlock elements.
constexpr std::int64_t kWinogradBlock = 2048;
template <class T>
void winograd_output_grads(const Conv2dParams& p, const WinogradShape& s, const T* dy, T* dM, std::int64_t ks,
                           T* work) {
  const std::int64_t OH = p.out_h, OW = p.out_w, L = s.tiles, pairs = OW / 2;
  const std::int64_t block = std::max<std::int64_t>(1, kWinogradBlock / L);
  for (std::int64_t o0 = 0; o0 < p.out_channels; o0 += block) {
    const std::int64_t n = std::min(block, p.out_channels - o0), len = n * L;
    T* D = work;  // D[r * 2 + c][o][q] = dy[o][2 ty + r][2 tx + c]
    std::fill(D, D + 4 * len, T(0));
    for (std::int64_t o = 0; o < n; ++o)
      for (std::int64_t ty = 0; ty < s.th; ++ty)
        for (int r = 0; r < 2 && 2 * ty + r < OH; ++r) {
          const T* yr = dy + ((o0 + o) * OH + 2 * ty + r) * OW;
          T* d0 = D + (r * 2) * len + o * L + ty * s.row;
          T* d1 = d0 + len;
          for (std::int64_t tx = 0; tx < pairs; ++tx) {
            d0[tx] = yr[2 * tx];
            d1[tx] = yr[2 * tx + 1];
          }
          if (OW % 2) d0[pairs] = yr[OW - 1];
        }
    const ConstArr<T> a(D, len), b(D + len, len), c(D + 2 * len, len), d(D + 3 * len, len);  // dy 00, 01, 10, 11
    auto out = [&](int k) { return Arr<T>(dM + k * ks + o0 * L, len); };
    // A = rows (1, 0), (1, 1), (1, -1), (0, -1): dM[i][j] = sum_rc A[i][r] A[j][c] dy[r][c].
    out(0) = a;
    out(1) = a + b;
    out(2) = a - b;
    out(3) = -b;
    out(4) = a + c;
    out(5) = (a + b) + (c + d);
    out(6) = (a - b) + (c - d);
    out(7) = -(b + d);
    out(8) = a - c;
    out(9) = (a + b) - (c + d);
    out(10) = (a - b) - (c - d);
    out(11) = d - b;
    out(12) = -c;
    out(13) = -(c + d);
    out(14) = d - c;
    out(15) = d;
  }
}

/// dw[o][c] = G^T dU[.][o][c] G: the adjoint of winograd_weights, with its
/// blocks of filters (the 16 rows of dU are as far apart as U's).
template <class T>
void winograd_weight_grads(const T* dU, std::int64_t O, std::int64_t Cg, T* dw) {
  constexpr std::int64_t kBlock = kFilterBlock;
  const std::int64_t n = O * Cg;
  T buf[16 * kBlock];
  for (std::int64_t f0 = 0; f0 < n; f0 += kBlock) {
    const std::int64_t nb = std::min(kBlock, n - f0);
    for (int k = 0; k < 16; ++k) std::copy_n(dU + k * n + f0, nb, buf + k * kBlock);
    FROST_SIMD for (std::int64_t j = 0; j < nb; ++j) {
      auto u = [&](int i, int c) { return buf[(i * 4 + c) * kBlock + j]; };
      T r[3][4];  // G^T u: G's columns are (1, .5, .5, 0), (0, .5, -.5, 0), (0, .5, .5, 1)
      for (int c = 0; c < 4; ++c) {
        r[0][c] = u(0, c) + T(0.5) * (u(1, c) + u(2, c));
        r[1][c] = T(0.5) * (u(1, c) - u(2, c));
        r[2][c] = T(0.5) * (u(1, c) + u(2, c)) + u(3, c);
      }
      T* g = dw + (f0 + j) * 9;
      for (int a = 0; a < 3; ++a) {  // (G^T u) G
        g[a * 3 + 0] = r[a][0] + T(0.5) * (r[a][1] + r[a][2]);
        g[a * 3 + 1] = T(0.5) * (r[a][1] - r[a][2]);
        g[a * 3 + 2] = T(0.5) * (r[a][1] + r[a][2]) + r[a][3];
      }
    }
  }
}

template <class T>
void conv2d_grad_weight_winograd(const Conv2dParams& p, const T* x, const T* dy, T* dw) {
  const std::int64_t G = p.groups, C = p.in_channels, O = p.out_channels, Cg = C / G, Og = O / G;
  const WinogradShape s = winograd_shape(p);
  const std::int64_t L = s.tiles, usize = 16 * O * Cg;
  // One image at a time: the GEMMs' inner dimension is then only its tiles,
  // but V and dM stay in cache (larger chunks measured slower).
  const int threads = image_threads(p.batch, 2 * 16 * O * Cg * L);
  const std::int64_t work = std::max(4 * (s.th + 1) * s.row + 8 * L, 4 * std::max(kWinogradBlock, L));
  const std::int64_t per_thread = usize + 16 * (C + O) * L + work;
  Scratch<T> scratch(threads * per_thread);
  for (int t = 0; t < threads; ++t) std::fill_n(scratch.get() + t * per_thread, usize, T(0));  // a thread may get no image
  over_images(threads, p.batch, [&](int t, std::int64_t b, std::int64_t e) {
    T* dU = scratch.get() + t * per_thread;  // dU[k][o][c], this thread's sum
    T* V = dU + usize;                        // V[k][c][L]
    T* dM = V + 16 * C * L;                   // dM[k][o][L]
    T* wk = dM + 16 * O * L;
    for (std::int64_t n = b; n < e; ++n) {
      winograd_inputs(p, s, x + n * C * p.in_h * p.in_w, V, C * L, L, wk);
      winograd_output_grads(p, s, dy + n * O * p.out_h * p.out_w, dM, O * L, wk);
      for (int k = 0; k < 16; ++k)
        for (std::int64_t g = 0; g < G; ++g) {
          Eigen::Map<const RowMat<T>> A(dM + (k * O + g * Og) * L, Og, L), B(V + (k * C + g * Cg) * L, Cg, L);
          Eigen::Map<RowMat<T>>(dU + (k * O + g * Og) * Cg, Og, Cg).noalias() += A * B.transpose();
        }
    }
  });
  Arr<T> sum(scratch.get(), usize);
  for (int t = 1; t < threads; ++t) sum += Arr<T>(scratch.get() + t * per_thread, usize);
  winograd_weight_grads(scratch.get(), O, Cg, dw);
}

}  // namespace conv_detail

template <class T>
void conv2d(const Conv2dParams& p, const View<const T>& xv, const View<const T>& wv, const T* bias, const View<T>& yv,
            UnaryOp act);

namespace conv_detail {
/// A single image gives one-image-per-thread nothing to split: its output
/// channels are split over the threads instead, half(q, o0) convolving the
/// block of q.out_channels filters from o0. Returns false when the image is
/// too small to pay for the threads.
template <class Fn>
bool split_channels(const Conv2dParams& p, Fn&& half) {
#if defined(_OPENMP)
  const std::int64_t flops = 2 * p.out_channels * p.out_h * p.out_w * p.in_channels * p.kernel_h * p.kernel_w;
  const int threads = omp_get_max_threads();
  if (p.batch != 1 || p.groups != 1 || p.out_channels < 32 || flops < (std::int64_t{1} << 22) || threads < 2 ||
      omp_in_parallel())
    return false;
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t per = (p.out_channels / nt + 7) / 8 * 8;
    const std::int64_t o0 = std::min(p.out_channels, t * per);
    const std::int64_t o1 = t + 1 == nt ? p.out_channels : std::min(p.out_channels, o0 + per);
    if (o0 < o1) {
      Conv2dParams q = p;
      q.out_channels = o1 - o0;
      half(q, o0);
    }
  }
  return true;
#else
  (void)p, (void)half;
  return false;
#endif
}

/// Which Winograd form a forward call with p takes: 0 (none), 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)).
inline int winograd_variant(const Conv2dParams& p) {
  if (p.batch <= 0 || !use_winograd(p)) return 0;
  return use_winograd4(p) ? 4 : 2;
}
}  // namespace conv_detail

template <class T>
void conv2d(const Conv2dParams& p, const View<const T>& xv, const View<const T>& wv, const T* bias, const View<T>& yv,
            UnaryOp act) {
  using namespace conv_detail;
  const std::int64_t per_filter = p.in_channels / p.groups * p.kernel_h * p.kernel_w, hw = p.out_h * p.out_w;
  if (split_channels(p, [&](const Conv2dParams& q, std::int64_t o0) {
        cpu::conv2d(q, xv, View<const T>(wv.data + o0 * per_filter, Shape{q.out_channels, p.in_channels, p.kernel_h, p.kernel_w}),
                    bias ? bias + o0 : nullptr, View<T>(yv.data + o0 * hw, Shape{1, q.out_channels, p.out_h, p.out_w}), act);
      }))
    return;
  if (const int v = winograd_variant(p))
    return v == 4 ? conv2d_winograd4(p, xv.data, wv.data, bias, yv.data, act)
                  : conv2d_winograd(p, xv.data, wv.data, bias, yv.data, act);
  const std::int64_t G = p.groups, Cg = p.in_channels / G, Og = p.out_channels / G;
  const std::int64_t HWi = p.in_h * p.in_w, HWo = p.out_h * p.out_w, Kg = Cg * p.kernel_h * p.kernel_w;
  if (p.batch == 0 || p.out_channels == 0 || HWo == 0) return;
  if (use_direct_conv<T>(p)) return direct_over_images(p, conv2d_direct<T>, xv.data, wv.data, bias, yv.data, act);
  const bool direct = reads_input_directly(p);
  const std::int64_t col_size = direct ? 0 : p.in_channels * p.kernel_h * p.kernel_w * HWo;
  const int threads = image_threads(p.batch, 2 * p.out_channels * Kg * HWo);
  Scratch<T> scratch(threads * col_size);
  over_images(threads, p.batch, [&](int t, std::int64_t b, std::int64_t e) {
    T* col = scratch.get() + t * col_size;
    for (std::int64_t n = b; n < e; ++n) {
      const T* x = xv.data + n * p.in_channels * HWi;
      T* y = yv.data + n * p.out_channels * HWo;
      if (!direct) im2col(x, p.in_channels, p, col);
      const T* src = direct ? x : col;
      for (std::int64_t g = 0; g < G; ++g) {
        Eigen::Map<RowMat<T>> Y(y + g * Og * HWo, Og, HWo);
        if (Kg == 0) {
          Y.setZero();
          continue;
        }
        Eigen::Map<const RowMat<T>> A(wv.data + g * Og * Kg, Og, Kg), B(src + g * Kg * HWo, Kg, HWo);
        Y.noalias() = A * B;
      }
      bias_activation(y, bias, p.out_channels, HWo, act);
    }
  });
}

/// The filters in the form a forward call with p would make of them on every
/// call (Winograd-transformed: [16 or 36 positions, out_channels,
/// in_channels / groups]), for frozen plans to make once; an empty shape
/// when the call reads the filters as they are.
inline Shape conv2d_prepared_shape(const Conv2dParams& p) {
  const int v = conv_detail::winograd_variant(p);
  if (!v) return {};
  // Prepared once, F(4x4)'s larger bank costs nothing per call: planes of
  // 8x8+ outputs take it at any batch (one 16x16 image's GEMMs, a vector
  // of 16 tiles wide, suit gemm_direct).
  const bool f4 = v == 4 || (p.out_h >= 8 && p.out_w >= 8);
  return {f4 ? 36 : 16, p.out_channels, p.in_channels / p.groups};
}

/// u = w in the form u.shape names (conv2d_prepared_shape's).
template <class T>
void conv2d_prepare(const Conv2dParams& p, const View<const T>& wv, const View<T>& uv) {
  using namespace conv_detail;
  const std::int64_t Cg = p.in_channels / p.groups;
  FROST_CHECK(p.kernel_h == 3 && p.kernel_w == 3 && uv.shape.ndim() == 3 && (uv.shape[0] == 16 || uv.shape[0] == 36) &&
                  uv.shape[1] == p.out_channels && uv.shape[2] == Cg,
              "frost::cpu::conv2d_prepare: filters [", p.out_channels, ", ", Cg, ", ", p.kernel_h, ", ", p.kernel_w,
              "] have no prepared form ", uv.shape.str(), " (expected [16 or 36, ", p.out_channels, ", ", Cg, "] for 3x3)");
  if (uv.shape[0] == 36) winograd4_weights(wv.data, p.out_channels, Cg, uv.data);
  else winograd_weights(wv.data, p.out_channels, Cg, uv.data);
}

/// conv2d with the filters in their prepared form u ([positions, filters,
/// in_channels / groups]; its dim-0 stride may span more filters, as a
/// block's view of a larger bank does).
namespace conv_detail {
/// True when q is a plain 2x2 stride-2 max pool (floor) of p's whole output.
inline bool pools_2x2(const Conv2dParams& p, const Pool2dParams& q) {
  return pool_detail::is_plain_2x2(q) && q.in_h == p.out_h && q.in_w == p.out_w && q.out_h == p.out_h / 2 &&
         q.out_w == p.out_w / 2 && q.batch == p.batch && q.channels == p.out_channels;
}

template <class T>
void check_prepared(const char* op, const Conv2dParams& p, const View<const T>& uv) {
  FROST_CHECK(p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 &&
                  p.dilation_w == 1 && uv.shape.ndim() == 3 && (uv.shape[0] == 16 || uv.shape[0] == 36) &&
                  uv.shape[1] == p.out_channels && uv.shape[2] == p.in_channels / p.groups &&
                  uv.strides[1] == p.in_channels / p.groups && uv.strides[2] == 1,
              "frost::cpu::", op, ": prepared filters ", uv.shape.str(), " do not fit a 3x3 stride-1 convolution of ",
              p.in_channels, " -> ", p.out_channels, " channels (groups ", p.groups, ")");
}
}  // namespace conv_detail

template <class T>
void conv2d_prepared(const Conv2dParams& p, const View<const T>& xv, const View<const T>& uv, const T* bias,
                     const View<T>& yv, UnaryOp act) {
  using namespace conv_detail;
  const std::int64_t Cg = p.in_channels / p.groups;
  check_prepared("conv2d_prepared", p, uv);
  if (p.batch == 0 || p.out_channels == 0) return;
  const std::int64_t hw = p.out_h * p.out_w;
  if (split_channels(p, [&](const Conv2dParams& q, std::int64_t o0) {
        cpu::conv2d_prepared(q, xv, View<const T>(uv.data + o0 * Cg, Shape{uv.shape[0], q.out_channels, Cg}, uv.strides),
                             bias ? bias + o0 : nullptr, View<T>(yv.data + o0 * hw, Shape{1, q.out_channels, p.out_h, p.out_w}),
                             act);
      }))
    return;
  if (uv.shape[0] == 36) conv2d_winograd4(p, xv.data, static_cast<const T*>(nullptr), bias, yv.data, act, uv.data, uv.strides[0]);
  else conv2d_winograd(p, xv.data, static_cast<const T*>(nullptr), bias, yv.data, act, uv.data, uv.strides[0]);
}

/// conv2d_prepared, then max pooling q of its output, in one pass when the
/// filters are F(4x4)'s and q is 2x2 with stride 2 (no padding, floor): the
/// output transform pools each tile while in cache. False, having done
/// nothing, for other shapes (the caller runs the two).
/// Whether conv2d_max_pool (positions 0) or conv2d_prepared_max_pool (a
/// bank of that many positions) pools in the conv's own pass: the same
/// answer on every build (a frozen plan keeps no scratch where it holds).
template <class T>
bool conv2d_pools_in_pass(const Conv2dParams& p, const Pool2dParams& q, std::int64_t positions) {
  using namespace conv_detail;
  return pools_2x2(p, q) && (positions == 0 ? use_direct_pool_everywhere<T>(p) : positions == 36);
}

template <class T>
bool conv2d_prepared_max_pool(const Conv2dParams& p, const Pool2dParams& q, const View<const T>& xv,
                              const View<const T>& uv, const T* bias, const View<T>& yv, UnaryOp act) {
  using namespace conv_detail;
  check_prepared("conv2d_prepared_max_pool", p, uv);
  if (!conv2d_pools_in_pass<T>(p, q, uv.shape[0])) return false;
  if (p.batch == 0 || p.out_channels == 0) return true;
  const std::int64_t Cg = p.in_channels / p.groups, phw = q.out_h * q.out_w;
  if (!split_channels(p, [&](const Conv2dParams& h, std::int64_t o0) {
        conv2d_winograd4(h, xv.data, static_cast<const T*>(nullptr), bias ? bias + o0 : nullptr, yv.data + o0 * phw, act,
                         uv.data + o0 * Cg, uv.strides[0], true);
      }))
    conv2d_winograd4(p, xv.data, static_cast<const T*>(nullptr), bias, yv.data, act, uv.data, uv.strides[0], true);
  return true;
}

/// conv2d, then max pooling q of its output, in one pass for the few-channel
/// 3x3 convolutions of conv_direct.hpp pooled 2x2 with stride 2 (each
/// window's four sums are in registers together). False, having done
/// nothing, for other shapes (the caller runs the two).
template <class T>
bool conv2d_max_pool(const Conv2dParams& p, const Pool2dParams& q, const View<const T>& xv, const View<const T>& wv,
                     const T* bias, const View<T>& yv, UnaryOp act) {
  using namespace conv_detail;
  if (!conv2d_pools_in_pass<T>(p, q, 0)) return false;
  direct_over_images(p, conv2d_direct_max_pool<T>, xv.data, wv.data, bias, yv.data, act);
  return true;
}

template <class T>
void conv2d_grad_input(const Conv2dParams& p, const View<const T>& dyv, const View<const T>& wv, const View<T>& dxv) {
  using namespace conv_detail;
  const std::int64_t G = p.groups, Cg = p.in_channels / G, Og = p.out_channels / G;
  const std::int64_t HWi = p.in_h * p.in_w, HWo = p.out_h * p.out_w, Kg = Cg * p.kernel_h * p.kernel_w;
  if (p.batch == 0 || p.in_channels == 0 || HWi == 0) return;
  if (p.out_channels == 0 || HWo == 0) {
    std::fill(dxv.data, dxv.data + p.batch * p.in_channels * HWi, T(0));
    return;
  }
  // A stride-1 3x3 convolution's input gradient is itself one: dy convolved
  // with the flipped, transposed kernel and padding 2 - pad. Big enough, it
  // takes the Winograd path too.
  if (p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 &&
      p.dilation_w == 1 && p.pad_h <= 2 && p.pad_w <= 2) {
    Conv2dParams q = p;
    q.in_channels = p.out_channels;
    q.in_h = p.out_h;
    q.in_w = p.out_w;
    q.out_channels = p.in_channels;
    q.out_h = p.in_h;
    q.out_w = p.in_w;
    q.pad_h = 2 - p.pad_h;
    q.pad_w = 2 - p.pad_w;
    if (use_winograd(q)) {
      Scratch<T> flipped(p.in_channels * Og * 9);  // [C, O / groups, 3, 3]
      for (std::int64_t g = 0; g < G; ++g)
        for (std::int64_t c = 0; c < Cg; ++c)
          for (std::int64_t o = 0; o < Og; ++o) {
            const T* src = wv.data + ((g * Og + o) * Cg + c) * 9;
            T* dst = flipped.get() + ((g * Cg + c) * Og + o) * 9;
            for (int k = 0; k < 9; ++k) dst[k] = src[8 - k];
          }
      if (use_winograd4(q)) conv2d_winograd4(q, dyv.data, flipped.get(), static_cast<const T*>(nullptr), dxv.data, UnaryOp::copy);
      else conv2d_winograd(q, dyv.data, flipped.get(), static_cast<const T*>(nullptr), dxv.data, UnaryOp::copy);
      return;
    }
  }
  const bool direct = reads_input_directly(p);
  const std::int64_t col_size = direct ? 0 : p.in_channels * p.kernel_h * p.kernel_w * HWo;
  const int threads = image_threads(p.batch, 2 * p.out_channels * Kg * HWo);
  Scratch<T> scratch(threads * col_size);
  over_images(threads, p.batch, [&](int t, std::int64_t b, std::int64_t e) {
    T* col = scratch.get() + t * col_size;
    for (std::int64_t n = b; n < e; ++n) {
      const T* dy = dyv.data + n * p.out_channels * HWo;
      T* dx = dxv.data + n * p.in_channels * HWi;
      T* dst = direct ? dx : col;  // dcol = W^T dy, then folded back onto dx
      for (std::int64_t g = 0; g < G; ++g) {
        Eigen::Map<const RowMat<T>> A(wv.data + g * Og * Kg, Og, Kg), B(dy + g * Og * HWo, Og, HWo);
        Eigen::Map<RowMat<T>>(dst + g * Kg * HWo, Kg, HWo).noalias() = A.transpose() * B;
      }
      if (!direct) {
        std::fill(dx, dx + p.in_channels * HWi, T(0));
        col2im(col, p.in_channels, p, dx);
      }
    }
  });
}

template <class T>
void conv2d_grad_weight(const Conv2dParams& p, const View<const T>& xv, const View<const T>& dyv, const View<T>& dwv) {
  using namespace conv_detail;
  const std::int64_t G = p.groups, Cg = p.in_channels / G, Og = p.out_channels / G;
  const std::int64_t HWi = p.in_h * p.in_w, HWo = p.out_h * p.out_w, Kg = Cg * p.kernel_h * p.kernel_w;
  // The Winograd path writes every element of dw itself.
  if (p.batch > 0 && use_winograd(p)) return conv2d_grad_weight_winograd(p, xv.data, dyv.data, dwv.data);
  const std::int64_t wsize = p.out_channels * Kg;
  std::fill(dwv.data, dwv.data + wsize, T(0));
  if (p.batch == 0 || wsize == 0 || HWo == 0) return;
  const bool direct = reads_input_directly(p);
  const std::int64_t col_size = direct ? 0 : p.in_channels * p.kernel_h * p.kernel_w * HWo;
  const int threads = image_threads(p.batch, 2 * p.out_channels * Kg * HWo);
  // Each thread sums its images' dW in its own buffer (thread 0 in dw itself).
  Scratch<T> scratch(threads * col_size + (threads - 1) * wsize);
  T* partial = scratch.get() + threads * col_size;
  std::fill(partial, partial + (threads - 1) * wsize, T(0));
  over_images(threads, p.batch, [&](int t, std::int64_t b, std::int64_t e) {
    T* col = scratch.get() + t * col_size;
    T* acc = t == 0 ? dwv.data : partial + (t - 1) * wsize;
    for (std::int64_t n = b; n < e; ++n) {
      const T* x = xv.data + n * p.in_channels * HWi;
      const T* dy = dyv.data + n * p.out_channels * HWo;
      if (!direct) im2col(x, p.in_channels, p, col);
      const T* src = direct ? x : col;
      for (std::int64_t g = 0; g < G; ++g) {
        Eigen::Map<const RowMat<T>> A(dy + g * Og * HWo, Og, HWo), B(src + g * Kg * HWo, Kg, HWo);
        Eigen::Map<RowMat<T>>(acc + g * Og * Kg, Og, Kg).noalias() += A * B.transpose();
      }
    }
  });
  Arr<T> dw(dwv.data, wsize);
  for (int t = 1; t < threads; ++t) dw += Arr<T>(partial + (t - 1) * wsize, wsize);
}

}  // namespace frost::cpu
