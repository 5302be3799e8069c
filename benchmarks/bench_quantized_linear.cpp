// The int8 linear kernel (backend/cpu/quantized_linear.hpp: the input rows
// quantized, then the integer products) against the float product it
// replaces (Eigen's GEMM, y = x W^T), side by side on each shape: each
// iteration times both, and the counters give their medians and the ratio.
// It includes only backend headers, so benchmarks/quantized_isa.sh builds
// it for each instruction set the kernel has a path for (AVX-512 VNNI,
// AVX-VNNI, AVX2) and runs them one after another:
//
//   bash benchmarks/quantized_isa.sh
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include <frost/backend/cpu/quantized_linear.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void int8_vs_float(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k)), bias(static_cast<std::size_t>(n));
  std::vector<float> y(static_cast<std::size_t>(m * n));
  for (auto* v : {&x, &w, &bias})
    for (auto& e : *v) e = normal(gen);
  std::vector<unsigned char> blob(static_cast<std::size_t>(frost::cpu::QuantizedWeightLayout(n, k).total));
  std::vector<unsigned char> rows(static_cast<std::size_t>(frost::cpu::QuantizedInputLayout(m, k).total));
  frost::cpu::quantize_weight(w.data(), n, k, k, blob.data());
  Eigen::Map<const RowMajor> X(x.data(), m, k), W(w.data(), n, k);
  Eigen::Map<RowMajor> Y(y.data(), m, n);
  std::vector<double> int8_ms, float_ms;
  for (auto _ : state) {
    auto t0 = Clock::now();
    frost::cpu::quantize_rows(x.data(), m, k, k, rows.data());
    frost::cpu::quantized_linear(rows.data(), blob.data(), m, n, k, bias.data(), y.data(), n, frost::UnaryOp::copy);
    int8_ms.push_back(ms_since(t0));
    benchmark::DoNotOptimize(y.data());
    t0 = Clock::now();
    Y.noalias() = X * W.transpose();
    Y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data(), n);
    float_ms.push_back(ms_since(t0));
    benchmark::DoNotOptimize(y.data());
  }
  const double q = median(int8_ms), f = median(float_ms);
  state.counters["int8_ms"] = q;
  state.counters["float_ms"] = f;
  state.counters["speedup"] = q > 0 ? f / q : 0.0;
}

}  // namespace

// x [m, k] x W [n, k]: ResearchModel's classifier at batch 1 and 64, the MLP's first and second layers at batch 64.
BENCHMARK(int8_vs_float)
    ->ArgNames({"m", "n", "k"})
    ->Args({1, 512, 8192})
    ->Args({64, 512, 8192})
    ->Args({64, 256, 784})
    ->Args({64, 256, 256})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
