// jit::trace and guards: what a traced graph holds, how it prints, and that a
// plan never takes the branch the trace did not see.
#include <doctest/doctest.h>

#include <frost/frost.hpp>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace frost;
using T = Tensor<float>;

namespace {

struct Mlp : nn::Module {
  nn::Linear fc1 = register_module("fc1", nn::Linear(8, 16));
  nn::Linear fc2 = register_module("fc2", nn::Linear(16, 4));
  T forward(const T& x) { return fc2(fc1(x).relu()); }
};

/// The guide's adaptive pattern: the depth depends on the data.
struct Branchy : nn::Module {
  nn::Linear a = register_module("a", nn::Linear(4, 4));
  nn::Linear b = register_module("b", nn::Linear(4, 4));
  float threshold = 0.0f;
  static constexpr int kGuardLine = __LINE__ + 2;
  T forward(const T& x) {
    if (x.mean() > threshold) return a(x).relu();  // the guard's line
    return b(b(x).tanh());
  }
};

bool close(const T& a, const T& b, double tol = 1e-5) {
  if (a.shape() != b.shape()) return false;
  return (a - b).abs().max().item() <= tol * (1.0 + b.abs().max().item());
}

}  // namespace

TEST_CASE("jit::trace: a module's graph has its inputs, named constants, steps and outputs") {
  manual_seed(1);
  auto m = nn::make<Mlp>();
  const auto x = T::randn({2, 8});
  const jit::Graph g = jit::trace(m, x);
  REQUIRE(g.inputs.size() == 1);
  CHECK(g.input_shapes[0] == Shape{2, 8});
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0].shape == Shape{2, 4});
  int linears = 0, relus = 0;
  for (const auto& s : g.steps) {
    linears += s.kind == jit::StepKind::linear;
    relus += s.kind == jit::StepKind::unary && static_cast<UnaryOp>(s.op) == UnaryOp::relu;
  }
  CHECK(linears == 2);
  CHECK(relus == 1);
  const std::string text = g.str();
  CHECK(text.find("%fc1.weight") != std::string::npos);
  CHECK(text.find("linear") != std::string::npos);
  CHECK(text.find("relu") != std::string::npos);
  CHECK(text.find("return") != std::string::npos);
  const std::string dot = g.to_dot();
  CHECK(dot.rfind("digraph", 0) == 0);
  CHECK(dot.find("fc2.bias") != std::string::npos);
}

TEST_CASE("jit::trace: a callable over tensors, with views and a host-made constant") {
  const auto x = T::randn({3, 4});
  auto f = [](const T& a) { return (a.t().contiguous() * T::arange(0, 3)).sum({0}) + 1.0f; };
  const auto g = jit::trace(f, x);
  auto plan = jit::freeze<float>(g);
  const auto x2 = T::randn({3, 4});
  CHECK(close(plan.run(x2), f(x2)));
}

TEST_CASE("jit::trace: an index tensor counted with add_ inside the trace runs in the plan as in eager") {
  auto f = [](const T& a) {
    auto idx = IndexTensor::from({0, 2, 1});
    idx.add_(1);  // an int64 kernel writing over a host-made constant: the plan works on its own copy
    return a.index_select(0, idx) * 2.0f;
  };
  const auto x = T::randn({4, 3});
  auto plan = jit::freeze<float>(jit::trace(f, x));
  const auto x2 = T::randn({4, 3});
  CHECK(close(plan.run(x2), f(x2)));
  CHECK(close(plan.run(x2), f(x2)));  // the constant is not counted up run after run
}

TEST_CASE("jit::trace: tensors captured from outside the trace are a clear error") {
  const auto outside = T::randn({4});
  auto f = [&](const T& a) { return a + outside; };
  CHECK_THROWS_WITH_AS(jit::trace(f, T::randn({4})), doctest::Contains("neither an input"), Error);
}

TEST_CASE("jit guards: a plan checks the branch it froze and names the line") {
  manual_seed(2);
  auto m = nn::make<Branchy>();
  const auto pos = T::rand({2, 4}) + 1.0f, neg = T::rand({2, 4}) - 2.0f;
  const auto g = jit::trace(m, pos);
  REQUIRE(g.guards.size() == 1);
  CHECK(g.guards[0].outcome == true);
  CHECK(g.guards[0].where == "test_jit_trace.cpp:" + std::to_string(Branchy::kGuardLine));
  auto plan = jit::freeze(m, pos);
  CHECK(close(plan.run(pos), m(pos)));
  // The other branch: never silently the frozen one.
  try {
    plan.run(neg);
    FAIL("the plan ran a branch it did not trace");
  } catch (const jit::GuardFailure& e) {
    const std::string msg = e.what();
    CHECK(msg.find("condition was true") != std::string::npos);
    CHECK(msg.find("test_jit_trace.cpp:") != std::string::npos);
  }
  // Frozen on the other branch, it runs that one.
  auto plan2 = jit::freeze(m, neg);
  CHECK(close(plan2.run(neg), m(neg)));
  CHECK_THROWS_AS(plan2.run(pos), jit::GuardFailure);
}

TEST_CASE("jit guards: item() in a trace is a strict guard on the value") {
  auto f = [](const T& a) {
    const float s = a.sum().item();  // a host read the plan must re-check
    return a * s;
  };
  const auto x = T::ones({3});
  const auto g = jit::trace(f, x);
  REQUIRE(g.guards.size() == 1);
  CHECK(g.guards[0].how == detail::HostRead::item);
  auto plan = jit::freeze<float>(g);
  CHECK(close(plan.run(x), f(x)));
  CHECK_THROWS_AS(plan.run(T::ones({3}) * 2.0f), jit::GuardFailure);
}

TEST_CASE("jit guards: a cast in a trace reads its values on the host and guards on them") {
  // Plans have no cast step: the trace sees the conversion as a host read.
  auto f = [](const T& a) { return a + a.argmax(0).to<float>(); };
  const auto x = T::from({1, 3, 2});
  const auto g = jit::trace(f, x);
  REQUIRE(g.guards.size() == 1);
  CHECK(g.guards[0].how == detail::HostRead::to_vector);
  auto plan = jit::freeze<float>(g);
  CHECK(close(plan.run(x), f(x)));
  CHECK(close(plan.run(x * 2.0f), f(x * 2.0f)));  // the same argmax
  CHECK_THROWS_AS(plan.run(T::from({3, 1, 2})), jit::GuardFailure);
}

TEST_CASE("jit::Plan::run: wrong input count or shape is a frost::Error") {
  auto m = nn::make<Mlp>();
  auto plan = jit::freeze(m, T::randn({2, 8}));
  CHECK_THROWS_WITH_AS(plan.run(T::randn({3, 8})), doctest::Contains("traced with [2, 8]"), Error);
  CHECK_THROWS_WITH_AS(plan.run_all({}), doctest::Contains("expected 1 inputs"), Error);
}

TEST_CASE("jit::Plan: no allocations once warm, and concurrent runs agree") {
  manual_seed(3);
  auto m = nn::make<Mlp>();
  const auto x = T::randn({4, 8});
  auto plan = jit::freeze(m, x);
  std::vector<T> out;
  plan.run_into({x}, out);
  out.clear();
  const auto before = memory_stats();
  for (int i = 0; i < 10; ++i) {
    plan.run_into({x}, out);
    out.clear();
  }
  const auto after = memory_stats();
  CHECK(after.allocations == before.allocations);
  const T expect = [&] { InferenceMode im; return m(x); }();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        if (!close(plan.run(x), expect)) ++bad;
    });
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
}
