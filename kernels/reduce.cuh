// Reductions, arg-reductions and softmax: one thread block per output row,
// each thread folding a strided slice, then cub::BlockReduce across the block.
// NaN propagates through max/min as on the CPU (and in PyTorch).
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cub/block/block_reduce.cuh>

#include <frost/backend/backend.hpp>

#include "check.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

// Integer sums and products wrap, as on the CPU (fn::wrap_*).
template <ReduceOp OP, class T>
struct Combine {
  __device__ T operator()(T acc, T v) const {
    if constexpr (std::is_integral_v<T> && OP == ReduceOp::sum) return fn::wrap_add(acc, v);
    else if constexpr (std::is_integral_v<T> && OP == ReduceOp::prod) return fn::wrap_mul(acc, v);
    else if constexpr (OP == ReduceOp::sum) return acc + v;
    else if constexpr (OP == ReduceOp::prod) return acc * v;
    else if constexpr (OP == ReduceOp::max) return (v > acc || v != v) ? v : acc;
    else return (v < acc || v != v) ? v : acc;
  }
};

// Integer bounds as constants: constexpr variables are usable in device code,
// std::numeric_limits' functions are not (without --expt-relaxed-constexpr).
template <class T>
inline constexpr T kLowest = std::numeric_limits<T>::lowest();
template <class T>
inline constexpr T kHighest = std::numeric_limits<T>::max();

template <ReduceOp OP, class T>
__device__ constexpr T reduce_init() {
  if constexpr (OP == ReduceOp::sum) return T(0);
  else if constexpr (OP == ReduceOp::prod) return T(1);
  else if constexpr (std::is_integral_v<T>) return OP == ReduceOp::max ? kLowest<T> : kHighest<T>;
  else if constexpr (OP == ReduceOp::max) return -infinity<T>();
  else return infinity<T>();
}

/// Output row r (kept geometry: operand 0 = y, operand 1 = x's base) folds
/// the `inner` elements of x's reduced geometry.
template <ReduceOp OP, class T>
__global__ void reduce_rows(std::int64_t rows, Strided<2> kept, std::int64_t inner, Strided<1> red, const T* x, T* y) {
  using BlockReduce = cub::BlockReduce<T, kThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  const Combine<OP, T> comb;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    std::int64_t ko[2];
    kept.offsets(r, ko);
    T acc = reduce_init<OP, T>();
    for (std::int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
      std::int64_t ro[1];
      red.offsets(i, ro);
      acc = comb(acc, x[ko[1] + ro[0]]);
    }
    const T total = BlockReduce(tmp).Reduce(acc, comb);
    if (threadIdx.x == 0) y[ko[0]] = total;
    __syncthreads();  // tmp is reused by the next row
  }
}

/// Few elements per row: one thread per output row.
template <ReduceOp OP, class T>
__global__ void reduce_rows_thread(std::int64_t rows, Strided<2> kept, std::int64_t inner, Strided<1> red, const T* x,
                                   T* y) {
  const Combine<OP, T> comb;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t r = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += step) {
    std::int64_t ko[2];
    kept.offsets(r, ko);
    T acc = reduce_init<OP, T>();
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t ro[1];
      red.offsets(i, ro);
      acc = comb(acc, x[ko[1] + ro[0]]);
    }
    y[ko[0]] = acc;
  }
}

