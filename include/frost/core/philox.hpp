// Philox 4x32-10 (Salmon et al., SC'11): a counter-based generator. Element i
// of a draw depends only on (seed, offset, i), so CPU threads and CUDA kernels
// produce the same numbers for the same seed whatever the parallel split.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "macros.hpp"

namespace frost {

namespace philox {

struct U4 {
  std::uint32_t x[4];
};

FROST_HOST_DEVICE inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

/// Ten Philox rounds over counter `ctr` with the 64-bit key `seed`.
FROST_HOST_DEVICE inline U4 block(std::uint64_t seed, std::uint64_t ctr_lo, std::uint64_t ctr_hi = 0) {
  std::uint32_t c0 = static_cast<std::uint32_t>(ctr_lo), c1 = static_cast<std::uint32_t>(ctr_lo >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(ctr_hi), c3 = static_cast<std::uint32_t>(ctr_hi >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// Uniform float in [0, 1) from 24 random bits.
FROST_HOST_DEVICE inline float to_float01(std::uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
/// Uniform double in [0, 1) from 53 random bits.
FROST_HOST_DEVICE inline double to_double01(std::uint32_t a, std::uint32_t b) {
  return (static_cast<double>(a >> 5) * 67108864.0 + static_cast<double>(b >> 6)) * (1.0 / 9007199254740992.0);
}

/// What a draw produces; each element i uses Philox block (offset + i / per_block).
enum class Dist : std::uint8_t { uniform, normal, bernoulli, randint };

/// The type a draw for element type T computes in: float for float and the
/// types narrower than 4 bytes, double for double and the 4- and 8-byte
/// integers (an int32 randint may span 2^32 values, more than float's 24 bits).
template <class T>
using draw_type = std::conditional_t<(sizeof(T) < 4 || std::is_same_v<T, float>), float, double>;

/// Elements produced per Philox block for type T.
template <class T>
FROST_HOST_DEVICE constexpr int per_block() { return sizeof(draw_type<T>) == 4 ? 4 : 2; }

/// A uniform u in [0, 1) as a draw in [lo, hi): one explicit fma. A compiler
/// may contract lo + (hi - lo) u into one or not (GCC does from -O2 on, nvcc
/// by default), and the two round apart: unfused, the same seed drew other
/// numbers in a -O1 build. The CPU's bulk path calls this too.
FROST_HOST_DEVICE inline double uniform_in(double u, double lo, double hi) { return std::fma(hi - lo, u, lo); }

/// Element i of a draw: uniform in [lo, hi), normal(mean=lo, std=hi),
/// bernoulli(p=lo) as 0/1, or randint in [lo, hi).
/// Lane `lane` of Philox block `r` as a draw from `dist` (what sample()
/// returns for the element that maps to that block and lane).
template <class T>
FROST_HOST_DEVICE inline T from_block(Dist dist, const U4& r, int lane, double lo, double hi) {
  constexpr int pb = per_block<T>();
  double u, v;  // two uniforms in [0,1); v only needed by normal
  if constexpr (pb == 4) {
    u = to_float01(r.x[lane]);
    v = to_float01(r.x[lane ^ 1]);
  } else {
    u = to_double01(r.x[2 * lane], r.x[2 * lane + 1]);
    v = to_double01(r.x[2 * (lane ^ 1)], r.x[2 * (lane ^ 1) + 1]);
  }
  switch (dist) {
    case Dist::uniform: return static_cast<T>(uniform_in(u, lo, hi));
    case Dist::bernoulli: return static_cast<T>(u < lo ? 1 : 0);
    case Dist::randint: {
      const double span = hi - lo;
      double k = std::floor(u * span);
      if (k >= span) k = span - 1;
      return static_cast<T>(lo + k);
    }
    case Dist::normal: {
      // Box-Muller over the lane pair (2k, 2k+1): one radius, cos for the even
      // lane and sin for the odd one, so pairs are independent normals.
      const bool even = (lane & 1) == 0;
      const double u1 = 1.0 - (even ? u : v), u2 = even ? v : u;
      const double rad = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
      return static_cast<T>(std::fma(hi * rad, even ? std::cos(th) : std::sin(th), lo));  // fused: as uniform_in
    }
  }
  return T(0);
}

template <class T>
FROST_HOST_DEVICE inline T sample(Dist dist, std::uint64_t seed, std::uint64_t offset, std::uint64_t i, double lo,
                                  double hi) {
  constexpr int pb = per_block<T>();
  return from_block<T>(dist, block(seed, offset + i / pb), static_cast<int>(i % pb), lo, hi);
}

}  // namespace philox

/// A Philox 4x32-10 generator: a seed and an offset counting used blocks.
/// Each thread has its own default generator (see default_generator()).
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(std::uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  void set_offset(std::uint64_t o) { offset_ = o; }
  /// Reserves the blocks for `n` elements of type T and returns the starting offset.
  template <class T>
  std::uint64_t take(std::uint64_t n) {
    const std::uint64_t start = offset_;
    offset_ += (n + philox::per_block<T>() - 1) / philox::per_block<T>();
    return start;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

/// The calling thread's default generator.
inline Generator& default_generator() {
  thread_local Generator g;
  return g;
}

/// Seeds the calling thread's default generator (like torch.manual_seed).
inline void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace frost
