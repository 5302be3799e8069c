// nn::init: gains and fans against PyTorch (tests/reference/init_reference.py),
// sample statistics of every distribution, orthogonality, reproducibility,
// requires-grad leaves, strided targets and PyTorch's errors.
#include <algorithm>
#include <cmath>

#include "support.hpp"

#include <frost/nn/init.hpp>

using namespace frost;
using namespace frost::test;
namespace init = frost::nn::init;

namespace {

struct Stats {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
};

template <class T>
Stats stats(const Tensor<T>& t) {
  const auto v = t.to_vector();
  Stats s;
  for (auto x : v) {
    s.mean += static_cast<double>(x);
    s.min = std::min(s.min, static_cast<double>(x));
    s.max = std::max(s.max, static_cast<double>(x));
  }
  s.mean /= static_cast<double>(v.size());
  for (auto x : v) s.std += (static_cast<double>(x) - s.mean) * (static_cast<double>(x) - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size() - 1));
  return s;
}

// 200k samples: the sample mean is within ~4.5 standard errors of `mean`
// at 1% of std, and the sample std within 1%.
void check_moments(const Stats& s, double mean, double std) {
  CHECK(std::fabs(s.mean - mean) < 0.01 * std);
  CHECK(s.std == doctest::Approx(std).epsilon(0.01));
}

}  // namespace

TEST_CASE("init: calculate_gain matches PyTorch") {
  CHECK(init::calculate_gain("linear") == 1.0);
  CHECK(init::calculate_gain("conv2d") == 1.0);
  CHECK(init::calculate_gain("conv_transpose3d") == 1.0);
  CHECK(init::calculate_gain("sigmoid") == 1.0);
  CHECK(init::calculate_gain("tanh") == doctest::Approx(1.6666666666666667).epsilon(1e-15));
  CHECK(init::calculate_gain("relu") == doctest::Approx(1.4142135623730951).epsilon(1e-15));
  CHECK(init::calculate_gain("leaky_relu") == doctest::Approx(1.4141428569978354).epsilon(1e-15));
  CHECK(init::calculate_gain("leaky_relu", 0.2) == doctest::Approx(1.3867504905630728).epsilon(1e-15));
  CHECK(init::calculate_gain("leaky_relu", 0.0) == doctest::Approx(1.4142135623730951).epsilon(1e-15));
  CHECK(init::calculate_gain("selu") == 0.75);
}

TEST_CASE("init: calculate_fan_in_and_fan_out matches PyTorch") {
  auto f = init::calculate_fan_in_and_fan_out(TF::empty({3, 4}));
  CHECK(f.fan_in == 4);
  CHECK(f.fan_out == 3);
  auto [fi, fo] = init::calculate_fan_in_and_fan_out(TF::empty({8, 4, 3, 3}));
  CHECK(fi == 36);
  CHECK(fo == 72);
  f = init::calculate_fan_in_and_fan_out(TD::empty({5, 2, 7}));
  CHECK(f.fan_in == 14);
  CHECK(f.fan_out == 35);
}

TEST_CASE("init: uniform_, normal_ and constants") {
  manual_seed(11);
  auto u = init::uniform_(TF::empty({400, 500}), -0.5, 1.5);
  auto s = stats(u);
  CHECK(s.min >= -0.5);
  CHECK(s.max < 1.5);
  check_moments(s, 0.5, 2.0 / std::sqrt(12.0));
  s = stats(init::uniform_(TD::empty({400, 500})));
  CHECK(s.min >= 0.0);
  CHECK(s.max < 1.0);
  check_moments(s, 0.5, 1.0 / std::sqrt(12.0));

  check_moments(stats(init::normal_(TF::empty({400, 500}), 2.0, 0.3)), 2.0, 0.3);
  check_moments(stats(init::normal_(TD::empty({200000}))), 0.0, 1.0);

  CHECK(init::constant_(TF::empty({2, 3}), 0.25f).to_vector() == std::vector<float>(6, 0.25f));
  CHECK(init::zeros_(TD::empty({4})).to_vector() == std::vector<double>(4, 0.0));
  CHECK(init::ones_(TD::empty({2, 2})).to_vector() == std::vector<double>(4, 1.0));
  CHECK(init::zeros_(IndexTensor::empty({3})).to_vector() == std::vector<std::int64_t>(3, 0));
  CHECK(init::eye_(TD::empty({2, 3})).to_vector() == std::vector<double>{1, 0, 0, 0, 1, 0});
  CHECK(init::eye_(TD::empty({3, 2})).to_vector() == std::vector<double>{1, 0, 0, 1, 0, 0});
  CHECK(init::eye_(IndexTensor::empty({2, 2})).to_vector() == std::vector<std::int64_t>{1, 0, 0, 1});
}

