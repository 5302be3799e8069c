// linear and bilinear maps (frost::nn::functional), written with matmul so
// their gradients come from its rules.
#pragma once
#include <optional>

#include "../../tensor.hpp"

namespace frost::nn::functional {

// Under autocast (amp/autocast.hpp) linear of float32 tensors runs in the
// region's 16-bit dtype (defined below).
namespace detail {
FROST_AUTOCAST_API Tensor<float> autocast_linear(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b);
}  // namespace detail

/// y = x W^T + b for x of shape [*, in], W [out, in], b [out] (or undefined).
template <FloatingScalar T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias = {}) {
  frost::detail::check_same_device(x, weight, "linear");
  if (bias.defined()) frost::detail::check_same_device(x, bias, "linear (bias)");
  FROST_CHECK(weight.dim() == 2, "frost::nn::functional::linear: weight must be 2-D [out, in], got ",
              weight.shape().str());
  FROST_CHECK(x.dim() >= 1 && x.shape()[x.dim() - 1] == weight.shape()[1], "frost::nn::functional::linear: input of shape ",
              x.shape().str(), " does not end in in_features = ", weight.shape()[1], " (weight ",
              weight.shape().str(), ")");
  FROST_CHECK(!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == weight.shape()[0]),
              "frost::nn::functional::linear: bias of shape ", bias.defined() ? bias.shape().str() : "",
              " does not match out_features = ", weight.shape()[0]);
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(x.device())) return detail::autocast_linear(x, weight, bias);
  if (x.dim() == 2) {
    // A trace records one linear node (freeze fuses, folds and packs it) when
    // the operands are GEMM-ready as they are.
    const bool gemm_ready = (x.stride(1) == 1 || x.stride(0) == 1) && weight.is_contiguous() &&
                            (!bias.defined() || bias.is_contiguous());
    std::optional<frost::detail::TraceOpScope> scope;
    if (frost::detail::tracing() && gemm_ready) scope.emplace();
    auto y = bias.defined() ? addmm(bias, x, weight.t()) : mm(x, weight.t());
    if (scope)
      scope->done({"linear",
                   {frost::detail::raw_view(x), frost::detail::raw_view(weight),
                    bias.defined() ? frost::detail::raw_view(bias) : frost::detail::RawView{}},
                   frost::detail::raw_view(y)});
    return y;
  }
  auto y = matmul(x, weight.t());
  return bias.defined() ? y + bias : y;
}

/// y[n, o] = x1[n] . W[o] . x2[n] + b[o]; W [out, in1, in2].
template <FloatingScalar T>
Tensor<T> bilinear(const Tensor<T>& x1, const Tensor<T>& x2, const Tensor<T>& weight, const Tensor<T>& bias = {}) {
  frost::detail::check_same_device(x1, x2, "bilinear");
  frost::detail::check_same_device(x1, weight, "bilinear (weight)");
  if (bias.defined()) frost::detail::check_same_device(x1, bias, "bilinear (bias)");
  FROST_CHECK(weight.dim() == 3, "frost::nn::functional::bilinear: weight must be 3-D [out, in1, in2], got ",
              weight.shape().str());
  const auto out = weight.shape()[0], in1 = weight.shape()[1], in2 = weight.shape()[2];
  FROST_CHECK(x1.dim() >= 1 && x2.dim() == x1.dim() && x1.shape()[x1.dim() - 1] == in1 &&
                  x2.shape()[x2.dim() - 1] == in2 && x1.shape().numel() / in1 == x2.shape().numel() / in2,
              "frost::nn::functional::bilinear: inputs of shapes ", x1.shape().str(), " and ", x2.shape().str(),
              " do not match weight ", weight.shape().str(), " (expected [*, ", in1, "] and [*, ", in2, "])");
  Shape lead = x1.shape();
  lead[lead.ndim() - 1] = out;
  auto a = x1.reshape({-1, in1});
  auto b = x2.reshape({-1, in2});
  // (x1 W) for every output at once: [N, in1] x [in1, out * in2].
  auto t = mm(a, weight.permute({1, 0, 2}).reshape({in1, out * in2})).reshape({-1, out, in2});
  auto y = (t * b.unsqueeze(1)).sum({2});
  if (bias.defined()) y = y + bias;
  return y.reshape(lead);
}

#ifdef FROST_AUTOCAST_DEFINITIONS
namespace detail {
FROST_AUTOCAST_API Tensor<float> autocast_linear(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b) {
  return amp::detail::run_lowered(
      x.device(), [](const auto& i, const auto& k, const auto& c) { return linear(i, k, c); }, x, w, b);
}
}  // namespace detail
#endif

}  // namespace frost::nn::functional
