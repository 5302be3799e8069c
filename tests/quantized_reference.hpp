// The int8 linear's documented formulas computed one element at a time, the
// kernel's result for the same operands, and the comparison of the two (to
// the last rounding): shared by test_isa_kernels.cpp (the kernel on every
// instruction set) and test_jit_quantize.cpp (plans layer by layer).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <frost/backend/cpu/quantized_linear.hpp>

namespace frost_test {

using frost::UnaryOp;
namespace cpu = frost::cpu;
namespace fn = frost::fn;

inline std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }

/// The formulas of backend/cpu/quantized_linear.hpp, one element at a time:
/// y = act(sx sw sum(q qw) + b) for x [m, k] (row stride ldx), W [n, k].
template <class U>
std::vector<U> quantized_reference(const U* x, std::int64_t m, std::int64_t k, std::int64_t ldx, const U* w,
                                   std::int64_t n, const U* bias, UnaryOp act) {
  std::vector<float> sw(sz(n));
  std::vector<int> qw(sz(n * k));
  for (std::int64_t r = 0; r < n; ++r) {
    double amax = 0;
    for (std::int64_t j = 0; j < k; ++j) amax = std::max(amax, std::abs(double(w[r * k + j])));
    const double s = amax > 0 ? amax / 127.0 : 1.0;
    sw[sz(r)] = static_cast<float>(s);
    for (std::int64_t j = 0; j < k; ++j)
      qw[sz(r * k + j)] = static_cast<int>(std::clamp(std::nearbyint(double(w[r * k + j]) / s), -127.0, 127.0));
  }
  std::vector<U> y(sz(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    const U* row = x + i * ldx;
    float amax = 0;
    bool finite = true;
    for (std::int64_t j = 0; j < k; ++j) {
      finite = finite && std::isfinite(float(row[j]));
      amax = std::max(amax, std::abs(float(row[j])));
    }
    std::vector<int> q(sz(k));  // zeros for a row holding inf or NaN (its outputs: NaN)
    const bool zero = amax < cpu::kQuantizedTiny;
    const float inv = zero ? 0.0f : 127.0f / amax, sx = zero ? 1.0f : amax / 127.0f;
    for (std::int64_t j = 0; j < k && finite; ++j) {
      const float v = std::min(std::max(float(row[j]) * inv, -127.0f), 127.0f);
      q[sz(j)] = static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f));
    }
    for (std::int64_t c = 0; c < n; ++c) {
      long long dot = 0;
      for (std::int64_t j = 0; j < k; ++j) dot += q[sz(j)] * qw[sz(c * k + j)];
      U v = finite ? static_cast<U>(dot) * (static_cast<U>(sx) * static_cast<U>(sw[sz(c)]))
                   : std::numeric_limits<U>::quiet_NaN();
      if (bias) v += bias[c];
      y[sz(i * n + c)] = fn::unary(act, v, U(0), U(0));
    }
  }
  return y;
}

/// The kernel's y for the same operands.
template <class U>
std::vector<U> quantized_kernel(const U* x, std::int64_t m, std::int64_t k, std::int64_t ldx, const U* w,
                                std::int64_t n, const U* bias, UnaryOp act) {
  std::vector<unsigned char> blob(sz(cpu::QuantizedWeightLayout(n, k).total));
  std::vector<unsigned char> rows(sz(cpu::QuantizedInputLayout(m, k).total));
  cpu::quantize_weight(w, n, k, k, blob.data());
  cpu::quantize_rows(x, m, k, ldx, rows.data());
  std::vector<U> y(sz(m * n));
  cpu::quantized_linear(rows.data(), blob.data(), m, n, k, bias, y.data(), n, act);
  return y;
}

/// Equal to the last rounding, NaN matching NaN: the sums are exact
/// integers, and only the rescale's multiply and add may round differently
/// (fused or not).
template <class U>
bool same(const std::vector<U>& a, const std::vector<U>& b) {
  if (a.size() != b.size()) return false;
  const double tol = sizeof(U) == 4 ? 1e-6 : 1e-14;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(double(a[i]) - double(b[i])) <= tol * (1 + std::abs(double(b[i]))) ||
          (std::isnan(a[i]) && std::isnan(b[i]))))
      return false;
  return true;
}

}  // namespace frost_test
