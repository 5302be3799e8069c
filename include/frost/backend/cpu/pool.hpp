// CPU pooling: max (with PyTorch's flat indices) and average, forward and
// backward, one (batch, channel) plane at a time across OpenMP threads.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <Eigen/Core>

#include "../backend.hpp"
#include "../pool_window.hpp"
#include "parallel.hpp"
#include "reduce.hpp"

namespace frost::cpu {

namespace pool_detail {

/// Runs fn(plane) for every (batch, channel) plane, in parallel when the planes hold enough work.
template <class Fn>
void over_planes(const Pool2dParams& p, std::int64_t work_per_plane, Fn&& fn) {
  const std::int64_t planes = p.batch * p.channels;
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, work_per_plane));
  parallel_for(planes, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) fn(i);
  });
}

using frost::pool_detail::avg_window;
using frost::pool_detail::max_window;

/// One plane with PyTorch's rule: the first maximum wins, a NaN beats
/// everything (the last NaN's index is kept), an empty window reports its start.
template <class T>
void max_plane_exact(const Pool2dParams& p, const T* x, T* y, std::int64_t* idx) {
  for (std::int64_t oy = 0; oy < p.out_h; ++oy)
    for (std::int64_t ox = 0; ox < p.out_w; ++ox) {
      const auto w = max_window(p, oy, ox);
      std::int64_t best_i = w.y0 * p.in_w + w.x0;
      T best = -std::numeric_limits<T>::infinity();
      for (std::int64_t iy = w.y0; iy < w.y1; iy += p.dilation_h)
        for (std::int64_t ix = w.x0; ix < w.x1; ix += p.dilation_w) {
          const T v = x[iy * p.in_w + ix];
          if (v > best || std::isnan(v)) {
            best = v;
            best_i = iy * p.in_w + ix;
          }
        }
      y[oy * p.out_w + ox] = best;
      if (idx) idx[oy * p.out_w + ox] = best_i;
    }
}

/// The same for a plane without NaN: one comparison per element, which
/// compiles to max / conditional moves instead of unpredictable branches.
/// KW > 0: windows KW columns wide at dilation 1 (2x2 and 3x3 pooling),
/// unrolled; edge windows clipped narrower take the general loop.
template <class T, bool kIndices, int KW>
void max_plane_fast(const Pool2dParams& p, const T* x, T* y, std::int64_t* idx) {
  for (std::int64_t oy = 0; oy < p.out_h; ++oy) {
    const auto rows = max_window(p, oy, 0);
    for (std::int64_t ox = 0; ox < p.out_w; ++ox) {
      const auto w = max_window(p, oy, ox);
      std::int64_t best_i = rows.y0 * p.in_w + w.x0;
      T best = -std::numeric_limits<T>::infinity();
      for (std::int64_t iy = rows.y0; iy < rows.y1; iy += p.dilation_h) {
        const T* row = x + iy * p.in_w;
        if (KW > 0 && w.x1 - w.x0 == KW) {
          for (int j = 0; j < KW; ++j) {
            const T v = row[w.x0 + j];
            if constexpr (kIndices) best_i = v > best ? iy * p.in_w + w.x0 + j : best_i;
            best = v > best ? v : best;
          }
          continue;
        }
        for (std::int64_t ix = w.x0; ix < w.x1; ix += p.dilation_w) {
          const T v = row[ix];
          if constexpr (kIndices) best_i = v > best ? iy * p.in_w + ix : best_i;
          best = v > best ? v : best;
        }
      }
      y[oy * p.out_w + ox] = best;
      if constexpr (kIndices) idx[oy * p.out_w + ox] = best_i;
    }
  }
}

