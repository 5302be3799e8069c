// CPU elementwise kernels over the shared functors. The contiguous loops are
// instantiated per op so the functor's switch folds away and the loop
// vectorises; strided and broadcast layouts take one generic loop.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "../../core/functors.hpp"
#include "../../core/philox.hpp"
#include "../view.hpp"
#include "loop.hpp"
#include "parallel.hpp"

namespace frost::cpu {

// Transcendental functions are where a scalar libm loop is slow (tanh of 16
// floats costs more than the rest of an op): on dense memory these use
// Eigen's vectorised versions. The functor stays the definition (strided
// layouts and CUDA use it); both agree to a few ulp.
//
// Two of Eigen 3.4's are not that close, and are worked around here:
// - exp clamps its argument at -88.7 (float) / -709.8 (double), so exp(-inf)
//   came out as 2.9e-39 / 5.6e-309 instead of 0 (logsumexp of an all -inf
//   row was then finite): below that bound the libm value is taken.
// - float logistic is a rational fit of sigmoid - 1/2 with absolute error, up
//   to 6e-4 relative where sigmoid is small (x in [-13, -5]): 1 / (1 + e^-x)
//   over the vectorised exp is accurate to a few ulp (e^-x = inf gives 0).
// (Subnormal results are left to libm too: the bound is where e^x stops
// being a normal number.)
template <class T>
inline constexpr T kEigenExpLow = std::is_same_v<T, float> ? T(-87.3) : T(-708.3);  // e^x still normal above

template <class T, class A>
void exp_with_underflow(const Eigen::Map<const A>& xa, Eigen::Map<A>& ya) {
  ya = xa.exp();
  // One vectorised pass tells whether any element needs libm (NaNs ignored):
  // a scalar test of every element would cost 2.5x the exp itself.
  if (xa.size() > 0 && xa.template minCoeff<Eigen::PropagateNumbers>() < kEigenExpLow<T>)
    for (Eigen::Index i = 0; i < xa.size(); ++i)
      if (xa[i] < kEigenExpLow<T>) ya[i] = std::exp(xa[i]);
}

template <UnaryOp OP, class T>
bool eigen_unary(const T* x, T* y, std::int64_t n) {
  using A = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<const A> xa(x, n);
  Eigen::Map<A> ya(y, n);
  if constexpr (OP == UnaryOp::exp) exp_with_underflow<T>(xa, ya);
  else if constexpr (OP == UnaryOp::log) ya = xa.log();
  else if constexpr (OP == UnaryOp::tanh) ya = xa.tanh();
  else if constexpr (OP == UnaryOp::sigmoid) ya = T(1) / (T(1) + (-xa).exp());
  else if constexpr (OP == UnaryOp::silu) ya = xa / (T(1) + (-xa).exp());
  else if constexpr (OP == UnaryOp::gelu_tanh)
    ya = T(0.5) * xa * (T(1) + (T(0.79788456080286535588) * (xa + T(0.044715) * xa.cube())).tanh());
  else if constexpr (OP == UnaryOp::sqrt) ya = xa.sqrt();
  else if constexpr (OP == UnaryOp::rsqrt) ya = xa.rsqrt();
  else if constexpr (OP == UnaryOp::sin) ya = xa.sin();
  else if constexpr (OP == UnaryOp::cos) ya = xa.cos();
  else return false;
  return true;
}

template <UnaryOp OP, class T>
void unary_dense(const T* x, T* y, std::int64_t n, T p0, T p1) {
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    if constexpr (std::is_floating_point_v<T>)  // integers: the functor loop
      if (eigen_unary<OP, T>(x + b, y + b, e - b)) return;
    for (std::int64_t i = b; i < e; ++i) y[i] = fn::unary<T>(OP, x[i], p0, p1);
  });
}

template <BinaryOp OP, class T>
void binary_dense(const T* a, const T* b, T* y, std::int64_t n, T p) {
  parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) y[i] = fn::binary<T>(OP, a[i], b[i], p);
  });
}

// a dense, b one value (x + bias scalar, x * mask scalar): the other common case.
template <BinaryOp OP, class T>
void binary_dense_scalar(const T* a, T bv, T* y, std::int64_t n, T p) {
  parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) y[i] = fn::binary<T>(OP, a[i], bv, p);
  });
}

/// y[i] = f(x[i]) for any strides (broadcast inputs included).
template <class X, class T, class F>
void map_strided(const View<const X>& x, const View<T>& y, F f) {
  Loop<2> loop(y.shape, {&y.strides, &x.strides});
  const std::int64_t sy = loop.inner_stride(0), sx = loop.inner_stride(1);
  parallel_for(y.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    loop.run(b, e, [&](const auto& off, std::int64_t cnt) {
      T* yp = y.data + off[0];
      const X* xp = x.data + off[1];
      for (std::int64_t i = 0; i < cnt; ++i) yp[i * sy] = f(xp[i * sx]);
    });
  });
}

