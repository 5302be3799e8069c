// Pooling over NCHW tensors: max_pool2d (with indices), avg_pool2d and
// adaptive_avg_pool2d, with PyTorch's arguments and output sizes. Each
// backward is an op whose own backward exists (max: a gather at the indices;
// average: the forward again), so second derivatives work.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "common.hpp"
#include "conv.hpp"  // Pair

namespace frost {

/// A Pair that may be left out (pooling's stride, the kernel size by
/// default). Unlike std::optional<Pair> it takes `{1, 2}` as well as `2`.
struct OptionalPair {
  bool set = false;
  Pair value = 0;
  OptionalPair() = default;
  OptionalPair(std::int64_t both) : set(true), value(both) {}  // NOLINT(google-explicit-constructor)
  OptionalPair(std::int64_t h, std::int64_t w) : set(true), value(h, w) {}
  OptionalPair(Pair p) : set(true), value(p) {}  // NOLINT(google-explicit-constructor)
  Pair value_or(Pair fallback) const { return set ? value : fallback; }
};

/// max_pool2d's options after the kernel size: `{.stride = 1, .padding = 1}`.
struct MaxPool2dOptions {
  OptionalPair stride = {};  // default: the kernel size
  Pair padding = 0;          // -inf on each side, at most half the kernel
  Pair dilation = 1;
  bool ceil_mode = false;  // round the output size up (a last window may start in the right/bottom padding)
};

/// avg_pool2d's options after the kernel size.
struct AvgPool2dOptions {
  OptionalPair stride = {};  // default: the kernel size
  Pair padding = 0;          // zeros on each side, at most half the kernel
  bool ceil_mode = false;
  bool count_include_pad = true;                               // padding zeros count in the divisor
  std::optional<std::int64_t> divisor_override = std::nullopt;  // divide every window by this instead
};

namespace detail {

/// PyTorch's pooling_output_shape: floor (or ceil) of the window count, where
/// a ceil-mode window must start inside the input or the left padding.
inline std::int64_t pool_out_size(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t stride,
                                  std::int64_t dil, bool ceil_mode) {
  const std::int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

/// Checks pooling arguments for a 4-D x (xs: the shape the caller passed).
template <class T>
Pool2dParams plan_pool(const char* op, const Tensor<T>& x, Pair kernel, const OptionalPair& stride_opt, Pair pad,
                       Pair dil, bool ceil_mode, const Shape& xs) {
  const Pair stride = stride_opt.value_or(kernel);
  FROST_CHECK(kernel.h >= 1 && kernel.w >= 1, "frost::", op, ": kernel size must be positive, got ", kernel.str());
  FROST_CHECK(stride.h >= 1 && stride.w >= 1, "frost::", op, ": stride must be positive, got ", stride.str());
  FROST_CHECK(dil.h >= 1 && dil.w >= 1, "frost::", op, ": dilation must be positive, got ", dil.str());
  FROST_CHECK(pad.h >= 0 && pad.w >= 0, "frost::", op, ": padding must be non-negative, got ", pad.str());
  FROST_CHECK(pad.h <= kernel.h / 2 && pad.w <= kernel.w / 2, "frost::", op, ": padding ", pad.str(),
              " must be at most half the kernel size ", kernel.str());
  const Shape& s = x.shape();
  FROST_CHECK(s[1] > 0 && s[2] > 0 && s[3] > 0, "frost::", op, ": expects non-empty channel and spatial dims, got input "
              "shape ", xs.str());
  Pool2dParams p;
  p.batch = s[0];
  p.channels = s[1];
  p.in_h = s[2];
  p.in_w = s[3];
  p.kernel_h = kernel.h;
  p.kernel_w = kernel.w;
  p.stride_h = stride.h;
  p.stride_w = stride.w;
  p.pad_h = pad.h;
  p.pad_w = pad.w;
  p.dilation_h = dil.h;
  p.dilation_w = dil.w;
  p.ceil_mode = ceil_mode;
  p.out_h = pool_out_size(p.in_h, kernel.h, pad.h, stride.h, dil.h, ceil_mode);
  p.out_w = pool_out_size(p.in_w, kernel.w, pad.w, stride.w, dil.w, ceil_mode);
  FROST_CHECK(p.out_h >= 1 && p.out_w >= 1, "frost::", op, ": the output would be ", p.out_h, " x ", p.out_w,
              " for input shape ", xs.str(), ", kernel ", kernel.str(), ", stride ", stride.str(), ", padding ",
              pad.str(), ", dilation ", dil.str(), "; the input is too small");
  return p;
}

inline Shape pool_in_shape(const Pool2dParams& p) { return {p.batch, p.channels, p.in_h, p.in_w}; }
inline Shape pool_out_shape(const Pool2dParams& p) { return {p.batch, p.channels, p.out_h, p.out_w}; }

template <class T>
Tensor<T> max_pool2d_backward(const Tensor<T>& dy, const Tensor<std::int64_t>& indices, const Pool2dParams& p);
template <class T>
Tensor<T> avg_pool2d_forward(const Tensor<T>& x, const Pool2dParams& p);
template <class T>
Tensor<T> avg_pool2d_backward(const Tensor<T>& dy, const Pool2dParams& p);

}  // namespace detail

/// y = the max of each window; dx = dy added at each window's argmax
struct MaxPool2dOp {
  static constexpr const char* name = "max_pool2d";
  Pool2dParams p;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<std::int64_t>& indices) const {
    g[0] = detail::max_pool2d_backward(dy, indices, p);
  }
};

/// dx = dy scattered to the indices; d/d(dy) = gg gathered at the indices
struct MaxPool2dBackwardOp {
  static constexpr const char* name = "max_pool2d_backward";
  Pool2dParams p;
  template <class T> void backward(const Tensor<T>& gg, Grads<T> g, const Tensor<std::int64_t>& indices) const {
    g[0] = gg.reshape({p.batch, p.channels, p.in_h * p.in_w})
               .gather(2, indices.view({p.batch, p.channels, p.out_h * p.out_w}))
               .view(detail::pool_out_shape(p));
  }
};

/// y = the mean of each window; dx = avg_pool2d_backward(dy)
struct AvgPool2dOp {
  static constexpr const char* name = "avg_pool2d";
  Pool2dParams p;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = detail::avg_pool2d_backward(dy, p); }
};

