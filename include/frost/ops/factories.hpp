// Tensor factories: filled, ranged, from host values, and random draws from
// the Philox generator (the same numbers for a seed on any thread count).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace frost {

template <class T>
Tensor<T> Tensor<T>::full(const Shape& shape, T value, Device d) {
  auto y = empty(shape, d);
  backend_for<T>(d).fill(y.view_of(), value);
  return y;
}

template <class T>
Tensor<T> Tensor<T>::from(const std::vector<T>& values, const Shape& shape) {
  FROST_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "frost::from: ", values.size(),
              " values do not fill shape ", shape.str(), " (", shape.numel(), " elements expected)");
  auto y = empty(shape);
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i) y.data()[i] = values[i];  // std::vector<bool> packs bits
  } else if (!values.empty()) {
    std::memcpy(y.data(), values.data(), values.size() * sizeof(T));
  }
  return y;
}

template <class T>
Tensor<T> Tensor<T>::arange(double start, double end, double step) {
  // An integer tensor's step and first value are truncated to integers, as
  // PyTorch's are: arange(0, 5, 1.5) is 0..4, and a step below 1 is none.
  static_assert(!std::is_same_v<T, bool>, "frost::arange: not defined for bool tensors (as in PyTorch)");
  if constexpr (std::is_integral_v<T>) step = std::trunc(step);
  FROST_CHECK(step != 0, "frost::arange: step must be non-zero (an integer tensor's is truncated)");
  FROST_CHECK(std::isfinite(start) && std::isfinite(end), "frost::arange: bounds must be finite, got ", start, " and ", end);
  FROST_CHECK((end - start) / step >= 0, "frost::arange: step ", step, " does not lead from ", start, " to ", end);
  const auto n = static_cast<std::int64_t>(std::ceil((end - start) / step));
  const double first = std::is_integral_v<T> ? std::trunc(start) : start;
  auto y = empty({n});
  for (std::int64_t i = 0; i < n; ++i) y.data()[i] = static_cast<T>(first + static_cast<double>(i) * step);
  return y;
}

template <class T>
Tensor<T> Tensor<T>::linspace(double start, double end, std::int64_t steps) {
  FROST_CHECK(steps >= 0, "frost::linspace: number of steps must be non-negative, got ", steps);
  auto y = empty({steps});
  const double h = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  for (std::int64_t i = 0; i < steps; ++i)
    y.data()[i] = static_cast<T>(i == steps - 1 && steps > 1 ? end : start + h * static_cast<double>(i));
  return y;
}

template <class T>
Tensor<T> Tensor<T>::eye(std::int64_t n, std::int64_t m) {
  if (m < 0) m = n;
  FROST_CHECK(n >= 0, "frost::eye: n must be non-negative, got ", n);
  auto y = zeros({n, m});
  for (std::int64_t i = 0; i < std::min(n, m); ++i) y.data()[i * m + i] = T(1);
  return y;
}

namespace detail {
template <class T>
Tensor<T> draw(const Shape& shape, Generator* gen, philox::Dist dist, double lo, double hi,
               Device device = Device::cpu()) {
  auto y = Tensor<T>::empty(shape, device);
  Generator& g = gen ? *gen : default_generator();
  const std::uint64_t off = g.take<T>(static_cast<std::uint64_t>(shape.numel()));
  backend_for<T>(y.device()).random(y.view_of(), dist, g.seed(), off, lo, hi);
  return y;
}
}  // namespace detail

template <class T>
Tensor<T> Tensor<T>::rand(const Shape& shape, Generator* gen) {
  static_assert(FloatingScalar<T>, "frost::rand: floating dtypes only (randint draws integers)");
  return detail::draw<T>(shape, gen, philox::Dist::uniform, 0.0, 1.0);
}
template <class T>
Tensor<T> Tensor<T>::randn(const Shape& shape, Generator* gen) {
  static_assert(FloatingScalar<T>, "frost::randn: floating dtypes only (randint draws integers)");
  return detail::draw<T>(shape, gen, philox::Dist::normal, 0.0, 1.0);
}
template <class T>
Tensor<T> Tensor<T>::randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator* gen) {
  FROST_CHECK(low < high, "frost::randint: expects low < high, got [", low, ", ", high, ")");
  // The draw (one Philox routine for every device) maps a 53-bit uniform onto
  // the range in double: bounds beyond 2^53 would round (draws left [low,
  // high)), and a wider range would skip values.
  constexpr std::int64_t exact = std::int64_t(1) << 53;
  FROST_CHECK(low >= -exact && high <= exact && high - low <= exact, "frost::randint: the range [", low, ", ", high,
              ") needs more than the draw's 53 bits (expected bounds and a width of at most 2^53)");
  if constexpr (std::is_integral_v<T> && sizeof(T) < 8) {
    // As PyTorch: the bounds must be values of T (high may be one past its largest).
    constexpr auto lo = static_cast<std::int64_t>(std::numeric_limits<T>::lowest());
    constexpr auto hi = static_cast<std::int64_t>(std::numeric_limits<T>::max());
    FROST_CHECK(low >= lo && high - 1 <= hi, "frost::randint: the range [", low, ", ", high, ") is out of bounds for ",
                dtype_name<T>(), " (expected values in [", lo, ", ", hi, "])");
  }
  return detail::draw<T>(shape, gen, philox::Dist::randint, static_cast<double>(low), static_cast<double>(high));
}

template <class T> Tensor<T> zeros_like(const Tensor<T>& x) { return Tensor<T>::zeros(x.shape(), x.device()); }
template <class T> Tensor<T> ones_like(const Tensor<T>& x) { return Tensor<T>::ones(x.shape(), x.device()); }
template <class T> Tensor<T> empty_like(const Tensor<T>& x) { return Tensor<T>::empty(x.shape(), x.device()); }
template <class T> Tensor<T> full_like(const Tensor<T>& x, std::type_identity_t<T> v) { return Tensor<T>::full(x.shape(), v, x.device()); }
// Drawn on x's device, with the same numbers a CPU draw would give (Philox).
template <class T> Tensor<T> rand_like(const Tensor<T>& x, Generator* g = nullptr) {
  return detail::draw<T>(x.shape(), g, philox::Dist::uniform, 0.0, 1.0, x.device());
}
template <class T> Tensor<T> randn_like(const Tensor<T>& x, Generator* g = nullptr) {
  return detail::draw<T>(x.shape(), g, philox::Dist::normal, 0.0, 1.0, x.device());
}

/// One draw of Bernoulli(p) from the default generator: the guide's
/// `if (training && bernoulli(0.3))`.
inline bool bernoulli(double p, Generator* gen = nullptr) {
  FROST_CHECK(p >= 0 && p <= 1, "frost::bernoulli: p must be in [0, 1], got ", p);
  return detail::draw<double>({}, gen, philox::Dist::bernoulli, p, 0).item() != 0;
}

}  // namespace frost