TEST_CASE("init: kaiming and xavier follow PyTorch's formulas") {
  manual_seed(3);
  const double fan_in = 500, fan_out = 400;
  // Default: leaky_relu with a = 0, fan_in: bound sqrt(6 / fan_in).
  auto w = init::kaiming_uniform_(TF::empty({400, 500}));
  auto s = stats(w);
  const double bound = std::sqrt(6.0 / fan_in);
  CHECK(s.min >= -bound);
  CHECK(s.max < bound);
  CHECK(s.max > 0.99 * bound);
  check_moments(s, 0.0, bound / std::sqrt(3.0));
  // nn.Linear's own choice: a = sqrt(5) gives bound 1 / sqrt(fan_in).
  s = stats(init::kaiming_uniform_(TD::empty({400, 500}), {.a = std::sqrt(5.0)}));
  CHECK(s.max < 1.0 / std::sqrt(fan_in));
  check_moments(s, 0.0, 1.0 / std::sqrt(fan_in) / std::sqrt(3.0));

  check_moments(stats(init::kaiming_normal_(TF::empty({400, 500}), {.mode = init::fan_out, .nonlinearity = "relu"})),
                0.0, std::sqrt(2.0 / fan_out));
  check_moments(stats(init::kaiming_normal_(TD::empty({400, 500}), {.a = 0.2})), 0.0,
                1.3867504905630728 / std::sqrt(fan_in));
  // Conv weight [out, in, kh, kw]: fans include the receptive field.
  check_moments(stats(init::kaiming_normal_(TF::empty({64, 32, 10, 10}), {.nonlinearity = "tanh"})), 0.0,
                (5.0 / 3.0) / std::sqrt(3200.0));

  const double xs = std::sqrt(2.0 / (fan_in + fan_out));
  s = stats(init::xavier_uniform_(TF::empty({400, 500}), 2.0));
  CHECK(s.min >= -2.0 * std::sqrt(3.0) * xs);
  CHECK(s.max < 2.0 * std::sqrt(3.0) * xs);
  check_moments(s, 0.0, 2.0 * xs);
  check_moments(stats(init::xavier_normal_(TD::empty({400, 500}))), 0.0, xs);
}

TEST_CASE("init: trunc_normal_ stays in bounds with the truncated moments") {
  manual_seed(5);
  auto s = stats(init::trunc_normal_(TF::empty({400, 500})));
  CHECK(s.min >= -2.0);
  CHECK(s.max <= 2.0);
  check_moments(s, 0.0, 0.8796256610342398);
  // Asymmetric window (PyTorch's own sampler gives 1.41278, 0.83153 here).
  s = stats(init::trunc_normal_(TD::empty({200000}), 1.0, 2.0, 0.0, 3.0));
  CHECK(s.min >= 0.0);
  CHECK(s.max <= 3.0);
  check_moments(s, 1.4132624361230661, 0.8313200565040956);
  // A far tail: all mass in [3, 3.5] of a standard normal, still no NaN or inf.
  s = stats(init::trunc_normal_(TD::empty({1000}), 0.0, 1.0, 3.0, 3.5));
  CHECK(s.min >= 3.0);
  CHECK(s.max <= 3.5);
  CHECK(std::isfinite(s.mean));
}

