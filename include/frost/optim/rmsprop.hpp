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
      T* p = param.data();
      T* sq = detail::ensure_zeros(st.square_avg, param);
      T* ga = o.centered ? detail::ensure_zeros(st.grad_avg, param) : nullptr;
      T* buf = o.momentum > 0 ? detail::ensure_zeros(st.momentum_buffer, param) : nullptr;
      ++st.step;
      const T alpha = T(o.alpha), one_alpha = T(1 - o.alpha), eps = T(o.eps), wd = T(o.weight_decay);
      const T mom = T(o.momentum), lr = T(o.lr), sign = o.maximize ? T(-1) : T(1);
      cpu::parallel_for(param.numel(), cpu::kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          T gi = sign * g[i];
          if (wd != 0) gi = gi + wd * p[i];
          sq[i] = sq[i] * alpha + one_alpha * gi * gi;
          T avg;
          if (ga) {
            ga[i] = ga[i] * alpha + one_alpha * gi;
            avg = std::sqrt(sq[i] + T(-1) * ga[i] * ga[i]);
          } else {
            avg = std::sqrt(sq[i]);
          }
          avg = avg + eps;
          if (buf) {
            buf[i] = buf[i] * mom + gi / avg;
            p[i] = p[i] + -lr * buf[i];
          } else {
            p[i] = p[i] + -lr * gi / avg;
          }
        }
      });
    });
  }
};

using RMSprop = RMSpropT<float>;

}  // namespace frost::optim
