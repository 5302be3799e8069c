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

/// PyTorch's K-dimensional class losses: input [N, C, d1, ..., dk] is the
/// [N d1 ... dk, C] case with the classes moved last.
template <class T>
Tensor<T> classes_last(const Tensor<T>& input) {
  Shape perm{0};
  for (int d = 2; d < input.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return input.permute(perm).reshape({-1, input.size(1)});
}
/// Checks that class-index targets are [N, d1, ..., dk] for input [N, C, d1, ..., dk].
template <class T>
void check_kdim_target(const Tensor<T>& input, const IndexTensor& target, const char* op) {
  bool ok = target.dim() == input.dim() - 1 && target.size(0) == input.size(0);
  for (int d = 1; ok && d < target.dim(); ++d) ok = target.size(d) == input.size(d + 1);
  FROST_CHECK(ok, "frost::nn::functional::", op, ": target of shape ", target.shape().str(),
              " does not match input of shape ", input.shape().str(), " (expected [N, d1, ..., dk] for [N, C, d1, ..., dk])");
}
}  // namespace detail

/// mean((input - target)^2) (or the sum / each element).
template <FloatingScalar T>
Tensor<T> mse_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape(input, target, "mse_loss");
  auto d = input - target;
  return detail::reduce(d * d, r);
}

/// mean(|input - target|).
template <FloatingScalar T>
Tensor<T> l1_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape(input, target, "l1_loss");
  return detail::reduce((input - target).abs(), r);
}

/// Huber-style loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere.
template <FloatingScalar T>
Tensor<T> smooth_l1_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean,
                         double beta = 1.0) {
  detail::check_same_shape(input, target, "smooth_l1_loss");
  FROST_CHECK(beta >= 0, "frost::nn::functional::smooth_l1_loss: beta must be non-negative, got ", beta);
  auto d = input - target;
  auto a = d.abs();
  if (beta == 0) return detail::reduce(a, r);
  // the square of d, not of |d|: its second derivative at d = 0 is 1/beta (|d|'s slope there is 0)
  auto quadratic = d * d * T(0.5 / beta), linear = a - T(0.5 * beta);
  return detail::reduce(where(frost::detail::m01(a) < T(beta), quadratic, linear), r);
}

/// Huber loss: 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere
/// (smooth_l1_loss with beta = delta, times delta).
template <FloatingScalar T>
Tensor<T> huber_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean,
                     double delta = 1.0) {
  detail::check_same_shape(input, target, "huber_loss");
  FROST_CHECK(delta > 0, "frost::nn::functional::huber_loss: delta must be positive, got ", delta);
  auto d = input - target;
  auto a = d.abs();
  return detail::reduce(where(frost::detail::m01(a) < T(delta), d * d * T(0.5), (a - T(0.5 * delta)) * T(delta)), r);
}

/// kl_div's reductions: PyTorch's, with batchmean (the sum over the batch
/// size, the KL divergence per sample) beside the elementwise mean.
enum class KLDivReduction { none, batchmean, mean, sum };

