// What the CUDA test files share: the skip where no GPU is visible, the
// device they run on, and the CPU-vs-CUDA comparison.
#pragma once
#include <cmath>
#include <cstdlib>
#include <string>

#include <frost/frost.hpp>

#include <doctest/doctest.h>

namespace {

const frost::Device kCuda = frost::Device::cuda();

/// Every case starts here: without a GPU it reports the skip and returns
/// true. Where FROST_REQUIRE_CUDA is set (tests/gpu/check.sh sets it), no
/// GPU is a failure instead: a GPU machine whose device the program cannot
/// see must not pass the check by skipping it.
inline bool no_gpu() {
  if (frost::cuda::is_available()) return false;
  if (std::getenv("FROST_REQUIRE_CUDA")) FAIL_CHECK("no CUDA device is visible, and FROST_REQUIRE_CUDA is set");
  else MESSAGE("skipped: no CUDA device");
  return true;
}

/// "" when a (moved back from the device) and b agree to atol + rtol |b|, NaN matching NaN.
template <class T>
std::string differ(const frost::Tensor<T>& got, const frost::Tensor<T>& want, double atol, double rtol,
                   const std::string& what) {
  if (got.shape() != want.shape()) return what + ": shape " + got.shape().str() + " vs CPU " + want.shape().str() + "\n";
  const auto g = got.to_vector(), w = want.to_vector();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double a = double(g[i]), b = double(w[i]);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;  // equal infinities
    const double excess = std::isnan(a) || std::isnan(b) ? INFINITY : std::abs(a - b) / (atol + rtol * std::abs(b));
    if (excess > worst) {
      worst = excess;
      at = i;
    }
  }
  if (worst <= 1) return "";
  return what + ": element " + std::to_string(at) + " is " + std::to_string(double(g[at])) + " on CUDA, " +
         std::to_string(double(w[at])) + " on the CPU\n";
}

}  // namespace
