// Plan::profile: every step timed once per run, in plan order, beside the
// whole run; the table; guards and bad arguments. (The CUDA event timing is
// in tests/gpu/test_cuda_kernels.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <frost/frost.hpp>
#include <string>

#include "../examples/research_model.hpp"
#include "support.hpp"

using namespace frost;
using T = Tensor<float>;

namespace {

/// The rows cover the plan's steps once each, in order, with sane times.
void check_rows(const jit::PlanProfile& p, const jit::Plan<float>& plan, int runs) {
  CHECK(p.device == Device::cpu());
  CHECK(p.runs == runs);
  CHECK(p.run_ms > 0);
  std::size_t next = 0;
  for (const auto& s : p.steps) {
    CHECK(s.first == next);
    REQUIRE(s.count >= 1);
    next += s.count;
    CHECK(s.kind == jit::step_kind_name(plan.graph().steps[s.first].kind));
    CHECK(s.min_ms >= 0);
    CHECK(s.median_ms >= s.min_ms);
  }
  CHECK(next == plan.graph().steps.size());
  CHECK(p.steps_ms() > 0);
}

}  // namespace

TEST_CASE("jit::Plan::profile: each step of ResearchModelBN timed, slowest first in the table") {
  manual_seed(3);
  auto model = nn::make<guide::ResearchModelBN>();
  model->eval();
  const auto x = T::randn({4, 3, 32, 32});
  const auto plan = jit::freeze(model, x);
  const auto p = plan.profile({x}, 3);
  check_rows(p, plan, 3);
  // Both convolutions run fused with their pools; the classifier is linear steps.
  int conv_pool = 0;
  for (const auto& s : p.steps) conv_pool += s.kind == "conv2d_pool";
  CHECK(conv_pool == 2);
  CHECK(p.steps[0].out == Shape{4, 64, 16, 16});
  CHECK(p.steps[0].attrs.find("kernel=3x3") != std::string::npos);
  CHECK(p.steps[0].note.find("batch norm folded") != std::string::npos);

  const std::string all = p.table();
  CHECK(all.find("conv2d_pool") != std::string::npos);
  CHECK(all.find("batch norm folded") != std::string::npos);
  CHECK(all.find(std::to_string(plan.graph().steps.size()) + " steps on cpu, medians of 3 runs") != std::string::npos);
  // table(2): the header, the two slowest rows, the totals.
  const std::string top = p.table(2);
  CHECK(std::count(top.begin(), top.end(), '\n') == 4);
  double slowest = 0;
  for (const auto& s : p.steps) slowest = std::max(slowest, s.median_ms);
  char row[64];
  std::snprintf(row, sizeof row, "%10.4f", slowest);
  CHECK(top.find(row) < top.find('\n', top.find('\n') + 1));  // on the first row

  // Profiling leaves the plan as it was.
  CHECK(plan.check(model, x).ok);
}

TEST_CASE("jit::Plan::profile: a guarded plan times its guards, and a failing guard throws as run does") {
  manual_seed(5);
  auto model = nn::make<guide::AdaptiveResNet>();
  model->eval();
  const auto easy = T::randn({2, 3, 16, 16}) * 0.1f + 3.0f;
  const auto plan = jit::freeze(model, easy);
  const auto p = plan.profile({easy}, 2);
  check_rows(p, plan, 2);
  CHECK(std::any_of(p.steps.begin(), p.steps.end(), [](const auto& s) { return s.kind == "guard"; }));
  CHECK_THROWS_AS(plan.profile({T::randn({2, 3, 16, 16}) * 0.1f}, 2), jit::GuardFailure);
}

TEST_CASE("jit::Plan::profile: the MLP at batch 1 and 64 (matrix-vector chains time as one row)") {
  manual_seed(7);
  auto mlp = guide::make_mlp();
  mlp->eval();
  for (std::int64_t batch : {1, 64}) {
    CAPTURE(batch);
    const auto x = T::randn({batch, 784});
    const auto plan = jit::freeze(mlp, x);
    const auto p = plan.profile({x}, 2);
    check_rows(p, plan, 2);
    for (const auto& s : p.steps)
      if (s.count > 1) CHECK(s.attrs == std::to_string(s.count) + " matrix-vector layers in one parallel region");
  }
}

TEST_CASE("jit::Plan::profile: bad arguments are errors naming the call") {
  auto mlp = guide::make_mlp();
  const auto plan = jit::freeze(mlp, T::randn({2, 784}));
  CHECK_THROWS_WITH_AS(plan.profile({T::randn({2, 784})}, 0), doctest::Contains("Plan::profile: runs must be at least 1"),
                       Error);
  CHECK_THROWS_WITH_AS(plan.profile({T::randn({3, 784})}), doctest::Contains("has shape [3, 784]"), Error);
  CHECK_THROWS_WITH_AS(plan.profile({}), doctest::Contains("expected 1 inputs"), Error);
}
