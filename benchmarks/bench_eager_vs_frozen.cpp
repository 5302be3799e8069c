// The project's headline: the same C++ model run eagerly (InferenceMode)
// and as a frozen jit plan, side by side in one run, for the guide's
// ResearchModel, ResearchModelBN, the 784-256-256-10 MLP and AdaptiveResNet
// at batch 1 and 64. Prints a table of median latency, throughput, peak
// tensor memory and the frozen/eager ratios, then, at batch 1, percentiles
// of single calls timed one by one, and on the CPU the plans frozen with
// quantize_linear (dynamic int8 linear layers) against the float plans;
// `--json FILE` also writes the rows as a JSON array. `--device cuda` runs both on the GPU (the model
// moved with module.to, the plan with Plan::to, which replays it as a CUDA
// Graph); it needs a build with frost::cuda. `--profile` adds where the
// frozen time goes: Plan::profile's slowest steps of the batch-64 plans, and
// ResearchModel at batch 64 frozen with other options (conv + pool block
// sizes, unfused, TF32 on CUDA), each timed. Google Benchmark's own flags
// pass through.
//
//   build/release/bench_eager_vs_frozen --json eager_vs_frozen.json
//   build/gpu/bench_eager_vs_frozen --device cuda --profile
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <frost/frost.hpp>
#include <nlohmann/json.hpp>

#include "../examples/research_model.hpp"

namespace {

using frost::Tensor;
using T = Tensor<float>;
namespace nn = frost::nn;
namespace jit = frost::jit;

struct Case {
  std::string model;
  int batch = 1;
  std::function<T(const T&)> eager;
  std::shared_ptr<jit::Plan<float>> plan;
  std::shared_ptr<jit::Plan<float>> quantized;  // CPU runs: frozen with quantize_linear
  T x;
  std::int64_t eager_peak = 0, frozen_peak = 0;
};

/// Tensor bytes a region allocates beyond what was live before it.
template <class F>
std::int64_t peak_of(F&& f) {
  frost::reset_peak_memory_stats();
  const auto before = frost::memory_stats().current_bytes;
  f();
  return frost::memory_stats().peak_bytes - before;
}

/// Batch-norm statistics that are not the identity, so folding has work to do.
template <class M>
void warm_batch_norm(M& model, const frost::Shape& input) {
  model->train();
  frost::NoGradGuard ng;
  for (int i = 0; i < 3; ++i) model(T::randn(input) * 0.5f + 0.1f);
  model->eval();
}

frost::Device g_device = frost::Device::cpu();

/// Waits for the device's queue, so a timed iteration includes its kernels.
void wait_for_device() {
  if (g_device.is_cuda()) frost::cuda::synchronize();
}

template <class M>
Case make_case(const std::string& name, M model, frost::Shape input) {
  Case c;
  c.model = name;
  c.batch = static_cast<int>(input[0]);
  c.x = T::randn(input);
  c.eager = [model](const T& x) { return model(x); };
  c.plan = std::make_shared<jit::Plan<float>>(jit::freeze(model, c.x));  // traced on the CPU
  if (g_device.is_cpu()) c.quantized = std::make_shared<jit::Plan<float>>(jit::freeze(model, {.quantize_linear = true}, c.x));
  model->to(g_device);
  c.plan->to(g_device);
  c.x = c.x.to(g_device);
  {
    frost::InferenceMode im;
    c.eager(c.x);  // warm the allocator's caches first: the peak is the steady state
    c.eager_peak = peak_of([&] { benchmark::DoNotOptimize(c.eager(c.x).data()); });
  }
  c.plan->run(c.x);  // on CUDA this run captures the graph (to() made the step-by-step first run)
  c.plan->run(c.x);
  wait_for_device();
  const auto run_peak = peak_of([&] { benchmark::DoNotOptimize(c.plan->run(c.x).data()); });
  c.frozen_peak = c.plan->arena_bytes() + run_peak;  // the workspace it holds plus anything a run allocates
  return c;
}

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  for (std::int64_t batch : {1, 64}) {
    frost::manual_seed(0);
    auto rm = nn::make<guide::ResearchModel>();
    rm->eval();
    cases.push_back(make_case("ResearchModel", rm, {batch, 3, 32, 32}));
    auto bn = nn::make<guide::ResearchModelBN>();
    warm_batch_norm(bn, {8, 3, 32, 32});
    cases.push_back(make_case("ResearchModelBN", bn, {batch, 3, 32, 32}));
    auto mlp = guide::make_mlp();
    mlp->eval();
    cases.push_back(make_case("MLP", mlp, {batch, 784}));
    auto ar = nn::make<guide::AdaptiveResNet>();
    warm_batch_norm(ar, {8, 3, 32, 32});
    cases.push_back(make_case("AdaptiveResNet", ar, {batch, 3, 32, 32}));
  }
  return cases;
}

