// Tensor basics: factories, views and copies, joining and splitting, element
// access, dtype conversion, printing, random numbers (reproducible and
// independent of the thread count), memory statistics and a large matmul.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <frost/frost.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "support.hpp"

using frost::Generator;
using frost::Shape;
using frost::test::check_close;
using frost::test::TD;
using frost::test::TF;
using TI = frost::Tensor<std::int64_t>;

namespace {

template <class T>
std::string str(const frost::Tensor<T>& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <class T>
double mean_of(const std::vector<T>& v) {
  double s = 0;
  for (T x : v) s += static_cast<double>(x);
  return s / static_cast<double>(v.size());
}

template <class T>
double var_of(const std::vector<T>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (T x : v) s += (static_cast<double>(x) - m) * (static_cast<double>(x) - m);
  return s / static_cast<double>(v.size() - 1);
}

/// Restores the OpenMP thread count when a test leaves.
struct ThreadCountGuard {
#ifdef _OPENMP
  int saved = omp_get_max_threads();
  ~ThreadCountGuard() { omp_set_num_threads(saved); }
#endif
};

void set_threads([[maybe_unused]] int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

/// Reference product in double: [m, k] x [k, n] from row-major vectors.
std::vector<double> naive_mm(const std::vector<float>& a, const std::vector<float>& b, int m, int k, int n) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) {
      const double av = a[static_cast<std::size_t>(i) * k + p];
      for (int j = 0; j < n; ++j) c[static_cast<std::size_t>(i) * n + j] += av * b[static_cast<std::size_t>(p) * n + j];
    }
  return c;
}

}  // namespace

// ---- factories --------------------------------------------------------------

TEST_CASE("tensor: zeros ones full empty scalar") {
  auto z = TF::zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dim() == 2);
  CHECK(z.numel() == 6);
  CHECK(z.is_contiguous());
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.to_vector() == std::vector<float>(6, 0.0f));
  CHECK(TD::ones({4}).to_vector() == std::vector<double>(4, 1.0));
  CHECK(TF::full({2, 2}, 2.5f).to_vector() == std::vector<float>(4, 2.5f));
  CHECK(TI::full({3}, -7).to_vector() == std::vector<std::int64_t>(3, -7));
  auto e = TF::empty({3, 0, 2});
  CHECK(e.numel() == 0);
  CHECK(e.to_vector().empty());
  auto s = TD::scalar(4.0);
  CHECK(s.dim() == 0);
  CHECK(s.shape() == Shape{});
  CHECK(s.numel() == 1);
  CHECK(s.item() == 4.0);
  CHECK_FALSE(z.requires_grad());
  CHECK(z.is_leaf());
  CHECK(z.device() == frost::Device::cpu());
  CHECK(TF::dtype() == frost::DType::float32);
  CHECK(std::string(frost::dtype_name(TI::dtype())) == "int64");
}

