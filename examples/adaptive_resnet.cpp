// The guide's AdaptiveResNet: the depth of the network depends on the data.
// A C++ `if` on a tensor (explicit operator bool) picks the branch call by
// call; the tape records only the path taken, so backward follows it.
#include <frost/frost.hpp>
#include <iostream>

#include "research_model.hpp"

using namespace frost;
using T = Tensor<float>;

using guide::AdaptiveResNet;

int main() {
  manual_seed(0);
  auto model = nn::make<AdaptiveResNet>();
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int step = 0; step < 6; ++step) {
    // Bright and dark batches take different paths through the same model.
    const float shift = step % 2 == 0 ? 3.0f : 0.0f;
    const auto x = T::randn({8, 3, 16, 16}) * 0.1f + shift;
    const auto y = IndexTensor::randint(0, 10, {8});
    opt.zero_grad();
    auto loss = nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    // Only the branch taken received gradients this step.
    const bool deep = model->block2[0].as<guide::ResidualBlock>()->conv1->weight.grad().defined();
    const bool shallow = model->block1[0].as<guide::ResidualBlock>()->conv1->weight.grad().defined();
    std::cout << "step " << step << ": loss " << loss.item() << ", path " << (deep ? "deep (block2)" : "shallow (block1)")
              << "\n";
    if (deep == shallow) return 1;
  }
  model->eval();
  {
    InferenceMode guard;  // no tape, no version counters
    std::cout << "eval output " << model(T::randn({2, 3, 16, 16})).shape().str() << "\n";
  }
  return model->deep_calls > 0 && model->deep_calls < 6 ? 0 : 1;
}