/// The KL divergence of `target` from the distribution whose
/// log-probabilities are `input`, pointwise target (log target - input),
/// 0 where the target is 0 (PyTorch's xlogy); with log_target, `target`
/// holds log-probabilities too.
template <FloatingScalar T>
Tensor<T> kl_div(const Tensor<T>& input, const Tensor<T>& target, KLDivReduction r = KLDivReduction::mean,
                 bool log_target = false) {
  detail::check_same_shape(input, target, "kl_div");
  Tensor<T> l;
  if (log_target) {
    l = target.exp() * (target - input);
  } else {
    // log of 1 where the target is not positive: no -inf reaches a gradient.
    const auto safe = where(frost::detail::m01(target) > T(0), target, Tensor<T>::ones({}, target.device()));
    l = target * safe.log() - target * input;
  }
  switch (r) {
    case KLDivReduction::none: return l;
    case KLDivReduction::sum: return l.sum();
    case KLDivReduction::mean: return l.mean();
    case KLDivReduction::batchmean: return input.dim() == 0 ? l.sum() : l.sum() * (T(1) / T(input.size(0)));
  }
  return l;
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
/// (or [C], or [N, C, d1, ..., dk]), target class indices [N] (or [], or
/// [N, d1, ..., dk]). Mean is weighted by the targets' class weights, as in PyTorch.
template <FloatingScalar T>
Tensor<T> nll_loss(const Tensor<T>& input, const IndexTensor& target, const ClassLossOptions<T>& o = {}) {
  frost::detail::check_same_device(input, target, "nll_loss");
  if (o.weight.defined()) frost::detail::check_same_device(input, o.weight, "nll_loss (weight)");
  if (input.dim() > 2) {
    detail::check_kdim_target(input, target, "nll_loss");
    auto l = nll_loss(detail::classes_last(input), target.reshape({-1}), o);
    return o.reduction == Reduction::none ? l.reshape(target.shape()) : l;
  }
  FROST_CHECK(input.dim() == 2 || input.dim() == 1,
              "frost::nn::functional::nll_loss: input must be [N, C], [C] or [N, C, d1, ..., dk], got ", input.shape().str());
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

/// Cross-entropy of logits [N, C] against class indices [N] (or [C] and [],
/// or [N, C, d1, ..., dk] and [N, d1, ..., dk]): log_softmax + nll_loss, with
/// PyTorch's label smoothing.
template <FloatingScalar T>
Tensor<T> cross_entropy(const Tensor<T>& input, const IndexTensor& target, const ClassLossOptions<T>& o = {}) {
  FROST_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
              "frost::nn::functional::cross_entropy: label_smoothing must be in [0, 1], got ", o.label_smoothing);
  if (o.weight.defined()) frost::detail::check_same_device(input, o.weight, "cross_entropy (weight)");
  if (input.dim() > 2) {
    frost::detail::check_same_device(input, target, "cross_entropy");
    detail::check_kdim_target(input, target, "cross_entropy");
    auto l = cross_entropy(detail::classes_last(input), target.reshape({-1}), o);
    return o.reduction == Reduction::none ? l.reshape(target.shape()) : l;
  }
  FROST_CHECK(input.dim() == 2 || input.dim() == 1,
              "frost::nn::functional::cross_entropy: input must be [N, C], [C] or [N, C, d1, ..., dk], got ",
              input.shape().str());
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

/// Cross-entropy against class probabilities [N, C] (soft targets; or
/// [N, C, d1, ..., dk], both the same shape).
template <FloatingScalar T>
Tensor<T> cross_entropy(const Tensor<T>& input, const Tensor<T>& target_probs, const ClassLossOptions<T>& o = {}) {
  detail::check_same_shape(input, target_probs, "cross_entropy");
  if (o.weight.defined()) frost::detail::check_same_device(input, o.weight, "cross_entropy (weight)");
  if (input.dim() > 2) {
    auto l = cross_entropy(detail::classes_last(input), detail::classes_last(target_probs), o);
    if (o.reduction != Reduction::none) return l;
    Shape rows{input.size(0)};
    for (int d = 2; d < input.dim(); ++d) rows.push_back(input.size(d));
    return l.reshape(rows);
  }
  FROST_CHECK(input.dim() == 2, "frost::nn::functional::cross_entropy: input must be [N, C] or [N, C, d1, ..., dk], got ",
              input.shape().str());
  const std::int64_t c = input.size(1);
  auto p = o.label_smoothing > 0 ? target_probs * T(1 - o.label_smoothing) + T(o.label_smoothing / double(c))
                                 : target_probs;
  auto lp = input.log_softmax(1);
  auto loss = -(o.weight.defined() ? p * lp * o.weight : p * lp).sum({1});
  return detail::reduce(loss, o.reduction);
}

namespace detail {
/// max(log x, -100), the clamped log of binary_cross_entropy (no gradient of its own).
template <class T>
Tensor<T> clamped_log(const Tensor<T>& x) {
  return maximum(x.log(), Tensor<T>::full({}, T(-100), x.device()));
}

/// l = -(t max(log x, -100) + (1 - t) max(log(1 - x), -100)), with PyTorch's
/// rule dx = (x - t) / max(x (1 - x), 1e-12): finite where a probability is
/// exactly 0 or 1 (a saturated float sigmoid), where the composite's log
/// rule sends 0/0 back. dt = max(log(1 - x), -100) - max(log x, -100).
struct BinaryCrossEntropyOp {
  static constexpr const char* name = "binary_cross_entropy";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& t) const {
    // PyTorch's epsilon is the float 1e-12 in every dtype (9.99999996e-13 in double).
    if (g.needs(0)) g[0] = dy * (x - t) / maximum(x * (T(1) - x), Tensor<T>::full({}, T(1e-12f), x.device()));
    if (g.needs(1)) g[1] = dy * (clamped_log(T(1) - x) - clamped_log(x));
  }
};

/// log(1 + e^-x), computed stably as log(1 + e^-|x|) + max(-x, 0); its rule
/// dx = sigmoid(x) - 1 is the derivative everywhere, where the composite's
/// abs and relu give 0 instead of -1/2 at x = 0 (a zero-initialised head).
struct SoftplusNegOp {
  static constexpr const char* name = "binary_cross_entropy_with_logits";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = dy * (x.sigmoid() - T(1));
  }
};

/// `y` computed from `inputs` without recording, then recorded as one `Op`.
template <class T, class Op, class F, class... S>
Tensor<T> record_as(Op op, std::initializer_list<const Tensor<T>*> inputs, F compute, S... saved) {
  Tensor<T> y;
  {
    NoGradGuard ng;
    y = compute();
  }
  if (frost::detail::any_requires_grad<T>(inputs)) frost::detail::record(y, op, inputs, saved...);
  return y;
}
}  // namespace detail

