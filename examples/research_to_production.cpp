// The guide's research-to-production path. ResearchModel trains with dropout
// and an auxiliary classifier taken 30% of the time (frost's generator, so a
// seed replays the run); ProductionModel keeps the features and the main
// classifier without dropout. Its weights are copied over by name, saved as
// safetensors (loadable by PyTorch), reloaded and frozen into a jit plan,
// then frozen again with its linear layers quantized to int8.
#include <frost/frost.hpp>
#include <cstdio>
#include <iostream>

#include "research_model.hpp"

using namespace frost;
using T = Tensor<float>;
using guide::ProductionModel;
using guide::ResearchModel;
namespace F = nn::functional;

/// A separable 10-class image set: class k brightens one 8x8 tile of one
/// channel, under noise.
std::pair<T, IndexTensor> make_dataset(std::int64_t n) {
  auto x = T::randn({n, 3, 32, 32}) * 0.5f;
  auto y = IndexTensor::randint(0, 10, {n});
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = y.data()[i];
    x.select(0, i).select(0, k % 3).narrow(0, (k / 3) * 8, 8).narrow(1, (k % 4) * 8, 8).add_(2.0f);
  }
  return {x, y};
}

float accuracy(const T& logits, const IndexTensor& y) {
  const auto pred = logits.argmax(1);
  std::int64_t right = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) right += pred.data()[i] == y.data()[i];
  return float(right) / float(y.numel());
}

int main() {
  manual_seed(0);
  const std::int64_t batch = 32, n_train = 256;
  auto [train_x, train_y] = make_dataset(n_train);
  auto [test_x, test_y] = make_dataset(128);

  auto research = nn::make<ResearchModel>();
  optim::Adam opt(research->parameters(), {.lr = 1e-3});
  for (int epoch = 1; epoch <= 4; ++epoch) {
    research->train();
    double total = 0;
    for (std::int64_t b = 0; b < n_train; b += batch) {
      const auto x = train_x.narrow(0, b, batch);
      const auto y = train_y.narrow(0, b, batch);
      opt.zero_grad();
      auto loss = F::cross_entropy(research(x), y);
      loss.backward();
      opt.step();
      total += loss.item();
    }
    research->eval();
    InferenceMode guard;
    const float acc = accuracy(research(test_x), test_y);
    std::printf("epoch %d  loss %.4f  test accuracy %.3f\n", epoch, total / double(n_train / batch), acc);
  }

  // Research -> production: same features, the classifier without dropout
  // (its Linear layers move from positions 1 and 3 to 0 and 2), no aux head.
  auto production = nn::make<ProductionModel>();
  nn::StateDict<float> sd;
  for (const auto& [name, value] : research->state_dict()) {
    if (name.starts_with("aux_classifier.")) continue;
    std::string to = name;
    if (name.starts_with("classifier.1.")) to = "classifier.0." + name.substr(13);
    if (name.starts_with("classifier.3.")) to = "classifier.2." + name.substr(13);
    sd.insert(to, value);
  }
  production->load_state_dict(sd);
  production->eval();

  const std::string path = "production_model.safetensors";
  save_safetensors(*production, path);
  auto reloaded = nn::make<ProductionModel>();
  load_safetensors(*reloaded, path);
  reloaded->eval();
  std::remove(path.c_str());

  InferenceMode guard;
  const auto a = research(test_x), b = production(test_x), c = reloaded(test_x);
  const float diff_prod = (a - b).abs().max().item(), diff_reload = (b - c).abs().max().item();
  const float acc = accuracy(c, test_y);
  std::printf("production vs research (eval): max |diff| %.2e; reloaded vs production: %.2e; accuracy %.3f\n",
              diff_prod, diff_reload, acc);

  // Freeze for serving: a static plan with no tape, fused epilogues and one arena.
  const auto sample = test_x.narrow(0, 0, 64).contiguous();
  auto plan = jit::freeze(reloaded, sample);
  std::printf("%s", plan.summary().c_str());
  const auto report = plan.check(reloaded, sample);
  std::printf("%s\n", report.str().c_str());

  // Quantize for serving on the CPU: the linear layers in dynamic int8
  // (PyTorch's quantize_dynamic), the convolutions in float.
  auto int8 = jit::freeze(reloaded, {.quantize_linear = true}, sample);
  const auto yf = plan.run(sample), yq = int8.run(sample);
  const float q_diff = (yq - yf).abs().max().item() / yf.abs().max().item();
  const float q_acc = accuracy(yq, test_y.narrow(0, 0, 64)), f_acc = accuracy(yf, test_y.narrow(0, 0, 64));
  std::printf("int8 plan (quantize_linear): max difference %.2e of the float plan's range; accuracy on these 64: %.3f "
              "(float plan: %.3f)\n", q_diff, q_acc, f_acc);
  return diff_prod < 1e-5f && diff_reload == 0 && acc > 0.5f && report.ok && q_acc >= f_acc - 0.1f ? 0 : 1;
}