/// Keeps the median of each benchmark's repetitions (seconds).
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> median_s;
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> medians;  // the console shows the medians only; the table below has the rest
    for (const auto& r : runs)
      if (r.aggregate_name == "median") {
        median_s[r.run_name.function_name] = r.GetAdjustedRealTime() / 1e6;  // microseconds
        medians.push_back(r);
      }
    ConsoleReporter::ReportRuns(medians);
  }
};

/// Percentiles of single calls, each timed alone (seconds). Google
/// Benchmark's figure is a repetition's mean, which a noisy machine's slow
/// calls pull up: a microsecond-scale plan's mean can sit 20% above its median.
struct CallLatency {
  double p50 = 0, p90 = 0;
};
template <class F>
CallLatency per_call(F&& call, double budget_s) {
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  std::vector<double> t;
  const auto start = clock::now();
  while (t.size() < 100 || (t.size() < 100000 && secs(clock::now() - start) < budget_s)) {
    const auto a = clock::now();
    call();
    t.push_back(secs(clock::now() - a));
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[t.size() * 9 / 10]};
}

std::string key(const Case& c, const char* mode) { return c.model + "/batch" + std::to_string(c.batch) + "/" + mode; }

/// A frozen run on the device, waited for.
void run_plan(const jit::Plan<float>& plan, const T& x, std::vector<T>& out) {
  plan.run_into({x}, out);
  benchmark::DoNotOptimize(out[0].data());
  wait_for_device();
  out.clear();
}

