// Batch normalization over dense x [n, c, inner] on the CPU, the few passes
// it needs: per channel, the mean and then the spread about it (two passes,
// each plane summed with vector accumulators and the planes in double, so
// float data keeps its precision), then one pass that
// writes y = (x - mean) s + b with s = w invstd per channel (x - mean first,
// as the composite does, so a large mean cancels exactly). The backward is one
// pass of sums and one that writes dx. The ops' composite form makes about
// a dozen passes over the activation for the same work.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "parallel.hpp"

namespace frost::cpu {

namespace bn {

/// Units (channels, planes) per thread's share when each is `per_unit` elements of work.
inline std::int64_t grain_of(std::int64_t per_unit) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(per_unit, 1));
}

/// Sum over channel ch's planes of f(plane of x, plane of g), each plane's
/// part an Eigen expression summed with vector accumulators, the planes'
/// parts added in double.
template <class T, class F>
double channel_sum(std::int64_t n, std::int64_t c, std::int64_t inner, std::int64_t ch, const T* x, const T* g, F&& f) {
  using A = Eigen::Array<T, Eigen::Dynamic, 1>;
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at = (i * c + ch) * inner;
    total += double(f(Eigen::Map<const A>(x + at, inner), Eigen::Map<const A>(g + at, inner)));
  }
  return total;
}

/// Runs f(plane, channel) over every plane (i, ch) of [n, c, inner], threads splitting the planes.
template <class F>
void each_plane(std::int64_t n, std::int64_t c, std::int64_t inner, F&& f) {
  parallel_for(n * c, grain_of(inner), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p) f(p * inner, static_cast<std::size_t>(p % c));
  });
}

/// y = (x - m[ch]) s[ch] + b[ch] over every plane.
template <class T>
void normalize_planes(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* m, const T* s,
                      const T* b, T* y) {
  each_plane(n, c, inner, [&](std::int64_t at, std::size_t ch) {
    const T mp = m[ch], sp = s[ch], bp = b[ch];
    const T* xp = x + at;
    T* yp = y + at;
    FROST_SIMD
    for (std::int64_t j = 0; j < inner; ++j) yp[j] = (xp[j] - mp) * sp + bp;
  });
}

}  // namespace bn

template <class T>
void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b, T* y,
                         T* save_mean, T* save_invstd, T* running_mean, T* running_var, double momentum, double eps) {
  const std::int64_t per_channel = n * inner;
  const double count = double(per_channel);
  std::vector<T> s(static_cast<std::size_t>(c));
  parallel_for(c, bn::grain_of(per_channel), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t ch = lo; ch < hi; ++ch) {
      const double mean =
          bn::channel_sum(n, c, inner, ch, x, x, [](const auto& xa, const auto&) { return xa.sum(); }) / count;
      const T m = T(mean);
      // The spread about the (rounded) mean, plus the rounding's own share.
      const double dm = mean - double(m);
      const double ss =
          bn::channel_sum(n, c, inner, ch, x, x, [&](const auto& xa, const auto&) { return (xa - m).square().sum(); });
      const double var = std::max(0.0, ss / count - dm * dm);
      const double invstd = 1 / std::sqrt(var + eps);
      save_mean[ch] = T(mean);
      save_invstd[ch] = T(invstd);
      s[static_cast<std::size_t>(ch)] = T(double(w[ch]) * invstd);
      if (running_mean) {  // PyTorch's update: the unbiased variance
        running_mean[ch] = T((1 - momentum) * double(running_mean[ch]) + momentum * mean);
        running_var[ch] = T((1 - momentum) * double(running_var[ch]) + momentum * var * count / (count - 1));
      }
    }
  });
  bn::normalize_planes(n, c, inner, x, save_mean, s.data(), b, y);
}

template <class T>
void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b,
                          const T* mean, const T* var, T* y, double eps) {
  std::vector<T> s(static_cast<std::size_t>(c));
  for (std::int64_t ch = 0; ch < c; ++ch)
    s[static_cast<std::size_t>(ch)] = T(double(w[ch]) / std::sqrt(double(var[ch]) + eps));
  bn::normalize_planes(n, c, inner, x, mean, s.data(), b, y);
}

/// dx = k dy - c2 (x - mean) - c1 with k = w invstd, c1 = k db / N,
/// c2 = k invstd dw / N; dw = invstd sum(dy (x - mean)), db = sum(dy).
template <class T>
void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy, const T* w,
                         const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db) {
  const double count = double(n * inner);
  std::vector<T> k(static_cast<std::size_t>(c)), c1(static_cast<std::size_t>(c)), c2(static_cast<std::size_t>(c));
  parallel_for(c, bn::grain_of(n * inner), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t ch = lo; ch < hi; ++ch) {
      const double invstd = double(save_invstd[ch]);
      const T m = save_mean[ch];
      const double sdy = bn::channel_sum(n, c, inner, ch, dy, dy, [](const auto& ga, const auto&) { return ga.sum(); });
      const double sdyx =
          bn::channel_sum(n, c, inner, ch, x, dy, [&](const auto& xa, const auto& ga) {
            return (ga * (xa - m)).sum();
          });
      const double gw = sdyx * invstd, kk = double(w[ch]) * invstd;
      db[ch] = T(sdy);
      dw[ch] = T(gw);
      const auto u = static_cast<std::size_t>(ch);
      k[u] = T(kk);
      c1[u] = T(kk * sdy / count);
      c2[u] = T(kk * invstd * gw / count);
    }
  });
  bn::each_plane(n, c, inner, [&](std::int64_t at, std::size_t ch) {
    const T kp = k[ch], c1p = c1[ch], c2p = c2[ch], mp = save_mean[ch];
    const T* xp = x + at;
    const T* gp = dy + at;
    T* op = dx + at;
    FROST_SIMD
    for (std::int64_t j = 0; j < inner; ++j) op[j] = kp * gp[j] - c2p * (xp[j] - mp) - c1p;
  });
}

}  // namespace frost::cpu
