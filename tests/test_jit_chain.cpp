// The linear-chain freeze pass: linear layers over 16+ rows run depth-first,
// 8 rows at a time through every layer, against eager and against the
// layer-by-layer plan; its arena, save/load, refit and hostile plan files.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <frost/frost.hpp>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../examples/research_model.hpp"
#include "support.hpp"

using namespace frost;
using T = Tensor<float>;
using TD = Tensor<double>;

namespace {

int count(const jit::Graph& g, jit::StepKind k) {
  int n = 0;
  for (const auto& s : g.steps) n += s.kind == k;
  return n;
}

using test::temp_path;

}  // namespace

TEST_CASE("freeze pass: linear layers over 16+ rows run depth-first, 8 rows at a time") {
  manual_seed(41);
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
#endif
  // Five layers of mixed widths (the scratch alternates between two slices
  // of the widest hidden layer); 17, 20 and 33 rows leave a short last block.
  auto net = nn::make<test::LinearLayers>(std::vector<std::int64_t>{300, 256, 512, 40, 256, 7});
  for (std::int64_t rows : {16, 17, 20, 33, 64}) {
    const TD x = TD::randn({rows, 300});
    const TD eager = [&] { InferenceMode im; return net(x); }();
    const auto g = jit::trace(net, x);
    for (int freeze_threads : {1, 3}) {
#ifdef _OPENMP
      omp_set_num_threads(freeze_threads);
#endif
      auto plan = jit::freeze<double>(g);
      jit::FreezeOptions off;
      off.chain_linears = false;
      auto layered = jit::freeze<double>(g, off);
      CHECK(count(plan.graph(), jit::StepKind::linear_chain) == 1);
      CHECK(count(plan.graph(), jit::StepKind::linear) == 0);
      CHECK(plan.summary().find("linear chains: 1 chains of 5 layers") != std::string::npos);
      CHECK(count(layered.graph(), jit::StepKind::linear) == 5);
      for (int threads : {1, 2, 3, 5}) {  // more or fewer than the plan's scratch slices
        INFO(rows << " rows, frozen on " << freeze_threads << " threads, run on " << threads);
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        CHECK((plan.run(x) - eager).abs().max().item() < 1e-12);
        CHECK((plan.run(x) - layered.run(x)).abs().max().item() < 1e-12);
      }
      // Only a block's activations per scratch slice: 8 rows of 512, twice, against the batch's.
      CHECK(plan.graph().steps[0].out[1].shape == Shape{freeze_threads == 1 ? 1 : std::min<std::int64_t>(3, (rows + 7) / 8), 2, 8, 512});
    }
  }
#ifdef _OPENMP
  omp_set_num_threads(saved);
#endif
  // A chain stops before its weights outgrow the caches: 900 x 700 doubles
  // (5 MB) is a layer of its own, between a chain of two and a last layer.
  auto wide = nn::make<test::LinearLayers>(std::vector<std::int64_t>{64, 64, 900, 700, 5});
  const TD x = TD::randn({24, 64});
  auto plan = jit::freeze(wide, x);
  CHECK(count(plan.graph(), jit::StepKind::linear_chain) == 1);
  CHECK(count(plan.graph(), jit::StepKind::linear) == 2);
  CHECK((plan.run(x) - [&] { InferenceMode im; return wide(x); }()).abs().max().item() < 1e-12);
  // A few rows stay layer by layer (matrix-vector panels split over the threads).
  const TD few = TD::randn({15, 64});
  CHECK(count(jit::freeze(wide, few).graph(), jit::StepKind::linear_chain) == 0);
}

TEST_CASE("linear chain: the MLP's arena holds blocks, not the batch; save, load and refit") {
  manual_seed(42);
  auto mlp = guide::make_mlp();
  mlp->eval();
  const T x = T::randn({64, 784});
  const auto g = jit::trace(mlp, x);
  auto plan = jit::freeze<float>(g);
  jit::FreezeOptions off;
  off.chain_linears = false;
  auto layered = jit::freeze<float>(g, off);
  REQUIRE(count(plan.graph(), jit::StepKind::linear_chain) == 1);
  // Layer by layer: both 64 x 256 hidden activations (128 KiB). Chained: 8
  // rows of them per thread, and the output.
  CHECK(layered.arena_bytes() == 2 * 64 * 256 * 4);
  CHECK(plan.arena_bytes() <= layered.arena_bytes() / 2);
  const T eager = [&] { InferenceMode im; return mlp(x); }();
  CHECK((plan.run(x) - eager).abs().max().item() < 1e-5);
  CHECK(plan.graph().str().find("linear_chain") != std::string::npos);
  // Saved: the weights; the panels are made again on load.
  const auto path = temp_path("chain.frost");
  plan.save(path);
  auto loaded = jit::Plan<float>::load(path);
  CHECK((loaded.run(x) - plan.run(x)).abs().max().item() == 0);
  // Refit: new weights into the loaded plan, panels made again.
  for (auto& p : mlp->parameters()) {
    NoGradGuard ng;
    p.mul_(0.5f);
  }
  loaded.refit(mlp);
  const T eager2 = [&] { InferenceMode im; return mlp(x); }();
  CHECK((loaded.run(x) - eager2).abs().max().item() < 1e-5);
  std::remove(path.c_str());
}

TEST_CASE("linear chain: hostile steps in a plan file are errors") {
  manual_seed(43);
  auto mlp = guide::make_mlp();
  mlp->eval();
  const T x = T::randn({16, 784});
  auto plan = jit::freeze(mlp, x);
  REQUIRE(count(plan.graph(), jit::StepKind::linear_chain) == 1);
  jit::Graph g = plan.graph();
  std::vector<std::int64_t> offsets(g.buffers.size(), 0);
  auto rejected = [&](const jit::Graph& bad, const char* what) {
    CHECK_THROWS_WITH_AS(jit::detail::validate_plan(bad, offsets, std::int64_t{1} << 30, "test"), doctest::Contains(what), Error);
  };
  const jit::Step chain = g.steps[0];
  auto with = [&](auto edit) {
    jit::Graph bad = g;
    edit(bad.steps[0]);
    return bad;
  };
  rejected(with([](jit::Step& s) { s.i0 = 16; }), "the scratch must be dense");  // more rows than the scratch holds
  rejected(with([](jit::Step& s) { s.i0 = 0; }), "out of range");
  rejected(with([](jit::Step& s) { s.program.pop_back(); }), "an activation a layer");
  rejected(with([](jit::Step& s) { s.in.pop_back(); }), "an activation a layer");
  rejected(with([](jit::Step& s) { std::swap(s.in[1], s.in[4]); }), "layer 0");  // widths that do not chain
  rejected(with([](jit::Step& s) { s.in[3] = s.in[1]; }), "panels must be a whole prepared buffer");
  rejected(with([](jit::Step& s) { s.out[1].shape[0] = 5000; s.out[1].strides = contiguous_strides(s.out[1].shape); }),
           "");
  rejected(with([](jit::Step& s) { s.program[1].op = 200; }), "out of range");
  // The panels belong to this step alone.
  jit::Graph twice = g;
  twice.steps.push_back(chain);
  rejected(twice, "exactly one linear layer");
}
