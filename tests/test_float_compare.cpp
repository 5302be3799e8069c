// Float comparisons give Tensor<bool>, as PyTorch's: values (NaN included),
// broadcasting, masks in products, where, masked_fill, boolean indexing and
// counts, gradients through where; and in a frozen plan the comparison's
// bool round trip (compare, cast to bool, cast back for where or a product)
// is folded away, while a bool the plan returns keeps its cast.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"

using namespace frost;
using frost::test::TD;
using frost::test::TF;

namespace {
std::vector<int> bits(const Tensor<bool>& b) {
  std::vector<int> v;
  for (double x : b.to<double>().to_vector()) v.push_back(static_cast<int>(x));
  return v;
}
int count(const jit::Graph& g, jit::StepKind k) {
  int n = 0;
  for (const auto& s : g.steps) n += s.kind == k;
  return n;
}
}  // namespace

TEST_CASE_TEMPLATE("float comparisons give Tensor<bool>; NaN compares as IEEE (only != is true)", T, float, double) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const auto a = Tensor<T>::from({1, 2, nan, -1, 0});
  const auto b = Tensor<T>::from({1, 3, nan, -2, T(-0.0)});
  static_assert(std::is_same_v<decltype(a < b), Tensor<bool>>);
  static_assert(std::is_same_v<decltype(a < T(0)), Tensor<bool>>);
  CHECK(bits(a == b) == std::vector<int>{1, 0, 0, 0, 1});
  CHECK(bits(a != b) == std::vector<int>{0, 1, 1, 1, 0});
  CHECK(bits(a < b) == std::vector<int>{0, 1, 0, 0, 0});
  CHECK(bits(a <= b) == std::vector<int>{1, 1, 0, 0, 1});
  CHECK(bits(a > b) == std::vector<int>{0, 0, 0, 1, 0});
  CHECK(bits(a >= b) == std::vector<int>{1, 0, 0, 1, 1});
  CHECK(bits(a > T(0)) == std::vector<int>{1, 1, 0, 0, 0});
  CHECK(bits(a != T(0)) == std::vector<int>{1, 1, 1, 1, 0});
  // Broadcast: [2, 1] against [3].
  const auto c = Tensor<T>::from({0, 2}, {2, 1}), d = Tensor<T>::from({-1, 0, 1});
  CHECK((c > d).shape() == Shape{2, 3});
  CHECK(bits(c > d) == std::vector<int>{1, 0, 0, 1, 1, 1});
}

TEST_CASE("a float comparison's bool works as PyTorch's: products, where, masked_fill, x[mask], counts, any / all") {
  const auto x = TF::from({-2, 0.5f, 3, -0.25f, 0, 4}, {2, 3});
  const auto pos = x > 0.0f;
  CHECK((x * pos).to_vector() == x.relu().to_vector());  // bool x float is float
  static_assert(std::is_same_v<decltype(x * pos), TF>);
  CHECK(where(pos, x, x * 0.5f).to_vector() == std::vector<float>{-1, 0.5f, 3, -0.125f, 0, 4});
  CHECK(x.masked_fill(x < 0.0f, 9.0f).to_vector() == std::vector<float>{9, 0.5f, 3, 9, 0, 4});
  CHECK(masked_fill(x, x < 0.0f, 9.0f).to_vector() == std::vector<float>{9, 0.5f, 3, 9, 0, 4});
  CHECK(x.index(pos).to_vector() == std::vector<float>{0.5f, 3, 4});
  CHECK(sum(pos).item() == 3);  // a bool sum is an int64 count
  CHECK(static_cast<bool>(any(x > 3.5f)));
  CHECK_FALSE(static_cast<bool>(all(x > -3.0f) & all(x > 0.0f)));
  CHECK(logical_not(pos).to<float>().to_vector() == std::vector<float>{1, 0, 0, 1, 1, 0});
  // A branch on a comparison is an ordinary C++ bool.
  CHECK(static_cast<bool>(x.max() > 3.0f));
}

TEST_CASE("gradients flow through where with a comparison's bool, in double, by finite differences") {
  const auto x = TD::from({-2, 0.5, 3, -0.25, 0.75, 4}, {2, 3}).requires_grad_();
  auto f = [](const std::vector<TD>& v) { return where(v[0] > 0.1, v[0] * v[0], v[0].exp()).sum(); };
  CHECK(frost::test::gradcheck(f, {x}));
}

TEST_CASE("jit: a comparison feeding where or a product keeps no bool round trip in the frozen plan") {
  auto f = [](const TF& x) { return where(x > 0.0f, x, x * 0.1f) + x * (x < 1.0f); };
  const auto x = TF::from({-2, 0.5f, 3, -0.25f, 1, 4}, {2, 3});
  const auto traced = jit::trace(f, x);
  CHECK(count(traced, jit::StepKind::cast) == 4);  // each comparison to bool and back
  const auto plan = jit::freeze(f, x);
  CHECK(count(plan.graph(), jit::StepKind::cast) == 0);
  CHECK(plan.summary().find("2 bool round trips") != std::string::npos);
  for (const auto& in : {x, x * -3.0f, x + 0.75f}) CHECK(plan.run(in).to_vector() == f(in).to_vector());
  // A bool the plan returns is cast once, and comes back as bool.
  auto g = [](const TF& v) { return std::make_tuple(v > 0.0f, (v > 0.0f).to<float>() * v); };
  const auto pg = jit::freeze(g, x);
  const auto out = pg.run_any({x * -1.0f});
  CHECK(out[0].dtype() == DType::bool_);
  CHECK(bits(out[0].as<bool>()) == bits(x * -1.0f > 0.0f));
  CHECK(out[1].as<float>().to_vector() == std::get<1>(g(x * -1.0f)).to_vector());
}
