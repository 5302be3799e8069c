// Test helpers shared by the suites: closeness checks and a central-difference
// gradient check in double.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <frost/frost.hpp>
#include <unistd.h>

namespace frost::test {

/// A file name in the temp directory for this test process alone: ctest
/// runs each test case as its own process, several at once.
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("frost_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

using TD = Tensor<double>;
using TF = Tensor<float>;

/// tests/data/<file>: the reference files the suites compare with.
inline std::string test_data_path(const std::string& file) {
  const std::string here = __FILE__;
  return here.substr(0, here.find_last_of("/\\") + 1) + "data/" + file;
}

/// Runs `f` and returns the frost::Error message ("" when nothing was thrown).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Largest |a - b| / (atol + rtol |b|) over elements (<= 1 means close). A
/// NaN or an infinity matches only itself: infinitely far from anything
/// else (a plain quotient would be NaN there, and std::max drops a NaN).
template <class T>
double closeness(const std::vector<T>& a, const std::vector<T>& b, double atol, double rtol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      if (x == y || (std::isnan(x) && std::isnan(y))) continue;
      return std::numeric_limits<double>::infinity();
    }
    worst = std::max(worst, std::fabs(x - y) / (atol + rtol * std::fabs(y)));
  }
  return worst;
}

template <class T>
void check_close(const Tensor<T>& a, const std::vector<T>& expect, double atol = 1e-6, double rtol = 1e-5) {
  CHECK(closeness(a.to_vector(), expect, atol, rtol) <= 1.0);
}

template <class T>
void check_close(const Tensor<T>& a, const Tensor<T>& b, double atol = 1e-6, double rtol = 1e-5) {
  REQUIRE(a.shape() == b.shape());
  CHECK(closeness(a.to_vector(), b.to_vector(), atol, rtol) <= 1.0);
}

/// Central-difference gradient check in double: compares d(sum(w * f(x)))/dx
/// from backward with finite differences, for a fixed random weighting w (so
/// the upstream gradient is not all ones). Returns false and reports the
/// first mismatch.
inline bool gradcheck(const std::function<TD(const std::vector<TD>&)>& f, std::vector<TD> inputs, double eps = 1e-6,
                      double atol = 1e-5, double rtol = 1e-4) {
  for (auto& x : inputs) x = x.detach().clone().requires_grad_();
  TD y0 = f(inputs);
  Generator g(1234);
  TD w = TD::rand(y0.shape(), &g) + 0.5;
  auto objective = [&](const std::vector<TD>& xs) { return (f(xs) * w).sum(); };
  objective(inputs).backward();
  bool ok = true;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    TD analytic = inputs[k].grad();
    std::vector<double> ana = analytic.defined() ? analytic.to_vector() : std::vector<double>(inputs[k].numel(), 0.0);
    TD base = inputs[k].detach().clone();
    for (std::int64_t i = 0; i < base.numel(); ++i) {
      std::vector<TD> xs;
      for (auto& x : inputs) xs.push_back(x.detach());
      NoGradGuard ng;
      TD plus = base.clone(), minus = base.clone();
      plus.data()[i] += eps;
      minus.data()[i] -= eps;
      xs[k] = plus;
      const double fp = objective(xs).item();
      xs[k] = minus;
      const double fm = objective(xs).item();
      const double num = (fp - fm) / (2 * eps);
      if (std::fabs(num - ana[static_cast<std::size_t>(i)]) > atol + rtol * std::fabs(num)) {
        MESSAGE("gradcheck: input ", k, " element ", i, ": analytic ", ana[static_cast<std::size_t>(i)], " numeric ",
                num);
        ok = false;
        break;
      }
    }
  }
  return ok;
}

/// Linear layers of the given widths (tanh, relu, none in turn), in double,
/// the result times `scale` when it is not 1 (a step after the layers): the
/// freeze tests' chains of linear steps.
struct LinearLayers : nn::ModuleT<double> {
  std::vector<TD> w, b;
  double scale = 1;
  explicit LinearLayers(const std::vector<std::int64_t>& widths) {
    for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
      w.push_back(register_parameter("w" + std::to_string(i), TD::randn({widths[i + 1], widths[i]}) * 0.1));
      b.push_back(register_parameter("b" + std::to_string(i), TD::randn({widths[i + 1]})));
    }
  }
  TD forward(TD x) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      x = nn::functional::linear(x, w[i], b[i]);
      x = i % 3 == 0 ? x.tanh() : i % 3 == 1 ? x.relu() : x;
    }
    return scale == 1 ? x : x * scale;
  }
};

/// A plan whose index step can fall out of range at run time: each row of
/// x [n, 10] takes the table row its largest column names, and the table
/// has 4 rows. in_range() picks rows 1 and 0; out_of_range()'s second row
/// picks row 7.
struct Router : nn::Module {
  TF table = register_buffer("table", TF::randn({4, 3}));
  TF forward(const TF& x) { return table.index_select(0, x.argmax(1)) + x.narrow(1, 0, 3); }
  static TF in_range() { return TF::from({0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 10}); }
  static TF out_of_range() { return TF::from({0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0}, {2, 10}); }
};

}  // namespace frost::test
