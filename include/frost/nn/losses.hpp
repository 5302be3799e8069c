// Loss functions (frost::nn::functional), written with ops so their
// gradients and second derivatives come from the ops' rules. Names,
// arguments and reductions follow torch.nn.functional.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "../tensor.hpp"

namespace frost::nn::functional {

/// How a per-element loss is reduced: PyTorch's reduction argument.
enum class Reduction { none, mean, sum };

namespace detail {
template <class T>
Tensor<T> reduce(const Tensor<T>& loss, Reduction r) {
  switch (r) {
    case Reduction::none: return loss;
    case Reduction::sum: return loss.sum();
    case Reduction::mean: return loss.mean();
  }
  return loss;
}

template <class T>
void check_same_shape(const Tensor<T>& a, const Tensor<T>& b, const char* op) {
  frost::detail::check_same_device(a, b, op);
  FROST_CHECK(a.shape() == b.shape(), "frost::nn::functional::", op, ": input of shape ", a.shape().str(),
              " and target of shape ", b.shape().str(), " must have the same shape");
}

/// Class indices as the losses read them, made where they lie (no read
/// back, no sync on a device): ignored entries replaced by class 0 (so they
/// can index), plus a 0/1 mask of the counted ones. The range check is the
/// one of the gather that reads them (nll_loss). Index tensors have no
/// arithmetic, so the mask is computed in double, exact for every index
/// up to 2^53: one beyond is out of range for any real C, and still fails
/// the gather after rounding; ignore_index is held to that range.
template <class T>
std::pair<IndexTensor, Tensor<T>> class_targets(const IndexTensor& target, std::int64_t ignore_index) {
  constexpr std::int64_t exact = std::int64_t(1) << 53;
  // Strict: a target 2^53 + 1 rounds to 2^53 and would pass for an ignore_index of 2^53.
  FROST_CHECK(ignore_index > -exact && ignore_index < exact, "frost::nn::functional: ignore_index ", ignore_index,
              " is 2^53 or more in magnitude (expected a class index or a small negative sentinel such as -100)");
  const Tensor<double> t = target.to<double>();
  const Tensor<double> counted = frost::detail::unary_raw(UnaryOp::ne_scalar, t, double(ignore_index));
  return {frost::detail::binary_raw(BinaryOp::mul, t, counted).to<std::int64_t>(), counted.to<T>()};
}
}  // namespace detail

/// mean((input - target)^2) (or the sum / each element).
template <FloatScalar T>
Tensor<T> mse_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape(input, target, "mse_loss");
  auto d = input - target;
  return detail::reduce(d * d, r);
}

/// mean(|input - target|).
template <FloatScalar T>
Tensor<T> l1_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape(input, target, "l1_loss");
  return detail::reduce((input - target).abs(), r);
}

/// Huber-style loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere.
template <FloatScalar T>
Tensor<T> smooth_l1_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean,
                         double beta = 1.0) {
  detail::check_same_shape(input, target, "smooth_l1_loss");
  FROST_CHECK(beta >= 0, "frost::nn::functional::smooth_l1_loss: beta must be non-negative, got ", beta);
  auto a = (input - target).abs();
  if (beta == 0) return detail::reduce(a, r);
  auto quadratic = a * a * T(0.5 / beta), linear = a - T(0.5 * beta);
  return detail::reduce(where(a < T(beta), quadratic, linear), r);
}

/// Options of nll_loss / cross_entropy, as in PyTorch.
template <class T>
struct ClassLossOptions {
  Tensor<T> weight;                  ///< per-class weight [C] (undefined: all 1)
  std::int64_t ignore_index = -100;  ///< targets equal to this contribute nothing
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0.0;      ///< cross_entropy only
};

/// Negative log-likelihood of class indices: input is log-probabilities [N, C]
/// (or [C]), target class indices [N] (or []). Mean is weighted by the
/// targets' class weights, as in PyTorch.
template <FloatScalar T>
Tensor<T> nll_loss(const Tensor<T>& input, const IndexTensor& target, const ClassLossOptions<T>& o = {}) {
  frost::detail::check_same_device(input, target, "nll_loss");
  if (o.weight.defined()) frost::detail::check_same_device(input, o.weight, "nll_loss (weight)");
  FROST_CHECK(input.dim() == 2 || input.dim() == 1, "frost::nn::functional::nll_loss: input must be [N, C] or [C], got ",
              input.shape().str());
  const Tensor<T> x = input.dim() == 1 ? input.unsqueeze(0) : input;
  const IndexTensor t = input.dim() == 1 ? target.reshape({1}) : target;
  FROST_CHECK(t.dim() == 1 && t.size(0) == x.size(0), "frost::nn::functional::nll_loss: target of shape ",
              target.shape().str(), " does not match input of shape ", input.shape().str(), " (expected [N])");
  const std::int64_t c = x.size(1);
  if (o.weight.defined())
    FROST_CHECK(o.weight.shape() == Shape{c}, "frost::nn::functional::nll_loss: weight of shape ",
                o.weight.shape().str(), " does not match ", c, " classes");
  auto [idx, keep] = detail::class_targets<T>(t, o.ignore_index);
  Tensor<T> logp;
  try {  // the gather checks every target, where it lies
    logp = x.gather(1, idx.unsqueeze(1)).squeeze(1);
  } catch (const IndexError& e) {
    frost::detail::fail_as<IndexError>("frost::nn::functional::nll_loss: a target is out of bounds for ", c,
                        " classes (expected 0 <= target < ", c, " or ignore_index ", o.ignore_index, "): ", e.what());
  }
  const auto w = o.weight.defined() ? o.weight.index_select(0, idx) * keep : keep;
  auto picked = -logp * w;
  switch (o.reduction) {
    case Reduction::none: return input.dim() == 1 ? picked.squeeze(0) : picked;
    case Reduction::sum: return picked.sum();
    case Reduction::mean: return picked.sum() / w.sum();
  }
  return picked;
}

