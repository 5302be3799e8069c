// The guide's init_weights: model->apply visits every module; the function
// switches on the layer type and initialises from frost's generator, so one
// seed reproduces the model.
#include <frost/frost.hpp>
#include <iostream>

using namespace frost;

void init_weights(nn::Module& m) {
  if (auto* conv = m.as<nn::Conv2d>()) {
    nn::init::kaiming_normal_(conv->weight, {.mode = nn::init::fan_out, .nonlinearity = "relu"});
    if (conv->bias.defined()) nn::init::constant_(conv->bias, 0);
  } else if (auto* bn = m.as<nn::BatchNorm2d>()) {
    nn::init::constant_(bn->weight, 1);
    nn::init::constant_(bn->bias, 0);
  } else if (auto* lin = m.as<nn::Linear>()) {
    nn::init::normal_(lin->weight, 0, 0.01);
    nn::init::constant_(lin->bias, 0);
  }
}

nn::Sequential make_model() {
  return nn::Sequential(nn::Conv2d(3, 16, 3, {.padding = 1}), nn::BatchNorm2d(16), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(16, 32, 3, {.padding = 1}), nn::BatchNorm2d(32), nn::ReLU(),
                        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(32, 10));
}

int main() {
  manual_seed(42);
  auto model = make_model();
  model->apply(init_weights);
  std::cout << model << "\n";

  // Kaiming normal, fan_out, relu: std = sqrt(2 / (out_channels * 3 * 3)).
  const auto w = model[4].as<nn::Conv2d>()->weight;
  std::cout << "4.weight std " << w.std().item() << " (expected " << std::sqrt(2.0 / (32 * 9)) << ")\n";

  // The same seed gives the same model.
  manual_seed(42);
  auto again = make_model();
  again->apply(init_weights);
  const bool same = (model->state_dict().at("4.weight") - again->state_dict().at("4.weight")).abs().max().item() == 0;
  std::cout << "reproducible from the seed: " << (same ? "yes" : "no") << "\n";

  const auto y = model(Tensor<float>::randn({2, 3, 16, 16}));
  std::cout << "output " << y.shape().str() << "\n";
  return same && y.shape() == Shape{2, 10} ? 0 : 1;
}
