// RMSprop (Hinton's running average of squared gradients), optionally
// centered and with momentum: PyTorch's torch.optim.RMSprop update.
#pragma once
#include <cmath>
#include <optional>

#include "optimizer.hpp"

namespace frost::optim {

/// Hyperparameters of RMSprop (PyTorch's names and defaults).
struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  ///< smoothing constant of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;  ///< normalise by the estimated variance instead of the second moment
  bool maximize = false;
};

inline void check_options(const RMSpropOptions& o, const char* name, std::optional<std::size_t> group) {
  const auto at = detail::where(group);
  FROST_CHECK(o.lr >= 0, "frost::optim::", name, ": Invalid learning rate: ", o.lr, at);
  FROST_CHECK(o.eps >= 0, "frost::optim::", name, ": Invalid epsilon value: ", o.eps, at);
  FROST_CHECK(o.momentum >= 0, "frost::optim::", name, ": Invalid momentum value: ", o.momentum, at);
  FROST_CHECK(o.weight_decay >= 0, "frost::optim::", name, ": Invalid weight_decay value: ", o.weight_decay, at);
  FROST_CHECK(o.alpha >= 0, "frost::optim::", name, ": Invalid alpha value: ", o.alpha, at);
}

/// RMSprop over parameters of element type T.
/// \code
/// optim::RMSprop opt(model->parameters(), {.lr = 1e-3, .momentum = 0.9, .centered = true});
/// \endcode
template <FloatScalar T = float>
class RMSpropT : public OptimizerBase<T, RMSpropOptions> {
  using Base = OptimizerBase<T, RMSpropOptions>;

 public:
  using Options = RMSpropOptions;
  explicit RMSpropT(std::vector<Tensor<T>> params, const Options& defaults = {})
      : Base("RMSprop", Base::one_group(std::move(params)), defaults) {}
  explicit RMSpropT(std::vector<typename Base::GroupInit> groups, const Options& defaults = {})
      : Base("RMSprop", std::move(groups), defaults) {}

  void step() override {
    this->for_each_param_with_grad([](const Options& o, Tensor<T>& param, const T* g, ParamState<T>& st) {
      T* sq = detail::ensure_zeros(st.square_avg, param);
      T* ga = o.centered ? detail::ensure_zeros(st.grad_avg, param) : nullptr;
      T* buf = o.momentum > 0 ? detail::ensure_zeros(st.momentum_buffer, param) : nullptr;
      ++st.step;
      OptimStep<T> s;
      s.kind = OptimKind::rmsprop;
      s.alpha = T(o.alpha);
      s.one_alpha = T(1 - o.alpha);
      s.eps = T(o.eps);
      s.weight_decay = T(o.weight_decay);
      s.momentum = T(o.momentum);
      s.lr = T(o.lr);
      s.sign = o.maximize ? T(-1) : T(1);
      backend_for<T>(param.device()).optimizer_step(s, param.data(), g, sq, ga, buf, param.numel());
    });
  }
};

using RMSprop = RMSpropT<float>;

}  // namespace frost::optim
