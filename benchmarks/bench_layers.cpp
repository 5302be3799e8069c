// CPU layer throughput: convolution, batch norm and pooling at batch 64, and
// the guide's ResearchModel end to end (eager inference, one training step).
// Times are milliseconds per iteration; `gflops` counts the convolution's
// multiply-adds as 2 flops. PyTorch's figures on the same machine come from
// benchmarks/reference/torch_layers.py, run beside this binary:
//
//   build/release/bench_layers --benchmark_format=json
//   /usr/bin/python3 benchmarks/reference/torch_layers.py
#include <benchmark/benchmark.h>

#include <frost/frost.hpp>

#include "../examples/research_model.hpp"

namespace {

using frost::Tensor;
using T = Tensor<float>;
namespace nn = frost::nn;

void conv_case(benchmark::State& state, std::int64_t cin, std::int64_t cout, std::int64_t hw, bool backward) {
  frost::manual_seed(0);
  auto conv = nn::Conv2d(cin, cout, 3, {.padding = 1});
  auto x = T::randn({64, cin, hw, hw});
  if (backward) x.requires_grad_();
  for (auto _ : state) {
    if (backward) {
      auto y = conv(x);
      y.sum().backward();
      conv->zero_grad();
      x.set_grad({});
    } else {
      frost::InferenceMode guard;
      benchmark::DoNotOptimize(conv(x).data());
    }
  }
  const double flops = 2.0 * 64 * cout * hw * hw * cin * 9 * (backward ? 3 : 1);
  state.counters["gflops"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_conv_3x64(benchmark::State& s) { conv_case(s, 3, 64, 32, false); }
void BM_conv_3x64_bwd(benchmark::State& s) { conv_case(s, 3, 64, 32, true); }
void BM_conv_64x128(benchmark::State& s) { conv_case(s, 64, 128, 16, false); }
void BM_conv_64x128_bwd(benchmark::State& s) { conv_case(s, 64, 128, 16, true); }

void BM_batchnorm2d(benchmark::State& state) {
  auto bn = nn::BatchNorm2d(64);
  auto x = T::randn({64, 64, 32, 32});
  for (auto _ : state) {
    frost::NoGradGuard guard;  // training-mode statistics, no tape
    benchmark::DoNotOptimize(bn(x).data());
  }
}

void BM_maxpool2d(benchmark::State& state) {
  auto pool = nn::MaxPool2d(2);
  auto x = T::randn({64, 64, 32, 32});
  for (auto _ : state) {
    frost::InferenceMode guard;
    benchmark::DoNotOptimize(pool(x).data());
  }
}

void BM_research_infer(benchmark::State& state) {
  frost::manual_seed(0);
  auto model = nn::make<guide::ResearchModel>();
  model->eval();
  auto x = T::randn({64, 3, 32, 32});
  for (auto _ : state) {
    frost::InferenceMode guard;
    benchmark::DoNotOptimize(model(x).data());
  }
}

void BM_research_train_step(benchmark::State& state) {
  frost::manual_seed(0);
  auto model = nn::make<guide::ResearchModel>();
  frost::optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  auto x = T::randn({64, 3, 32, 32});
  auto y = frost::IndexTensor::randint(0, 10, {64});
  for (auto _ : state) {
    opt.zero_grad();
    auto loss = nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
  }
}

}  // namespace

BENCHMARK(BM_conv_3x64)->Name("conv2d/3x64/bs64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_3x64_bwd)->Name("conv2d/3x64/bs64/fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_64x128)->Name("conv2d/64x128/bs64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_64x128_bwd)->Name("conv2d/64x128/bs64/fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_batchnorm2d)->Name("batchnorm2d/bs64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_maxpool2d)->Name("maxpool2d/bs64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_research_infer)->Name("research/infer_bs64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_research_train_step)->Name("research/train_step_bs64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