/// dx = avg_pool2d's adjoint applied to dy; being linear, its gradient is avg_pool2d again
struct AvgPool2dBackwardOp {
  static constexpr const char* name = "avg_pool2d_backward";
  Pool2dParams p;
  template <class T> void backward(const Tensor<T>& gg, Grads<T> g) const { g[0] = detail::avg_pool2d_forward(gg, p); }
};

namespace detail {

/// Values and indices; with want_indices false and nothing to record, the
/// indices are neither computed nor returned (inference).
template <class T>
ValuesIndices<T> max_pool2d_forward(const Tensor<T>& x_in, const Pool2dParams& p, bool want_indices) {
  const Tensor<T> x = x_in.contiguous();
  const bool rec = any_requires_grad<T>({&x});
  auto y = Tensor<T>::empty(pool_out_shape(p), x.device());
  Tensor<std::int64_t> idx;
  if (rec || want_indices) idx = Tensor<std::int64_t>::empty(pool_out_shape(p), x.device());
  backend_for<T>(x.device()).max_pool2d(p, x.view_of(), y.view_of(),
                                        idx.defined() ? idx.view_of() : View<std::int64_t>());
  if (rec) record(y, MaxPool2dOp{p}, {&x}, idx);
  return {y, idx};
}

template <class T>
Tensor<T> max_pool2d_backward(const Tensor<T>& dy_in, const Tensor<std::int64_t>& indices, const Pool2dParams& p) {
  const Tensor<T> dy = dy_in.contiguous();
  auto dx = Tensor<T>::empty(pool_in_shape(p), dy.device());
  backend_for<T>(dy.device()).max_pool2d_backward(p, dy.view_of(), indices.view_of(), dx.view_of());
  if (any_requires_grad<T>({&dy})) record(dx, MaxPool2dBackwardOp{p}, {&dy}, indices);
  return dx;
}

template <class T>
Tensor<T> avg_pool2d_forward(const Tensor<T>& x_in, const Pool2dParams& p) {
  const Tensor<T> x = x_in.contiguous();
  auto y = Tensor<T>::empty(pool_out_shape(p), x.device());
  backend_for<T>(x.device()).avg_pool2d(p, x.view_of(), y.view_of());
  if (any_requires_grad<T>({&x})) record(y, AvgPool2dOp{p}, {&x});
  return y;
}

template <class T>
Tensor<T> avg_pool2d_backward(const Tensor<T>& dy_in, const Pool2dParams& p) {
  const Tensor<T> dy = dy_in.contiguous();
  auto dx = Tensor<T>::empty(pool_in_shape(p), dy.device());
  backend_for<T>(dy.device()).avg_pool2d_backward(p, dy.view_of(), dx.view_of());
  if (any_requires_grad<T>({&dy})) record(dx, AvgPool2dBackwardOp{p}, {&dy});
  return dx;
}

template <class T>
void check_pool_input(const char* op, const Tensor<T>& x) {
  check_defined(x, op);
  FROST_CHECK(x.dim() == 3 || x.dim() == 4, "frost::", op, ": expects a 4-D input [N, C, H, W] or a 3-D unbatched one "
              "[C, H, W], got shape ", x.shape().str());
}

/// PyTorch's adaptive bins as an [out, in] averaging matrix: row i averages
/// [floor(i in / out), ceil((i + 1) in / out)).
template <class T>
Tensor<T> adaptive_bins(std::int64_t in, std::int64_t out) {
  std::vector<T> m(static_cast<std::size_t>(in * out), T(0));
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t b = i * in / out, e = ((i + 1) * in + out - 1) / out;
    for (std::int64_t j = b; j < e; ++j) m[static_cast<std::size_t>(i * in + j)] = T(1) / static_cast<T>(e - b);
  }
  return Tensor<T>::from(m, {out, in});
}

}  // namespace detail

