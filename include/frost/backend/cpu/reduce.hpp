// CPU reductions, arg-reductions and softmax. Sums over long contiguous runs
// are split into fixed blocks whose partials are added in order, so results do
// not depend on the number of threads.
#pragma once
#include <cmath>
#include <type_traits>
#include <cstdint>
#include <limits>
#include <vector>

#include "../backend.hpp"
#include "loop.hpp"
#include "parallel.hpp"

namespace frost::cpu {

template <class T>
struct ReduceInit {
  static T value(ReduceOp op) {
    switch (op) {
      case ReduceOp::sum: return T(0);
      case ReduceOp::prod: return T(1);
      case ReduceOp::max: return std::is_integral_v<T> ? std::numeric_limits<T>::lowest() : -std::numeric_limits<T>::infinity();
      case ReduceOp::min: return std::is_integral_v<T> ? std::numeric_limits<T>::max() : std::numeric_limits<T>::infinity();
    }
    return T(0);
  }
};

template <ReduceOp OP, class T>
inline T combine(T acc, T v) {
  if constexpr (std::is_integral_v<T> && OP == ReduceOp::sum) return fn::wrap_add(acc, v);  // wraps, as PyTorch
  else if constexpr (std::is_integral_v<T> && OP == ReduceOp::prod) return fn::wrap_mul(acc, v);
  else if constexpr (OP == ReduceOp::sum) return acc + v;
  else if constexpr (OP == ReduceOp::prod) return acc * v;
  else if constexpr (OP == ReduceOp::max) return (v > acc || v != v) ? v : acc;  // NaN wins, as in PyTorch
  else return (v < acc || v != v) ? v : acc;
}

template <ReduceOp OP, class T>
T reduce_run(const T* p, std::int64_t n, std::int64_t stride) {
  T acc = ReduceInit<T>::value(OP);
  if (stride == 1) {
    if constexpr (OP == ReduceOp::sum && std::is_floating_point_v<T>) {
      // 32 independent accumulators: vectorises without -ffast-math, and
      // several vector adds are in flight at once (one chain of 8 was bound
      // by the add latency, not by memory).
      constexpr int kAcc = 32;
      T s[kAcc] = {};
      std::int64_t i = 0;
      for (; i + kAcc <= n; i += kAcc)
        for (int j = 0; j < kAcc; ++j) s[j] += p[i + j];
      for (; i < n; ++i) s[i % kAcc] += p[i];
      for (int w = kAcc / 2; w > 0; w /= 2)  // pairwise
        for (int j = 0; j < w; ++j) s[j] += s[j + w];
      return s[0];
    }
    for (std::int64_t i = 0; i < n; ++i) acc = combine<OP>(acc, p[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) acc = combine<OP>(acc, p[i * stride]);
  }
  return acc;
}

template <ReduceOp OP, class T>
void reduce_impl(const View<const T>& x, int n_reduced, const View<T>& y) {
  const int nk = x.ndim() - n_reduced;
  Shape kshape, kstride, rshape, rstride;
  for (int d = 0; d < x.ndim(); ++d) {
    if (d < nk) {
      kshape.push_back(x.shape[d]);
      kstride.push_back(x.strides[d]);
    } else {
      rshape.push_back(x.shape[d]);
      rstride.push_back(x.strides[d]);
    }
  }
  const std::int64_t outer = kshape.numel(), inner = rshape.numel();
  const T init = ReduceInit<T>::value(OP);
  Loop<2> out_loop(kshape, {&y.strides, &kstride});
  Loop<1> red(rshape, {&rstride});
  const bool red_one_run = red.nd == 1;

  // Kept dims dense and innermost in memory (a column sum, the bias gradient):
  // add whole rows into the output so the inner loop is contiguous.
  if (outer > 1 && out_loop.nd == 1 && out_loop.inner_stride(0) == 1 && out_loop.inner_stride(1) == 1) {
    T* yp = y.data;
    parallel_for(outer, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) yp[o] = init;
      red.run(0, inner, [&](const auto& off, std::int64_t cnt) {
        for (std::int64_t r = 0; r < cnt; ++r) {
          const T* xp = x.data + off[0] + r * red.inner_stride(0);
          for (std::int64_t o = b; o < e; ++o) yp[o] = combine<OP>(yp[o], xp[o]);
        }
      });
    });
    return;
  }

