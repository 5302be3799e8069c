// The forward 3x3 stride-1 convolution of images with few channels (a
// network's first layer: RGB in, 3 x 9 = 27 products per output). Through
// im2col its GEMM has a depth of 27, so the kernel reloads and stores its
// sums after every 27 multiply-adds and runs at about 60% of the FMA rate.
// Here 8 filters x 2 vectors of output columns stay in 16 vector registers
// across all the taps (6 filters, 12 registers, where there are only 16):
// each tap is 2 unaligned loads of a padded input row, a broadcast weight
// per filter and 16 (12) multiply-adds, and the bias and activation are
// applied before the one store.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../../core/functors.hpp"
#include "conv_common.hpp"
#include "vec.hpp"

namespace frost::cpu::conv_detail {

template <class T>
struct DirectConv {
  using Vec = SimdVec<T>;
  static constexpr std::int64_t kLanes = kVecLanes<T>;
  // Filters a block (the last block overlaps the one before): the sums
  // (2 vectors a filter), 2 input vectors and a broadcast fit the registers.
  static constexpr std::int64_t kFilters = kVecRegs >= 32 ? 8 : 6;
  static constexpr std::int64_t kPoolFilters = kVecRegs >= 32 ? 4 : 2;  // block_pool's (4 vectors a filter)
  static constexpr std::int64_t kMaxDepth = 48;  // channels x 9 taps: above this the im2col GEMM is efficient
};

/// True when conv2d_direct takes p: a 3x3 stride-1 undilated ungrouped
/// convolution of at most 5 input channels, a block of filters or more and
/// outputs at least one vector wide.
template <class T>
bool use_direct_conv(const Conv2dParams& p) {
  using D = DirectConv<T>;
  return p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 &&
         p.dilation_w == 1 && p.groups == 1 && p.in_channels * 9 <= D::kMaxDepth && p.in_channels > 0 &&
         p.out_channels >= D::kFilters && p.out_w >= D::kLanes && p.out_h > 0;
}

namespace direct_detail {
/// xp[c][r][col] = x[c][r - pad_h][col - pad_w] (one image), 0 outside it:
/// C planes of (out_h + 2) x (out_w + 2).
template <class T>
void pad_image(const Conv2dParams& p, const T* x, T* xp) {
  const std::int64_t C = p.in_channels, H = p.in_h, W = p.in_w, ph = p.out_h + 2, pw = p.out_w + 2;
  std::fill_n(xp, C * ph * pw, T(0));
  const std::int64_t lo = std::min(p.pad_w, pw), hi = std::min(pw, W + p.pad_w);
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t r = 0; r < ph; ++r) {
      const std::int64_t iy = r - p.pad_h;
      if (iy < 0 || iy >= H || lo >= hi) continue;
      const T* xr = x + (c * H + iy) * W;  // padded column col is xr[col - pad_w]
      std::copy(xr + (lo - p.pad_w), xr + (hi - p.pad_w), xp + (c * ph + r) * pw + lo);
    }
}

/// y rows of filters [o0, o0 + kFilters) at output row oy, columns [ox, ox + CB
/// vectors): the sums over every channel and tap, then bias and act.
template <int CB, class T>
void block(const T* xp, std::int64_t C, std::int64_t ph, std::int64_t pw, const T* w, const T* bias, UnaryOp act,
           std::int64_t o0, std::int64_t oy, std::int64_t ox, std::int64_t OH, std::int64_t OW, T* y) {
  using D = DirectConv<T>;
  using Vec = typename D::Vec;
  constexpr std::int64_t F = D::kFilters, V = D::kLanes;
  Vec acc[F][CB];
  for (int f = 0; f < F; ++f)
    for (int b = 0; b < CB; ++b) acc[f][b] = Vec{};
  for (std::int64_t c = 0; c < C; ++c)
    for (int i = 0; i < 3; ++i) {
      const T* row = xp + (c * ph + oy + i) * pw + ox;
      for (int j = 0; j < 3; ++j) {
        Vec in[CB];
        for (int b = 0; b < CB; ++b) {
          load_vec(in[b], row + j + b * V);
          in_register(in[b]);
        }
        const T* wt = w + (o0 * C + c) * 9 + i * 3 + j;  // filter o0's tap; the next filter's is C * 9 on
        for (int f = 0; f < F; ++f) {
          const T wf = wt[f * C * 9];
          for (int b = 0; b < CB; ++b) acc[f][b] += wf * in[b];
        }
      }
    }
  for (int f = 0; f < F; ++f) {
    const T bo = bias ? bias[o0 + f] : T(0);
    T* yr = y + ((o0 + f) * OH + oy) * OW + ox;
    for (int b = 0; b < CB; ++b) {
      Vec v = acc[f][b] + bo;
      if (act == UnaryOp::relu) v = v > Vec{} ? v : Vec{};  // NaN -> 0, as fn::unary's relu
      store_vec(yr + b * V, v);
    }
    if (act != UnaryOp::copy && act != UnaryOp::relu)
      for (std::int64_t k = 0; k < CB * V; ++k) yr[k] = fn::unary(act, yr[k], T(0), T(0));
  }
}

/// Max-pooled 2x2 (stride 2) output of filters [o0, o0 + kPoolFilters) at
/// pooled row py, pooled columns [px, px + V): conv rows 2 py and 2 py + 1,
/// columns [2 px, 2 px + 2 V), summed as block's, then bias, act, and the
/// max of each window (NaN wins, as in max_pool2d). The conv output is
/// never stored.
template <class T>
void block_pool(const T* xp, std::int64_t C, std::int64_t ph, std::int64_t pw, const T* w, const T* bias, UnaryOp act,
                std::int64_t o0, std::int64_t py, std::int64_t px, std::int64_t PH, std::int64_t PW, T* y) {
  using D = DirectConv<T>;
  using Vec = typename D::Vec;
  constexpr std::int64_t F = D::kPoolFilters, V = D::kLanes;
  Vec acc[F][2][2];  // [filter][row][column vector]
  for (int f = 0; f < F; ++f)
    for (int r = 0; r < 2; ++r)
      for (int b = 0; b < 2; ++b) acc[f][r][b] = Vec{};
  const std::int64_t oy = 2 * py, ox = 2 * px;
  for (std::int64_t c = 0; c < C; ++c)
    for (int i = 0; i < 3; ++i) {
      const T* row = xp + (c * ph + oy + i) * pw + ox;
      for (int j = 0; j < 3; ++j) {
        Vec in[2][2];
        for (int r = 0; r < 2; ++r)
          for (int b = 0; b < 2; ++b) {
            load_vec(in[r][b], row + r * pw + j + b * V);
            in_register(in[r][b]);
          }
        const T* wt = w + (o0 * C + c) * 9 + i * 3 + j;
        for (int f = 0; f < F; ++f) {
          const T wf = wt[f * C * 9];
          for (int r = 0; r < 2; ++r)
            for (int b = 0; b < 2; ++b) acc[f][r][b] += wf * in[r][b];
        }
      }
    }
  for (int f = 0; f < F; ++f) {
    const T bo = bias ? bias[o0 + f] : T(0);
    Vec v[2][2];
    for (int r = 0; r < 2; ++r)
      for (int b = 0; b < 2; ++b) {
        v[r][b] = acc[f][r][b] + bo;
        if (act == UnaryOp::relu) v[r][b] = v[r][b] > Vec{} ? v[r][b] : Vec{};  // NaN -> 0, as fn::unary's relu
        else if (act != UnaryOp::copy)  // before the max: act need not be monotonic
          for (std::int64_t k = 0; k < V; ++k) v[r][b][k] = fn::unary(act, v[r][b][k], T(0), T(0));
      }
    Vec c[2], out;  // the rows' max, column by column (NaN wins, as in max_pool2d), then the columns'
    for (int b = 0; b < 2; ++b) c[b] = ((v[0][b] > v[1][b]) | (v[0][b] != v[0][b])) ? v[0][b] : v[1][b];
    max_pairs<T>(c[0], c[1], out);
    store_vec(y + ((o0 + f) * PH + py) * PW + px, out);
  }
}
}  // namespace direct_detail

