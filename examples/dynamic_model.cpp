// The guide's DynamicModel: layers appended at run time. The next forward
// runs them, the optimizer is rebuilt over the new parameters, and the
// state dict names them like PyTorch (layers.0.weight, layers.1.weight, ...).
#include <frost/frost.hpp>
#include <iostream>

using namespace frost;
using T = Tensor<float>;

struct DynamicModel : nn::Module {
  nn::ModuleList layers = register_module("layers", nn::ModuleList(nn::Linear(10, 10)));

  void add_layer() { layers->push_back(nn::Linear(10, 10)); }

  T forward(T x) {
    for (const auto& layer : *layers) x = layer(x).relu();
    return x;
  }
};

int main() {
  manual_seed(0);
  auto model = nn::make<DynamicModel>();
  const auto x = T::randn({32, 10}), target = T::randn({32, 10}).relu();
  for (int depth = 1; depth <= 3; ++depth) {
    optim::Adam opt(model->parameters(), {.lr = 1e-2});
    float loss_value = 0;
    for (int step = 0; step < 50; ++step) {
      opt.zero_grad();
      auto loss = nn::functional::mse_loss(model(x), target);
      loss.backward();
      opt.step();
      loss_value = loss.item();
    }
    std::cout << "depth " << depth << ": " << model->parameters().size() << " parameters, loss " << loss_value
              << "\n";
    if (depth < 3) model->add_layer();  // the graph follows on the next call
  }
  for (const auto& name : model->state_dict().keys()) std::cout << "  " << name << "\n";
  // Frozen at its current depth: the plan holds the three layers the loop ran.
  auto plan = jit::freeze(model, x);
  const auto report = plan.check(model, x);
  std::cout << report.str() << "\n";
  return model->state_dict().size() == 6 && report.ok ? 0 : 1;
}
