// Max and average pooling, forward and backward, one thread per output (or
// input) element. frost's own kernels rather than cuDNN's: cuDNN's max pooling
// gives no indices (its backward re-reads x and y) and its average pooling has
// no divisor_override or PyTorch's ceil_mode clipping; PyTorch's CUDA path uses
// native kernels for the same reasons. The windows come from the host+device
// helpers the CPU kernels use (backend/pool_window.hpp).
#pragma once
#include <cstdint>

#include <frost/backend/pool_window.hpp>

#include "check.cuh"
#include "index.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

template <class T>
__global__ void max_pool_kernel(Pool2dParams p, const T* x, T* y, std::int64_t* indices) {
  const std::int64_t n = p.batch * p.channels * p.out_h * p.out_w, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t o = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const std::int64_t ox = o % p.out_w, oy = (o / p.out_w) % p.out_h, plane = o / (p.out_w * p.out_h);
    const T* xp = x + plane * p.in_h * p.in_w;
    const auto w = pool_detail::max_window(p, oy, ox);
    std::int64_t best_i = w.y0 * p.in_w + w.x0;
    T best = -infinity<T>();
    for (std::int64_t iy = w.y0; iy < w.y1; iy += p.dilation_h)
      for (std::int64_t ix = w.x0; ix < w.x1; ix += p.dilation_w) {
        const T v = xp[iy * p.in_w + ix];
        if (v > best || v != v) {
          best = v;
          best_i = iy * p.in_w + ix;
        }
      }
    y[o] = best;
    if (indices) indices[o] = best_i;
  }
}

/// dx (zeroed first) += dy at the recorded indices; windows may overlap, hence atomics.
template <class T>
__global__ void max_pool_backward_kernel(Pool2dParams p, const T* dy, const std::int64_t* indices, T* dx) {
  const std::int64_t n = p.batch * p.channels * p.out_h * p.out_w, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t o = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const std::int64_t plane = o / (p.out_w * p.out_h);
    atomic_add(dx + plane * p.in_h * p.in_w + indices[o], dy[o]);
  }
}

template <class T>
__global__ void avg_pool_kernel(Pool2dParams p, const T* x, T* y) {
  const std::int64_t n = p.batch * p.channels * p.out_h * p.out_w, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t o = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const std::int64_t ox = o % p.out_w, oy = (o / p.out_w) % p.out_h, plane = o / (p.out_w * p.out_h);
    const T* xp = x + plane * p.in_h * p.in_w;
    const auto w = pool_detail::avg_window(p, oy, ox);
    T s = 0;
    for (std::int64_t iy = w.y0; iy < w.y1; ++iy)
      for (std::int64_t ix = w.x0; ix < w.x1; ++ix) s += xp[iy * p.in_w + ix];
    y[o] = s / static_cast<T>(w.divisor);
  }
}

/// One thread per input element, summing the outputs whose windows cover it
/// (no atomics, the same sum order for every run).
template <class T>
__global__ void avg_pool_backward_kernel(Pool2dParams p, const T* dy, T* dx) {
  const std::int64_t n = p.batch * p.channels * p.in_h * p.in_w, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const std::int64_t ix = i % p.in_w, iy = (i / p.in_w) % p.in_h, plane = i / (p.in_w * p.in_h);
    const T* dyp = dy + plane * p.out_h * p.out_w;
    // Outputs whose (unclipped) window [o * stride - pad, + kernel) holds iy.
    const std::int64_t oy0 = pool_detail::max64(0, (iy + p.pad_h - p.kernel_h + p.stride_h) / p.stride_h);
    const std::int64_t oy1 = pool_detail::min64(p.out_h, (iy + p.pad_h) / p.stride_h + 1);
    const std::int64_t ox0 = pool_detail::max64(0, (ix + p.pad_w - p.kernel_w + p.stride_w) / p.stride_w);
    const std::int64_t ox1 = pool_detail::min64(p.out_w, (ix + p.pad_w) / p.stride_w + 1);
    T s = 0;
    for (std::int64_t oy = oy0; oy < oy1; ++oy)
      for (std::int64_t ox = ox0; ox < ox1; ++ox) {
        const auto w = pool_detail::avg_window(p, oy, ox);
        if (iy >= w.y0 && iy < w.y1 && ix >= w.x0 && ix < w.x1) s += dyp[oy * p.out_w + ox] / static_cast<T>(w.divisor);
      }
    dx[i] = s;
  }
}

}  // namespace frost::cuda_detail