/// Cross-entropy of logits [N, C] against class indices [N]: log_softmax +
/// nll_loss, with PyTorch's label smoothing.
template <FloatScalar T>
Tensor<T> cross_entropy(const Tensor<T>& input, const IndexTensor& target, const ClassLossOptions<T>& o = {}) {
  FROST_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
              "frost::nn::functional::cross_entropy: label_smoothing must be in [0, 1], got ", o.label_smoothing);
  if (o.weight.defined()) frost::detail::check_same_device(input, o.weight, "cross_entropy (weight)");
  FROST_CHECK(input.dim() == 2 || input.dim() == 1,
              "frost::nn::functional::cross_entropy: input must be [N, C] or [C], got ", input.shape().str());
  const int cdim = input.dim() - 1;
  auto logp = input.log_softmax(cdim);
  auto nll = nll_loss(logp, target, o);
  if (o.label_smoothing == 0) return nll;
  // The smoothing term: -sum_c w_c log p_c per sample, ignored samples zeroed.
  const Tensor<T> lp = input.dim() == 1 ? logp.unsqueeze(0) : logp;
  const IndexTensor t = input.dim() == 1 ? target.reshape({1}) : target;
  const std::int64_t c = lp.size(1);
  auto [idx, keep] = detail::class_targets<T>(t, o.ignore_index);  // checked by nll_loss
  auto smooth = -(o.weight.defined() ? lp * o.weight : lp).sum({1}) * keep;
  Tensor<T> s;
  switch (o.reduction) {
    case Reduction::none: s = input.dim() == 1 ? smooth.squeeze(0) : smooth; break;
    case Reduction::sum: s = smooth.sum(); break;
    case Reduction::mean:
      s = smooth.sum() / (o.weight.defined() ? (o.weight.index_select(0, idx) * keep).sum() : keep.sum());
      break;
  }
  const T eps = T(o.label_smoothing);
  return nll * (T(1) - eps) + s * (eps / T(c));
}

/// Cross-entropy against class probabilities [N, C] (soft targets).
template <FloatScalar T>
Tensor<T> cross_entropy(const Tensor<T>& input, const Tensor<T>& target_probs, const ClassLossOptions<T>& o = {}) {
  detail::check_same_shape(input, target_probs, "cross_entropy");
  if (o.weight.defined()) frost::detail::check_same_device(input, o.weight, "cross_entropy (weight)");
  FROST_CHECK(input.dim() == 2, "frost::nn::functional::cross_entropy: input must be [N, C], got ", input.shape().str());
  const std::int64_t c = input.size(1);
  auto p = o.label_smoothing > 0 ? target_probs * T(1 - o.label_smoothing) + T(o.label_smoothing / double(c))
                                 : target_probs;
  auto lp = input.log_softmax(1);
  auto loss = -(o.weight.defined() ? p * lp * o.weight : p * lp).sum({1});
  return detail::reduce(loss, o.reduction);
}

/// Binary cross-entropy of probabilities; logs are clamped at -100 like PyTorch.
template <FloatScalar T>
Tensor<T> binary_cross_entropy(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean,
                               const Tensor<T>& weight = {}) {
  detail::check_same_shape(input, target, "binary_cross_entropy");
  if (weight.defined()) frost::detail::check_same_device(input, weight, "binary_cross_entropy (weight)");
  auto lo = Tensor<T>::full({}, T(-100), input.device());
  auto l = -(target * maximum(input.log(), lo) + (T(1) - target) * maximum((T(1) - input).log(), lo));
  return detail::reduce(weight.defined() ? l * weight : l, r);
}

/// Binary cross-entropy on logits, computed stably:
/// (1 - y) x + (1 + (pw - 1) y) (log(1 + e^-|x|) + max(-x, 0)).
template <FloatScalar T>
Tensor<T> binary_cross_entropy_with_logits(const Tensor<T>& input, const Tensor<T>& target,
                                           Reduction r = Reduction::mean, const Tensor<T>& weight = {},
                                           const Tensor<T>& pos_weight = {}) {
  detail::check_same_shape(input, target, "binary_cross_entropy_with_logits");
  if (weight.defined()) frost::detail::check_same_device(input, weight, "binary_cross_entropy_with_logits (weight)");
  if (pos_weight.defined())
    frost::detail::check_same_device(input, pos_weight, "binary_cross_entropy_with_logits (pos_weight)");
  auto softplus_neg = (T(1) + (-input.abs()).exp()).log() + (-input).relu();  // log(1 + e^-x)
  auto l = pos_weight.defined() ? (T(1) - target) * input + (T(1) + (pos_weight - T(1)) * target) * softplus_neg
                                : (T(1) - target) * input + softplus_neg;
  return detail::reduce(weight.defined() ? l * weight : l, r);
}

}  // namespace frost::nn::functional
