// The activations torch.nn.functional builds from others: hardsigmoid,
// hardswish, mish, selu, logsigmoid, prelu. Written with ops, so their
// gradients, second derivatives and frozen plans come from those ops'
// (a plan fuses them into one elementwise chain).
#pragma once
#include "../../tensor.hpp"

namespace frost::nn::functional {

/// relu6(x + 3) / 6. The gradient is 1/6 strictly between -3 and 3.
template <FloatingScalar T>
Tensor<T> hardsigmoid(const Tensor<T>& x) {
  return hardtanh(x + T(3), 0, 6) * T(1.0 / 6);
}

/// x hardsigmoid(x). The product rule gives PyTorch 2.15's gradient at
/// x = -3 and x = 3 too (0 and 1; tests/test_kinks.cpp).
template <FloatingScalar T>
Tensor<T> hardswish(const Tensor<T>& x) {
  return x * hardsigmoid(x);
}

/// x tanh(softplus(x))
template <FloatingScalar T>
Tensor<T> mish(const Tensor<T>& x) {
  return x * softplus(x).tanh();
}

/// scale elu(x, alpha) with the self-normalising constants.
template <FloatingScalar T>
Tensor<T> selu(const Tensor<T>& x) {
  constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  return elu(x, alpha) * T(scale);
}

/// log(sigmoid(x)) = -softplus(-x), without overflow for large |x|.
template <FloatingScalar T>
Tensor<T> logsigmoid(const Tensor<T>& x) {
  return -softplus(-x);
}

/// x where x > 0, weight x elsewhere; weight has one value, or one per
/// channel (dim 1 of x, PyTorch's layout). At x = 0 exactly the slope is
/// the weight, with no derivative in the weight (PyTorch's); one weight
/// broadcasts as a scalar, so a 0-dim input gives a 0-dim output.
template <FloatingScalar T>
Tensor<T> prelu(const Tensor<T>& x, const Tensor<T>& weight) {
  frost::detail::check_same_device(x, weight, "nn::functional::prelu");
  FROST_CHECK(weight.dim() <= 1, "frost::nn::functional::prelu: weight must be 1-D or a scalar, got ", weight.shape().str());
  Tensor<T> w = weight.numel() == 1 ? weight.reshape(Shape{}) : weight.reshape({-1});
  if (w.numel() != 1) {
    FROST_CHECK(x.dim() >= 2 && x.size(1) == w.numel(), "frost::nn::functional::prelu: weight has ", w.numel(),
                " values but input of shape ", x.shape().str(), " has ", x.dim() >= 2 ? x.size(1) : 1,
                " channels (dim 1); expected 1 or one per channel");
    Shape per_channel{w.numel()};
    for (int d = 2; d < x.dim(); ++d) per_channel.push_back(1);
    w = w.reshape(per_channel);
  }
  return where(frost::detail::m01(x) > T(0), x, where(frost::detail::m01(x) < T(0), x * w, x * w.detach()));
}

}  // namespace frost::nn::functional