TEST_CASE("init: erfinv inverts erf") {
  for (double y : {-0.999999, -0.9, -0.5, -1e-8, 0.0, 0.3, 0.75, 0.99, 0.9999999})
    CHECK(std::erf(init::detail::erfinv(y)) == doctest::Approx(y).epsilon(1e-14));
  CHECK(std::isinf(init::detail::erfinv(1.0)));
  CHECK(std::isinf(init::detail::erfinv(-1.0)));
}

TEST_CASE("init: orthogonal_ gives orthonormal rows or columns") {
  manual_seed(9);
  auto check_identity = [](const TD& m, double scale) {
    const auto n = m.shape()[0];
    check_close(m, TD::eye(n) * (scale * scale), 1e-12, 0);
  };
  auto wide = init::orthogonal_(TD::empty({6, 10}));
  check_identity(wide.mm(wide.t()), 1.0);
  auto tall = init::orthogonal_(TD::empty({10, 6}), 0.5);
  check_identity(tall.t().mm(tall), 0.5);
  auto square = init::orthogonal_(TD::empty({7, 7}));
  check_identity(square.mm(square.t()), 1.0);
  check_identity(square.t().mm(square), 1.0);
  // A conv weight is orthogonal over its flattened trailing dims.
  auto conv = init::orthogonal_(TD::empty({4, 2, 3, 3}), 2.0).reshape({4, 18});
  check_identity(conv.mm(conv.t()), 2.0);
  auto f = init::orthogonal_(TF::empty({16, 16}));
  check_close(f.mm(f.t()), TF::eye(16), 1e-5, 0);
  // sign(diag(R)) makes the draw unbiased: over many 1 x 1 draws both signs appear.
  int positive = 0;
  for (int i = 0; i < 64; ++i) positive += init::orthogonal_(TD::empty({1, 1})).item() > 0;
  CHECK(positive > 10);
  CHECK(positive < 54);
}

TEST_CASE("init: manual_seed and an explicit Generator reproduce a draw") {
  auto draw_all = [](Generator* g) {
    std::vector<double> v;
    for (auto x : init::kaiming_uniform_(TD::empty({5, 7}), {.generator = g}).to_vector()) v.push_back(x);
    for (auto x : init::normal_(TF::empty({9}), 0, 1, g).to_vector()) v.push_back(x);
    for (auto x : init::trunc_normal_(TD::empty({6}), 0, 1, -2, 2, g).to_vector()) v.push_back(x);
    for (auto x : init::orthogonal_(TD::empty({3, 4}), 1, g).to_vector()) v.push_back(x);
    for (auto x : init::xavier_normal_(TF::empty({4, 4}), 1, g).to_vector()) v.push_back(x);
    return v;
  };
  manual_seed(42);
  const auto a = draw_all(nullptr);
  manual_seed(42);
  CHECK(draw_all(nullptr) == a);
  CHECK(draw_all(nullptr) != a);  // the generator moved on
  Generator g1(42), g2(42);
  CHECK(draw_all(&g1) == a);      // an explicit generator with the same seed draws the same numbers
  CHECK(draw_all(&g2) == a);
}

TEST_CASE("init: works on a leaf that requires grad and records nothing") {
  auto w = TD::empty({3, 4}).requires_grad_();
  const auto v0 = w.version();
  auto r = init::kaiming_normal_(w);
  CHECK(r.is_same(w));
  CHECK(w.version() > v0);
  CHECK(w.is_leaf());
  CHECK(std::string(w.grad_fn_name()).empty());
  CHECK(w.requires_grad());
  CHECK(is_grad_enabled());
  for (auto f : {+[](TD t) { return init::zeros_(t); }, +[](TD t) { return init::eye_(t); },
                 +[](TD t) { return init::orthogonal_(t); }, +[](TD t) { return init::trunc_normal_(t); },
                 +[](TD t) { return init::xavier_uniform_(t); }, +[](TD t) { return init::uniform_(t); }}) {
    f(w);
    CHECK(w.is_leaf());
    CHECK(w.requires_grad());
  }
  // Still a working parameter: the gradient reaches it.
  init::ones_(w);
  (w * 3.0).sum().backward();
  check_close(w.grad(), std::vector<double>(12, 3.0));
  CHECK(!w.grad().requires_grad());
}

