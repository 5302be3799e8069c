// Strided geometry for device kernels: up to four operands walked in the
// output's row-major order. Dims that are contiguous across every operand
// are merged on the host first, so the usual dense case costs one division
// chain of length one.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include <frost/backend/view.hpp>
#include <frost/core/shape.hpp>

namespace frost::cuda_detail {

constexpr int kThreads = 256;

/// +infinity in device code (std::numeric_limits is host-only without --expt-relaxed-constexpr).
template <class T>
__device__ inline T infinity() {
  return static_cast<T>(__int_as_float(0x7f800000));
}

/// Where a launch goes: the stream, and the multiprocessor count grids are sized by.
struct Launch {
  cudaStream_t stream;
  int sm_count;
};

template <int N>
struct Strided {
  int nd = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t stride[N][kMaxDims] = {};
  bool dense = true;  // every operand is contiguous in the same order: element i is at offset i

  /// The offsets of flat element i in each operand.
  __device__ void offsets(std::int64_t i, std::int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const std::int64_t idx = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < N; ++k) off[k] += idx * stride[k][d];
    }
  }
};

/// Geometry of `shape` with each operand's strides (all of `shape`'s rank),
/// size-1 dims dropped and mergeable neighbours merged.
template <int N>
Strided<N> make_strided(const Shape& shape, const Shape* const (&strides)[N]) {
  Strided<N> g;
  for (int d = 0; d < shape.ndim(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = g.nd > 0;
    for (int k = 0; k < N && merge; ++k) merge = g.stride[k][g.nd - 1] == (*strides[k])[d] * shape[d];
    if (merge) {
      g.shape[g.nd - 1] *= shape[d];
      for (int k = 0; k < N; ++k) g.stride[k][g.nd - 1] = (*strides[k])[d];
    } else {
      g.shape[g.nd] = shape[d];
      for (int k = 0; k < N; ++k) g.stride[k][g.nd] = (*strides[k])[d];
      ++g.nd;
    }
  }
  g.dense = g.nd == 0 || (g.nd == 1 && [&] {
              for (int k = 0; k < N; ++k)
                if (g.stride[k][0] != 1) return false;
              return true;
            }());
  return g;
}

/// Four consecutive elements moved as one access (16 bytes for float, two
/// 16-byte halves for double): the dense kernels' vectorised loads and stores.
template <class T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

/// Whether p can be read as Pack4s from its first element (cudaMallocAsync's
/// blocks are; a view's offset may shift one off).
template <class T>
inline bool pack_aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(Pack4<T>) == 0;
}

/// Whether y and the n inputs can all be read as Pack4s.
template <class T>
inline bool packs_fit(const T* y, const T* const* in, int n) {
  bool ok = pack_aligned(y);
  for (int k = 0; k < n; ++k) ok = ok && pack_aligned(in[k]);
  return ok;
}

/// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(std::int64_t n, int sm_count) {
  const std::int64_t want = (n + kThreads - 1) / kThreads, cap = std::int64_t(sm_count) * 16;
  return static_cast<unsigned>(want < 1 ? 1 : (want < cap ? want : cap));
}

}  // namespace frost::cuda_detail
