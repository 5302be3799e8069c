// Plans with values of every dtype inside: bool and integer intermediates
// and constants traced, frozen, run, saved and loaded; guards on bool
// conditions and on integer divisors; scalars a step cannot hold refused.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "plan_dtypes.hpp"
#include "support.hpp"

using namespace frost;
using frost::test::error_of;
using frost::test::TF;

TEST_CASE("jit: a plan holds bool and integer values (casts, comparisons, wrapping math, remainders, promotion, "
          "bool sums) and runs as eager, bit for bit") {
  frost::test::plan_every_dtype_on(Device::cpu());
  const auto x = TF::from({0.5f, -1.5f, 2.25f, 3.0f, -4.75f, 1.0f, 7.5f, -0.25f}, {2, 4});
  auto f = [](const TF& t) { return frost::test::every_dtype_forward(t); };
  const auto g = jit::trace(f, x);
  const std::string s = g.str();
  for (const char* type : {"Bool[", "Byte[", "Char[", "Short[", "Int[", "Long[", "Float["}) {
    CAPTURE(type);
    CHECK(s.find(type) != std::string::npos);
  }
}

TEST_CASE("jit: a plan with bool and integer constants saves and loads exactly") {
  const auto x = TF::from({0.5f, -1.5f, 2.25f, 3.0f, -4.75f, 1.0f, 7.5f, -0.25f}, {2, 4});
  auto f = [](const TF& t) { return frost::test::every_dtype_forward(t); };
  const auto plan = jit::freeze(f, x);
  const std::string path = frost::test::temp_path("plan_dtypes.safetensors");
  plan.save(path);
  bool int16_constant = false;
  const auto file = SafetensorsFile::open(path);
  for (const auto& n : file.names()) int16_constant = int16_constant || file.info(n).dtype == "I16";
  CHECK(int16_constant);  // stored in its own dtype, not widened
  const auto loaded = jit::Plan<float>::load(path);
  for (const auto& in : {x, x * 3.0f}) CHECK(loaded.run(in).to_vector() == f(in).to_vector());
  std::remove(path.c_str());
}

TEST_CASE("jit: an `if` on a bool tensor is a guard; a later input taking the other branch is a GuardFailure") {
  auto f = [](const TF& x) {
    if (any(x > 3.0f)) return x * 2.0f;
    return x + 1.0f;
  };
  const auto x = TF::from({1.0f, 2.0f, -5.0f});
  const auto plan = jit::freeze(f, x);
  CHECK(plan.graph().guards.size() == 1);
  CHECK(plan.run(TF::from({0.0f, 3.0f, 1.0f})).to_vector() == std::vector<float>{1.0f, 4.0f, 2.0f});
  CHECK_THROWS_AS(plan.run(TF::from({0.0f, 3.5f, 1.0f})), jit::GuardFailure);
}

TEST_CASE("jit: an integer division traced with non-zero divisors guards them; a zero in a later run is an Error") {
  auto f = [](const TF& x) {
    const auto a = (x * 10.0f).to<std::int64_t>();
    const auto b = x.to<std::int64_t>();
    return div(a, b, "floor").to<float>();
  };
  const auto x = TF::from({1.5f, -2.0f, 3.0f});
  const auto plan = jit::freeze(f, x);
  CHECK(plan.run(TF::from({2.0f, -3.0f, 4.5f})).to_vector() == f(TF::from({2.0f, -3.0f, 4.5f})).to_vector());
  CHECK_THROWS_AS(plan.run(TF::from({2.0f, 0.5f, 4.0f})), jit::GuardFailure);
}

TEST_CASE("jit: an int64 scalar a plan step cannot hold exactly (beyond 2^53) is refused at trace time") {
  auto f = [](const TF& x) { return (x.to<std::int64_t>() + ((std::int64_t{1} << 60) + 1)).to<float>(); };
  CHECK_THROWS_WITH_AS((void)jit::trace(f, TF::ones({2})),
                       doctest::Contains("the int64 scalar 1152921504606846977 of a traced add_scalar is not a double exactly"),
                       frost::Error);
  // Within 2^53 the scalar is exact and the plan equals eager.
  auto g = [](const TF& x) { return (x.to<std::int64_t>() + (std::int64_t{1} << 52) + 1).to<double>().sum().to<float>(); };
  const auto plan = jit::freeze(g, TF::ones({2}));
  CHECK(plan.run(TF::full({2}, 3.0f)).item() == g(TF::full({2}, 3.0f)).item());
}