TEST_CASE("init: strided targets are written in place") {
  auto base = TD::zeros({4, 6});
  init::ones_(base.slice(1, 0, 6, 2));
  CHECK(base.to_vector() == std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
                                                1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0});
  auto t = TD::zeros({3, 2});
  init::eye_(t.t());  // 2 x 3 view of a 3 x 2 buffer
  CHECK(t.to_vector() == std::vector<double>{1, 0, 0, 1, 0, 0});
  // Draws land in row-major order of the view, the same numbers as a dense tensor.
  manual_seed(1);
  const auto dense = init::normal_(TD::empty({3, 4})).to_vector();
  manual_seed(1);
  auto buf = TD::zeros({4, 3});
  init::normal_(buf.t());
  CHECK(buf.t().contiguous().to_vector() == dense);
  manual_seed(1);
  auto o = TD::zeros({5, 4});
  init::orthogonal_(o.t());
  check_close(o.t().mm(o), TD::eye(4), 1e-12, 0);
}

TEST_CASE("init: bad input raises PyTorch's errors") {
  CHECK_THROWS_WITH_AS(init::calculate_gain("foo"), doctest::Contains("Unsupported nonlinearity foo"), Error);
  CHECK_THROWS_WITH_AS(init::kaiming_uniform_(TF::empty({4, 4}), {.nonlinearity = "softplus"}),
                       doctest::Contains("Unsupported nonlinearity softplus"), Error);
  CHECK_THROWS_WITH_AS(init::calculate_fan_in_and_fan_out(TF::empty({3})),
                       doctest::Contains("Fan in and fan out can not be computed for tensor with fewer than 2 "
                                         "dimensions (got shape [3])"),
                       Error);
  CHECK_THROWS_WITH_AS(init::xavier_uniform_(TF::empty({})), doctest::Contains("fewer than 2 dimensions"), Error);
  CHECK_THROWS_WITH_AS(init::kaiming_normal_(TF::empty({5})), doctest::Contains("fewer than 2 dimensions"), Error);
  CHECK_THROWS_WITH_AS(init::orthogonal_(TD::empty({3})),
                       doctest::Contains("frost::nn::init::orthogonal_: Only tensors with 2 or more dimensions are "
                                         "supported (got shape [3])"),
                       Error);
  CHECK_THROWS_WITH_AS(init::eye_(TD::empty({2, 2, 2})),
                       doctest::Contains("Only tensors with 2 dimensions are supported (got shape [2, 2, 2])"), Error);
  CHECK_THROWS_WITH_AS(init::uniform_(TD::empty({2}), 2.0, 1.0), doctest::Contains("from=2 > to=1"), Error);
  CHECK_THROWS_WITH_AS(init::normal_(TD::empty({2}), 0.0, -1.0), doctest::Contains("std >= 0.0, but found std -1"),
                       Error);
  CHECK_THROWS_WITH_AS(init::trunc_normal_(TD::empty({2}), 0.0, 1.0, 1.0, -1.0), doctest::Contains("expects a < b"),
                       Error);
  CHECK_THROWS_WITH_AS(init::zeros_(TD()), doctest::Contains("nn::init::constant_: got an undefined tensor"), Error);
  // An empty weight is left alone, as in PyTorch.
  CHECK(init::kaiming_uniform_(TF::empty({0, 3})).numel() == 0);
  CHECK(init::orthogonal_(TF::empty({0, 3})).numel() == 0);
}
