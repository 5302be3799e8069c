// Dynamic int8 quantization of linear layers (FreezeOptions::quantize_linear):
// the kernel against the documented formulas computed here one element at a
// time (exact: the sums are integers), plans against those formulas layer
// by layer and against float, and the plan file (save, load, refit, hostile
// edits of the quantized step).
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
#include "support.hpp"

using namespace frost;
using T = Tensor<float>;
using TD = Tensor<double>;

namespace {

/// The formulas of backend/cpu/quantized_linear.hpp, one element at a time:
/// y = act(sx sw sum(q qw) + b) for x [m, k] (row stride ldx), W [n, k].
template <class U>
std::vector<U> reference(const U* x, std::int64_t m, std::int64_t k, std::int64_t ldx, const U* w, std::int64_t n,
                         const U* bias, UnaryOp act) {
  std::vector<float> sw(static_cast<std::size_t>(n));
  std::vector<int> qw(static_cast<std::size_t>(n * k));
  for (std::int64_t r = 0; r < n; ++r) {
    double amax = 0;
    for (std::int64_t j = 0; j < k; ++j) amax = std::max(amax, std::abs(double(w[r * k + j])));
    const double s = amax > 0 ? amax / 127.0 : 1.0;
    sw[static_cast<std::size_t>(r)] = static_cast<float>(s);
    for (std::int64_t j = 0; j < k; ++j)
      qw[static_cast<std::size_t>(r * k + j)] = static_cast<int>(std::clamp(std::nearbyint(double(w[r * k + j]) / s), -127.0, 127.0));
  }
  std::vector<U> y(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    const U* row = x + i * ldx;
    float amax = 0;
    bool finite = true;
    for (std::int64_t j = 0; j < k; ++j) {
      finite = finite && std::isfinite(float(row[j]));
      amax = std::max(amax, std::abs(float(row[j])));
    }
    std::vector<int> q(static_cast<std::size_t>(k));  // zeros for a row holding inf or NaN (its outputs: NaN)
    const bool zero = amax < cpu::kQuantizedTiny;
    const float inv = zero ? 0.0f : 127.0f / amax, sx = zero ? 1.0f : amax / 127.0f;
    for (std::int64_t j = 0; j < k && finite; ++j) {
      const float v = std::min(std::max(float(row[j]) * inv, -127.0f), 127.0f);
      q[static_cast<std::size_t>(j)] = static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f));
    }
    for (std::int64_t c = 0; c < n; ++c) {
      long long dot = 0;
      for (std::int64_t j = 0; j < k; ++j) dot += q[static_cast<std::size_t>(j)] * qw[static_cast<std::size_t>(c * k + j)];
      U v = finite ? static_cast<U>(dot) * (static_cast<U>(sx) * static_cast<U>(sw[static_cast<std::size_t>(c)]))
                   : std::numeric_limits<U>::quiet_NaN();
      if (bias) v += bias[c];
      y[static_cast<std::size_t>(i * n + c)] = fn::unary(act, v, U(0), U(0));
    }
  }
  return y;
}

/// The kernel's y for the same operands.
template <class U>
std::vector<U> kernel(const U* x, std::int64_t m, std::int64_t k, std::int64_t ldx, const U* w, std::int64_t n,
                      const U* bias, UnaryOp act) {
  std::vector<unsigned char> blob(static_cast<std::size_t>(cpu::QuantizedWeightLayout(n, k).total));
  std::vector<unsigned char> rows(static_cast<std::size_t>(cpu::QuantizedInputLayout(m, k).total));
  cpu::quantize_weight(w, n, k, k, blob.data());
  cpu::quantize_rows(x, m, k, ldx, rows.data());
  std::vector<U> y(static_cast<std::size_t>(m * n));
  cpu::quantized_linear(rows.data(), blob.data(), m, n, k, bias, y.data(), n, act);
  return y;
}

