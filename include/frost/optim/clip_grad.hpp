// Gradient clipping by total norm: torch.nn.utils.clip_grad_norm_.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "../tensor.hpp"

namespace frost::nn::utils {

/// Scales the gradients of `parameters` in place so that their joint
/// `norm_type`-norm (the norm of the per-tensor norms; inf for the largest
/// magnitude) is at most `max_norm`, and returns that norm before clipping.
/// Parameters without a gradient are skipped.
/// \code
/// loss.backward();
/// nn::utils::clip_grad_norm_(model->parameters(), 1.0);
/// opt.step();
/// \endcode
template <FloatScalar T>
Tensor<T> clip_grad_norm_(const std::vector<Tensor<T>>& parameters, double max_norm, double norm_type = 2.0,
                          bool error_if_nonfinite = false) {
  FROST_CHECK(norm_type > 0,
              "frost::nn::utils::clip_grad_norm_: norm_type must be positive or inf, got ", norm_type);
  NoGradGuard ng;
  std::vector<Tensor<T>> grads;
  for (const auto& p : parameters) {
    frost::detail::check_defined(p, "nn::utils::clip_grad_norm_");
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return Tensor<T>::scalar(T(0));
  const bool inf = std::isinf(norm_type);
  // Each tensor's norm comes from the norm op (the backend's reduction);
  // combining the handful of per-tensor norms is host arithmetic in double.
  double total = 0;
  for (const auto& g : grads) {
    if (g.numel() == 0) continue;
    const double n = static_cast<double>(inf ? g.abs().max().item() : g.norm(norm_type).item());
    total = inf ? std::max(total, n) : total + std::pow(n, norm_type);
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const T total_t = static_cast<T>(total);
  FROST_CHECK(!error_if_nonfinite || std::isfinite(total_t), "frost::nn::utils::clip_grad_norm_: The total norm of order ",
              norm_type, " for gradients from `parameters` is non-finite (", total_t,
              "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
              "anyway, set `error_if_nonfinite=false`");
  const T coef = static_cast<T>(max_norm / (static_cast<double>(total_t) + 1e-6));
  if (coef < T(1)) {
    for (const auto& p : parameters) {
      Tensor<T> g = p.grad();
      if (!g.defined()) continue;
      // A gradient that aliases other memory (an expanded view of the upstream
      // gradient) is replaced rather than scaled in place.
      if (g.impl()->is_view || !g.is_contiguous()) {
        Tensor<T> owner = p;
        owner.set_grad(g * coef);
      } else {
        g.mul_(coef);
      }
    }
  }
  return Tensor<T>::scalar(total_t);
}

/// clip_grad_norm_ for one parameter.
template <FloatScalar T>
Tensor<T> clip_grad_norm_(const Tensor<T>& parameter, double max_norm, double norm_type = 2.0,
                          bool error_if_nonfinite = false) {
  return clip_grad_norm_(std::vector<Tensor<T>>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

}  // namespace frost::nn::utils