/// Few long rows (a full sum, batch-norm statistics): block (r, c) folds
/// chunk c of row r into partial[r * chunks + c]; a second pass folds the
/// partials, so the whole GPU works on them.
template <ReduceOp OP, class T>
__global__ void reduce_chunks(std::int64_t chunks, std::int64_t chunk_len, Strided<2> kept, std::int64_t inner,
                              Strided<1> red, const T* x, T* partial) {
  using BlockReduce = cub::BlockReduce<T, kThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  const Combine<OP, T> comb;
  const std::int64_t r = blockIdx.x / chunks, c = blockIdx.x % chunks;
  std::int64_t ko[2];
  kept.offsets(r, ko);
  const std::int64_t lo = c * chunk_len, hi = lo + chunk_len < inner ? lo + chunk_len : inner;
  T acc = reduce_init<OP, T>();
  for (std::int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    std::int64_t ro[1];
    red.offsets(i, ro);
    acc = comb(acc, x[ko[1] + ro[0]]);
  }
  const T total = BlockReduce(tmp).Reduce(acc, comb);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/// Splits x's dims into the kept (leading) and reduced (trailing `n_reduced`) geometries.
template <class T>
void reduce_geometry(const View<const T>& x, int n_reduced, const View<T>& y, Strided<2>& kept, Strided<1>& red,
                     std::int64_t& rows, std::int64_t& inner) {
  const int nk = x.ndim() - n_reduced;
  Shape ks, kxs, rs, rxs;
  for (int d = 0; d < x.ndim(); ++d) {
    if (d < nk) {
      ks.push_back(x.shape[d]);
      kxs.push_back(x.strides[d]);
    } else {
      rs.push_back(x.shape[d]);
      rxs.push_back(x.strides[d]);
    }
  }
  const Shape* kst[2] = {&y.strides, &kxs};
  const Shape* rst[1] = {&rxs};
  kept = make_strided<2>(ks, kst);
  red = make_strided<1>(rs, rst);
  rows = ks.numel();
  inner = rs.numel();
}

/// Calls f(std::integral_constant<ReduceOp, op>{}): a kernel template per op.
template <class F>
void with_reduce_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum: return f(std::integral_constant<ReduceOp, ReduceOp::sum>{});
    case ReduceOp::prod: return f(std::integral_constant<ReduceOp, ReduceOp::prod>{});
    case ReduceOp::max: return f(std::integral_constant<ReduceOp, ReduceOp::max>{});
    case ReduceOp::min: return f(std::integral_constant<ReduceOp, ReduceOp::min>{});
  }
}

/// How many chunks to split each of `rows` rows of `inner` elements into (1: no split).
inline std::int64_t reduce_chunks_for(std::int64_t rows, std::int64_t inner, int sm_count) {
  constexpr std::int64_t kMinChunk = 8192;
  if (rows == 0 || rows >= 2 * std::int64_t(sm_count) || inner < 2 * kMinChunk) return 1;  // rows == 0: nothing to split (and no division by it)
  const std::int64_t want = (4 * std::int64_t(sm_count) + rows - 1) / rows;  // about four blocks per multiprocessor
  const std::int64_t most = inner / kMinChunk;
  return want < most ? want : most;
}

/// Pass one of a split reduction: partial[r * chunks + c].
template <class T>
void launch_reduce_chunks(const Launch& L, ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y,
                          std::int64_t chunks, T* partial) {
  Strided<2> kept;
  Strided<1> red;
  std::int64_t rows = 0, inner = 0;
  reduce_geometry(x, n_reduced, y, kept, red, rows, inner);
  const std::int64_t chunk_len = (inner + chunks - 1) / chunks;
  const auto blocks = static_cast<unsigned>(rows * chunks);
  with_reduce_op(op, [&](auto tag) {
    reduce_chunks<decltype(tag)::value, T>
        <<<blocks, kThreads, 0, L.stream>>>(chunks, chunk_len, kept, inner, red, x.data, partial);
  });
  check_launch("reduce");
}

template <class T>
void launch_reduce(const Launch& L, ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) {
  Strided<2> kept;
  Strided<1> red;
  std::int64_t rows = 0, inner = 0;
  reduce_geometry(x, n_reduced, y, kept, red, rows, inner);
  if (rows == 0) return;
  const bool per_thread = inner <= 32;
  with_reduce_op(op, [&](auto tag) {
    constexpr ReduceOp OP = decltype(tag)::value;
    if (per_thread)
      reduce_rows_thread<OP, T><<<grid_for(rows, L.sm_count), kThreads, 0, L.stream>>>(rows, kept, inner, red, x.data, y.data);
    else
      reduce_rows<OP, T><<<static_cast<unsigned>(rows < 65535 ? rows : 65535), kThreads, 0, L.stream>>>(rows, kept, inner,
                                                                                                 red, x.data, y.data);
  });
  check_launch("reduce");
}

// ---- arg-reductions ----------------------------------------------------------

template <class T>
struct ArgBest {
  T v;
  std::int64_t i;
};

template <class T>
__device__ inline bool is_nan(T v) {
  if constexpr (FloatingScalar<T>) return v != v;
  else return false;
}

