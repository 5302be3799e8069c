// The README's model example, kept here so CTest builds and runs it.
#include <frost/frost.hpp>
#include <cstdio>
using namespace frost;
using T = Tensor<float>;

struct Net : nn::Module {              // members registered once, by PyTorch's names
  nn::Sequential features = register_module("features", nn::Sequential(
      nn::Conv2d(3, 16, 3, {.padding = 1}), nn::BatchNorm2d(16), nn::ReLU(), nn::MaxPool2d(2)));
  nn::Linear head = register_module("head", nn::Linear(16 * 16 * 16, 10));
  float threshold = 0.1f;

  T forward(T x) {
    x = features(x);
    if (x.mean() > threshold) x = x * 2.0f;   // your own control flow decides the graph
    return head(x.flatten(1));
  }
};

int main() {
  manual_seed(0);
  auto model = nn::make<Net>();        // a shared handle: model(x), model->parameters()
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  auto x = T::randn({8, 3, 32, 32});
  auto y = IndexTensor::randint(0, 10, {8});
  opt.zero_grad();
  auto loss = nn::functional::cross_entropy(model(x), y);
  loss.backward();
  opt.step();
  save_safetensors(*model, "net.safetensors");   // features.0.weight, features.1.running_mean, ...
  load_safetensors(*model, "net.safetensors");   // strict: missing/unexpected/mis-shaped keys are listed
  std::remove("net.safetensors");
  auto plan = jit::freeze(model, x);             // eval-mode trace: batch norm folded, dropout gone
  return plan.check(model, x).ok ? 0 : 1;        // frozen equals eager
}
