// Dynamic int8 quantization of linear layers (FreezeOptions::quantize_linear):
// plans against the documented formulas layer by layer (exact: the sums are
// integers; the kernel alone is in test_isa_kernels.cpp) and against float,
// and the plan file (save, load, refit, hostile edits of the quantized step).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <frost/frost.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../examples/research_model.hpp"
#include "quantized_reference.hpp"
#include "support.hpp"

using namespace frost;
using T = Tensor<float>;
using TD = Tensor<double>;
using frost_test::same;

namespace {

int count(const jit::Graph& g, jit::StepKind k) {
  int n = 0;
  for (const auto& s : g.steps) n += s.kind == k;
  return n;
}

/// Largest |a - b| relative to b's largest magnitude.
double relative(const T& a, const T& b) { return (a - b).abs().max().item() / b.abs().max().item(); }

}  // namespace

TEST_CASE("freeze with quantize_linear: the MLP's layers quantized, layer by layer the formulas, near float") {
  manual_seed(62);
  auto mlp = guide::make_mlp();
  mlp->eval();
  std::vector<decltype(mlp[0].as<nn::Linear>())> layers;
  for (std::size_t i : {0, 2, 4}) layers.push_back(mlp[i].as<nn::Linear>());
  for (std::int64_t batch : {1, 5, 64}) {
    CAPTURE(batch);
    const auto x = T::randn({batch, 784});
    auto plan = jit::freeze(mlp, {.quantize_linear = true}, x);
    CHECK(count(plan.graph(), jit::StepKind::quantized_linear) == 3);
    CHECK(count(plan.graph(), jit::StepKind::linear) + count(plan.graph(), jit::StepKind::linear_chain) == 0);
    CHECK(plan.summary().find("dynamic int8 quantization: 3 linear layers") != std::string::npos);
    const auto y = plan.run(x);
    // The formulas applied layer after layer, relu between.
    std::vector<float> h = x.to_vector();
    std::int64_t k = 784;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const auto* lin = layers[l];
      const std::int64_t n = lin->weight.shape()[0];
      h = frost_test::quantized_reference(h.data(), batch, k, k, lin->weight.data(), n, lin->bias.data(),
                    l + 1 < layers.size() ? UnaryOp::relu : UnaryOp::copy);
      k = n;
    }
    CHECK(same(y.to_vector(), h));
    // And near the float model.
    InferenceMode im;
    CHECK(relative(y, mlp(x)) < 0.03);
  }
}

TEST_CASE("freeze with quantize_linear: ResearchModel's classifier in int8 beside its float convolutions; double plans") {
  manual_seed(63);
  auto model = nn::make<guide::ResearchModel>();
  model->eval();
  const auto x = T::randn({3, 3, 32, 32});
  auto plan = jit::freeze(model, {.quantize_linear = true}, x);
  CHECK(count(plan.graph(), jit::StepKind::quantized_linear) == 2);
  CHECK(count(plan.graph(), jit::StepKind::conv2d_pool) == 2);
  {
    InferenceMode im;
    CHECK(relative(plan.run(x), model(x)) < 0.03);
  }
  // Plan::profile names the new steps.
  CHECK(plan.profile({x}, 1).table().find("quantized_linear") != std::string::npos);

  auto dmlp = nn::SequentialT<double>(nn::LinearT<double>(40, 30), nn::ReLUT<double>(), nn::LinearT<double>(30, 5));
  dmlp->eval();
  const auto xd = TD::randn({6, 40});
  auto dplan = jit::freeze(dmlp, {.quantize_linear = true}, xd);
  CHECK(count(dplan.graph(), jit::StepKind::quantized_linear) == 2);
  InferenceMode im;
  const auto want = dmlp(xd);
  CHECK((dplan.run(xd) - want).abs().max().item() < 0.03 * want.abs().max().item());
}