namespace detail {
template <class T>
ValuesIndices<T> max_pool2d_entry(const Tensor<T>& input, Pair kernel_size, const MaxPool2dOptions& options,
                                  bool want_indices) {
  check_pool_input("max_pool2d", input);
  const bool batched = input.dim() == 4;
  const Tensor<T> x = batched ? input : input.unsqueeze(0);
  const auto p = plan_pool("max_pool2d", x, kernel_size, options.stride, options.padding, options.dilation,
                           options.ceil_mode, input.shape());
  auto r = max_pool2d_forward(x, p, want_indices);
  if (!batched) r = {r.values.squeeze(0), want_indices ? r.indices.squeeze(0) : r.indices};
  return r;
}
}  // namespace detail

/// Max pooling with PyTorch's indices: each is the flat position (h W + w) of
/// its window's max in the input plane.
template <FloatingScalar T>
ValuesIndices<T> max_pool2d_with_indices(const Tensor<T>& input, Pair kernel_size, const MaxPool2dOptions& options = {}) {
  return detail::max_pool2d_entry(input, kernel_size, options, true);
}

/// Max over kernel_size windows of x [N, C, H, W] (or [C, H, W]).
/// \code
/// auto y = frost::max_pool2d(x, 2);                        // 2x2 windows, stride 2
/// auto z = frost::max_pool2d(x, 3, {.stride = 1, .padding = 1});
/// \endcode
template <FloatingScalar T>
Tensor<T> max_pool2d(const Tensor<T>& input, Pair kernel_size, const MaxPool2dOptions& options = {}) {
  return detail::max_pool2d_entry(input, kernel_size, options, false).values;
}

/// Mean over kernel_size windows of x [N, C, H, W] (or [C, H, W]).
template <FloatingScalar T>
Tensor<T> avg_pool2d(const Tensor<T>& input, Pair kernel_size, const AvgPool2dOptions& options = {}) {
  detail::check_pool_input("avg_pool2d", input);
  FROST_CHECK(!options.divisor_override || *options.divisor_override != 0,
              "frost::avg_pool2d: divisor_override must be non-zero");
  const bool batched = input.dim() == 4;
  const Tensor<T> x = batched ? input : input.unsqueeze(0);
  auto p = detail::plan_pool("avg_pool2d", x, kernel_size, options.stride, options.padding, Pair(1),
                             options.ceil_mode, input.shape());
  p.count_include_pad = options.count_include_pad;
  p.divisor_override = options.divisor_override ? *options.divisor_override : 0;
  auto y = detail::avg_pool2d_forward(x, p);
  return batched ? y : y.squeeze(0);
}

/// Mean over PyTorch's adaptive bins to an output of output_size (H', W'):
/// bin i of a dim spans [floor(i H / H'), ceil((i + 1) H / H')). Equal bins
/// run as avg_pool2d; others as products with the bins' averaging matrices.
template <FloatingScalar T>
Tensor<T> adaptive_avg_pool2d(const Tensor<T>& input, Pair output_size) {
  detail::check_pool_input("adaptive_avg_pool2d", input);
  const std::int64_t H = input.shape()[input.dim() - 2], W = input.shape()[input.dim() - 1];
  const std::int64_t oh = output_size.h, ow = output_size.w;
  FROST_CHECK(oh >= 1 && ow >= 1, "frost::adaptive_avg_pool2d: output size must be positive, got ", output_size.str());
  FROST_CHECK(H > 0 && W > 0 && input.shape()[input.dim() - 3] > 0, "frost::adaptive_avg_pool2d: expects non-empty "
              "channel and spatial dims, got input shape ", input.shape().str());
  if (H % oh == 0 && W % ow == 0) return avg_pool2d(input, {H / oh, W / ow});
  // y = A_h x A_w^T per plane: the bins' weights 1/(len_h len_w) factor per dim.
  const auto ah = detail::adaptive_bins<T>(H, oh).to(input.device()), aw = detail::adaptive_bins<T>(W, ow).to(input.device());
  return matmul(ah, matmul(input, aw.t()));
}

}  // namespace frost
