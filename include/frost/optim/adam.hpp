// Adam and AdamW (decoupled weight decay): PyTorch's torch.optim.Adam and
// torch.optim.AdamW updates, including amsgrad and maximize.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "optimizer.hpp"

namespace frost::optim {

/// Hyperparameters of Adam (PyTorch's names and defaults).
struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  ///< L2 penalty added to the gradient
  bool amsgrad = false;
  bool maximize = false;
};

/// Hyperparameters of AdamW: Adam's, with decoupled weight decay (default 1e-2).
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  ///< parameters shrink by lr * weight_decay each step
  bool amsgrad = false;
  bool maximize = false;
};

namespace detail {
template <class O>
void check_adam_options(const O& o, const char* name, std::optional<std::size_t> group) {
  const auto at = where(group);
  FROST_CHECK(o.lr >= 0, "frost::optim::", name, ": Invalid learning rate: ", o.lr, at);
  FROST_CHECK(o.eps >= 0, "frost::optim::", name, ": Invalid epsilon value: ", o.eps, at);
  FROST_CHECK(o.betas[0] >= 0 && o.betas[0] < 1, "frost::optim::", name, ": Invalid beta parameter at index 0: ",
              o.betas[0], " (expected 0 <= beta < 1)", at);
  FROST_CHECK(o.betas[1] >= 0 && o.betas[1] < 1, "frost::optim::", name, ": Invalid beta parameter at index 1: ",
              o.betas[1], " (expected 0 <= beta < 1)", at);
  FROST_CHECK(o.weight_decay >= 0, "frost::optim::", name, ": Invalid weight_decay value: ", o.weight_decay, at);
}

/// One Adam step on one parameter, fused into one pass over its memory.
/// `decoupled` selects AdamW's decay (p *= 1 - lr wd) over Adam's L2 term.
template <class T, class O>
void adam_update(const O& o, bool decoupled, Tensor<T>& param, const T* g, ParamState<T>& st) {
  T* m = ensure_zeros(st.exp_avg, param);
  T* v = ensure_zeros(st.exp_avg_sq, param);
  T* vmax = o.amsgrad ? ensure_zeros(st.max_exp_avg_sq, param) : nullptr;
  const double step = static_cast<double>(++st.step);
  const double bc1 = 1 - std::pow(o.betas[0], step), bc2 = 1 - std::pow(o.betas[1], step);
  OptimStep<T> s;
  s.kind = OptimKind::adam;
  s.beta1 = T(o.betas[0]);
  s.beta2 = T(o.betas[1]);
  s.one_beta1 = T(1 - o.betas[0]);
  s.one_beta2 = T(1 - o.betas[1]);
  s.step_size = T(o.lr / bc1);
  s.bc2_sqrt = T(std::sqrt(bc2));
  s.eps = T(o.eps);
  s.weight_decay = decoupled ? T(0) : T(o.weight_decay);
  s.shrink = decoupled ? T(1 - o.lr * o.weight_decay) : T(1);
  s.sign = o.maximize ? T(-1) : T(1);
  backend_for<T>(param.device()).optimizer_step(s, param.data(), g, m, v, vmax, param.numel());
}
}  // namespace detail

inline void check_options(const AdamOptions& o, const char* name, std::optional<std::size_t> group) {
  detail::check_adam_options(o, name, group);
}
inline void check_options(const AdamWOptions& o, const char* name, std::optional<std::size_t> group) {
  detail::check_adam_options(o, name, group);
}

/// Adam over parameters of element type T.
/// \code
/// optim::Adam opt(model->parameters(), {.lr = 3e-4, .betas = {0.9, 0.99}});
/// \endcode
template <FloatScalar T = float>
class AdamT : public OptimizerBase<T, AdamOptions> {
  using Base = OptimizerBase<T, AdamOptions>;

 public:
  using Options = AdamOptions;
  explicit AdamT(std::vector<Tensor<T>> params, const Options& defaults = {})
      : Base("Adam", Base::one_group(std::move(params)), defaults) {}
  explicit AdamT(std::vector<typename Base::GroupInit> groups, const Options& defaults = {})
      : Base("Adam", std::move(groups), defaults) {}

  void step() override {
    this->for_each_param_with_grad([](const Options& o, Tensor<T>& p, const T* g, ParamState<T>& st) {
      detail::adam_update(o, false, p, g, st);
    });
  }
};

/// AdamW (Loshchilov & Hutter): weight decay applied to the parameters, not
/// added to the gradient.
/// \code
/// optim::AdamW opt(model->parameters(), {.lr = 1e-3, .weight_decay = 0.05});
/// \endcode
template <FloatScalar T = float>
class AdamWT : public OptimizerBase<T, AdamWOptions> {
  using Base = OptimizerBase<T, AdamWOptions>;

 public:
  using Options = AdamWOptions;
  explicit AdamWT(std::vector<Tensor<T>> params, const Options& defaults = {})
      : Base("AdamW", Base::one_group(std::move(params)), defaults) {}
  explicit AdamWT(std::vector<typename Base::GroupInit> groups, const Options& defaults = {})
      : Base("AdamW", std::move(groups), defaults) {}

  void step() override {
    this->for_each_param_with_grad([](const Options& o, Tensor<T>& p, const T* g, ParamState<T>& st) {
      detail::adam_update(o, true, p, g, st);
    });
  }
};

using Adam = AdamT<float>;
using AdamW = AdamWT<float>;

}  // namespace frost::optim
