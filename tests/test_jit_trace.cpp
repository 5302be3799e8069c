// jit::trace and guards: what a traced graph holds, how it prints, and that a
// plan never takes the branch the trace did not see.
#include <doctest/doctest.h>

#include <frost/frost.hpp>
#include <algorithm>
#include <atomic>
#include <limits>
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

TEST_CASE("jit::trace: a cast is a plan step, not a guard: plans convert whatever values they get") {
  // An argmax used as a number: before cast steps, the plan guarded on the
  // traced argmax and refused any input with another.
  auto f = [](const T& a) { return a + a.argmax(0).to<float>(); };
  const auto x = T::from({1, 3, 2});
  const auto g = jit::trace(f, x);
  CHECK(g.guards.empty());
  CHECK(g.str().find("Float[] = cast[from=Long]") != std::string::npos);
  auto plan = jit::freeze<float>(g);
  for (const auto& in : {x, x * 2.0f, T::from({3, 1, 2}), T::from({0, 1, 5})}) CHECK(close(plan.run(in), f(in), 0));
  // Bucketing, the common float -> index pattern: the rows a plan looks up
  // follow its input; NaN and out-of-range values convert as in eager
  // (NaN to INT64_MIN, +-1e30 saturating), through double and back.
  auto bucket = [](const T& v) {
    const auto table = T::arange(8).reshape({4, 2}) * 10.0f;  // made in the trace: a plan constant
    const auto idx = (v.clamp(0.0f, 0.999f) * 4.0f).to<std::int64_t>();  // truncates: the floor here
    const auto odd = ((v.to<double>() * 1e10).to<std::int64_t>().to<double>() * 1e-10).to<float>();
    return table.index_select(0, idx).sum({1}) + odd;
  };
  manual_seed(4);
  const auto v = T::rand({6});
  auto pb = jit::freeze<float>(jit::trace(bucket, v));
  CHECK(pb.graph().guards.empty());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& in : {v, T::rand({6}), T::from({0.1f, 0.9f, 0.3f, 0.6f, 0.2f, 0.0f}), T::from({1e30f, -1e30f, 0.5f, 0.25f, 0.7f, 0.4f})})
    CHECK(close(pb.run(in), bucket(in), 0));
  // NaN: the index op rejects INT64_MIN as eager does; the plain cast gives eager's bits.
  auto plain = [](const T& a) { return a.to<std::int64_t>().to<float>(); };
  const auto with_nan = T::from({nan, 2.5f, -7.9f});
  const auto pp = jit::freeze<float>(jit::trace(plain, with_nan));
  CHECK(pp.run(with_nan).to_vector() == plain(with_nan).to_vector());
  CHECK(pp.run(with_nan).to_vector()[0] == static_cast<float>(std::numeric_limits<std::int64_t>::min()));
  CHECK_THROWS_AS(pb.run(T::from({nan, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f})), Error);
}

TEST_CASE("jit::trace: one_hot given its classes is plan steps; inferring them guards on the indices") {
  auto f = [](const T& a) { return one_hot(a.argmax(1), 4).to<float>() * a; };
  manual_seed(5);
  const auto x = T::randn({3, 4});
  auto plan = jit::freeze<float>(jit::trace(f, x));
  CHECK(plan.graph().guards.empty());
  for (const auto& in : {x, T::randn({3, 4}), T::randn({3, 4})}) CHECK(close(plan.run(in), f(in), 0));
  // Inferred from the largest index: the host reads the indices, and the plan checks them.
  auto inferred = [](const T& a) { return one_hot(a.argmax(1)).to<float>(); };
  const auto y = T::from({0, 1, 0, 2, 0, 0}, {2, 3});
  auto guarded = jit::freeze<float>(jit::trace(inferred, y));
  CHECK(guarded.graph().guards.size() == 1);
  CHECK(close(guarded.run(y), inferred(y), 0));
  CHECK_THROWS_AS(guarded.run(T::from({0, 1, 0, 0, 2, 0}, {2, 3})), jit::GuardFailure);
}

TEST_CASE("jit: a cast step reading another dtype than it states, or an unknown one, is rejected") {
  auto f = [](const T& a) { return a.argmax(0).to<float>(); };
  jit::Graph g = jit::trace(f, T::from({1, 3, 2}));
  auto cast = std::find_if(g.steps.begin(), g.steps.end(), [](const jit::Step& s) { return s.kind == jit::StepKind::cast; });
  REQUIRE(cast != g.steps.end());
  const std::vector<std::int64_t> unplaced(g.buffers.size(), -1);
  auto check = [&] { jit::detail::validate_plan(g, unplaced, 0, "test", true); };
  CHECK_NOTHROW(check());
  cast->op = static_cast<int>(DType::float64);  // the argmax's int64 read as double
  CHECK_THROWS_WITH_AS(check(), doctest::Contains("reads buffer"), Error);
  cast->op = static_cast<int>(DType::int32);  // a dtype, but not the buffer's
  CHECK_THROWS_WITH_AS(check(), doctest::Contains("reads buffer 2 (int64) as int32"), Error);
  cast->op = kDTypeCount;
  CHECK_THROWS_WITH_AS(check(), doctest::Contains("op code 10 is out of range"), Error);
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