/// --profile: the batch-64 plans' slowest steps, then ResearchModel at batch
/// 64 frozen with other options, each run timed call by call.
void print_profiles(const std::vector<Case>& cases) {
  for (const auto& c : cases)
    if (c.batch == 64 && (c.model == "ResearchModel" || c.model == "ResearchModelBN"))
      std::printf("\nPlan::profile, %s at batch 64 (the 8 slowest steps):\n%s", c.model.c_str(),
                  c.plan->profile({c.x}, 20).table(8).c_str());

  frost::manual_seed(0);
  auto rm = nn::make<guide::ResearchModel>();
  rm->eval();
  const T x = T::randn({64, 3, 32, 32});
  const jit::Graph traced = jit::trace(rm, x);
  const T xd = x.to(g_device);
  auto blocks = [](std::int64_t n) {
    jit::FreezeOptions o;
    o.conv_pool_images = n;
    return o;
  };
  jit::FreezeOptions unfused, tf32, tf32_whole = blocks(64);
  unfused.fuse_conv_pool = false;
  tf32.allow_tf32 = tf32_whole.allow_tf32 = true;
  std::vector<std::pair<std::string, jit::FreezeOptions>> variants = {{"default", {}},
                                                                      {"conv+pool blocks of 8 images", blocks(8)},
                                                                      {"conv+pool blocks of 32 images", blocks(32)},
                                                                      {"conv+pool blocks of 64 images", blocks(64)},
                                                                      {"conv and pool unfused", unfused}};
  if (g_device.is_cuda()) {
    variants.emplace_back("allow_tf32", tf32);
    variants.emplace_back("allow_tf32, blocks of 64 images", tf32_whole);
  }
  std::printf("\nResearchModel at batch 64, frozen with other options (%s; call by call):\n", g_device.str().c_str());
  std::printf("%-32s %13s %13s %12s %10s %12s\n", "variant", "p50 ms", "p90 ms", "arena B", "vs default",
              "max rel diff");
  double base = 0;
  T reference;  // the default plan's output
  for (const auto& [name, opt] : variants) {
    auto plan = jit::freeze<float>(jit::Graph(traced), opt);
    plan.to(g_device);
    std::vector<T> out;
    for (int i = 0; i < 3; ++i) run_plan(plan, xd, out);  // warm (on CUDA: the capture)
    const CallLatency l = per_call([&] { run_plan(plan, xd, out); }, 1.0);
    const T y = plan.run(xd).cpu();
    if (base == 0) base = l.p50, reference = y;
    const double diff = (y - reference).abs().max().item() / reference.abs().max().item();
    std::printf("%-32s %13.4f %13.4f %12lld %9.2fx %12.2e\n", name.c_str(), l.p50 * 1e3, l.p90 * 1e3,
                static_cast<long long>(plan.arena_bytes()), base / l.p50, diff);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool profile = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    else if (std::strcmp(argv[i], "--profile") == 0) profile = true;
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) g_device = std::strcmp(argv[++i], "cuda") == 0 ? frost::Device::cuda() : frost::Device::cpu();
    else args.push_back(argv[i]);
  }
  if (g_device.is_cuda() && !frost::cuda::is_available()) {
    std::printf("skipped: no CUDA device (or this build lacks frost::cuda)\n");
    return 0;
  }
  std::printf("device: %s\n", g_device.is_cuda() ? frost::cuda::device_name().c_str() : "cpu");
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());

  auto cases = make_cases();
  for (auto& c : cases) {
    const double min_time = c.batch == 1 ? 0.05 : 0.15;
    benchmark::RegisterBenchmark(key(c, "eager").c_str(), [&c](benchmark::State& st) {
      frost::InferenceMode im;
      for (auto _ : st) {
        benchmark::DoNotOptimize(c.eager(c.x).data());
        wait_for_device();
      }
    })->Unit(benchmark::kMicrosecond)->MinTime(min_time)->Repetitions(5)->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark(key(c, "frozen").c_str(), [&c](benchmark::State& st) {
      std::vector<T> out;
      for (auto _ : st) run_plan(*c.plan, c.x, out);
    })->Unit(benchmark::kMicrosecond)->MinTime(min_time)->Repetitions(5)->ReportAggregatesOnly(true);
    if (c.quantized)
      benchmark::RegisterBenchmark(key(c, "frozen_int8").c_str(), [&c](benchmark::State& st) {
        std::vector<T> out;
        for (auto _ : st) run_plan(*c.quantized, c.x, out);
      })->Unit(benchmark::kMicrosecond)->MinTime(min_time)->Repetitions(5)->ReportAggregatesOnly(true);
  }
  Collector rep;
  benchmark::RunSpecifiedBenchmarks(&rep);

  nlohmann::json rows = nlohmann::json::array();
  std::printf("\n%-16s %5s %11s %11s %8s %13s %13s %9s\n", "model", "batch", "eager ms", "frozen ms", "speedup",
              "eager peak B", "frozen peak B", "mem ratio");
  std::map<std::string, CallLatency> calls;  // batch 1: key -> percentiles
  for (auto& c : cases) {
    if (c.batch != 1 || !rep.median_s.count(key(c, "eager")) || !rep.median_s.count(key(c, "frozen"))) continue;
    {
      frost::InferenceMode im;
      calls[key(c, "eager")] = per_call([&] {
        benchmark::DoNotOptimize(c.eager(c.x).data());
        wait_for_device();
      }, 0.2);
    }
    std::vector<T> out;
    calls[key(c, "frozen")] = per_call([&] { run_plan(*c.plan, c.x, out); }, 0.2);
  }
  for (const auto& c : cases) {
    const auto e = rep.median_s.find(key(c, "eager")), f = rep.median_s.find(key(c, "frozen"));
    if (e == rep.median_s.end() || f == rep.median_s.end()) continue;  // filtered out
    std::printf("%-16s %5d %11.4f %11.4f %7.2fx %13lld %13lld %9.2f\n", c.model.c_str(), c.batch, e->second * 1e3,
                f->second * 1e3, e->second / f->second, static_cast<long long>(c.eager_peak),
                static_cast<long long>(c.frozen_peak),
                c.eager_peak > 0 ? double(c.frozen_peak) / double(c.eager_peak) : 0.0);
    for (const auto& [mode, secs, peak] : {std::tuple{"eager", e->second, c.eager_peak}, std::tuple{"frozen", f->second, c.frozen_peak}}) {
      nlohmann::json row = {{"model", c.model}, {"batch", c.batch}, {"mode", mode}, {"median_ms", secs * 1e3},
                            {"items_per_s", c.batch / secs}, {"peak_bytes", peak}};
      if (const auto l = calls.find(key(c, mode)); l != calls.end())
        row["call_p50_ms"] = l->second.p50 * 1e3, row["call_p90_ms"] = l->second.p90 * 1e3;
      rows.push_back(std::move(row));
    }
  }
  std::printf("(%s; speedup = eager / frozen median latency; mem ratio = frozen / eager peak tensor bytes per call)\n",
              g_device.str().c_str());
  if (!calls.empty()) {
    std::printf("\nbatch 1, single calls timed one by one (the table above: medians of repetitions' means):\n");
    std::printf("%-16s %13s %13s %13s %13s %8s\n", "model", "eager p50 ms", "eager p90 ms", "frozen p50 ms",
                "frozen p90 ms", "speedup");
    for (const auto& c : cases) {
      const auto e = calls.find(key(c, "eager")), f = calls.find(key(c, "frozen"));
      if (e == calls.end() || f == calls.end()) continue;
      std::printf("%-16s %13.4f %13.4f %13.4f %13.4f %7.2fx\n", c.model.c_str(), e->second.p50 * 1e3,
                  e->second.p90 * 1e3, f->second.p50 * 1e3, f->second.p90 * 1e3, e->second.p50 / f->second.p50);
    }
  }
  bool header = false;
  for (const auto& c : cases) {
    const auto f = rep.median_s.find(key(c, "frozen")), q = rep.median_s.find(key(c, "frozen_int8"));
    if (f == rep.median_s.end() || q == rep.median_s.end()) continue;
    if (!header) {
      std::printf("\nfrozen with quantize_linear (dynamic int8 linear layers) against the float plan:\n");
      std::printf("%-16s %5s %11s %11s %8s %13s\n", "model", "batch", "float ms", "int8 ms", "speedup", "max rel diff");
      header = true;
    }
    const T yf = c.plan->run(c.x), yq = c.quantized->run(c.x);
    const double diff = (yq - yf).abs().max().item() / yf.abs().max().item();
    std::printf("%-16s %5d %11.4f %11.4f %7.2fx %13.2e\n", c.model.c_str(), c.batch, f->second * 1e3, q->second * 1e3,
                f->second / q->second, diff);
    rows.push_back({{"model", c.model}, {"batch", c.batch}, {"mode", "frozen_int8"}, {"median_ms", q->second * 1e3},
                    {"items_per_s", c.batch / q->second}, {"max_rel_diff_vs_float", diff}});
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << rows.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  std::printf("\nplan summary, ResearchModelBN at batch 64:\n%s", cases[5].plan->summary().c_str());
  if (profile) print_profiles(cases);
  benchmark::Shutdown();
  return 0;
}
