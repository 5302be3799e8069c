// Elementwise kernels: unary, binary, where, copy, fill and Philox draws, all
// from the host+device functors in core/functors.hpp and core/philox.hpp, so
// the CPU tests cover their arithmetic. Grid-stride loops; dense operands take
// a flat path with four elements per thread (one vector load per operand when
// every pointer is aligned for it), the rest the strided walk.
#pragma once
#include <cstdint>
#include <type_traits>

#include <frost/core/functors.hpp>
#include <frost/core/philox.hpp>

#include "check.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

template <class T>
struct UnaryFn {
  UnaryOp op;
  T p0, p1;
  __device__ T operator()(T x) const { return fn::unary(op, x, p0, p1); }
};
template <class T>
struct BinaryFn {
  BinaryOp op;
  T p;
  __device__ T operator()(T a, T b) const { return fn::binary(op, a, b, p); }
};
template <class T>
struct WhereFn {
  __device__ T operator()(T c, T a, T b) const { return c != T(0) ? a : b; }
};
template <class T>
struct CopyFn {
  __device__ T operator()(T x) const { return x; }
};
template <class T>
struct FillFn {
  T v;
  __device__ T operator()() const { return v; }
};

/// y[i] = f(in[0][i], ...) for NIN inputs; operand 0 of the geometry is y.
template <class T, int NIN>
struct Inputs {
  const T* p[NIN > 0 ? NIN : 1];
};

template <class T, int NIN, class F>
__device__ inline T call(const F& f, const Inputs<T, NIN>& in, const std::int64_t* off) {
  if constexpr (NIN == 0) return f();
  else if constexpr (NIN == 1) return f(in.p[0][off[0]]);
  else if constexpr (NIN == 2) return f(in.p[0][off[0]], in.p[1][off[1]]);
  else return f(in.p[0][off[0]], in.p[1][off[1]], in.p[2][off[2]]);
}

/// f at element j of packs a[0..NIN).
template <class T, int NIN, class F>
__device__ inline T call_packed(const F& f, const Pack4<T>* a, int j) {
  if constexpr (NIN == 0) return f();
  else if constexpr (NIN == 1) return f(a[0].v[j]);
  else if constexpr (NIN == 2) return f(a[0].v[j], a[1].v[j]);
  else return f(a[0].v[j], a[1].v[j], a[2].v[j]);
}

/// Dense operands, all Pack4-aligned: four elements per thread moved with one
/// vector load per input and one store; the last n % 4 by single threads.
template <class T, int NIN, class F>
__global__ void map_packed(std::int64_t n, T* __restrict__ y, Inputs<T, NIN> in, F f) {
  const std::int64_t packs = n / 4, tid = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = tid; i < packs; i += step) {
    Pack4<T> a[NIN > 0 ? NIN : 1];
#pragma unroll
    for (int k = 0; k < NIN; ++k) a[k] = reinterpret_cast<const Pack4<T>*>(in.p[k])[i];
    Pack4<T> out;
#pragma unroll
    for (int j = 0; j < 4; ++j) out.v[j] = call_packed<T, NIN>(f, a, j);
    reinterpret_cast<Pack4<T>*>(y)[i] = out;
  }
  const std::int64_t t = packs * 4 + tid;
  if (t < n) {
    std::int64_t off[NIN > 0 ? NIN : 1];
    for (int k = 0; k < NIN; ++k) off[k] = t;
    y[t] = call<T, NIN>(f, in, off);
  }
}

/// Dense operands, some not Pack4-aligned: four consecutive elements per
/// thread, loaded one by one.
template <class T, int NIN, class F>
__global__ void map_dense(std::int64_t n, T* __restrict__ y, Inputs<T, NIN> in, F f) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x * 4;
  for (std::int64_t base = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; base < n; base += step) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t i = base + j;
      if (i < n) {
        std::int64_t off[NIN > 0 ? NIN : 1];
        for (int k = 0; k < NIN; ++k) off[k] = i;
        y[i] = call<T, NIN>(f, in, off);
      }
    }
  }
}

template <class T, int NIN, class F>
__global__ void map_strided(std::int64_t n, Strided<NIN + 1> g, T* __restrict__ y, Inputs<T, NIN> in, F f) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    std::int64_t off[NIN + 1];
    g.offsets(i, off);
    y[off[0]] = call<T, NIN>(f, in, off + 1);
  }
}

/// Runs f over y's elements with the inputs (each already broadcast to y's shape).
template <class T, int NIN, class F>
void launch_map(const Launch& L, const View<T>& y, const View<const T>* const (&ins)[NIN > 0 ? NIN : 1],
                F f, const char* op) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  Inputs<T, NIN> in{};
  const Shape* strides[NIN + 1];
  strides[0] = &y.strides;
  for (int k = 0; k < NIN; ++k) {
    in.p[k] = ins[k]->data;
    strides[k + 1] = &ins[k]->strides;
  }
  const Strided<NIN + 1> g = make_strided<NIN + 1>(y.shape, strides);
  if (g.dense) {
    if (packs_fit<T>(y.data, in.p, NIN)) map_packed<T, NIN><<<grid_for((n + 3) / 4, L.sm_count), kThreads, 0, L.stream>>>(n, y.data, in, f);
    else map_dense<T, NIN><<<grid_for((n + 3) / 4, L.sm_count), kThreads, 0, L.stream>>>(n, y.data, in, f);
  } else {
    map_strided<T, NIN><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(n, g, y.data, in, f);
  }
  check_launch(op);
}

/// y = x as Y (fn::cast, as the CPU converts), any strides.
template <class X, class Y>
__global__ void cast_kernel(std::int64_t n, Strided<2> g, Y* __restrict__ y, const X* __restrict__ x) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    std::int64_t off[2];
    g.offsets(i, off);
    y[off[0]] = fn::cast<Y>(x[off[1]]);
  }
}
template <class X, class Y>
void launch_cast(const Launch& L, const View<const X>& x, const View<Y>& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  const Shape* strides[2] = {&y.strides, &x.strides};
  const Strided<2> g = make_strided<2>(y.shape, strides);
  cast_kernel<X, Y><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(n, g, y.data, x.data);
  check_launch("cast");
}

/// Element i of y (row-major) = philox::sample(dist, seed, offset, i, lo, hi):
/// the same numbers as the CPU backend draws for the same generator state.
template <class T>
__global__ void random_kernel(std::int64_t n, Strided<1> g, T* y, philox::Dist dist, std::uint64_t seed,
                              std::uint64_t offset, double lo, double hi) {
  using S = philox::draw_type<T>;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    std::int64_t off[1];
    g.offsets(i, off);
    y[off[0]] = static_cast<T>(philox::sample<S>(dist, seed, offset, static_cast<std::uint64_t>(i), lo, hi));
  }
}

template <class T>
void launch_random(const Launch& L, const View<T>& y, philox::Dist dist, std::uint64_t seed,
                   std::uint64_t offset, double lo, double hi) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  const Shape* st[1] = {&y.strides};
  random_kernel<T><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(n, make_strided<1>(y.shape, st), y.data, dist, seed,
                                                              offset, lo, hi);
  check_launch("random");
}

}  // namespace frost::cuda_detail