  if (outer == 1 && red_one_run && inner > 65536) {
    // One long run: fixed-size blocks, partials combined in order.
    constexpr std::int64_t kBlock = 16384;
    const std::int64_t nb = (inner + kBlock - 1) / kBlock, st = red.inner_stride(0);
    std::vector<T> part(static_cast<std::size_t>(nb));
    parallel_for(nb, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const std::int64_t len = std::min(kBlock, inner - i * kBlock);
        part[static_cast<std::size_t>(i)] = reduce_run<OP, T>(x.data + i * kBlock * st, len, st);
      }
    });
    T acc = init;
    for (T v : part) acc = combine<OP>(acc, v);
    *y.data = acc;
    return;
  }

  parallel_for(outer, inner > 0 ? std::max<std::int64_t>(1, kParallelGrain / inner) : outer,
               [&](std::int64_t b, std::int64_t e) {
                 out_loop.run(b, e, [&](const auto& off, std::int64_t cnt) {
                   for (std::int64_t o = 0; o < cnt; ++o) {
                     const T* base = x.data + off[1] + o * out_loop.inner_stride(1);
                     T acc = init;
                     if (red_one_run) {
                       acc = reduce_run<OP, T>(base, inner, red.inner_stride(0));
                     } else {
                       red.run(0, inner, [&](const auto& roff, std::int64_t rc) {
                         acc = combine<OP>(acc, reduce_run<OP, T>(base + roff[0], rc, red.inner_stride(0)));
                       });
                     }
                     y.data[off[0] + o * out_loop.inner_stride(0)] = acc;
                   }
                 });
               });
}

template <class T>
void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) {
  switch (op) {
    case ReduceOp::sum: return reduce_impl<ReduceOp::sum>(x, n_reduced, y);
    case ReduceOp::prod: return reduce_impl<ReduceOp::prod>(x, n_reduced, y);
    case ReduceOp::max: return reduce_impl<ReduceOp::max>(x, n_reduced, y);
    case ReduceOp::min: return reduce_impl<ReduceOp::min>(x, n_reduced, y);
  }
}

template <class T>
void arg_reduce(bool is_max, const View<const T>& x, const View<T>& values, const View<std::int64_t>& indices) {
  const int nd = x.ndim();
  const std::int64_t n = x.shape[nd - 1], st = x.strides[nd - 1];
  Shape kshape, kstride;
  for (int d = 0; d + 1 < nd; ++d) {
    kshape.push_back(x.shape[d]);
    kstride.push_back(x.strides[d]);
  }
  // NaN wins, as in PyTorch: the first NaN is the extremum.
  auto is_nan = [](T v) {
    if constexpr (FloatingScalar<T>) return v != v;  // float16 / bfloat16 compare in float
    else return false;
  };
  Loop<3> loop(kshape, {&kstride, &values.strides, &indices.strides});
  loop.run(0, kshape.numel(), [&](const auto& off, std::int64_t cnt) {
    for (std::int64_t o = 0; o < cnt; ++o) {
      const T* p = x.data + off[0] + o * loop.inner_stride(0);
      T best = p[0];
      std::int64_t bi = 0;
      for (std::int64_t i = 1; i < n && !is_nan(best); ++i) {
        const T v = p[i * st];
        if (is_nan(v) || (is_max ? v > best : v < best)) {
          best = v;
          bi = i;
        }
      }
      values.data[off[1] + o * loop.inner_stride(1)] = best;
      indices.data[off[2] + o * loop.inner_stride(2)] = bi;
    }
  });
}

template <class T>
void softmax(const View<const T>& x, const View<T>& y, bool log) {
  const int nd = x.ndim();
  const std::int64_t n = x.shape[nd - 1];
  Shape kshape, xs, ys;
  for (int d = 0; d + 1 < nd; ++d) {
    kshape.push_back(x.shape[d]);
    xs.push_back(x.strides[d]);
    ys.push_back(y.strides[d]);
  }
  Loop<2> loop(kshape, {&xs, &ys});
  const std::int64_t rows = kshape.numel();
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / (n > 0 ? n : 1)), [&](std::int64_t b, std::int64_t e) {
    loop.run(b, e, [&](const auto& off, std::int64_t cnt) {
      for (std::int64_t r = 0; r < cnt; ++r) {
        const T* xp = x.data + off[0] + r * loop.inner_stride(0);
        T* yp = y.data + off[1] + r * loop.inner_stride(1);
        T m = -std::numeric_limits<T>::infinity();
        for (std::int64_t i = 0; i < n; ++i) m = xp[i] > m ? xp[i] : m;
        if (m == -std::numeric_limits<T>::infinity()) m = T(0);  // all -inf: avoid inf - inf
        T s = 0;
        if (log) {
          for (std::int64_t i = 0; i < n; ++i) s += std::exp(xp[i] - m);
          const T ls = m + std::log(s);
          for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] - ls;
        } else {
          for (std::int64_t i = 0; i < n; ++i) s += (yp[i] = std::exp(xp[i] - m));
          const T inv = T(1) / s;
          for (std::int64_t i = 0; i < n; ++i) yp[i] *= inv;
        }
      }
    });
  });
}

}  // namespace frost::cpu
