// Dropout as functions (frost::nn::functional): dropout and dropout2d, with
// masks drawn from frost's Philox generator, so a seed gives the same mask on
// any thread count (and on CUDA).
#pragma once
#include <cstdint>

#include "../../tensor.hpp"

namespace frost::nn::functional {

namespace detail {

/// Scaled keep-mask of `shape` on `d`: 1 / (1 - p) with probability 1 - p, else 0.
template <class T>
Tensor<T> dropout_mask(const Shape& shape, double p, Device d, Generator* gen) {
  auto mask = Tensor<T>::empty(shape, d);
  Generator& g = gen ? *gen : default_generator();
  const std::uint64_t offset = g.take<T>(static_cast<std::uint64_t>(shape.numel()));
  backend_for<T>(d).random(mask.view_of(), philox::Dist::bernoulli, g.seed(), offset, 1.0 - p, 0.0);
  NoGradGuard ng;
  mask.mul_(T(1.0 / (1.0 - p)));
  return mask;
}

/// The shared part of dropout and dropout2d: a mask of `mask_shape`
/// broadcast over the input. The gradient is the same mask (mul's rule).
template <class T>
Tensor<T> apply_dropout(const Tensor<T>& input, const Shape& mask_shape, double p, bool training, Generator* gen,
                        const char* op) {
  FROST_CHECK(p >= 0 && p <= 1, "frost::nn::functional::", op, ": dropout probability p must be in [0, 1], got ", p);
  if (!training || p == 0) return input;
  // As PyTorch: no draw, and a zero gradient rather than 0 * inf.
  if (p == 1) return input * Tensor<T>::zeros({}, input.device());
  frost::detail::TraceOpScope scope;  // a trace records one dropout node (freeze removes it)
  auto y = input * dropout_mask<T>(mask_shape, p, input.device(), gen);
  scope.done({"dropout", {frost::detail::raw_view(input)}, frost::detail::raw_view(y), 0, p});
  return y;
}

}  // namespace detail

/// Zeroes each element with probability `p` and scales the rest by
/// 1 / (1 - p) (torch.nn.functional.dropout); the identity when not
/// `training` or p == 0. The mask comes from `gen` (default: this thread's
/// generator, see frost::manual_seed).
template <FloatingScalar T>
Tensor<T> dropout(const Tensor<T>& input, double p = 0.5, bool training = true, Generator* gen = nullptr) {
  frost::detail::check_defined(input, "dropout");
  return detail::apply_dropout(input, input.shape(), p, training, gen, "dropout");
}

/// Zeroes whole channels of [N, C, H, W] (or unbatched [C, H, W]) with
/// probability `p` and scales the kept ones by 1 / (1 - p)
/// (torch.nn.functional.dropout2d).
template <FloatingScalar T>
Tensor<T> dropout2d(const Tensor<T>& input, double p = 0.5, bool training = true, Generator* gen = nullptr) {
  frost::detail::check_defined(input, "dropout2d");
  FROST_CHECK(input.dim() == 3 || input.dim() == 4,
              "frost::nn::functional::dropout2d: expects a [N, C, H, W] or [C, H, W] input, got shape ",
              input.shape().str());
  Shape mask = input.shape();  // one draw per (sample, channel)
  mask[mask.ndim() - 1] = 1;
  mask[mask.ndim() - 2] = 1;
  return detail::apply_dropout(input, mask, p, training, gen, "dropout2d");
}

}  // namespace frost::nn::functional