TEST_CASE("tensor: arange linspace eye from") {
  CHECK(TF::arange(5).to_vector() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(TD::arange(2, 5).to_vector() == std::vector<double>{2, 3, 4});
  check_close(TD::arange(0, 1, 0.25), {0.0, 0.25, 0.5, 0.75});
  check_close(TD::arange(0, 1, 0.1), {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, 1e-12, 1e-12);
  CHECK(TD::arange(0, 1, 0.1).numel() == 10);
  check_close(TF::arange(1.5, 3.0, 0.5), {1.5f, 2.0f, 2.5f});
  check_close(TD::arange(0.5, 2.1, 0.4), {0.5, 0.9, 1.3, 1.7}, 1e-12, 1e-12);  // 2.1 excluded
  CHECK(TD::arange(5, 0, -1.5).to_vector() == std::vector<double>{5, 3.5, 2, 0.5});
  CHECK(TI::arange(-2, 3).to_vector() == std::vector<std::int64_t>{-2, -1, 0, 1, 2});
  // Integer tensors truncate the step and the first value, as PyTorch 1.13 does.
  CHECK(TI::arange(0, 5, 1.5).to_vector() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(TI::arange(0.5, 4.5, 2).to_vector() == std::vector<std::int64_t>{0, 2});
  CHECK(TI::arange(0, -5, -1.5).to_vector() == std::vector<std::int64_t>{0, -1, -2, -3, -4});
  CHECK_THROWS_WITH_AS(TI::arange(0, 3, 0.5), doctest::Contains("step must be non-zero"), frost::Error);
  CHECK(TF::arange(3, 3).numel() == 0);

  check_close(TD::linspace(0, 1, 5), {0.0, 0.25, 0.5, 0.75, 1.0});
  check_close(TD::linspace(-1, 1, 3), {-1.0, 0.0, 1.0});
  CHECK(TD::linspace(2, 3, 1).to_vector() == std::vector<double>{2});
  CHECK(TD::linspace(2, 3, 0).numel() == 0);
  CHECK(TF::linspace(0, 1, 7).to_vector().back() == 1.0f);

  CHECK(TF::eye(3).to_vector() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  auto e23 = TD::eye(2, 3);
  CHECK(e23.shape() == Shape{2, 3});
  CHECK(e23.to_vector() == std::vector<double>{1, 0, 0, 0, 1, 0});
  CHECK(TD::eye(3, 2).to_vector() == std::vector<double>{1, 0, 0, 1, 0, 0});

  auto f = TF::from({1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(f.shape() == Shape{3, 2});
  CHECK(f.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(TD::from({1.5, 2.5}).shape() == Shape{2});
  CHECK(TD::from(std::vector<double>{3.0}, Shape{}).item() == 3.0);
  CHECK(TF::from(std::vector<float>{}).numel() == 0);
}

TEST_CASE("tensor: rand randn randint ranges and statistics") {
  Generator g(2024);
  const int n = 100000;
  auto u = TF::rand({n}, &g).to_vector();
  CHECK(*std::min_element(u.begin(), u.end()) >= 0.0f);
  CHECK(*std::max_element(u.begin(), u.end()) < 1.0f);
  CHECK(mean_of(u) == doctest::Approx(0.5).epsilon(0.01));
  CHECK(var_of(u) == doctest::Approx(1.0 / 12).epsilon(0.02));
  auto ud = TD::rand({n}, &g).to_vector();
  CHECK(*std::min_element(ud.begin(), ud.end()) >= 0.0);
  CHECK(*std::max_element(ud.begin(), ud.end()) < 1.0);
  CHECK(mean_of(ud) == doctest::Approx(0.5).epsilon(0.01));
  // All of [0, 1) is covered: each tenth holds about a tenth of the draws.
  std::vector<int> bins(10, 0);
  for (double v : ud) ++bins[static_cast<std::size_t>(v * 10)];
  for (int b : bins) CHECK(std::abs(b - n / 10) < n / 100);

  for (int pass = 0; pass < 2; ++pass) {
    const auto z = pass == 0 ? TD::randn({n}, &g).to_vector() : TF::randn({n}, &g).to<double>().to_vector();
    CAPTURE(pass);
    CHECK(std::abs(mean_of(z)) < 0.015);
    CHECK(std::sqrt(var_of(z)) == doctest::Approx(1.0).epsilon(0.015));
    const double within1 = static_cast<double>(std::count_if(z.begin(), z.end(), [](double v) { return std::fabs(v) < 1; })) / n;
    CHECK(within1 == doctest::Approx(0.6827).epsilon(0.02));
    const double within2 = static_cast<double>(std::count_if(z.begin(), z.end(), [](double v) { return std::fabs(v) < 2; })) / n;
    CHECK(within2 == doctest::Approx(0.9545).epsilon(0.01));
    // Neighbours (the two halves of a Box-Muller pair) are uncorrelated.
    double c = 0;
    for (int i = 0; i + 1 < n; i += 2) c += z[static_cast<std::size_t>(i)] * z[static_cast<std::size_t>(i) + 1];
    CHECK(std::fabs(c / (n / 2)) < 0.02);
    CHECK(std::count_if(z.begin(), z.end(), [](double v) { return !std::isfinite(v); }) == 0);
  }

  auto ri = TI::randint(-3, 7, {n}, &g).to_vector();
  CHECK(*std::min_element(ri.begin(), ri.end()) == -3);
  CHECK(*std::max_element(ri.begin(), ri.end()) == 6);
  std::vector<int> counts(10, 0);
  for (auto v : ri) ++counts[static_cast<std::size_t>(v + 3)];
  for (int cnt : counts) CHECK(std::abs(cnt - n / 10) < n / 100);
  auto rf = TF::randint(0, 2, {1000}, &g).to_vector();
  for (float v : rf) CHECK((v == 0.0f || v == 1.0f));
  // A huge range keeps values inside it.
  auto big = TI::randint(0, std::int64_t{1} << 40, {1000}, &g).to_vector();
  for (auto v : big) CHECK((v >= 0 && v < (std::int64_t{1} << 40)));
  CHECK(std::set<std::int64_t>(big.begin(), big.end()).size() > 990);
  // A 2-D draw fills in row-major order like a 1-D one.
  Generator a(5), b(5);
  CHECK(TF::rand({4, 5}, &a).to_vector() == TF::rand({20}, &b).to_vector());
}

TEST_CASE("tensor: bulk uniform and Bernoulli draws equal the per-element definition") {
  // The CPU draws these 16 Philox blocks at a time; element i must still be
  // philox::sample(seed, offset, i), whatever the path or thread split.
  auto check = [](auto zero, frost::philox::Dist dist, double lo, double hi) {
    using T = decltype(zero);
    for (const std::int64_t n : {1, 63, 64, 65, 100003}) {
      auto y = frost::Tensor<T>::empty({n});
      frost::backend_for<T>(frost::Device::cpu()).random(y.view_of(), dist, 99, 12345, lo, hi);
      const auto v = y.to_vector();
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < n; ++i)
        bad += v[static_cast<std::size_t>(i)] != frost::philox::sample<T>(dist, 99, 12345, static_cast<std::uint64_t>(i), lo, hi);
      CAPTURE(n);
      CHECK(bad == 0);
    }
  };
  check(0.0f, frost::philox::Dist::uniform, -2.0, 3.0);
  check(0.0, frost::philox::Dist::uniform, -2.0, 3.0);
  check(0.0f, frost::philox::Dist::bernoulli, 0.3, 0.0);
  check(0.0, frost::philox::Dist::bernoulli, 0.7, 0.0);
}

TEST_CASE("tensor: like factories") {
  auto x = TD::from({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(frost::zeros_like(x).shape() == x.shape());
  CHECK(frost::zeros_like(x).to_vector() == std::vector<double>(6, 0.0));
  CHECK(frost::ones_like(x).to_vector() == std::vector<double>(6, 1.0));
  CHECK(frost::full_like(x, 3.0).to_vector() == std::vector<double>(6, 3.0));
  CHECK(frost::empty_like(x).shape() == x.shape());
  CHECK(frost::empty_like(x).data() != x.data());
  Generator g1(9), g2(9);
  auto r = frost::rand_like(x, &g1);
  CHECK(r.shape() == x.shape());
  CHECK(r.to_vector() == TD::rand({2, 3}, &g2).to_vector());
  auto rn = frost::randn_like(x, &g1);
  CHECK(rn.to_vector() == TD::randn({2, 3}, &g2).to_vector());
  // like-factories of a transposed tensor are contiguous with its shape
  auto z = frost::zeros_like(x.t());
  CHECK(z.shape() == Shape{3, 2});
  CHECK(z.is_contiguous());
  auto xi = TI::zeros({2});
  CHECK(frost::ones_like(xi).to_vector() == std::vector<std::int64_t>{1, 1});
}

// ---- views and copies -------------------------------------------------------

TEST_CASE("tensor: view and reshape share storage or copy") {
  auto x = TF::arange(12).view({3, 4});
  auto v = x.view({4, 3});
  CHECK(v.data() == x.data());
  CHECK(v.to_vector() == x.to_vector());
  auto v2 = x.view({2, -1, 2});
  CHECK(v2.shape() == Shape{2, 3, 2});
  CHECK(v2.data() == x.data());
  v.select(0, 0).fill_(-1.0f);
  CHECK(x.to_vector()[2] == -1.0f);

  // reshape of a contiguous tensor is a view; of a transposed one, a copy
  auto r = x.reshape({6, 2});
  CHECK(r.data() == x.data());
  auto xt = x.t();
  CHECK_FALSE(xt.is_contiguous());
  auto rc = xt.reshape({12});
  CHECK(rc.data() != x.data());
  CHECK(rc.is_contiguous());
  std::vector<float> expect;
  auto xv = x.to_vector();
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) expect.push_back(xv[static_cast<std::size_t>(i * 4 + j)]);
  CHECK(rc.to_vector() == expect);
  // a reshape that splits a dim of a non-contiguous tensor can still be a view
  auto cols = x.narrow(1, 0, 2);  // [3, 2], strides [4, 1]
  auto cv = cols.reshape({3, 2, 1});
  CHECK(cv.data() == cols.data());
  auto ct = xt.reshape({2, 2, 3});  // splits the first dim of [4, 3] strides [1, 4]
  CHECK(ct.data() == x.data());
  CHECK(ct.to_vector() == xt.to_vector());
  CHECK(x.reshape({3, 4}).data() == x.data());
  auto z = TF::zeros({0, 4});
  CHECK(z.view({4, 0}).shape() == Shape{4, 0});
  CHECK(z.reshape({-1, 2}).shape() == Shape{0, 2});
  CHECK(TF::scalar(2.0f).view({1, 1}).shape() == Shape{1, 1});
  CHECK(TF::ones({1, 1}).view({}).dim() == 0);
}

TEST_CASE("tensor: flatten unflatten unsqueeze squeeze") {
  auto x = TD::arange(24).view({2, 3, 4});
  CHECK(x.flatten().shape() == Shape{24});
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(x.flatten(1, 2).data() == x.data());
  CHECK(x.flatten(-2, -1).shape() == Shape{2, 12});
  CHECK(x.flatten(1, 1).shape() == x.shape());
  CHECK(TD::scalar(1.0).flatten().shape() == Shape{1});
  CHECK(x.unflatten(2, {2, 2}).shape() == Shape{2, 3, 2, 2});
  CHECK(x.unflatten(-1, {-1, 2}).shape() == Shape{2, 3, 2, 2});
  CHECK(x.unflatten(0, {1, 2}).data() == x.data());

  auto u = x.unsqueeze(1);
  CHECK(u.shape() == Shape{2, 1, 3, 4});
  CHECK(u.data() == x.data());
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3, 4});
  CHECK(TD::scalar(1.0).unsqueeze(0).shape() == Shape{1});
  // unsqueeze of a transposed view keeps the element order
  CHECK(x.transpose(0, 2).unsqueeze(1).contiguous().to_vector() == x.transpose(0, 2).contiguous().to_vector());

  auto s = TD::zeros({1, 3, 1, 2});
  CHECK(s.squeeze().shape() == Shape{3, 2});
  CHECK(s.squeeze(0).shape() == Shape{3, 1, 2});
  CHECK(s.squeeze(2).shape() == Shape{1, 3, 2});
  CHECK(s.squeeze(1).shape() == s.shape());  // size 3: unchanged
  CHECK(s.squeeze(-2).shape() == Shape{1, 3, 2});
  CHECK(TD::zeros({1, 1}).squeeze().dim() == 0);
  CHECK(s.squeeze().data() == s.data());
}

TEST_CASE("tensor: transpose permute expand") {
  auto x = TF::arange(6).view({2, 3});
  auto t = x.t();
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.strides() == Shape{1, 3});
  CHECK(t.data() == x.data());
  CHECK(t.contiguous().to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(t.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.transpose(0, 1).to_vector() == t.to_vector());
  CHECK(x.transpose(-1, -2).to_vector() == t.to_vector());
  CHECK(x.transpose(1, 1).to_vector() == x.to_vector());

  auto y = TF::arange(24).view({2, 3, 4});
  auto p = y.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(p.data() == y.data());
  auto pv = p.to_vector();
  auto yv = y.to_vector();
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        CHECK(pv[static_cast<std::size_t>(k * 6 + i * 3 + j)] == yv[static_cast<std::size_t>(i * 12 + j * 4 + k)]);
  CHECK(y.permute({-1, 0, 1}).shape() == Shape{4, 2, 3});
  CHECK(p.permute({1, 2, 0}).to_vector() == yv);

  auto c = TF::from({1, 2, 3}, {3, 1});
  auto e = c.expand({3, 4});
  CHECK(e.shape() == Shape{3, 4});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(e.data() == c.data());
  CHECK(e.to_vector() == std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  auto e2 = c.expand({2, -1, 2});
  CHECK(e2.shape() == Shape{2, 3, 2});
  CHECK(e2.stride(0) == 0);
  CHECK(e2.contiguous().to_vector() == std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(c.expand_as(TF::zeros({3, 2})).shape() == Shape{3, 2});
  CHECK(TF::scalar(5.0f).expand({2, 2}).to_vector() == std::vector<float>(4, 5.0f));
  // writing through the base is visible in the expanded view
  c.fill_(7.0f);
  CHECK(e.to_vector() == std::vector<float>(12, 7.0f));
}

TEST_CASE("tensor: narrow slice select") {
  auto x = TD::arange(20).view({4, 5});
  auto n = x.narrow(1, 1, 3);
  CHECK(n.shape() == Shape{4, 3});
  CHECK(n.storage_offset() == 1);
  CHECK(n.data() == x.data() + 1);
  CHECK(n.select(0, 1).to_vector() == std::vector<double>{6, 7, 8});
  CHECK(x.narrow(0, -2, 2).to_vector() == std::vector<double>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(x.narrow(1, 5, 0).numel() == 0);

  auto s = TD::arange(10);
  CHECK(s.slice(0, 1, 8, 3).to_vector() == std::vector<double>{1, 4, 7});
  CHECK(s.slice(0, 1, 8, 3).stride(0) == 3);
  CHECK(s.slice(0, 0, 10, 2).to_vector() == std::vector<double>{0, 2, 4, 6, 8});
  CHECK(s.slice(0, -3, 10).to_vector() == std::vector<double>{7, 8, 9});
  CHECK(s.slice(0, 2, -5).to_vector() == std::vector<double>{2, 3, 4});
  CHECK(s.slice(0, 5, 100).to_vector() == std::vector<double>{5, 6, 7, 8, 9});  // clamped like Python
  CHECK(s.slice(0, 7, 3).numel() == 0);
  CHECK(s.slice(0, -100, 2).to_vector() == std::vector<double>{0, 1});
  CHECK(x.slice(1, 0, 5, 2).to_vector() == std::vector<double>{0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 17, 19});
  auto sl = x.slice(1, 1, 5, 2);
  sl.fill_(-1.0);
  CHECK(x.select(0, 0).to_vector() == std::vector<double>{0, -1, 2, -1, 4});

  auto sel = x.select(1, -1);
  CHECK(sel.shape() == Shape{4});
  CHECK(sel.to_vector() == std::vector<double>{4, 9, 14, 19});
  CHECK(sel.stride(0) == 5);
  CHECK(x.select(0, 2).data() == x.data() + 10);
  CHECK(TD::arange(3).select(0, 1).dim() == 0);
  CHECK(TD::arange(3).select(0, 1).item() == 1.0);
}

TEST_CASE("tensor: contiguous and clone") {
  auto x = TF::arange(6).view({2, 3});
  CHECK(x.contiguous().data() == x.data());  // already contiguous: same tensor
  auto t = x.t();
  auto tc = t.contiguous();
  CHECK(tc.data() != x.data());
  CHECK(tc.is_contiguous());
  CHECK(tc.strides() == Shape{2, 1});
  CHECK(tc.to_vector() == t.to_vector());
  auto c = x.clone();
  CHECK(c.data() != x.data());
  CHECK(c.to_vector() == x.to_vector());
  c.fill_(0.0f);
  CHECK(x.to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // clone of a strided view is dense
  auto cs = x.slice(1, 0, 3, 2).clone();
  CHECK(cs.is_contiguous());
  CHECK(cs.to_vector() == std::vector<float>{0, 2, 3, 5});
  // size-1 dims do not break contiguity
  CHECK(TF::zeros({3, 1}).t().is_contiguous());
  CHECK(TI::arange(4).clone().to_vector() == std::vector<std::int64_t>{0, 1, 2, 3});
}

TEST_CASE("tensor: split and chunk") {
  auto x = TD::arange(10).view({5, 2});
  auto parts = x.split(2);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{2, 2});
  CHECK(parts[2].shape() == Shape{1, 2});
  CHECK(parts[1].to_vector() == std::vector<double>{4, 5, 6, 7});
  CHECK(parts[1].data() == x.data() + 4);  // views
  auto cols = x.split(1, 1);
  REQUIRE(cols.size() == 2);
  CHECK(cols[1].to_vector() == std::vector<double>{1, 3, 5, 7, 9});
  CHECK(x.split(10).size() == 1);

  auto ch = x.chunk(3);
  REQUIRE(ch.size() == 3);
  CHECK(ch[0].size(0) == 2);
  CHECK(ch[1].size(0) == 2);
  CHECK(ch[2].size(0) == 1);
  auto ch2 = TD::arange(6).chunk(4);  // PyTorch: 3 chunks of 2
  REQUIRE(ch2.size() == 3);
  for (auto& c : ch2) CHECK(c.numel() == 2);
  auto ch3 = TD::arange(2).chunk(5);
  REQUIRE(ch3.size() == 2);
  CHECK(ch3[1].item() == 1.0);
  // gradients flow back through split pieces
  auto w = TD::arange(4).requires_grad_();
  auto ps = w.split(3);
  (ps[0] * 2.0).sum().backward();
  CHECK(w.grad().to_vector() == std::vector<double>{2, 2, 2, 0});
}

TEST_CASE("tensor: cat and stack") {
  auto a = TF::from({1, 2, 3, 4}, {2, 2});
  auto b = TF::from({5, 6}, {1, 2});
  auto c0 = frost::cat(std::vector<TF>{a, b});
  CHECK(c0.shape() == Shape{3, 2});
  CHECK(c0.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  auto c1 = frost::cat(std::vector<TF>{a, a.t()}, 1);
  CHECK(c1.shape() == Shape{2, 4});
  CHECK(c1.to_vector() == std::vector<float>{1, 2, 1, 3, 3, 4, 2, 4});
  CHECK(frost::cat(std::vector<TF>{a, TF::zeros({0, 2})}).to_vector() == a.to_vector());
  CHECK(frost::cat(std::vector<TF>{a}, -1).data() != a.data());  // always a new tensor

  auto s0 = frost::stack(std::vector<TF>{a, a * 2.0f});
  CHECK(s0.shape() == Shape{2, 2, 2});
  CHECK(s0.to_vector() == std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8});
  auto s1 = frost::stack(std::vector<TF>{a, a * 2.0f}, 1);
  CHECK(s1.shape() == Shape{2, 2, 2});
  CHECK(s1.to_vector() == std::vector<float>{1, 2, 2, 4, 3, 4, 6, 8});
  auto s2 = frost::stack(std::vector<TF>{TF::from({1, 2}), TF::from({3, 4}), TF::from({5, 6})}, -1);
  CHECK(s2.shape() == Shape{2, 3});
  CHECK(s2.to_vector() == std::vector<float>{1, 3, 5, 2, 4, 6});
  CHECK(frost::stack(std::vector<TF>{TF::scalar(1.0f), TF::scalar(2.0f)}).shape() == Shape{2});

  // gradients split back to the inputs
  auto x = TD::from({1, 2}).requires_grad_();
  auto y = TD::from({3, 4, 5}).requires_grad_();
  (frost::cat(std::vector<TD>{x, y}) * TD::arange(5)).sum().backward();
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1});
  CHECK(y.grad().to_vector() == std::vector<double>{2, 3, 4});
  auto z = TD::from({1, 2}).requires_grad_();
  (frost::stack(std::vector<TD>{z, z * 3.0}, 1) * TD::from({1, 10, 100, 1000}, {2, 2})).sum().backward();
  CHECK(z.grad().to_vector() == std::vector<double>{1 + 30, 100 + 3000});
}

TEST_CASE("tensor: to_vector item data and element access") {
  auto x = TD::from({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(x.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(x.t().to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(x.select(1, 2).to_vector() == std::vector<double>{3, 6});
  CHECK(x.sum().item() == 21.0);
  CHECK(x.narrow(0, 1, 1).narrow(1, 2, 1).item() == 6.0);
  CHECK(TD::from({9.0}).item() == 9.0);
  x.data()[4] = 50.0;
  CHECK(x.to_vector()[4] == 50.0);
  CHECK(x.t().data() == x.data());
  CHECK(x.select(0, 1).data()[1] == 50.0);
  CHECK(x.size(0) == 2);
  CHECK(x.size(-1) == 3);
  CHECK(x.stride(0) == 3);
  CHECK(x.sizes() == x.shape());
  CHECK(x.is_same(x));
  CHECK_FALSE(x.is_same(x.view({6})));
  auto copy = x;  // handles share the tensor
  CHECK(copy.is_same(x));
  copy.data()[0] = -1.0;
  CHECK(x.to_vector()[0] == -1.0);
}

TEST_CASE("tensor: index tensors count with add_ (a scalar), in place") {
  auto i = frost::IndexTensor::from({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto v0 = i.version();
  i.add_(10);
  CHECK(i.to_vector() == std::vector<std::int64_t>{11, 12, 13, 14, 15, 16});
  CHECK(i.version() == v0 + 1);
  auto col = i.t().select(0, 1);  // strided: 12, 15
  col += 1;
  col -= 3;
  CHECK(i.to_vector() == std::vector<std::int64_t>{11, 10, 13, 14, 13, 16});
}

TEST_CASE("tensor: to converts the element type") {
  auto x = TF::from({-1.7f, -0.2f, 0.0f, 2.9f});
  auto i = x.to<std::int64_t>();
  CHECK(i.to_vector() == std::vector<std::int64_t>{-1, 0, 0, 2});  // truncation toward zero, like PyTorch
  auto d = x.to<double>();
  CHECK(d.to_vector()[0] == doctest::Approx(-1.7).epsilon(1e-6));
  CHECK(TD::dtype() == frost::DType::float64);
  CHECK(x.to<float>().is_same(x));  // same type: the same tensor
  CHECK(i.to<double>().to_vector() == std::vector<double>{-1, 0, 0, 2});
  // non-contiguous source
  auto m = TD::arange(6).view({2, 3}).t().to<float>();
  CHECK(m.shape() == Shape{3, 2});
  CHECK(m.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(TD::empty({0, 2}).to<float>().shape() == Shape{0, 2});
  // What C++ leaves undefined, defined (as x86, CUDA and PyTorch convert):
  // NaN is int64's lowest value, out-of-range values saturate.
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(TD::from({std::nan(""), inf, -inf, 1e19, -1e19, -0.5}).to<std::int64_t>().to_vector() ==
        std::vector<std::int64_t>{INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0});
  CHECK(TF::from({std::nanf(""), 9.3e18f}).to<std::int64_t>().to_vector() ==
        std::vector<std::int64_t>{INT64_MIN, INT64_MAX});
  CHECK(frost::IndexTensor::from({INT64_MAX, -3}).to<double>().to_vector() == std::vector<double>{9223372036854775807.0, -3});
}

TEST_CASE("tensor: floor ceil round trunc, halves to even, and what they do to inf, NaN and -0") {
  const auto x = TD::from({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.7, 1.2});
  CHECK(x.round().to_vector() == std::vector<double>{-2, -2, -0.0, 0, 2, 2, -2, 1});  // PyTorch's torch.round
  CHECK(x.floor().to_vector() == std::vector<double>{-3, -2, -1, 0, 1, 2, -2, 1});
  CHECK(x.ceil().to_vector() == std::vector<double>{-2, -1, -0.0, 1, 2, 3, -1, 2});
  CHECK(x.trunc().to_vector() == std::vector<double>{-2, -1, -0.0, 0, 1, 2, -1, 1});
  CHECK(std::signbit(x.round().to_vector()[2]));  // -0.5 rounds to -0, as in PyTorch
  const float inf = std::numeric_limits<float>::infinity();
  const auto special = TF::from({inf, -inf, std::nanf(""), 8388609.0f}).round().to_vector();
  CHECK(special[0] == inf);
  CHECK(special[1] == -inf);
  CHECK(std::isnan(special[2]));
  CHECK(special[3] == 8388609.0f);  // already integral: unchanged
  // Piecewise constant, and recorded as in PyTorch: a loss reached only
  // through them backpropagates zeros (it is not "does not require grad").
  auto w = TF::from({0.3f, 1.6f}).requires_grad_();
  for (const auto& y : {w.floor(), w.ceil(), w.round(), w.trunc(), w.sign()}) {
    REQUIRE(y.requires_grad());
    w.set_grad({});
    (y * 3.0f).sum().backward();
    CHECK(w.grad().to_vector() == std::vector<float>{0, 0});
  }
  // Beside a differentiable term they add nothing to its gradient.
  w.set_grad({});
  (w * 2.0f + w.round()).sum().backward();
  CHECK(w.grad().to_vector() == std::vector<float>{2, 2});
}

// ---- printing ---------------------------------------------------------------

TEST_CASE("tensor: printing") {
  const auto s = str(TF::from({1, 2, 3, 4, 5, 6}, {2, 3}));
  CHECK(contains(s, "tensor("));
  CHECK(contains(s, "dtype=float32"));
  CHECK(contains(s, "shape=[2, 3]"));
  CHECK(s == "tensor([[1., 2., 3.],\n        [4., 5., 6.]], dtype=float32, shape=[2, 3])");
  CHECK(str(TD::from({0.5, -1.25})) == "tensor([ 0.5000, -1.2500], dtype=float64, shape=[2])");
  CHECK(str(TI::from({1, -20, 300})) == "tensor([  1, -20, 300], dtype=int64, shape=[3])");
  CHECK(str(TF::scalar(3.5f)) == "tensor(3.5000, dtype=float32, shape=[])");
  CHECK(str(TF::empty({0})) == "tensor([], dtype=float32, shape=[0])");
  CHECK(str(TF()) == "tensor(undefined)");
  CHECK(contains(str(TD::from({1e-6, 1.0})), "1.0000e-06"));
  CHECK(contains(str(TD::from({1e10, 1.5})), "e+10"));
  CHECK(contains(str(TD::from({NAN, INFINITY, -INFINITY, 1.0})), "nan"));
  CHECK(contains(str(TD::from({NAN, INFINITY, -INFINITY, 1.0})), "-inf"));

  // 3-D: blocks separated by a blank line
  const auto s3 = str(TF::arange(8).view({2, 2, 2}));
  CHECK(contains(s3, "[[[0., 1.],\n"));
  CHECK(contains(s3, "]],\n\n"));
  CHECK(contains(s3, "shape=[2, 2, 2]"));

  // big tensors are summarised
  const auto big = str(TF::arange(2000));
  CHECK(contains(big, "..."));
  CHECK(contains(big, "shape=[2000]"));
  CHECK(contains(big, "1999."));
  CHECK_FALSE(contains(big, "1000."));
  CHECK(big.size() < 200);
  const auto big2 = str(TD::zeros({100, 100}));
  CHECK(contains(big2, "..."));
  CHECK(std::count(big2.begin(), big2.end(), '\n') < 12);
  CHECK_FALSE(contains(str(TF::arange(1000)), "..."));

  // strided views print in logical order
  CHECK(contains(str(TF::arange(6).view({2, 3}).t()), "[[0., 3.],"));

  // autograd state
  auto x = TF::from({1.0f, 2.0f}).requires_grad_();
  CHECK(contains(str(x), "requires_grad=True"));
  CHECK(contains(str(x * x), "grad_fn=<mul>"));
  CHECK_FALSE(contains(str(x.detach()), "requires_grad"));
}

// ---- random numbers ---------------------------------------------------------

TEST_CASE("tensor: same seed gives the same numbers") {
  frost::manual_seed(42);
  auto a = TF::rand({1000});
  auto an = TD::randn({10});
  frost::manual_seed(42);
  auto b = TF::rand({1000});
  auto bn = TD::randn({10});
  CHECK(a.to_vector() == b.to_vector());
  CHECK(an.to_vector() == bn.to_vector());
  // consecutive draws differ
  CHECK(TF::rand({1000}).to_vector() != a.to_vector());
  frost::manual_seed(43);
  CHECK(TF::rand({1000}).to_vector() != a.to_vector());
  // the default generator is per thread and starts from the same seed
  frost::manual_seed(7);
  auto here = TF::rand({8}).to_vector();
  std::vector<float> there;
  std::thread t([&] {
    frost::manual_seed(7);
    there = TF::rand({8}).to_vector();
  });
  t.join();
  CHECK(here == there);
}

TEST_CASE("tensor: Generator objects") {
  Generator g1(123), g2(123), g3(124);
  CHECK(g1.seed() == 123);
  CHECK(g1.offset() == 0);
  auto a = TF::rand({10}, &g1);
  CHECK(g1.offset() == 3);  // 10 floats = 3 Philox blocks of 4
  CHECK(a.to_vector() == TF::rand({10}, &g2).to_vector());
  CHECK(a.to_vector() != TF::rand({10}, &g3).to_vector());
  auto a2 = TF::rand({10}, &g1);
  CHECK(a2.to_vector() != a.to_vector());
  // replay by restoring the offset
  g1.set_offset(0);
  CHECK(TF::rand({10}, &g1).to_vector() == a.to_vector());
  g1.manual_seed(123);
  CHECK(g1.offset() == 0);
  CHECK(TF::rand({10}, &g1).to_vector() == a.to_vector());
  // an explicit generator leaves the default one alone
  frost::manual_seed(5);
  auto d1 = TF::rand({4});
  frost::manual_seed(5);
  (void)TF::rand({100}, &g1);
  CHECK(TF::rand({4}).to_vector() == d1.to_vector());
  // draws of different sizes do not overlap: one draw of 8 = two draws of 4
  Generator h1(77), h2(77);
  auto whole = TD::rand({8}, &h1).to_vector();
  auto first = TD::rand({4}, &h2).to_vector();
  auto second = TD::rand({4}, &h2).to_vector();
  first.insert(first.end(), second.begin(), second.end());
  CHECK(whole == first);
}

TEST_CASE("tensor: random numbers do not depend on the thread count") {
  ThreadCountGuard guard;
  const int n = 100000;
  auto draw = [&](int threads) {
    set_threads(threads);
    Generator g(31337);
    auto u = TF::rand({n}, &g).to_vector();
    auto z = TD::randn({n}, &g).to_vector();
    auto r = TI::randint(0, 1000, {n}, &g).to_vector();
    std::vector<float> s;
    {
      auto t = TF::rand({2, n / 2}, &g);
      s = t.to_vector();
    }
    return std::make_tuple(u, z, r, s);
  };
  const auto one = draw(1);
  const auto two = draw(2);
  const auto four = draw(4);
  CHECK(std::get<0>(one) == std::get<0>(two));
  CHECK(std::get<1>(one) == std::get<1>(two));
  CHECK(std::get<2>(one) == std::get<2>(two));
  CHECK(std::get<3>(one) == std::get<3>(two));
  CHECK(std::get<0>(one) == std::get<0>(four));
  CHECK(std::get<1>(one) == std::get<1>(four));
  // long sums are reduced in fixed blocks: bitwise the same on any thread count
  auto data = TF::rand({1000000});
  set_threads(1);
  const float s1 = data.sum().item();
  set_threads(2);
  const float s2 = data.sum().item();
  CHECK(s1 == s2);
}

TEST_CASE("tensor: bernoulli") {
  Generator g(99);
  int hits = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) hits += frost::bernoulli(0.3, &g) ? 1 : 0;
  CHECK(static_cast<double>(hits) / n == doctest::Approx(0.3).epsilon(0.05));
  bool any_true = false, any_false = false;
  for (int i = 0; i < 100; ++i) {
    any_true = any_true || frost::bernoulli(0.0, &g);
    any_false = any_false || !frost::bernoulli(1.0, &g);
  }
  CHECK_FALSE(any_true);
  CHECK_FALSE(any_false);
  // reproducible from the default generator
  frost::manual_seed(3);
  std::vector<bool> first;
  for (int i = 0; i < 50; ++i) first.push_back(frost::bernoulli(0.5));
  frost::manual_seed(3);
  std::vector<bool> second;
  for (int i = 0; i < 50; ++i) second.push_back(frost::bernoulli(0.5));
  CHECK(first == second);
  CHECK(std::count(first.begin(), first.end(), true) > 10);
}

// ---- memory statistics ------------------------------------------------------

TEST_CASE("tensor: memory_stats tracks current peak and allocations") {
  const auto s0 = frost::memory_stats();
  {
    auto t = TF::empty({1000});
    const auto s1 = frost::memory_stats();
    CHECK(s1.current_bytes == s0.current_bytes + 4000);
    CHECK(s1.allocations == s0.allocations + 1);
    CHECK(s1.peak_bytes >= s1.current_bytes);
    // views and handle copies allocate nothing
    auto v = t.view({10, 100}).t().narrow(0, 0, 5);
    auto h = t;
    CHECK(frost::memory_stats().allocations == s1.allocations);
    CHECK(frost::memory_stats().current_bytes == s1.current_bytes);
    // an op allocates its result
    auto y = t + 1.0f;
    CHECK(frost::memory_stats().allocations == s1.allocations + 1);
    CHECK(frost::memory_stats().current_bytes == s1.current_bytes + 4000);
  }
  CHECK(frost::memory_stats().current_bytes == s0.current_bytes);

  frost::reset_peak_memory_stats();
  const auto base = frost::memory_stats();
  CHECK(base.peak_bytes == base.current_bytes);
  { auto big = TD::empty({100000}); }
  { auto small = TD::empty({1000}); }
  const auto after = frost::memory_stats();
  CHECK(after.current_bytes == base.current_bytes);
  CHECK(after.peak_bytes == base.current_bytes + 800000);
  CHECK(after.allocations == base.allocations + 2);
  frost::reset_peak_memory_stats();
  CHECK(frost::memory_stats().peak_bytes == base.current_bytes);

  // a forward + backward frees everything but the gradients it keeps
  const auto before = frost::memory_stats().current_bytes;
  {
    auto w = TD::randn({64, 64}).requires_grad_();
    {
      auto x = TD::randn({32, 64});
      auto loss = x.matmul(w).tanh().sum();
      loss.backward();
    }
    CHECK(frost::memory_stats().current_bytes == before + 2 * 64 * 64 * 8);  // w and w.grad
  }
  CHECK(frost::memory_stats().current_bytes == before);
}

TEST_CASE("tensor: reset_peak_memory_stats resets every live thread's peak") {
  // A worker that once held a temporary and is still alive: its old peak
  // must not stay in the summed peak after a reset.
  std::mutex m;
  std::condition_variable cv;
  bool allocated = false, release = false;
  std::thread worker([&] {
    { auto tmp = TF::empty({5000}); }
    std::unique_lock<std::mutex> lock(m);
    allocated = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return allocated; });
  }
  frost::reset_peak_memory_stats();
  const auto s = frost::memory_stats();
  CHECK(s.peak_bytes == s.current_bytes);
  { auto mine = TF::empty({100}); }
  CHECK(frost::memory_stats().peak_bytes == s.current_bytes + 400);
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  worker.join();
}

// ---- matmul against a naive loop --------------------------------------------

TEST_CASE("tensor: matmul 512x512 float matches a naive loop") {
  Generator g(512);
  const int n = 512;
  auto a = TF::randn({n, n}, &g);
  auto b = TF::randn({n, n}, &g);
  auto c = a.matmul(b);
  REQUIRE(c.shape() == Shape{n, n});
  const auto av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector();
  const auto ref = naive_mm(av, bv, n, n, n);
  // Entries are sums of 512 products (typical size sqrt(512) ~ 23): compare
  // each to 1e-3 of its own size, with that scale as the floor for entries
  // that cancel to near zero.
  double worst = 0, max_abs = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(cv[i] - ref[i]) / (1.0 + std::fabs(ref[i])));
    max_abs = std::max(max_abs, std::fabs(cv[i] - ref[i]));
  }
  CAPTURE(max_abs);
  CHECK(worst < 1e-3);
  CHECK(max_abs < 1e-3);
  // the same product through transposed operands (no copies: GEMM flags)
  auto at = a.t().contiguous().t();  // same values, column-major layout
  CHECK_FALSE(at.is_contiguous());
  auto c2 = at.matmul(b.t().contiguous().t());
  double worst2 = 0;
  const auto c2v = c2.to_vector();
  for (std::size_t i = 0; i < ref.size(); ++i)
    worst2 = std::max(worst2, std::fabs(c2v[i] - ref[i]) / (1.0 + std::fabs(ref[i])));
  CHECK(worst2 < 1e-3);
}

TEST_CASE("tensor: matmul shapes against a naive loop") {
  Generator g(3);
  auto check = [](const TF& got, const std::vector<double>& ref) {
    const auto v = got.to_vector();
    REQUIRE(v.size() == ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) CHECK(v[i] == doctest::Approx(ref[i]).epsilon(1e-4).scale(1.0));
  };
  auto a = TF::randn({5, 7}, &g), b = TF::randn({7, 3}, &g);
  const auto ref = naive_mm(a.to_vector(), b.to_vector(), 5, 7, 3);
  check(a.mm(b), ref);
  check(a.matmul(b), ref);
  // transposed and strided operands
  auto bt = TF::randn({3, 7}, &g);
  check(a.matmul(bt.t()), naive_mm(a.to_vector(), bt.t().to_vector(), 5, 7, 3));
  auto wide = TF::randn({5, 14}, &g);
  auto sl = wide.slice(1, 0, 14, 2);  // [5, 7] with column stride 2
  check(sl.matmul(b), naive_mm(sl.to_vector(), b.to_vector(), 5, 7, 3));
  // vector forms
  auto v = TF::randn({7}, &g);
  auto mv = a.matmul(v);
  CHECK(mv.shape() == Shape{5});
  check(mv, naive_mm(a.to_vector(), v.to_vector(), 5, 7, 1));
  auto vm = v.matmul(b);
  CHECK(vm.shape() == Shape{3});
  check(vm, naive_mm(v.to_vector(), b.to_vector(), 1, 7, 3));
  auto dot = v.matmul(v);
  CHECK(dot.dim() == 0);
  check(dot, naive_mm(v.to_vector(), v.to_vector(), 1, 7, 1));
  // batched with broadcast batch dims
  auto ba = TF::randn({2, 1, 4, 7}, &g), bb = TF::randn({3, 7, 2}, &g);
  auto bc = ba.matmul(bb);
  REQUIRE(bc.shape() == Shape{2, 3, 4, 2});
  const auto bav = ba.to_vector(), bbv = bb.to_vector(), bcv = bc.to_vector();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::vector<float> am(bav.begin() + i * 28, bav.begin() + (i + 1) * 28);
      std::vector<float> bm(bbv.begin() + j * 14, bbv.begin() + (j + 1) * 14);
      const auto r = naive_mm(am, bm, 4, 7, 2);
      for (int k = 0; k < 8; ++k)
        CHECK(bcv[static_cast<std::size_t>((i * 3 + j) * 8 + k)] == doctest::Approx(r[static_cast<std::size_t>(k)]).epsilon(1e-4).scale(1.0));
    }
  auto b3 = TF::randn({4, 5, 7}, &g);
  auto r3 = b3.matmul(b);  // batch folded into rows
  CHECK(r3.shape() == Shape{4, 5, 3});
  check(r3.select(0, 2), naive_mm(b3.select(0, 2).to_vector(), b.to_vector(), 5, 7, 3));
  auto bm = b3.bmm(TF::randn({4, 7, 2}, &g));
  CHECK(bm.shape() == Shape{4, 5, 2});
  // empty inner dimension: zeros
  CHECK(TF::ones({2, 0}).matmul(TF::ones({0, 3})).to_vector() == std::vector<float>(6, 0.0f));
}

TEST_CASE("tensor: ops on empty tensors") {
  auto e = TF::empty({0, 3});
  auto e2 = TF::empty({3, 0});
  CHECK(e.sum({1}).shape() == Shape{0});
  CHECK(e.sum({0}).to_vector() == std::vector<float>{0, 0, 0});
  CHECK(e2.sum({1}).to_vector() == std::vector<float>{0, 0, 0});
  CHECK(e2.sum({0}).shape() == Shape{0});
  CHECK(e.prod(0).to_vector() == std::vector<float>{1, 1, 1});
  CHECK(e.max(1).values.shape() == Shape{0});
  CHECK(e.argmax(1).shape() == Shape{0});
  CHECK(e.softmax(1).shape() == Shape{0, 3});
  CHECK(e.log_softmax(0).shape() == Shape{0, 3});
  CHECK(e.logsumexp({1}).shape() == Shape{0});
  CHECK((e + 1.0f).shape() == Shape{0, 3});
  CHECK((e * TF::ones({3})).shape() == Shape{0, 3});
  CHECK(e.exp().tanh().shape() == Shape{0, 3});
  CHECK(e.t().contiguous().shape() == Shape{3, 0});
  CHECK(e.clone().numel() == 0);
  CHECK(e.matmul(TF::ones({3, 2})).shape() == Shape{0, 2});
  CHECK(frost::cat(std::vector<TF>{e, TF::ones({1, 3})}).shape() == Shape{1, 3});
  CHECK(e.index_select(1, TI::from({0, 2})).shape() == Shape{0, 2});
  CHECK(e2.gather(1, TI::empty({3, 0})).shape() == Shape{3, 0});
  CHECK(e.view({3, 0}).shape() == Shape{3, 0});
  CHECK(TF::rand({0, 5}).numel() == 0);
  CHECK(TF::randn({5, 0}).numel() == 0);
  auto g = TD::empty({0, 3}).requires_grad_();
  (g.exp().sum({1}) * 2.0).sum().backward();
  CHECK(g.grad().shape() == Shape{0, 3});
  auto z = TF::zeros({2, 3});
  z.narrow(1, 1, 0).fill_(5.0f);
  z.narrow(0, 0, 0).add_(TF::ones({0, 3}));
  CHECK(z.to_vector() == std::vector<float>(6, 0.0f));
}

TEST_CASE("tensor: exp underflows to 0 and float sigmoid keeps its relative accuracy on dense memory") {
  // Dense tensors take Eigen's vectorised exp, which clamps its argument:
  // exp(-inf) must still be 0, and subnormal results the libm ones.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xf{-inf, -800.0f, -104.0f, -100.0f, -88.0f, -87.0f, 0.0f, 88.0f, 89.0f, inf};
  xf.resize(32, -inf);  // several SIMD packets
  const auto ef = TF::from(xf).exp().to_vector();
  for (std::size_t i = 0; i < xf.size(); ++i) {
    INFO("x = ", xf[i]);
    const float want = std::exp(xf[i]);
    CHECK((ef[i] == want || std::fabs(ef[i] - want) <= 4 * std::numeric_limits<float>::epsilon() * want));
  }
  std::vector<double> xd{-INFINITY, -1000.0, -745.0, -720.0, -708.0, 0.0, 709.0, 710.0};
  xd.resize(16, -INFINITY);
  const auto ed = TD::from(xd).exp().to_vector();
  for (std::size_t i = 0; i < xd.size(); ++i) {
    INFO("x = ", xd[i]);
    const double want = std::exp(xd[i]);
    CHECK((ed[i] == want || std::fabs(ed[i] - want) <= 4 * std::numeric_limits<double>::epsilon() * want));
  }
  CHECK(TF::full({1, 5}, -inf).logsumexp({1}).item() == -inf);  // was -87.1: exp(-inf) as 2.9e-39
  CHECK(TD::full({1, 2}, -INFINITY).logsumexp({1}).item() == -INFINITY);

  // Float sigmoid and silu against double, relative, where sigmoid is small too.
  std::vector<float> xs;
  for (int i = 0; i <= 600; ++i) xs.push_back(-30.0f + 0.1f * float(i));
  const auto s = TF::from(xs).sigmoid().to_vector(), si = TF::from(xs).silu().to_vector();
  double worst = 0, worst_silu = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], want = 1 / (1 + std::exp(-x));
    worst = std::max(worst, std::fabs(s[i] - want) / want);
    if (x != 0) worst_silu = std::max(worst_silu, std::fabs(si[i] - x * want) / std::fabs(x * want));
  }
  CHECK(worst < 1e-6);  // Eigen's rational fit was 6e-4 at x = -9
  CHECK(worst_silu < 1e-6);
  CHECK(TF::from(std::vector<float>(8, -inf)).sigmoid().to_vector() == std::vector<float>(8, 0.0f));
  CHECK(TF::from(std::vector<float>(8, inf)).sigmoid().to_vector() == std::vector<float>(8, 1.0f));
}