/// The better of two candidates under the CPU's rule: the first NaN, else the
/// extremum, ties to the smaller index.
template <class T>
struct ArgCombine {
  bool is_max;
  __device__ ArgBest<T> operator()(const ArgBest<T>& a, const ArgBest<T>& b) const {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) return an && (!bn || a.i < b.i) ? a : b;
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (is_max ? a.v > b.v : a.v < b.v) ? a : b;
  }
};

template <class T>
__global__ void arg_reduce_rows(std::int64_t rows, Strided<3> kept, std::int64_t n, std::int64_t st, bool is_max,
                                const T* x, T* values, std::int64_t* indices) {
  using BlockReduce = cub::BlockReduce<ArgBest<T>, kThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  const ArgCombine<T> comb{is_max};
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    std::int64_t o[3];
    kept.offsets(r, o);
    ArgBest<T> best{T(0), -1};
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) best = comb(best, ArgBest<T>{x[o[0] + i * st], i});
    const ArgBest<T> b = BlockReduce(tmp).Reduce(best, comb);
    if (threadIdx.x == 0) {
      values[o[1]] = b.v;
      indices[o[2]] = b.i;
    }
    __syncthreads();
  }
}

template <class T>
void launch_arg_reduce(const Launch& L, bool is_max, const View<const T>& x, const View<T>& values,
                       const View<std::int64_t>& indices) {
  const int nd = x.ndim();
  Shape ks, xs, vs, is;
  for (int d = 0; d + 1 < nd; ++d) {
    ks.push_back(x.shape[d]);
    xs.push_back(x.strides[d]);
    vs.push_back(values.strides[d]);
    is.push_back(indices.strides[d]);
  }
  const Shape* st[3] = {&xs, &vs, &is};
  const std::int64_t rows = ks.numel();
  if (rows == 0) return;
  arg_reduce_rows<T><<<static_cast<unsigned>(rows < 65535 ? rows : 65535), kThreads, 0, L.stream>>>(
      rows, make_strided<3>(ks, st), x.shape[nd - 1], x.strides[nd - 1], is_max, x.data, values.data, indices.data);
  check_launch("arg_reduce");
}

// ---- softmax -------------------------------------------------------------------

struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};
struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

/// One block per row: the max, the sum of exponentials, then the outputs
/// (the CPU's order of operations, so all -inf rows give NaN the same way).
template <class T>
__global__ void softmax_rows(std::int64_t rows, Strided<2> kept, std::int64_t n, bool log, const T* x, T* y) {
  using BlockReduce = cub::BlockReduce<T, kThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ T shared;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    std::int64_t o[2];
    kept.offsets(r, o);
    const T* xp = x + o[0];
    T* yp = y + o[1];
    T m = -infinity<T>();
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) m = xp[i] > m ? xp[i] : m;
    m = BlockReduce(tmp).Reduce(m, MaxOp{});
    if (threadIdx.x == 0) shared = m == -infinity<T>() ? T(0) : m;
    __syncthreads();
    m = shared;
    T sum = 0;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += exp(xp[i] - m);
    __syncthreads();
    sum = BlockReduce(tmp).Reduce(sum, SumOp{});
    if (threadIdx.x == 0) shared = sum;
    __syncthreads();
    sum = shared;
    if (log) {
      const T ls = m + ::log(sum);
      for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) yp[i] = xp[i] - ls;
    } else {
      const T inv = T(1) / sum;
      for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) yp[i] = exp(xp[i] - m) * inv;
    }
    __syncthreads();
  }
}

template <class T>
void launch_softmax(const Launch& L, const View<const T>& x, const View<T>& y, bool log) {
  const int nd = x.ndim();
  Shape ks, xs, ys;
  for (int d = 0; d + 1 < nd; ++d) {
    ks.push_back(x.shape[d]);
    xs.push_back(x.strides[d]);
    ys.push_back(y.strides[d]);
  }
  const Shape* st[2] = {&xs, &ys};
  const std::int64_t rows = ks.numel();
  if (rows == 0 || x.shape[nd - 1] == 0) return;
  softmax_rows<T><<<static_cast<unsigned>(rows < 65535 ? rows : 65535), kThreads, 0, L.stream>>>(
      rows, make_strided<2>(ks, st), x.shape[nd - 1], log, x.data, y.data);
  check_launch("softmax");
}

}  // namespace frost::cuda_detail