/// The padded copy of one image conv2d_direct reads (pad_image's).
inline std::int64_t direct_work(const Conv2dParams& p) { return p.in_channels * (p.out_h + 2) * (p.out_w + 2); }

/// y = act(conv(x, w) + bias) for the images [n0, n1) of x, use_direct_conv(p)
/// holding; `work` holds direct_work(p) elements.
template <class T>
void conv2d_direct(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, UnaryOp act, std::int64_t n0,
                   std::int64_t n1, T* work) {
  using D = DirectConv<T>;
  const std::int64_t C = p.in_channels, O = p.out_channels, H = p.in_h, W = p.in_w, OH = p.out_h, OW = p.out_w;
  const std::int64_t ph = OH + 2, pw = OW + 2;
  for (std::int64_t n = n0; n < n1; ++n) {
    direct_detail::pad_image(p, x + n * C * H * W, work);
    T* yn = y + n * O * OH * OW;
    const std::int64_t wide = 2 * D::kLanes;
    for (std::int64_t ob = 0; ob < O; ob += D::kFilters) {
      const std::int64_t o0 = std::min(ob, O - D::kFilters);  // the last block overlaps: the same sums again
      for (std::int64_t oy = 0; oy < OH; ++oy) {
        std::int64_t ox = 0;
        for (; ox + wide <= OW; ox += wide) direct_detail::block<2>(work, C, ph, pw, w, bias, act, o0, oy, ox, OH, OW, yn);
        for (; ox < OW; ox += D::kLanes)
          direct_detail::block<1>(work, C, ph, pw, w, bias, act, o0, oy, std::min(ox, OW - D::kLanes), OH, OW, yn);
      }
    }
  }
}

