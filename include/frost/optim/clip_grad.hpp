// Gradient clipping: by total norm (torch.nn.utils.clip_grad_norm_) and by
// value (clip_grad_value_).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
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
  // The norm of the per-tensor norms, as PyTorch computes it, in tensor ops
  // on the gradients' device: no value comes back to the host (one sync per
  // parameter on a GPU, when the host combined them), unless
  // error_if_nonfinite asks for the check. Gradients on several devices (a
  // model split across GPUs) have their norms gathered on the first one's.
  std::vector<Tensor<T>> norms;
  for (const auto& g : grads) {
    if (g.numel() == 0) continue;
    Tensor<T> n = std::isinf(norm_type) ? g.abs().max() : g.norm(norm_type);
    norms.push_back(norms.empty() || n.device() == norms[0].device() ? n : n.to(norms[0].device()));
  }
  if (norms.empty()) return Tensor<T>::scalar(T(0));
  const Tensor<T> stacked = stack(norms);
  const Tensor<T> total = std::isinf(norm_type) ? stacked.max() : stacked.norm(norm_type);
  if (error_if_nonfinite) {
    const T t = total.item();
    FROST_CHECK(std::isfinite(t), "frost::nn::utils::clip_grad_norm_: The total norm of order ", norm_type,
                " for gradients from `parameters` is non-finite (", t,
                "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                "anyway, set `error_if_nonfinite=false`");
  }
  // min(max_norm / (total + 1e-6), 1): a non-finite total scales by NaN or 0, as in PyTorch.
  const Tensor<T> coef = (static_cast<T>(max_norm) / (total + T(1e-6))).clamp(std::numeric_limits<T>::lowest(), T(1));
  // On the host the factor costs nothing to read: a norm within bounds leaves the gradients untouched.
  if (total.device().is_cpu() && coef.item() == T(1)) return total;
  std::vector<Tensor<T>> coefs{coef};  // the factor on each device the gradients are on
  auto coef_on = [&](Device d) {
    for (const auto& c : coefs)
      if (c.device() == d) return c;
    return coefs.emplace_back(coef.to(d));
  };
  for (const auto& p : parameters) {
    Tensor<T> g = p.grad();
    if (!g.defined()) continue;
    const Tensor<T> c = coef_on(g.device());
    // A gradient that aliases other memory (an expanded view of the upstream
    // gradient) is replaced rather than scaled in place.
    if (g.impl()->is_view || !g.is_contiguous()) {
      Tensor<T> owner = p;
      owner.set_grad(g * c);
    } else {
      g.mul_(c);
    }
  }
  return total;
}

/// clip_grad_norm_ for one parameter.
template <FloatScalar T>
Tensor<T> clip_grad_norm_(const Tensor<T>& parameter, double max_norm, double norm_type = 2.0,
                          bool error_if_nonfinite = false) {
  return clip_grad_norm_(std::vector<Tensor<T>>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

/// Clamps every gradient of `parameters` to [-clip_value, clip_value] in
/// place. Parameters without a gradient are skipped.
template <FloatScalar T>
void clip_grad_value_(const std::vector<Tensor<T>>& parameters, double clip_value) {
  FROST_CHECK(clip_value >= 0, "frost::nn::utils::clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  NoGradGuard ng;
  const T c = static_cast<T>(clip_value);
  for (const auto& p : parameters) {
    frost::detail::check_defined(p, "nn::utils::clip_grad_value_");
    Tensor<T> g = p.grad();
    if (!g.defined()) continue;
    // As in clip_grad_norm_: a gradient aliasing other memory is replaced.
    if (g.impl()->is_view || !g.is_contiguous()) {
      Tensor<T> owner = p;
      owner.set_grad(g.clamp(-c, c));
    } else {
      g.copy_(g.clamp(-c, c));
    }
  }
}

/// clip_grad_value_ for one parameter.
template <FloatScalar T>
void clip_grad_value_(const Tensor<T>& parameter, double clip_value) {
  clip_grad_value_(std::vector<Tensor<T>>{parameter}, clip_value);
}

}  // namespace frost::nn::utils