/// 2x2 windows at stride 2 without padding (the usual downsampling), values
/// only: the max of each row pair, vectorised, then of each column pair.
template <class T>
void max_plane_2x2(const Pool2dParams& p, const T* x, T* y, T* rowmax) {
  const std::int64_t W = p.in_w, OW = p.out_w;
  for (std::int64_t oy = 0; oy < p.out_h; ++oy) {
    const T* r0 = x + 2 * oy * W;
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(rowmax, 2 * OW) =
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(r0, 2 * OW)
            .max(Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(r0 + W, 2 * OW));
    T* yr = y + oy * OW;
    for (std::int64_t ox = 0; ox < OW; ++ox) yr[ox] = std::max(rowmax[2 * ox], rowmax[2 * ox + 1]);
  }
}

/// The same windows with PyTorch's flat indices (training records them):
/// four branch-free compares per output, first maximum in scan order wins.
template <class T>
void max_plane_2x2_indices(const Pool2dParams& p, const T* x, T* y, std::int64_t* idx) {
  const std::int64_t W = p.in_w, OW = p.out_w;
  for (std::int64_t oy = 0; oy < p.out_h; ++oy) {
    const std::int64_t top = 2 * oy * W;
    const T* r0 = x + top;
    const T* r1 = r0 + W;
    T* yr = y + oy * OW;
    std::int64_t* ir = idx + oy * OW;
    for (std::int64_t ox = 0; ox < OW; ++ox) {
      const std::int64_t c = 2 * ox;
      T best = r0[c];
      std::int64_t bi = top + c;
      bi = r0[c + 1] > best ? top + c + 1 : bi;
      best = r0[c + 1] > best ? r0[c + 1] : best;
      bi = r1[c] > best ? top + W + c : bi;
      best = r1[c] > best ? r1[c] : best;
      bi = r1[c + 1] > best ? top + W + c + 1 : bi;
      best = r1[c + 1] > best ? r1[c + 1] : best;
      yr[ox] = best;
      ir[ox] = bi;
    }
  }
}

inline bool is_plain_2x2(const Pool2dParams& p) {
  return p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 && p.pad_w == 0 &&
         p.dilation_h == 1 && p.dilation_w == 1 && 2 * p.out_h <= p.in_h && 2 * p.out_w <= p.in_w;
}

template <class T, bool kIndices>
void max_plane_fast(const Pool2dParams& p, const T* x, T* y, std::int64_t* idx) {
  if (p.dilation_w == 1 && p.kernel_w == 2) max_plane_fast<T, kIndices, 2>(p, x, y, idx);
  else if (p.dilation_w == 1 && p.kernel_w == 3) max_plane_fast<T, kIndices, 3>(p, x, y, idx);
  else max_plane_fast<T, kIndices, 0>(p, x, y, idx);
}

}  // namespace pool_detail

template <class T>
void max_pool2d(const Pool2dParams& p, const View<const T>& xv, const View<T>& yv, const View<std::int64_t>& iv) {
  const std::int64_t HW = p.in_h * p.in_w, OHW = p.out_h * p.out_w;
  pool_detail::over_planes(p, OHW * p.kernel_h * p.kernel_w, [&](std::int64_t plane) {
    const T* x = xv.data + plane * HW;
    T* y = yv.data + plane * OHW;
    std::int64_t* idx = iv.data ? iv.data + plane * OHW : nullptr;
    // A vectorised sum is NaN when the plane holds a NaN (or both infinities:
    // the exact path handles those too).
    if (std::isnan(Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, HW).sum()))
      pool_detail::max_plane_exact(p, x, y, idx);
    else if (!idx && p.out_w <= 512 && pool_detail::is_plain_2x2(p)) {
      T rowmax[1024];
      pool_detail::max_plane_2x2(p, x, y, rowmax);
    } else if (idx && pool_detail::is_plain_2x2(p))
      pool_detail::max_plane_2x2_indices(p, x, y, idx);
    else if (idx)
      pool_detail::max_plane_fast<T, true>(p, x, y, idx);
    else
      pool_detail::max_plane_fast<T, false>(p, x, y, nullptr);
  });
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const View<const T>& dyv, const View<const std::int64_t>& iv,
                         const View<T>& dxv) {
  const std::int64_t HW = p.in_h * p.in_w, OHW = p.out_h * p.out_w;
  pool_detail::over_planes(p, OHW + HW, [&](std::int64_t plane) {
    T* dx = dxv.data + plane * HW;
    const T* dy = dyv.data + plane * OHW;
    const std::int64_t* idx = iv.data + plane * OHW;
    std::fill(dx, dx + HW, T(0));
    for (std::int64_t i = 0; i < OHW; ++i) dx[idx[i]] += dy[i];
  });
}

