// Opening a safetensors checkpoint with many tensors: the header parse and
// validation, which must stay linear in the number of tensors (a large
// model's checkpoint has tens of thousands).
//
//   build/tests/bench_safetensors_open
//
// open/N: SafetensorsFile::open of a file of N one-element float tensors
// (named like a model's, "layers.<i>.mlp.weight"); s_per_tensor is the time
// per tensor, constant when the parse is linear.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <frost/frost.hpp>

namespace {

std::string file_with(int n) {
  const auto path = (std::filesystem::temp_directory_path() / ("frost_bench_open_" + std::to_string(n) + ".safetensors")).string();
  if (!std::filesystem::exists(path)) {
    std::vector<std::pair<std::string, frost::Tensor<float>>> ts;
    ts.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      ts.emplace_back("layers." + std::to_string(i) + ".mlp.weight", frost::Tensor<float>::full({1}, float(i)));
    frost::save_safetensors(ts, path);
  }
  return path;
}

void open(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string path = file_with(n);
  std::size_t seen = 0;
  for (auto _ : state) {
    const auto f = frost::SafetensorsFile::open(path);
    seen = f.names().size();
    benchmark::DoNotOptimize(seen);
  }
  if (seen != static_cast<std::size_t>(n)) state.SkipWithError("the file did not hold every tensor");
  // seconds per tensor, printed with its SI prefix ("2.5u" is 2.5 us)
  state.counters["s_per_tensor"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(open)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