template <class T>
void unary(UnaryOp op, const View<const T>& x, const View<T>& y, T p0, T p1) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  if (x.is_contiguous() && y.is_contiguous()) {
    switch (op) {
#define FROST_CASE(name) \
  case UnaryOp::name: return unary_dense<UnaryOp::name, T>(x.data, y.data, n, p0, p1);
      FROST_UNARY_OPS(FROST_CASE)
#undef FROST_CASE
    }
  }
  map_strided(x, y, [&](T v) { return fn::unary<T>(op, v, p0, p1); });
}

/// Any layout. The op is a template argument so the inner loops compile to
/// straight vector code; the inner runs a per-channel broadcast produces
/// (x + bias[c], x * scale[c]: one operand constant along the run) get their
/// own loops, since batch norm and bias adds live on them.
template <BinaryOp OP, class T>
void binary_strided(const View<const T>& a, const View<const T>& b, const View<T>& y, T p) {
  Loop<3> loop(y.shape, {&y.strides, &a.strides, &b.strides});
  const std::int64_t sy = loop.inner_stride(0), sa = loop.inner_stride(1), sb = loop.inner_stride(2);
  parallel_for(y.numel(), kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    loop.run(lo, hi, [&](const auto& off, std::int64_t cnt) {
      T* yp = y.data + off[0];
      const T* ap = a.data + off[1];
      const T* bp = b.data + off[2];
      if (sy == 1 && sa == 1 && sb == 0) {
        const T bv = *bp;
        for (std::int64_t i = 0; i < cnt; ++i) yp[i] = fn::binary<T>(OP, ap[i], bv, p);
      } else if (sy == 1 && sa == 0 && sb == 1) {
        const T av = *ap;
        for (std::int64_t i = 0; i < cnt; ++i) yp[i] = fn::binary<T>(OP, av, bp[i], p);
      } else if (sy == 1 && sa == 1 && sb == 1) {
        for (std::int64_t i = 0; i < cnt; ++i) yp[i] = fn::binary<T>(OP, ap[i], bp[i], p);
      } else {
        for (std::int64_t i = 0; i < cnt; ++i) yp[i * sy] = fn::binary<T>(OP, ap[i * sa], bp[i * sb], p);
      }
    });
  });
}

template <class T>
void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, T p) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  if (y.is_contiguous() && a.is_contiguous()) {
    if (b.is_contiguous()) {
      switch (op) {
#define FROST_CASE(name) \
  case BinaryOp::name: return binary_dense<BinaryOp::name, T>(a.data, b.data, y.data, n, p);
        FROST_BINARY_OPS(FROST_CASE)
#undef FROST_CASE
      }
    }
    bool scalar_b = true;
    for (auto s : b.strides) scalar_b = scalar_b && s == 0;
    if (scalar_b) {
      switch (op) {
#define FROST_CASE(name) \
  case BinaryOp::name: return binary_dense_scalar<BinaryOp::name, T>(a.data, *b.data, y.data, n, p);
        FROST_BINARY_OPS(FROST_CASE)
#undef FROST_CASE
      }
    }
  }
  switch (op) {
#define FROST_CASE(name) \
  case BinaryOp::name: return binary_strided<BinaryOp::name, T>(a, b, y, p);
    FROST_BINARY_OPS(FROST_CASE)
#undef FROST_CASE
  }
}
template <class T>
void where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  Loop<4> loop(y.shape, {&y.strides, &c.strides, &a.strides, &b.strides});
  const std::int64_t sy = loop.inner_stride(0), sc = loop.inner_stride(1), sa = loop.inner_stride(2),
                     sb = loop.inner_stride(3);
  parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    loop.run(lo, hi, [&](const auto& off, std::int64_t cnt) {
      T* yp = y.data + off[0];
      const T *cp = c.data + off[1], *ap = a.data + off[2], *bp = b.data + off[3];
      for (std::int64_t i = 0; i < cnt; ++i) yp[i * sy] = cp[i * sc] != T(0) ? ap[i * sa] : bp[i * sb];
    });
  });
}

template <class T>
void copy(const View<const T>& x, const View<T>& y) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  if (x.is_contiguous() && y.is_contiguous()) {
    const T* xp = x.data;
    T* yp = y.data;
    parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) yp[i] = xp[i];
    });
    return;
  }
  map_strided(x, y, [](T v) { return v; });
}

/// y = x as Y (fn::cast), any strides.
template <class X, class Y>
void cast(const View<const X>& x, const View<Y>& y) {
  if (y.numel() > 0) map_strided(x, y, [](X v) { return fn::cast<Y>(v); });
}