/// Binary cross-entropy of probabilities; logs are clamped at -100 like PyTorch.
template <FloatingScalar T>
Tensor<T> binary_cross_entropy(const Tensor<T>& input, const Tensor<T>& target, Reduction r = Reduction::mean,
                               const Tensor<T>& weight = {}) {
  detail::check_same_shape(input, target, "binary_cross_entropy");
  if (weight.defined()) frost::detail::check_same_device(input, weight, "binary_cross_entropy (weight)");
  auto l = detail::record_as<T>(
      detail::BinaryCrossEntropyOp{}, {&input, &target},
      [&] { return -(target * detail::clamped_log(input) + (T(1) - target) * detail::clamped_log(T(1) - input)); },
      SavedTensor<T>::input(input), SavedTensor<T>::input(target));
  return detail::reduce(weight.defined() ? l * weight : l, r);
}

/// Binary cross-entropy on logits, computed stably:
/// (1 - y) x + (1 + (pw - 1) y) log(1 + e^-x).
template <FloatingScalar T>
Tensor<T> binary_cross_entropy_with_logits(const Tensor<T>& input, const Tensor<T>& target,
                                           Reduction r = Reduction::mean, const Tensor<T>& weight = {},
                                           const Tensor<T>& pos_weight = {}) {
  detail::check_same_shape(input, target, "binary_cross_entropy_with_logits");
  if (weight.defined()) frost::detail::check_same_device(input, weight, "binary_cross_entropy_with_logits (weight)");
  if (pos_weight.defined())
    frost::detail::check_same_device(input, pos_weight, "binary_cross_entropy_with_logits (pos_weight)");
  auto softplus_neg = detail::record_as<T>(
      detail::SoftplusNegOp{}, {&input}, [&] { return (T(1) + (-input.abs()).exp()).log() + (-input).relu(); },
      SavedTensor<T>::input(input));
  auto l = pos_weight.defined() ? (T(1) - target) * input + (T(1) + (pos_weight - T(1)) * target) * softplus_neg
                                : (T(1) - target) * input + softplus_neg;
  return detail::reduce(weight.defined() ? l * weight : l, r);
}

}  // namespace frost::nn::functional
