// Stochastic gradient descent with momentum, dampening, Nesterov momentum and
// weight decay: PyTorch's torch.optim.SGD update, step for step.
#pragma once
#include <optional>

#include "optimizer.hpp"

namespace frost::optim {

/// Hyperparameters of SGD (PyTorch's names and defaults).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

inline void check_options(const SGDOptions& o, const char* name, std::optional<std::size_t> group) {
  const auto at = detail::where(group);
  FROST_CHECK(o.lr >= 0, "frost::optim::", name, ": Invalid learning rate: ", o.lr, at);
  FROST_CHECK(o.momentum >= 0, "frost::optim::", name, ": Invalid momentum value: ", o.momentum, at);
  FROST_CHECK(o.weight_decay >= 0, "frost::optim::", name, ": Invalid weight_decay value: ", o.weight_decay, at);
  FROST_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "frost::optim::", name,
              ": Nesterov momentum requires a momentum and zero dampening (got momentum ", o.momentum, ", dampening ",
              o.dampening, ")", at);
}

/// SGD over parameters of element type T.
/// \code
/// optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
/// opt.zero_grad(); loss.backward(); opt.step();
/// \endcode
/// The momentum buffer starts as the first gradient (not zero), as in PyTorch.
template <FloatScalar T = float>
class SGDT : public OptimizerBase<T, SGDOptions> {
  using Base = OptimizerBase<T, SGDOptions>;

 public:
  using Options = SGDOptions;
  explicit SGDT(std::vector<Tensor<T>> params, const Options& defaults = {})
      : Base("SGD", Base::one_group(std::move(params)), defaults) {}
  explicit SGDT(std::vector<typename Base::GroupInit> groups, const Options& defaults = {})
      : Base("SGD", std::move(groups), defaults) {}

  void step() override {
    this->for_each_param_with_grad([](const Options& o, Tensor<T>& param, const T* g, ParamState<T>& st) {
      OptimStep<T> s;
      s.kind = OptimKind::sgd;
      s.lr = T(o.lr);
      s.weight_decay = T(o.weight_decay);
      s.sign = o.maximize ? T(-1) : T(1);
      s.momentum = T(o.momentum);
      s.damp = T(1 - o.dampening);
      s.nesterov = o.nesterov;
      const bool use_mom = o.momentum != 0;
      s.first = use_mom && !st.momentum_buffer.defined();
      T* buf = use_mom ? detail::ensure_zeros(st.momentum_buffer, param) : nullptr;
      backend_for<T>(param.device()).optimizer_step(s, param.data(), g, buf, nullptr, nullptr, param.numel());
    });
  }
};

using SGD = SGDT<float>;

}  // namespace frost::optim
