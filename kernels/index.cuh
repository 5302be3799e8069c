// Indexing kernels: index_select, gather, scatter_add (atomic adds). A kernel
// cannot throw, so an out-of-range index is written to a device flag (the
// first one found wins) and the host turns it into the same frost::Error the
// CPU kernels give, after the launch.
#pragma once
#include <cstdint>

#include <frost/backend/view.hpp>

#include "check.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

/// flag[0]: 0 while every index was in range, else 1; flag[1]: the bad index.
__device__ inline bool index_ok(std::int64_t i, std::int64_t size, unsigned long long* flag) {
  if (i >= 0 && i < size) return true;
  if (atomicCAS(flag, 0ull, 1ull) == 0ull) flag[1] = static_cast<unsigned long long>(i);
  return false;
}

/// Unravels flat element i of `shape` (nd dims) into idx.
__device__ inline void unravel(std::int64_t i, int nd, const std::int64_t* shape, std::int64_t* idx) {
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
}

struct IndexGeom {
  int nd, dim;
  std::int64_t shape[kMaxDims];  // the iterated shape (y's for select/gather, index's for scatter)
  std::int64_t a[kMaxDims], b[kMaxDims], c[kMaxDims];  // operand strides
};

inline IndexGeom index_geom(const Shape& shape, int dim, const Shape& a, const Shape& b, const Shape& c) {
  IndexGeom g{};
  g.nd = shape.ndim();
  g.dim = dim;
  for (int d = 0; d < g.nd; ++d) {
    g.shape[d] = shape[d];
    g.a[d] = a[d];
    g.b[d] = d < b.ndim() ? b[d] : 0;
    g.c[d] = c[d];
  }
  return g;
}

/// Only the bounds check of index_select's indices: for an empty result
/// (another dim is 0) whose indices must still be in range, as on the CPU.
__global__ void index_check_kernel(std::int64_t n, std::int64_t size, std::int64_t index_stride,
                                   const std::int64_t* index, unsigned long long* flag) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t f = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; f < n; f += step)
    (void)index_ok(index[f * index_stride], size, flag);
}

// a = y, b = index (1-D, stride b[0]), c = x
template <class T>
__global__ void index_select_kernel(std::int64_t n, IndexGeom g, std::int64_t size, std::int64_t index_stride,
                                    const T* x, const std::int64_t* index, T* y, unsigned long long* flag) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t f = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; f < n; f += step) {
    std::int64_t idx[kMaxDims];
    unravel(f, g.nd, g.shape, idx);
    std::int64_t yo = 0, xo = 0;
    bool ok = true;
    for (int d = 0; d < g.nd; ++d) {
      yo += idx[d] * g.a[d];
      std::int64_t i = idx[d];
      if (d == g.dim) {
        i = index[idx[d] * index_stride];
        ok = index_ok(i, size, flag);
      }
      xo += i * g.c[d];
    }
    if (ok) y[yo] = x[xo];
  }
}

// a = y, b = index, c = x
template <class T>
__global__ void gather_kernel(std::int64_t n, IndexGeom g, std::int64_t size, const T* x, const std::int64_t* index,
                              T* y, unsigned long long* flag) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t f = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; f < n; f += step) {
    std::int64_t idx[kMaxDims];
    unravel(f, g.nd, g.shape, idx);
    std::int64_t yo = 0, io = 0, xo = 0;
    for (int d = 0; d < g.nd; ++d) {
      yo += idx[d] * g.a[d];
      io += idx[d] * g.b[d];
    }
    const std::int64_t i = index[io];
    if (!index_ok(i, size, flag)) continue;
    for (int d = 0; d < g.nd; ++d) xo += (d == g.dim ? i : idx[d]) * g.c[d];
    y[yo] = x[xo];
  }
}

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(std::int32_t* p, std::int32_t v) { atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v)); }
/// The element types scatter_add_kernel adds atomically.
template <class T>
inline constexpr bool has_atomic_add = FloatScalar<T> || std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::int32_t>;
__device__ inline void atomic_add(std::int64_t* p, std::int64_t v) {
  // Two's complement: an unsigned add wraps to the same bits.
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// iterated over index's shape; a = src, b = index, c = y
template <class T>
__global__ void scatter_add_kernel(std::int64_t n, IndexGeom g, std::int64_t size, const T* src,
                                   const std::int64_t* index, T* y, unsigned long long* flag) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t f = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; f < n; f += step) {
    std::int64_t idx[kMaxDims];
    unravel(f, g.nd, g.shape, idx);
    std::int64_t so = 0, io = 0, yo = 0;
    for (int d = 0; d < g.nd; ++d) {
      so += idx[d] * g.a[d];
      io += idx[d] * g.b[d];
    }
    const std::int64_t i = index[io];
    if (!index_ok(i, size, flag)) continue;
    for (int d = 0; d < g.nd; ++d) yo += (d == g.dim ? i : idx[d]) * g.c[d];
    atomic_add(y + yo, src[so]);
  }
}

}  // namespace frost::cuda_detail