/// Equal to the last rounding, NaN matching NaN: the sums are exact
/// integers, and only the rescale's multiply and add may round differently
/// (fused or not).
template <class U>
bool same(const std::vector<U>& a, const std::vector<U>& b) {
  if (a.size() != b.size()) return false;
  const double tol = sizeof(U) == 4 ? 1e-6 : 1e-14;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(double(a[i]) - double(b[i])) <= tol * (1 + std::abs(double(b[i]))) || (std::isnan(a[i]) && std::isnan(b[i]))))
      return false;
  return true;
}

int count(const jit::Graph& g, jit::StepKind k) {
  int n = 0;
  for (const auto& s : g.steps) n += s.kind == k;
  return n;
}

/// Largest |a - b| relative to b's largest magnitude.
double relative(const T& a, const T& b) { return (a - b).abs().max().item() / b.abs().max().item(); }

}  // namespace

TEST_CASE("quantized linear kernel: exactly the documented int8 formulas (shapes, strides, bias, relu, edge rows)") {
  Generator gen(61);
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {1, 5, 63}, {3, 4, 64}, {4, 7, 65}, {5, 8, 200}, {9, 10, 130}, {17, 3, 784}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const std::int64_t ldx = k + 3;  // rows with a gap between them
    const auto x = T::randn({m, ldx}, &gen) * 3.0f, w = T::randn({n, k}, &gen) * 0.2f, b = T::randn({n}, &gen);
    for (UnaryOp act : {UnaryOp::copy, UnaryOp::relu})
      for (const float* bias : {static_cast<const float*>(b.data()), static_cast<const float*>(nullptr)}) {
        CAPTURE(static_cast<int>(act));
        CAPTURE(bias != nullptr);
        CHECK(same(kernel(x.data(), m, k, ldx, w.data(), n, bias, act), reference(x.data(), m, k, ldx, w.data(), n, bias, act)));
      }
  }
  // Double operands, and rows the scales must handle: all zeros (y = bias),
  // inf or NaN (no scale: NaN), a zero weight row (its outputs: the bias),
  // a row of subnormal size (127 / max would overflow: zeros).
  {
    const std::int64_t m = 5, n = 3, k = 70;
    auto x = TD::randn({m, k}, &gen), w = TD::randn({n, k}, &gen), b = TD::randn({n}, &gen);
    for (std::int64_t j = 0; j < k; ++j) {
      x.data()[j] = 0;                         // row 0
      w.data()[2 * k + j] = 0;                 // weight row 2
    }
    x.data()[1 * k + 5] = INFINITY;            // row 1
    x.data()[2 * k + 9] = NAN;                 // row 2
    for (std::int64_t j = 0; j < k; ++j) x.data()[4 * k + j] = 1e-40 * double(j % 3);  // row 4
    const auto got = kernel(x.data(), m, k, k, w.data(), n, b.data(), UnaryOp::copy);
    CHECK(same(got, reference(x.data(), m, k, k, w.data(), n, b.data(), UnaryOp::copy)));
    for (std::int64_t c = 0; c < n; ++c) {
      CHECK(got[static_cast<std::size_t>(c)] == b.data()[c]);
      CHECK(std::isnan(got[static_cast<std::size_t>(n + c)]));
      CHECK(std::isnan(got[static_cast<std::size_t>(2 * n + c)]));
    }
    CHECK(got[3 * n + 2] == b.data()[2]);
    for (std::int64_t c = 0; c < n; ++c) CHECK(got[static_cast<std::size_t>(4 * n + c)] == b.data()[c]);
  }
  // Within a percent or two of float, as int8 should be.
  const auto x = T::randn({8, 512}, &gen), w = T::randn({64, 512}, &gen) * 0.05f;
  const auto y = kernel(x.data(), 8, 512, 512, w.data(), 64, static_cast<const float*>(nullptr), UnaryOp::copy);
  CHECK(relative(T::from(y).reshape({8, 64}), x.matmul(w.t())) < 0.03);
}

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
      h = reference(h.data(), batch, k, k, lin->weight.data(), n, lin->bias.data(),
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