TEST_CASE("freeze with quantize_linear: save, load and refit keep it; the int8 weights are made on load, not saved") {
  manual_seed(64);
  auto mlp = guide::make_mlp();
  mlp->eval();
  const auto x = T::randn({2, 784});
  auto plan = jit::freeze(mlp, {.quantize_linear = true}, x);
  const auto path = test::temp_path("quantized.frost");
  plan.save(path);
  {
    const auto f = SafetensorsFile::open(path);
    for (const auto& name : f.names()) CHECK(name.find("int8") == std::string::npos);
    CHECK(f.metadata().at("frost.quantize_linear") == "1");
  }
  auto loaded = jit::Plan<float>::load(path);
  CHECK(loaded.options().quantize_linear);
  CHECK(same(loaded.run(x).to_vector(), plan.run(x).to_vector()));
  // New weights: refit quantizes them again.
  auto other = guide::make_mlp();
  other->eval();
  loaded.refit(other);
  CHECK(count(loaded.graph(), jit::StepKind::quantized_linear) == 3);
  CHECK(same(loaded.run(x).to_vector(), jit::freeze(other, {.quantize_linear = true}, x).run(x).to_vector()));

  // Weights holding NaN or inf have no int8 scale: freezing or refitting with them is an error naming the weight.
  {
    auto bad = guide::make_mlp();
    bad->eval();
    bad[2].as<nn::Linear>()->weight.detach().data()[7] = NAN;
    CHECK_THROWS_WITH_AS(jit::freeze(bad, {.quantize_linear = true}, x), doctest::Contains("weight '2.weight' [256, 256] holds nan"),
                         Error);
    CHECK_THROWS_WITH_AS(plan.refit(bad), doctest::Contains("needs finite weights"), Error);
    CHECK(same(plan.run(x).to_vector(), jit::freeze(mlp, {.quantize_linear = true}, x).run(x).to_vector()));  // unchanged
  }

  // Hostile edits of a quantized step: its int8 weight or its scratch one element short.
  auto edited = [&](const std::function<void(nlohmann::json&, nlohmann::json&)>& edit) {
    const auto f = SafetensorsFile::open(path);
    auto meta = f.metadata();
    auto doc = nlohmann::json::parse(meta.at("frost.plan"));
    for (auto& s : doc["steps"])
      if (s["kind"] == static_cast<int>(jit::StepKind::quantized_linear)) {
        edit(doc, s);
        break;
      }
    meta["frost.plan"] = doc.dump();
    std::vector<detail::safetensors::OutEntry> entries;
    for (const auto& n : f.names()) {
      detail::safetensors::OutEntry e;
      e.name = n;
      e.dtype = "F32";
      e.shape = f.info(n).shape;
      const auto t = f.get<float>(n);
      e.data.assign(reinterpret_cast<const std::uint8_t*>(t.data()),
                    reinterpret_cast<const std::uint8_t*>(t.data()) + t.numel() * 4);
      entries.push_back(std::move(e));
    }
    const auto bad = test::temp_path("quantized_bad.frost");
    detail::safetensors::write_file(detail::safetensors::serialize(entries, meta), bad);
    return bad;
  };
  auto shorten = [](nlohmann::json& doc, nlohmann::json& slot) {
    const int b = slot[0];
    const std::int64_t n = slot[2][0].get<std::int64_t>() - 1;
    slot[2][0] = n;
    doc["buffers"][b]["numel"] = n;
  };
  const auto bad_blob = edited([&](auto& doc, auto& s) { shorten(doc, s["in"][3]); });
  CHECK_THROWS_WITH_AS(jit::Plan<float>::load(bad_blob), doctest::Contains("int8 weight must be a whole prepared buffer"), Error);
  const auto bad_scratch = edited([&](auto& doc, auto& s) { shorten(doc, s["out"][1]); });
  CHECK_THROWS_WITH_AS(jit::Plan<float>::load(bad_scratch), doctest::Contains("the scratch must be dense"), Error);
  std::remove(bad_blob.c_str());
  std::remove(path.c_str());
}