/// conv2d_direct max-pooled 2x2 with stride 2 (floor) into y [images,
/// out_channels, out_h / 2, out_w / 2], for shapes use_direct_pool takes.
template <class T>
void conv2d_direct_max_pool(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, UnaryOp act,
                            std::int64_t n0, std::int64_t n1, T* work) {
  using D = DirectConv<T>;
  constexpr std::int64_t V = D::kLanes;
  const std::int64_t C = p.in_channels, O = p.out_channels, PH = p.out_h / 2, PW = p.out_w / 2;
  const std::int64_t ph = p.out_h + 2, pw = p.out_w + 2;
  for (std::int64_t n = n0; n < n1; ++n) {
    direct_detail::pad_image(p, x + n * C * p.in_h * p.in_w, work);
    T* yn = y + n * O * PH * PW;
    for (std::int64_t ob = 0; ob < O; ob += D::kPoolFilters) {
      const std::int64_t o0 = std::min(ob, O - D::kPoolFilters);  // overlapping blocks: the same values again
      for (std::int64_t py = 0; py < PH; ++py)
        for (std::int64_t px = 0; px < PW; px += V)
          direct_detail::block_pool(work, C, ph, pw, w, bias, act, o0, py, std::min(px, PW - V), PH, PW, yn);
    }
  }
}

/// True when conv2d_direct_max_pool takes p: use_direct_conv's shapes (so
/// that the unpooled call sums in the same order) with a pooled row at
/// least one vector wide.
template <class T>
bool use_direct_pool(const Conv2dParams& p) {
  return use_direct_conv<T>(p) && p.out_w / 2 >= DirectConv<T>::kLanes && p.out_h >= 2;
}

/// use_direct_pool on every build, whatever its vector width and register
/// count (the widest block: 8 filters, 64-byte vectors): what a frozen plan
/// relies on when it keeps no scratch for the conv's output, so that a plan
/// saved by an AVX2 build runs on an AVX-512 one and the other way round.
template <class T>
bool use_direct_pool_everywhere(const Conv2dParams& p) {
  return use_direct_pool<T>(p) && p.out_channels >= 8 && p.out_w / 2 >= 64 / static_cast<std::int64_t>(sizeof(T));
}

/// `kernel` (conv2d_direct or conv2d_direct_max_pool) over all the images,
/// split over the threads, each with its own padded-image workspace.
template <class T, class Kernel>
void direct_over_images(const Conv2dParams& p, Kernel kernel, const T* x, const T* w, const T* bias, T* y, UnaryOp act) {
  const int threads = image_threads(p.batch, 2 * p.out_channels * p.in_channels * 9 * p.out_h * p.out_w);
  const std::int64_t work = direct_work(p);
  Scratch<T> scratch(threads * work);
  over_images(threads, p.batch, [&](int t, std::int64_t b, std::int64_t e) {
    kernel(p, x, w, bias, y, act, b, e, scratch.get() + t * work);
  });
}

}  // namespace frost::cpu::conv_detail
