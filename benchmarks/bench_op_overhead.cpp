// Per-op cost of the eager path on tiny tensors (the dispatch, allocation and
// tape overhead, not the math) and float GEMM throughput.
//
//   build/tests/bench_op_overhead --benchmark_format=json
//
// chain/*: 200 elementwise ops on a 16-float tensor (add a constant tensor,
// multiply by one, relu, tanh, in turn); ns_per_op is wall time / 200.
#include <benchmark/benchmark.h>

#include <chrono>

#include <frost/frost.hpp>

namespace {

using frost::Tensor;
constexpr int kOps = 200;

struct Chain {
  Tensor<float> x0 = Tensor<float>::rand({16}) + 0.5f;
  Tensor<float> c = Tensor<float>::rand({16}) * 0.1f;
  Tensor<float> m = Tensor<float>::rand({16}) * 0.5f + 0.75f;

  Tensor<float> run(Tensor<float> x) const {
    for (int i = 0; i < kOps; i += 4) {
      x = x + c;
      x = x * m;
      x = x.relu();
      x = x.tanh();
    }
    return x;
  }
};

// Google Benchmark reports time per iteration; this turns it into time per op.
void set_ns_per_op(benchmark::State& state, double seconds) {
  state.counters["ns_per_op"] = seconds * 1e9 / (static_cast<double>(state.iterations()) * kOps);
}

template <class Body>
void timed(benchmark::State& state, Body&& body) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) body();
  set_ns_per_op(state, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void chain_no_grad(benchmark::State& state) {
  Chain ch;
  frost::NoGradGuard ng;
  timed(state, [&] { benchmark::DoNotOptimize(ch.run(ch.x0).data()); });
}

void chain_inference(benchmark::State& state) {
  Chain ch;
  frost::InferenceMode im;
  timed(state, [&] { benchmark::DoNotOptimize(ch.run(ch.x0).data()); });
}

void chain_record(benchmark::State& state) {
  Chain ch;
  ch.x0.requires_grad_();
  timed(state, [&] { benchmark::DoNotOptimize(ch.run(ch.x0).data()); });
}

void chain_fwd_bwd(benchmark::State& state) {
  Chain ch;
  ch.x0.requires_grad_();
  timed(state, [&] {
    ch.run(ch.x0).sum().backward();
    ch.x0.set_grad({});
  });
}

// GFLOP/s from wall time: the GEMM runs on every OpenMP thread, so the
// calling thread's CPU time would overstate it.
void matmul(benchmark::State& state, std::int64_t n) {
  auto a = Tensor<float>::randn({n, n}), b = Tensor<float>::randn({n, n});
  frost::NoGradGuard ng;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b).data());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["gflops"] = static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(n * n * n) / s / 1e9;
}

}  // namespace

BENCHMARK(chain_no_grad)->Name("chain/no_grad");
BENCHMARK(chain_inference)->Name("chain/inference_mode");
BENCHMARK(chain_record)->Name("chain/record");
BENCHMARK(chain_fwd_bwd)->Name("chain/fwd_bwd");
BENCHMARK_CAPTURE(matmul, 512, 512)->Name("matmul/512")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmul, 1024, 1024)->Name("matmul/1024")->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
