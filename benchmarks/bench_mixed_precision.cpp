// Mixed precision on the CPU, side by side in one run: each case times its
// float32 form and its 16-bit form in the same iterations (alternating, so
// both see the same machine state) and reports both medians and the ratio.
//
//  - linear: y = x W^T + b at batch 1 and 64, float32 against bfloat16
//    tensors (the AVX-512 BF16 GEMM, gemm_bf16.hpp) and against float32
//    tensors under autocast (the casts included);
//  - the training step (forward, cross-entropy, backward, SGD) of the MLP
//    and of ResearchModel at batch 64, float32 (`fp32_train`) against
//    autocast (`amp_train`).
//
//   build/release/bench_mixed_precision --json mixed_precision.json
//
// `--json FILE` writes rows {model, batch, mode, median_ms}. Frozen
// bfloat16 plans (`bf16_frozen`) are the next part of the dtypes issue.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../examples/research_model.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using TF = frost::Tensor<float>;
namespace F = frost::nn::functional;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
double time_ms(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Row {
  std::string model;
  std::int64_t batch;
  std::string mode;
  double median_ms;
};
std::vector<Row> g_rows;

/// Times `a` and `b` alternately; counters a_name / b_name (ms) and their ratio.
void side_by_side(benchmark::State& state, const std::string& model, std::int64_t batch, const char* a_name,
                  const std::function<void()>& a, const char* b_name, const std::function<void()>& b) {
  a(), b();  // warm up: allocator pools, packed copies
  std::vector<double> ta, tb;
  for (auto _ : state) ta.push_back(time_ms(a)), tb.push_back(time_ms(b));
  const double ma = median(ta), mb = median(tb);
  state.counters[std::string(a_name) + "_ms"] = ma;
  state.counters[std::string(b_name) + "_ms"] = mb;
  state.counters["speedup"] = ma / mb;
  g_rows.push_back({model, batch, a_name, ma});
  g_rows.push_back({model, batch, b_name, mb});
}

void linear_cases(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  frost::InferenceMode im;
  const auto x = TF::randn({m, k}), w = TF::randn({n, k}) * 0.05f, bias = TF::randn({n});
  const auto xb = x.to<frost::bfloat16>(), wb = w.to<frost::bfloat16>(), bb = bias.to<frost::bfloat16>();
  const std::string model = "linear_" + std::to_string(k) + "x" + std::to_string(n);
  side_by_side(
      state, model, m, "fp32", [&] { benchmark::DoNotOptimize(F::linear(x, w, bias).data()); }, "bf16",
      [&] { benchmark::DoNotOptimize(F::linear(xb, wb, bb).data()); });
}

void linear_autocast(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  frost::InferenceMode im;
  const auto x = TF::randn({m, k}), w = TF::randn({n, k}) * 0.05f, bias = TF::randn({n});
  const std::string model = "linear_" + std::to_string(k) + "x" + std::to_string(n);
  side_by_side(
      state, model, m, "fp32", [&] { benchmark::DoNotOptimize(F::linear(x, w, bias).data()); }, "autocast",
      [&] {
        frost::autocast ac(frost::Device::cpu());
        benchmark::DoNotOptimize(F::linear(x, w, bias).data());
      });
}

template <class M>
void train_step(benchmark::State& state, const std::string& name, M& model, const TF& x) {
  const auto y = frost::Tensor<std::int64_t>::randint(0, 10, {x.size(0)});
  frost::optim::SGD opt(model->parameters(), {.lr = 1e-3});
  auto step = [&](bool amp) {
    opt.zero_grad();
    TF loss;
    {
      frost::autocast ac(frost::Device::cpu(), std::nullopt, amp);
      loss = F::cross_entropy(model->forward(x), y);
    }
    loss.backward();
    opt.step();
  };
  side_by_side(state, name, x.size(0), "fp32_train", [&] { step(false); }, "amp_train", [&] { step(true); });
}

void mlp_train(benchmark::State& state) {
  auto mlp = guide::make_mlp();
  const auto x = TF::randn({state.range(0), 784});
  train_step(state, "MLP", mlp, x);
}

void research_train(benchmark::State& state) {
  auto model = frost::nn::make<guide::ResearchModel>();
  model->eval();  // no dropout / auxiliary head: the same graph every step
  const auto x = TF::randn({state.range(0), 3, 32, 32});
  train_step(state, "ResearchModel", model, x);
}

}  // namespace

BENCHMARK(linear_cases)->Args({1, 512, 8192})->Args({64, 512, 8192})->Args({64, 256, 784})->Unit(benchmark::kMillisecond);
BENCHMARK(linear_autocast)->Args({64, 512, 8192})->Unit(benchmark::kMillisecond);
BENCHMARK(mlp_train)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(research_train)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(2.0);

int main(int argc, char** argv) {
  std::string json_path;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    else args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!json_path.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : g_rows)
      rows.push_back({{"model", r.model}, {"batch", r.batch}, {"mode", r.mode}, {"median_ms", r.median_ms}});
    std::ofstream(json_path) << rows.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