template <class T>
void fill(const View<T>& y, T value) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  Loop<1> loop(y.shape, {&y.strides});
  const std::int64_t sy = loop.inner_stride(0);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    loop.run(b, e, [&](const auto& off, std::int64_t cnt) {
      T* yp = y.data + off[0];
      for (std::int64_t i = 0; i < cnt; ++i) yp[i * sy] = value;
    });
  });
}

/// philox::block() for the N counters ctr_lo, ctr_lo + 1, ... at once: out[w][j] is
/// word w of block j. The state is held in 64-bit lanes (values below 2^32),
/// so every step is a plain 64-bit vector operation and the compiler
/// vectorises the rounds across the blocks (FROST_SIMD: GCC otherwise
/// unrolls them into scalar code).
template <int N>
inline void philox_blocks(std::uint64_t seed, std::uint64_t ctr_lo, std::uint32_t (&out)[4][N]) {
  constexpr std::uint64_t kLow = 0xFFFFFFFFu;
  std::uint64_t c0[N], c1[N], c2[N], c3[N];
  for (int j = 0; j < N; ++j) {
    const std::uint64_t ctr = ctr_lo + static_cast<std::uint64_t>(j);
    c0[j] = ctr & kLow;
    c1[j] = ctr >> 32;
    c2[j] = 0;
    c3[j] = 0;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    FROST_SIMD for (int j = 0; j < N; ++j) {
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0[j], p1 = std::uint64_t{0xCD9E8D57u} * c2[j];
      c0[j] = (p1 >> 32) ^ c1[j] ^ k0;
      c1[j] = p1 & kLow;
      c2[j] = (p0 >> 32) ^ c3[j] ^ k1;
      c3[j] = p0 & kLow;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int j = 0; j < N; ++j) {
    out[0][j] = static_cast<std::uint32_t>(c0[j]);
    out[1][j] = static_cast<std::uint32_t>(c1[j]);
    out[2][j] = static_cast<std::uint32_t>(c2[j]);
    out[3][j] = static_cast<std::uint32_t>(c3[j]);
  }
}

template <class T>
void random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset, double lo, double hi) {
  const std::int64_t n = y.numel();
  if (n == 0) return;
  // Element i of the draw goes to flat (row-major) position i of y, whatever
  // the thread split: the numbers depend on (seed, offset, i) only.
  Loop<1> loop(y.shape, {&y.strides});
  const std::int64_t sy = loop.inner_stride(0);
  using S = philox::draw_type<T>;
  if (y.is_contiguous()) {
    // One Philox block serves per_block consecutive elements: compute it
    // once per block, not once per element (4x fewer rounds for floats).
    constexpr int pb = philox::per_block<S>();
    constexpr int kBlocks = 16;  // blocks drawn together by the bulk path
    // Uniform and Bernoulli draws also go in bulk: kBlocks Philox blocks at
    // once, then one branch-free conversion loop (from_block's arithmetic,
    // uniform_in for uniform draws, so the numbers are identical).
    const bool bulk = dist == philox::Dist::uniform || dist == philox::Dist::bernoulli;
    parallel_for(n, kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
      std::int64_t i = b;
      while (i < e) {
        const auto blk = static_cast<std::uint64_t>(i / pb);
        if (bulk && i % pb == 0 && e - i >= kBlocks * pb) {
          std::uint32_t r[4][kBlocks];
          philox_blocks(seed, offset + blk, r);
          T* out = y.data + i;
          for (int l = 0; l < pb; ++l)
            for (int j = 0; j < kBlocks; ++j) {
              double u;
              if constexpr (pb == 4) u = philox::to_float01(r[l][j]);
              else u = philox::to_double01(r[2 * l][j], r[2 * l + 1][j]);
              out[j * pb + l] = dist == philox::Dist::bernoulli ? static_cast<T>(u < lo ? 1 : 0)
                                                                : static_cast<T>(static_cast<S>(philox::uniform_in(u, lo, hi)));
            }
          i += kBlocks * pb;
          continue;
        }
        const philox::U4 r = philox::block(seed, offset + blk);
        const std::int64_t stop = std::min<std::int64_t>(e, static_cast<std::int64_t>(blk + 1) * pb);
        for (; i < stop; ++i)
          y.data[i] = static_cast<T>(philox::from_block<S>(dist, r, static_cast<int>(i % pb), lo, hi));
      }
    });
    return;
  }
  parallel_for(n, kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
    std::int64_t i = b;
    loop.run(b, e, [&](const auto& off, std::int64_t cnt) {
      T* yp = y.data + off[0];
      for (std::int64_t j = 0; j < cnt; ++j, ++i)
        yp[j * sy] = static_cast<T>(philox::sample<S>(dist, seed, offset, static_cast<std::uint64_t>(i), lo, hi));
    });
  });
}

}  // namespace frost::cpu
