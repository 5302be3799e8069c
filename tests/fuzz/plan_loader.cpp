// libFuzzer target for jit::Plan loading: any byte string is either a valid
// plan (then run on zero inputs when small) or a frost::Error; never a crash,
// a sanitizer report or a hang. Built and run briefly by scripts/fuzz.sh
// (clang, -fsanitize=fuzzer,address,undefined). With FROST_FUZZ_SEEDS it is
// instead a program writing seed plans into the directory given.
#include <cstdint>
#include <frost/frost.hpp>
#include <string>
#include <vector>

using namespace frost;
using T = Tensor<float>;

#if defined(FROST_FUZZ_SEEDS)
#include "../../examples/research_model.hpp"

struct Small : nn::Module {
  nn::Conv2d conv = register_module("conv", nn::Conv2d(2, 3, 3, {.padding = 1}));
  nn::BatchNorm2d bn = register_module("bn", nn::BatchNorm2d(3));
  nn::Linear fc = register_module("fc", nn::Linear(3 * 2 * 2, 4));
  T forward(const T& x) {
    auto y = max_pool2d(bn(conv(x)).relu(), 2);
    if (y.mean() > -100.0f) y = y.sigmoid() * 2.0f + y;
    return fc(y.flatten(1)).softmax(1);
  }
};

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  auto small = nn::make<Small>();
  small->eval();
  jit::freeze(small, T::randn({2, 2, 4, 4})).save(dir + "/small.frost");
  auto mlp = guide::make_mlp();
  mlp->eval();
  jit::freeze(mlp, T::randn({1, 784})).save(dir + "/mlp.frost");
  jit::freeze(small, {.quantize_linear = true}, T::randn({2, 2, 4, 4})).save(dir + "/small_int8.frost");
  return 0;
}
#else
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto f = SafetensorsFile::from_bytes(std::vector<std::uint8_t>(data, data + size), "<fuzz>");
    auto plan = jit::Plan<float>::from_file(f);
    if (plan.arena_bytes() > (std::int64_t{1} << 24)) return 0;
    std::vector<T> inputs;
    for (const auto& s : plan.graph().input_shapes) {
      if (s.numel() > (1 << 16)) return 0;
      inputs.push_back(T::zeros(s));
    }
    plan.run_all(inputs);
  } catch (const frost::Error&) {
  }
  return 0;
}
#endif
