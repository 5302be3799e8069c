// frost::half (IEEE binary16) and frost::bfloat16 (the top half of a float):
// 16-bit storage types that compute in float. They convert implicitly to and
// from float, as c10::Half and c10::BFloat16 do, and define no operators of
// their own, so `a + b`, `a < b` or `a == 0` run in float and a float result
// assigned back rounds once. The conversions are plain bit arithmetic,
// written once for the host and CUDA kernels (no <cuda_fp16.h> in headers
// every file parses): float -> 16 bits rounds to nearest even, overflows to
// infinity and keeps NaN a (quiet) NaN.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "macros.hpp"

namespace frost {

namespace detail {

FROST_HOST_DEVICE inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
FROST_HOST_DEVICE inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// float -> IEEE binary16, rounding to nearest even.
FROST_HOST_DEVICE inline std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf or NaN (a NaN keeps its top payload bits and stays quiet)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? (0x200u | ((a >> 13) & 0x3ffu)) : 0u));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (a < 0x38800000u) {
    // Below 2^-14: a subnormal half (or zero). Adding 0.5 as a float puts the
    // rounded subnormal's bits in the low mantissa: the FPU rounds to even.
    const float r = bits_float(a) + 0.5f;
    return static_cast<std::uint16_t>(sign | (float_bits(r) - 0x3f000000u));
  }
  // Normal: rebias the exponent and round the 13 dropped bits to even.
  const std::uint32_t odd = (a >> 13) & 1u;
  return static_cast<std::uint16_t>(sign | ((a - 0x38000000u + 0xfffu + odd) >> 13));
}

/// IEEE binary16 -> float (exact).
FROST_HOST_DEVICE inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// float -> bfloat16, rounding to nearest even; NaN stays a quiet NaN.
FROST_HOST_DEVICE inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
FROST_HOST_DEVICE inline float bf16_bits_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

}  // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent and 10 mantissa bits (PyTorch's float16).
struct half {
  std::uint16_t bits = 0;
  half() = default;
  FROST_HOST_DEVICE half(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT: implicit, as c10::Half
  /// Doubles and integers round to float first, as PyTorch's conversions do.
  FROST_HOST_DEVICE half(double d) : half(static_cast<float>(d)) {}
  template <class I>
    requires std::is_integral_v<I>
  FROST_HOST_DEVICE half(I i) : half(static_cast<float>(i)) {}
  FROST_HOST_DEVICE operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT
  // Compound assignment in float, rounded once (generic kernels write y += x).
  FROST_HOST_DEVICE half& operator+=(float o) { return *this = half(float(*this) + o); }
  FROST_HOST_DEVICE half& operator-=(float o) { return *this = half(float(*this) - o); }
  FROST_HOST_DEVICE half& operator*=(float o) { return *this = half(float(*this) * o); }
  FROST_HOST_DEVICE half& operator/=(float o) { return *this = half(float(*this) / o); }
  FROST_HOST_DEVICE static half from_bits(std::uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
};

/// bfloat16: float's 8 exponent bits with 7 mantissa bits.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  FROST_HOST_DEVICE bfloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}  // NOLINT
  FROST_HOST_DEVICE bfloat16(double d) : bfloat16(static_cast<float>(d)) {}
  template <class I>
    requires std::is_integral_v<I>
  FROST_HOST_DEVICE bfloat16(I i) : bfloat16(static_cast<float>(i)) {}
  FROST_HOST_DEVICE operator float() const { return detail::bf16_bits_to_float(bits); }  // NOLINT
  // Compound assignment in float, rounded once (generic kernels write y += x).
  FROST_HOST_DEVICE bfloat16& operator+=(float o) { return *this = bfloat16(float(*this) + o); }
  FROST_HOST_DEVICE bfloat16& operator-=(float o) { return *this = bfloat16(float(*this) - o); }
  FROST_HOST_DEVICE bfloat16& operator*=(float o) { return *this = bfloat16(float(*this) * o); }
  FROST_HOST_DEVICE bfloat16& operator/=(float o) { return *this = bfloat16(float(*this) / o); }
  FROST_HOST_DEVICE static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2, "16-bit storage types");

namespace detail {
/// numeric_limits of a 16-bit floating type, from its bit patterns.
template <class H, int Digits, int MaxExp, int MinExp, std::uint16_t Max, std::uint16_t Min, std::uint16_t Eps,
          std::uint16_t Inf, std::uint16_t NaN, std::uint16_t SNaN, std::uint16_t Denorm>
struct half_limits {
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = true, has_quiet_NaN = true, has_signaling_NaN = true, is_iec559 = true;
  static constexpr bool is_bounded = true, is_modulo = false, traps = false, tinyness_before = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr int digits = Digits, radix = 2, max_exponent = MaxExp, min_exponent = MinExp;
  static H min() { return H::from_bits(Min); }
  static H lowest() { return H::from_bits(static_cast<std::uint16_t>(Max | 0x8000u)); }
  static H max() { return H::from_bits(Max); }
  static H epsilon() { return H::from_bits(Eps); }
  static H round_error() { return H(0.5f); }
  static H infinity() { return H::from_bits(Inf); }
  static H quiet_NaN() { return H::from_bits(NaN); }
  static H signaling_NaN() { return H::from_bits(SNaN); }
  static H denorm_min() { return H::from_bits(Denorm); }
};
}  // namespace detail

}  // namespace frost

// Specialized as c10's are, so generic code's numeric_limits<T>::infinity()
// or lowest() is right for the 16-bit types (unspecialized it would be 0).
namespace std {
template <>
struct numeric_limits<frost::half>
    : frost::detail::half_limits<frost::half, 11, 16, -13, 0x7bff, 0x0400, 0x1400, 0x7c00, 0x7e00, 0x7d00, 0x0001> {};
template <>
struct numeric_limits<frost::bfloat16>
    : frost::detail::half_limits<frost::bfloat16, 8, 128, -125, 0x7f7f, 0x0080, 0x3c00, 0x7f80, 0x7fc0, 0x7fa0, 0x0001> {};
}  // namespace std
