// The guide's AdaptiveResNet: the depth of the network depends on the data.
// A C++ `if` on a tensor (explicit operator bool) picks the branch call by
// call; the tape records only the path taken, so backward follows it.
#include <frost/frost.hpp>
#include <iostream>

using namespace frost;
using T = Tensor<float>;

/// conv-bn-relu-conv-bn plus the identity.
struct ResidualBlock : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  explicit ResidualBlock(std::int64_t c)
      : conv1(register_module("conv1", nn::Conv2d(c, c, 3, {.padding = 1, .bias = false}))),
        conv2(register_module("conv2", nn::Conv2d(c, c, 3, {.padding = 1, .bias = false}))),
        bn1(register_module("bn1", nn::BatchNorm2d(c))),
        bn2(register_module("bn2", nn::BatchNorm2d(c))) {}
  T forward(const T& x) { return (bn2(conv2(bn1(conv1(x)).relu())) + x).relu(); }
};

struct AdaptiveResNet : nn::Module {
  nn::Conv2d conv1 = register_module("conv1", nn::Conv2d(3, 16, 3, {.padding = 1}));
  nn::Sequential block1 = register_module("block1", nn::Sequential(nn::make<ResidualBlock>(16)));
  nn::Sequential block2 =
      register_module("block2", nn::Sequential(nn::make<ResidualBlock>(16), nn::make<ResidualBlock>(16)));
  nn::Linear fc = register_module("fc", nn::Linear(16, 10));
  float threshold = 0.1f;
  int deep_calls = 0;

  T forward(T x) {
    x = conv1(x).relu();
    if (x.mean() > threshold) {  // easy input: one block
      x = block1(x);
    } else {  // hard input: two blocks
      x = block2(x);
      ++deep_calls;
    }
    return fc(adaptive_avg_pool2d(x, 1).flatten(1));
  }
};

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
    const bool deep = model->block2[0].as<ResidualBlock>()->conv1->weight.grad().defined();
    const bool shallow = model->block1[0].as<ResidualBlock>()->conv1->weight.grad().defined();
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
