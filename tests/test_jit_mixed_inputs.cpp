// Plans whose inputs and outputs are of several dtypes: a float tensor, int64
// token ids and a bool mask in one call, checked against the traced dtypes;
// outputs of other dtypes through run_any; saved and loaded.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include "plan_dtypes.hpp"
#include "support.hpp"

using namespace frost;
using frost::test::TF;
using I64 = Tensor<std::int64_t>;

TEST_CASE("jit: a plan takes a float, an int64 and a bool input in one call, as traced") {
  frost::test::plan_mixed_inputs_on(Device::cpu());
  manual_seed(5);
  auto m = nn::make<frost::test::Tagger>();
  const auto tokens = I64::from({1, 4, 9, 0, 2});
  const auto bias = TF::randn({5, 3});
  const auto keep = Tensor<bool>::from({true, false, true, true, false});
  const auto plan = jit::freeze(m, tokens, bias, keep);
  const std::string g = plan.graph().str();
  CHECK(g.find("%x0 : Long[5]") != std::string::npos);
  CHECK(g.find("%x1 : Float[5, 3]") != std::string::npos);
  CHECK(g.find("%x2 : Bool[5]") != std::string::npos);
  CHECK(plan.check(m, I64::from({3, 3, 2, 1, 0}), bias * 2.0f, keep).ok);
  CHECK(plan.profile_any({AnyTensor(tokens), AnyTensor(bias), AnyTensor(keep)}, 2).steps.size() == plan.graph().steps.size());

  // Each input's dtype is checked against the trace, by position.
  CHECK_THROWS_WITH_AS(plan.run(tokens.to<std::int32_t>(), bias, keep),
                       doctest::Contains("input 0 is int32 but the plan was traced with int64 there"), Error);
  CHECK_THROWS_WITH_AS(plan.run(tokens, bias, keep.to<float>()),
                       doctest::Contains("input 2 is float32 but the plan was traced with bool there"), Error);
  CHECK_THROWS_WITH_AS(plan.run_any({AnyTensor(bias), AnyTensor(tokens), AnyTensor(keep)}),
                       doctest::Contains("input 0 is float32 but the plan was traced with int64"), Error);

  // Saved and loaded with its input dtypes.
  const std::string path = frost::test::temp_path("tagger.frost");
  plan.save(path);
  const auto loaded = jit::Plan<float>::load(path);
  const auto t2 = I64::from({9, 8, 7, 6, 5});
  CHECK(loaded.run(t2, bias, keep).to_vector() == plan.run(t2, bias, keep).to_vector());
  CHECK_THROWS_WITH_AS(loaded.run(bias, bias, keep), doctest::Contains("input 0 is float32"), Error);
  std::remove(path.c_str());
}

TEST_CASE("jit: outputs of several dtypes come back from run_any; run_all asks for it") {
  auto f = [](const TF& x) { return std::make_tuple(x.softmax(-1), x.argmax(-1), x > 0.0f); };
  const auto x = TF::from({0.5f, -1.0f, 2.0f, 3.0f, 0.0f, -2.0f}, {2, 3});
  const auto plan = jit::freeze(f, x);
  const auto x2 = TF::from({4.0f, 1.0f, -2.0f, -1.0f, -3.0f, 5.0f}, {2, 3});
  const auto out = plan.run_any({x2});
  REQUIRE(out.size() == 3);
  const auto [want_p, want_i, want_m] = f(x2);
  CHECK(out[0].dtype() == DType::float32);
  CHECK(out[1].dtype() == DType::int64);
  CHECK(out[0].as<float>().to_vector() == want_p.to_vector());
  CHECK(out[1].as<std::int64_t>().to_vector() == want_i.to_vector());
  CHECK(out[2].to<float>().to_vector() == want_m.to<float>().to_vector());
  CHECK_THROWS_WITH_AS(plan.run_all({x2}), doctest::Contains("output 1 is int64, not float32; use run_any"), Error);
}

TEST_CASE("jit: a callable over integer inputs only freezes into a Plan<float>") {
  auto f = [](const Tensor<std::int32_t>& a, const Tensor<std::int32_t>& b) { return (a * b + 1).to<float>(); };
  const auto a = Tensor<std::int32_t>::from({1, -2, 3}), b = Tensor<std::int32_t>::from({4, 5, -6});
  auto plan = jit::freeze(f, a, b);
  static_assert(std::is_same_v<decltype(plan), jit::Plan<float>>);
  const auto a2 = Tensor<std::int32_t>::from({100000, 7, -9}), b2 = Tensor<std::int32_t>::from({100000, 0, 9});
  CHECK(plan.run(a2, b2).to_vector() == f(a2, b2).to_vector());  // int32 wraps as eager does
}

TEST_CASE("jit::compile: inputs of several dtypes; another dtype combination is a plan of its own") {
  manual_seed(8);
  auto m = nn::make<frost::test::Tagger>();
  m->eval();
  auto fast = jit::compile(m);
  const auto bias = TF::randn({5, 3});
  const auto keep = Tensor<bool>::from({true, false, true, true, false});
  const auto eager = [&](const I64& t, const Tensor<bool>& k) {
    InferenceMode im;
    return m->forward(t, bias, k);
  };
  for (const auto& t : {I64::from({1, 4, 9, 0, 2}), I64::from({3, 3, 3, 1, 0})})
    CHECK((fast(t, bias, keep) - eager(t, keep)).abs().max().item() <= 1e-6f);
  CHECK(fast.stats().traces == 1);
  const auto all = Tensor<bool>::ones({5});
  CHECK((fast(I64::from({5, 6, 7, 8, 9}), bias, all) - eager(I64::from({5, 6, 7, 8, 9}), all)).abs().max().item() <= 1e-6f);
  CHECK(fast.stats().traces == 1);  // same dtypes and shapes: the cached plan
  CHECK((fast(I64::from({1, 2}), TF::randn({2, 3}), Tensor<bool>::ones({2})).shape() == Shape{2, 3}));
  CHECK(fast.stats().traces == 2);  // new shapes: a second plan
}

namespace {
/// Two forwards: the input's dtype picks one, as overloads do in eager code.
struct ByDtype : nn::Module {
  TF forward(const I64& t) { return t.to<float>() * 2.0f; }
  TF forward(const Tensor<std::int32_t>& t) { return t.to<float>() * 3.0f; }
};
}  // namespace

TEST_CASE("jit::compile: an input of another dtype than a cached plan's traces a plan of its own") {
  auto m = nn::make<ByDtype>();
  auto fast = jit::compile(m);
  CHECK(fast(I64::from({1, 2})).to_vector() == std::vector<float>{2, 4});
  CHECK(fast(Tensor<std::int32_t>::from({1, 2})).to_vector() == std::vector<float>{3, 6});
  CHECK(fast(I64::from({5, 6})).to_vector() == std::vector<float>{10, 12});
  CHECK(fast.stats().traces == 2);
  CHECK(fast.stats().cached_plans == 2);
}