template <class T>
void avg_pool2d(const Pool2dParams& p, const View<const T>& xv, const View<T>& yv) {
  const std::int64_t H = p.in_h, W = p.in_w, OH = p.out_h, OW = p.out_w;
  pool_detail::over_planes(p, OH * OW * p.kernel_h * p.kernel_w, [&](std::int64_t plane) {
    const T* x = xv.data + plane * H * W;
    T* y = yv.data + plane * OH * OW;
    if (OW <= 512 && pool_detail::is_plain_2x2(p)) {  // full windows: row-pair sums, vectorised
      T rowsum[1024];
      const T div = static_cast<T>(p.divisor_override > 0 ? p.divisor_override : 4);
      for (std::int64_t oy = 0; oy < OH; ++oy) {
        const T* r0 = x + 2 * oy * W;
        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(rowsum, 2 * OW) =
            Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(r0, 2 * OW) +
            Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(r0 + W, 2 * OW);
        for (std::int64_t ox = 0; ox < OW; ++ox) y[oy * OW + ox] = (rowsum[2 * ox] + rowsum[2 * ox + 1]) / div;
      }
      return;
    }
    for (std::int64_t oy = 0; oy < OH; ++oy)
      for (std::int64_t ox = 0; ox < OW; ++ox) {
        const auto w = pool_detail::avg_window(p, oy, ox);
        const std::int64_t width = w.x1 - w.x0;
        if (w.y0 >= w.y1 || width <= 0) {
          y[oy * OW + ox] = T(0);
          continue;
        }
        T s = 0;
        if (width == W && (w.y1 - w.y0) * W >= 64) {
          // Whole rows (a global average pool): one contiguous run, summed
          // in reduce_run's vector partial sums; one scalar chain of adds
          // took 4 cycles an element (AdaptiveResNet's head: 7% of its plan).
          s = reduce_run<ReduceOp::sum, T>(x + w.y0 * W, (w.y1 - w.y0) * W, 1);
        } else if (width >= 64) {
          for (std::int64_t iy = w.y0; iy < w.y1; ++iy) s += reduce_run<ReduceOp::sum, T>(x + iy * W + w.x0, width, 1);
        } else {
          for (std::int64_t iy = w.y0; iy < w.y1; ++iy)
            for (std::int64_t ix = w.x0; ix < w.x1; ++ix) s += x[iy * W + ix];
        }
        y[oy * OW + ox] = s / static_cast<T>(w.divisor);
      }
  });
}

template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dyv, const View<T>& dxv) {
  const std::int64_t H = p.in_h, W = p.in_w, OH = p.out_h, OW = p.out_w;
  pool_detail::over_planes(p, OH * OW * p.kernel_h * p.kernel_w + H * W, [&](std::int64_t plane) {
    T* dx = dxv.data + plane * H * W;
    const T* dy = dyv.data + plane * OH * OW;
    std::fill(dx, dx + H * W, T(0));
    for (std::int64_t oy = 0; oy < OH; ++oy)
      for (std::int64_t ox = 0; ox < OW; ++ox) {
        const auto w = pool_detail::avg_window(p, oy, ox);
        if (w.y0 >= w.y1 || w.x0 >= w.x1) continue;
        const T g = dy[oy * OW + ox] / static_cast<T>(w.divisor);
        for (std::int64_t iy = w.y0; iy < w.y1; ++iy)
          for (std::int64_t ix = w.x0; ix < w.x1; ++ix) dx[iy * W + ix] += g;
      }
  });
}

}  // namespace frost::cpu
