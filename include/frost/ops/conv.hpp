// Convolutions over NCHW tensors: conv2d, conv1d (conv2d on a height-1 view)
// and conv_transpose2d, with PyTorch's arguments and shape rules. The forward
// and both gradients are backend kernels (im2col or Winograd + GEMM on the CPU); the
// gradient kernels are recorded as ops too, each with its own backward, so
// gradients of gradients (double backward) work.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "../amp/autocast_ops.hpp"
#include "common.hpp"

namespace frost {

/// Two extents, height then width: `2` means {2, 2}.
struct Pair {
  std::int64_t h, w;
  Pair(std::int64_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor): `.stride = 2`
  Pair(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  /// "(2, 3)", as pairs appear in error messages.
  std::string str() const { return "(" + std::to_string(h) + ", " + std::to_string(w) + ")"; }
};

/// Convolution padding: zeros on both sides of each dim (`1`, `{1, 2}`), or
/// PyTorch's "valid" (none) or "same" (the output keeps the input's size;
/// stride 1 only; an odd total puts the extra row/column at the bottom/right).
struct Padding {
  enum class Mode : std::uint8_t { explicit_, same, valid };
  Pair value = 0;
  Mode mode = Mode::explicit_;
  Padding(int both) : value(both) {}  // NOLINT(google-explicit-constructor); int: `0` is not a null const char*
  Padding(std::int64_t both) : value(both) {}  // NOLINT(google-explicit-constructor)
  Padding(std::int64_t h, std::int64_t w) : value(h, w) {}
  Padding(Pair p) : value(p) {}  // NOLINT(google-explicit-constructor)
  Padding(const char* mode_name) : value(0) {  // NOLINT(google-explicit-constructor)
    FROST_CHECK(mode_name != nullptr, "frost::conv: padding must be numbers, \"same\" or \"valid\", got a null string");
    if (std::strcmp(mode_name, "same") == 0) mode = Mode::same;
    else if (std::strcmp(mode_name, "valid") == 0) mode = Mode::valid;
    else detail::fail("frost::conv: padding must be numbers, \"same\" or \"valid\", got \"", mode_name, "\"");
  }
};

/// conv2d's options, in PyTorch's order: `{.stride = 2, .padding = 1}`.
struct Conv2dOptions {
  Pair stride = 1;
  Padding padding = 0;
  Pair dilation = 1;
  std::int64_t groups = 1;
};

/// conv1d's options (one number each; padding may be "same" / "valid").
struct Conv1dOptions {
  std::int64_t stride = 1;
  Padding padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
};

/// conv_transpose2d's options, in PyTorch's order. output_padding adds rows
/// and columns at the bottom/right of the output (to pick among the input
/// sizes a strided conv2d maps to the same size).
struct ConvTranspose2dOptions {
  Pair stride = 1;
  Pair padding = 0;
  Pair output_padding = 0;
  std::int64_t groups = 1;
  Pair dilation = 1;
};

// Under autocast (amp/autocast.hpp) convolutions of float32 tensors run in
// the region's 16-bit dtype.
namespace amp::detail {
FROST_AUTOCAST_API Tensor<float> autocast_conv2d(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b,
                                                 const Conv2dOptions& o);
FROST_AUTOCAST_API Tensor<float> autocast_conv1d(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b,
                                                 const Conv1dOptions& o);
FROST_AUTOCAST_API Tensor<float> autocast_conv_transpose2d(const Tensor<float>& x, const Tensor<float>& w,
                                                           const Tensor<float>& b, const ConvTranspose2dOptions& o);
}  // namespace amp::detail

namespace detail {

/// What a convolution op keeps besides its tensors: stride, top/left padding,
/// dilation and groups. The extents come from the tensors.
struct ConvGeom {
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
};

/// Backend parameters for x [N, C, H, W] -> y [N, O, oh, ow] with weight shape w [O, C / groups, kh, kw].
inline Conv2dParams conv_params(const ConvGeom& g, const Shape& x, const Shape& w, std::int64_t oh, std::int64_t ow) {
  Conv2dParams p;
  p.batch = x[0];
  p.in_channels = x[1];
  p.in_h = x[2];
  p.in_w = x[3];
  p.out_channels = w[0];
  p.kernel_h = w[2];
  p.kernel_w = w[3];
  p.out_h = oh;
  p.out_w = ow;
  p.stride_h = g.stride_h;
  p.stride_w = g.stride_w;
  p.pad_h = g.pad_h;
  p.pad_w = g.pad_w;
  p.dilation_h = g.dilation_h;
  p.dilation_w = g.dilation_w;
  p.groups = g.groups;
  return p;
}

template <class T>
Tensor<T> conv2d_forward(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b, const ConvGeom& g,
                         std::int64_t oh, std::int64_t ow, UnaryOp act = UnaryOp::copy);
template <class T>
Tensor<T> conv2d_grad_input(const Tensor<T>& dy, const Tensor<T>& w, const ConvGeom& g, const Shape& x_shape);
template <class T>
Tensor<T> conv2d_grad_weight(const Tensor<T>& x, const Tensor<T>& dy, const ConvGeom& g, const Shape& w_shape);

}  // namespace detail

/// y = conv2d(x, w) + b; dx = conv2d_grad_input(dy, w), dw = conv2d_grad_weight(x, dy),
/// db = dy summed over batch, height and width
struct Conv2dOp {
  static constexpr const char* name = "conv2d";
  detail::ConvGeom geom;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& w) const {
    if (g.needs(0)) g[0] = detail::conv2d_grad_input(dy, w, geom, x.shape());
    if (g.needs(1)) g[1] = detail::conv2d_grad_weight(x, dy, geom, w.shape());
    if (g.needs(2)) g[2] = dy.sum({0, 2, 3});
  }
};

/// dx = conv2d's input gradient, linear in (dy, w): d/d(dy) = conv2d(gg, w),
/// d/dw = conv2d_grad_weight(gg, dy)
struct Conv2dGradInputOp {
  static constexpr const char* name = "conv2d_grad_input";
  detail::ConvGeom geom;
  template <class T> void backward(const Tensor<T>& gg, Grads<T> g, const Tensor<T>& dy, const Tensor<T>& w) const {
    if (g.needs(0)) g[0] = detail::conv2d_forward(gg, w, Tensor<T>(), geom, dy.shape()[2], dy.shape()[3]);
    if (g.needs(1)) g[1] = detail::conv2d_grad_weight(gg, dy, geom, w.shape());
  }
};

/// dw = conv2d's weight gradient, linear in (x, dy): d/dx = conv2d_grad_input(dy, gg),
/// d/d(dy) = conv2d(x, gg)
struct Conv2dGradWeightOp {
  static constexpr const char* name = "conv2d_grad_weight";
  detail::ConvGeom geom;
  template <class T> void backward(const Tensor<T>& gg, Grads<T> g, const Tensor<T>& x, const Tensor<T>& dy) const {
    if (g.needs(0)) g[0] = detail::conv2d_grad_input(dy, gg, geom, x.shape());
    if (g.needs(1)) g[1] = detail::conv2d_forward(x, gg, Tensor<T>(), geom, dy.shape()[2], dy.shape()[3]);
  }
};

/// y = conv2d_grad_input(x, w) + b (the adjoint of conv2d that maps y's
/// space to x's); dx = conv2d(dy, w), dw = conv2d_grad_weight(dy, x), db = dy summed
struct ConvTranspose2dOp {
  static constexpr const char* name = "conv_transpose2d";
  detail::ConvGeom geom;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& w) const {
    if (g.needs(0)) g[0] = detail::conv2d_forward(dy, w, Tensor<T>(), geom, x.shape()[2], x.shape()[3]);
    if (g.needs(1)) g[1] = detail::conv2d_grad_weight(dy, x, geom, w.shape());
    if (g.needs(2)) g[2] = dy.sum({0, 2, 3});
  }
};

namespace detail {

/// conv2d of 4-D x and w into [N, O, oh, ow] with bias b (undefined: none)
/// and a fused activation (UnaryOp::copy or UnaryOp::relu). Arguments are
/// checked by the public ops.
template <class T>
Tensor<T> conv2d_forward(const Tensor<T>& x_in, const Tensor<T>& w_in, const Tensor<T>& b_in, const ConvGeom& g,
                         std::int64_t oh, std::int64_t ow, UnaryOp act) {
  FROST_CHECK(act == UnaryOp::copy || act == UnaryOp::relu, "frost::conv2d: the fused activation must be none or relu, got ",
              op_name(act));
  // contiguous() records a copy when it makes one, so gradients (and the
  // saved tensors that second derivatives differentiate) stay on the tape.
  const Tensor<T> x = x_in.contiguous(), w = w_in.contiguous();
  const Tensor<T> b = b_in.defined() ? b_in.contiguous() : b_in;
  const bool rec = any_requires_grad<T>({&x, &w, &b});
  auto y = Tensor<T>::empty({x.shape()[0], w.shape()[0], oh, ow}, x.device());
  backend_for<T>(x.device())
      .conv2d(conv_params(g, x.shape(), w.shape(), oh, ow), x.view_of(), w.view_of(), b.defined() ? b.data() : nullptr,
              y.view_of(), rec ? UnaryOp::copy : act);
  if (!rec) return y;
  record(y, Conv2dOp{g}, {&x, &w, &b}, SavedTensor<T>::input(x), SavedTensor<T>::input(w));
  return act == UnaryOp::relu ? relu(y) : y;
}

template <class T>
Tensor<T> conv2d_grad_input(const Tensor<T>& dy_in, const Tensor<T>& w_in, const ConvGeom& g, const Shape& x_shape) {
  const Tensor<T> dy = dy_in.contiguous(), w = w_in.contiguous();
  auto dx = Tensor<T>::empty(x_shape, dy.device());
  backend_for<T>(dy.device())
      .conv2d_grad_input(conv_params(g, x_shape, w.shape(), dy.shape()[2], dy.shape()[3]), dy.view_of(), w.view_of(),
                         dx.view_of());
  if (any_requires_grad<T>({&dy, &w}))
    record(dx, Conv2dGradInputOp{g}, {&dy, &w}, SavedTensor<T>::input(dy), SavedTensor<T>::input(w));
  return dx;
}

template <class T>
Tensor<T> conv2d_grad_weight(const Tensor<T>& x_in, const Tensor<T>& dy_in, const ConvGeom& g, const Shape& w_shape) {
  const Tensor<T> x = x_in.contiguous(), dy = dy_in.contiguous();
  auto dw = Tensor<T>::empty(w_shape, x.device());
  backend_for<T>(x.device())
      .conv2d_grad_weight(conv_params(g, x.shape(), w_shape, dy.shape()[2], dy.shape()[3]), x.view_of(), dy.view_of(),
                          dw.view_of());
  if (any_requires_grad<T>({&x, &dy}))
    record(dw, Conv2dGradWeightOp{g}, {&x, &dy}, SavedTensor<T>::input(x), SavedTensor<T>::input(dy));
  return dw;
}

/// "3 x 4", or "4" for a 1-D op (whose height is the 1 it was given).
inline std::string extent(bool one_d, std::int64_t h, std::int64_t w) {
  return one_d ? std::to_string(w) : std::to_string(h) + " x " + std::to_string(w);
}
inline std::string pair_str(bool one_d, Pair p) { return one_d ? std::to_string(p.w) : p.str(); }

/// A checked convolution: geometry and output extents.
struct ConvPlan {
  ConvGeom geom;
  std::int64_t out_h = 0, out_w = 0;
};

/// Checks conv2d / conv1d arguments (x and w already 4-D; xs, ws are the
/// shapes the caller passed, for messages) and resolves the padding.
template <class T>
ConvPlan plan_conv(const char* op, bool one_d, const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b, Pair stride,
                   const Padding& padding, Pair dilation, std::int64_t groups, const Shape& xs, const Shape& ws) {
  const std::int64_t C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const std::int64_t O = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3];
  FROST_CHECK(groups >= 1, "frost::", op, ": groups must be positive, got ", groups);
  FROST_CHECK(stride.h >= 1 && stride.w >= 1, "frost::", op, ": stride must be positive, got ", pair_str(one_d, stride));
  FROST_CHECK(dilation.h >= 1 && dilation.w >= 1, "frost::", op, ": dilation must be positive, got ",
              pair_str(one_d, dilation));
  FROST_CHECK(padding.mode != Padding::Mode::explicit_ || (padding.value.h >= 0 && padding.value.w >= 0), "frost::", op,
              ": padding must be non-negative, got ", pair_str(one_d, padding.value));
  FROST_CHECK(kh >= 1 && kw >= 1, "frost::", op, ": weight of shape ", ws.str(), " has an empty kernel");
  FROST_CHECK(O % groups == 0, "frost::", op, ": out_channels (", O, ", dim 0 of the weight of shape ", ws.str(),
              ") must be divisible by groups (", groups, ")");
  FROST_CHECK(C % groups == 0, "frost::", op, ": in_channels (", C, " in the input of shape ", xs.str(),
              ") must be divisible by groups (", groups, ")");
  FROST_CHECK(w.shape()[1] * groups == C, "frost::", op, ": weight of shape ", ws.str(), " expects ",
              w.shape()[1] * groups, " input channels (", w.shape()[1], " per group x ", groups,
              " groups), but the input of shape ", xs.str(), " has ", C);
  FROST_CHECK(!b.defined() || (b.dim() == 1 && b.shape()[0] == O), "frost::", op, ": bias of shape ", b.shape().str(),
              " does not match out_channels ", O, " of the weight of shape ", ws.str(), " (expected shape [", O, "])");
  const std::int64_t span_h = dilation.h * (kh - 1) + 1, span_w = dilation.w * (kw - 1) + 1;
  std::int64_t top = 0, bottom = 0, left = 0, right = 0;
  switch (padding.mode) {
    case Padding::Mode::explicit_:
      top = bottom = padding.value.h;
      left = right = padding.value.w;
      break;
    case Padding::Mode::valid: break;
    case Padding::Mode::same:
      FROST_CHECK(stride.h == 1 && stride.w == 1, "frost::", op, ": padding=\"same\" needs stride 1, got stride ",
                  pair_str(one_d, stride));
      // PyTorch puts the odd zero at the bottom/right.
      top = (span_h - 1) / 2;
      bottom = span_h - 1 - top;
      left = (span_w - 1) / 2;
      right = span_w - 1 - left;
      break;
  }
  const std::int64_t ph = H + top + bottom, pw = W + left + right;
  FROST_CHECK(ph >= span_h && pw >= span_w, "frost::", op, ": the kernel (", extent(one_d, kh, kw), ", dilation ",
              pair_str(one_d, dilation), ", spanning ", extent(one_d, span_h, span_w),
              ") is larger than the padded input (", extent(one_d, ph, pw), ") for input shape ", xs.str(),
              " and weight shape ", ws.str());
  ConvPlan plan;
  plan.geom = {stride.h, stride.w, top, left, dilation.h, dilation.w, groups};
  plan.out_h = (ph - span_h) / stride.h + 1;
  plan.out_w = (pw - span_w) / stride.w + 1;
  return plan;
}

template <class T>
void check_conv_devices(const char* op, const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b) {
  check_same_device(x, w, op);
  if (b.defined()) check_same_device(x, b, op);
}

}  // namespace detail

/// 2-D convolution (cross-correlation, as PyTorch) of x [N, C, H, W] (or
/// unbatched [C, H, W]) with w [O, C / groups, kH, kW], plus bias [O] when
/// given: y is [N, O, H', W'].
/// \code
/// auto y = frost::conv2d(x, w, b, {.padding = 1});          // 3x3 "same-size" conv
/// auto z = frost::conv2d(x, w, {}, {.stride = 2, .padding = "valid"});
/// \endcode
template <FloatingScalar T>
Tensor<T> conv2d(const Tensor<T>& input, const Tensor<T>& weight, const Tensor<T>& bias = Tensor<T>(),
                 const Conv2dOptions& options = {}) {
  detail::check_conv_devices("conv2d", input, weight, bias);
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(input.device())) return amp::detail::autocast_conv2d(input, weight, bias, options);
  FROST_CHECK(input.dim() == 3 || input.dim() == 4, "frost::conv2d: expects a 4-D input [N, C, H, W] or a 3-D unbatched "
              "one [C, H, W], got shape ", input.shape().str());
  FROST_CHECK(weight.dim() == 4, "frost::conv2d: expects a 4-D weight [out_channels, in_channels / groups, kH, kW], "
              "got shape ", weight.shape().str());
  const bool batched = input.dim() == 4;
  const Tensor<T> x = batched ? input : input.unsqueeze(0);
  const auto plan = detail::plan_conv("conv2d", false, x, weight, bias, options.stride, options.padding, options.dilation,
                                      options.groups, input.shape(), weight.shape());
  auto y = detail::conv2d_forward(x, weight, bias, plan.geom, plan.out_h, plan.out_w);
  return batched ? y : y.squeeze(0);
}

/// 1-D convolution of x [N, C, L] (or unbatched [C, L]) with w [O, C / groups, k]:
/// conv2d on height-1 views, no copies.
template <FloatingScalar T>
Tensor<T> conv1d(const Tensor<T>& input, const Tensor<T>& weight, const Tensor<T>& bias = Tensor<T>(),
                 const Conv1dOptions& options = {}) {
  detail::check_conv_devices("conv1d", input, weight, bias);
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(input.device())) return amp::detail::autocast_conv1d(input, weight, bias, options);
  FROST_CHECK(input.dim() == 2 || input.dim() == 3, "frost::conv1d: expects a 3-D input [N, C, L] or a 2-D unbatched "
              "one [C, L], got shape ", input.shape().str());
  FROST_CHECK(weight.dim() == 3, "frost::conv1d: expects a 3-D weight [out_channels, in_channels / groups, k], got shape ",
              weight.shape().str());
  FROST_CHECK(options.padding.mode != Padding::Mode::explicit_ || options.padding.value.h == options.padding.value.w,
              "frost::conv1d: padding is one number, got ", options.padding.value.str());
  const bool batched = input.dim() == 3;
  const Tensor<T> x = (batched ? input : input.unsqueeze(0)).unsqueeze(2);  // [N, C, 1, L]
  const Tensor<T> w = weight.unsqueeze(2);                                  // [O, C / groups, 1, k]
  Padding pad = options.padding;
  if (pad.mode == Padding::Mode::explicit_) pad.value = Pair(0, pad.value.w);
  const auto plan = detail::plan_conv("conv1d", true, x, w, bias, Pair(1, options.stride), pad,
                                      Pair(1, options.dilation), options.groups, input.shape(), weight.shape());
  auto y = detail::conv2d_forward(x, w, bias, plan.geom, plan.out_h, plan.out_w).squeeze(2);
  return batched ? y : y.squeeze(0);
}

/// Transposed 2-D convolution (the gradient of conv2d w.r.t. its input, as
/// PyTorch's conv_transpose2d) of x [N, C_in, H, W] (or [C_in, H, W]) with
/// w [C_in, C_out / groups, kH, kW], plus bias [C_out]:
/// H' = (H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1.
template <FloatingScalar T>
Tensor<T> conv_transpose2d(const Tensor<T>& input, const Tensor<T>& weight, const Tensor<T>& bias = Tensor<T>(),
                           const ConvTranspose2dOptions& options = {}) {
  const char* op = "conv_transpose2d";
  detail::check_conv_devices(op, input, weight, bias);
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(input.device())) return amp::detail::autocast_conv_transpose2d(input, weight, bias, options);
  FROST_CHECK(input.dim() == 3 || input.dim() == 4, "frost::conv_transpose2d: expects a 4-D input [N, C, H, W] or a 3-D "
              "unbatched one [C, H, W], got shape ", input.shape().str());
  FROST_CHECK(weight.dim() == 4, "frost::conv_transpose2d: expects a 4-D weight [in_channels, out_channels / groups, kH, "
              "kW], got shape ", weight.shape().str());
  const bool batched = input.dim() == 4;
  const Tensor<T> x = batched ? input : input.unsqueeze(0);
  const auto& o = options;
  const std::int64_t C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const std::int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  FROST_CHECK(o.groups >= 1, "frost::", op, ": groups must be positive, got ", o.groups);
  FROST_CHECK(o.stride.h >= 1 && o.stride.w >= 1, "frost::", op, ": stride must be positive, got ", o.stride.str());
  FROST_CHECK(o.dilation.h >= 1 && o.dilation.w >= 1, "frost::", op, ": dilation must be positive, got ",
              o.dilation.str());
  FROST_CHECK(o.padding.h >= 0 && o.padding.w >= 0, "frost::", op, ": padding must be non-negative, got ",
              o.padding.str());
  FROST_CHECK(o.output_padding.h >= 0 && o.output_padding.w >= 0, "frost::", op,
              ": output_padding must be non-negative, got ", o.output_padding.str());
  FROST_CHECK((o.output_padding.h < o.stride.h || o.output_padding.h < o.dilation.h) &&
                  (o.output_padding.w < o.stride.w || o.output_padding.w < o.dilation.w),
              "frost::", op, ": output_padding ", o.output_padding.str(), " must be smaller than the stride ",
              o.stride.str(), " or the dilation ", o.dilation.str(), " in each dim");
  FROST_CHECK(kh >= 1 && kw >= 1, "frost::", op, ": weight of shape ", weight.shape().str(), " has an empty kernel");
  FROST_CHECK(weight.shape()[0] == C, "frost::", op, ": weight of shape ", weight.shape().str(), " expects ",
              weight.shape()[0], " input channels (its dim 0), but the input of shape ", input.shape().str(), " has ", C);
  FROST_CHECK(C % o.groups == 0, "frost::", op, ": in_channels (", C, " in the input of shape ", input.shape().str(),
              ") must be divisible by groups (", o.groups, ")");
  const std::int64_t out_c = weight.shape()[1] * o.groups;
  FROST_CHECK(!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == out_c), "frost::", op, ": bias of shape ",
              bias.shape().str(), " does not match out_channels ", out_c, " (weight of shape ", weight.shape().str(),
              ", groups ", o.groups, "; expected shape [", out_c, "])");
  const std::int64_t oh = (H - 1) * o.stride.h - 2 * o.padding.h + o.dilation.h * (kh - 1) + o.output_padding.h + 1;
  const std::int64_t ow = (W - 1) * o.stride.w - 2 * o.padding.w + o.dilation.w * (kw - 1) + o.output_padding.w + 1;
  FROST_CHECK(oh >= 1 && ow >= 1, "frost::", op, ": the output would be ", oh, " x ", ow, " for input shape ",
              input.shape().str(), ", weight shape ", weight.shape().str(), ", stride ", o.stride.str(), ", padding ",
              o.padding.str(), ", dilation ", o.dilation.str(), "; it must be at least 1 x 1");
  const detail::ConvGeom geom{o.stride.h, o.stride.w, o.padding.h, o.padding.w, o.dilation.h, o.dilation.w, o.groups};

  const Tensor<T> xc = x.contiguous(), w = weight.contiguous();
  const Tensor<T> b = bias.defined() ? bias.contiguous() : bias;
  auto y = Tensor<T>::empty({xc.shape()[0], out_c, oh, ow}, xc.device());
  auto& be = backend_for<T>(xc.device());
  be.conv2d_grad_input(detail::conv_params(geom, y.shape(), w.shape(), H, W), xc.view_of(), w.view_of(), y.view_of());
  if (b.defined())  // y += b, broadcast over batch, height and width
    be.binary(BinaryOp::add, y.view_of(), View<const T>(b.data(), y.shape(), Shape{0, b.strides()[0], 0, 0}),
              y.view_of(), T(0));
  if (detail::any_requires_grad<T>({&xc, &w, &b}))
    detail::record(y, ConvTranspose2dOp{geom}, {&xc, &w, &b}, SavedTensor<T>::input(xc), SavedTensor<T>::input(w));
  return batched ? y : y.squeeze(0);
}

#ifdef FROST_AUTOCAST_DEFINITIONS
namespace amp::detail {
FROST_AUTOCAST_API Tensor<float> autocast_conv2d(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b,
                                                 const Conv2dOptions& o) {
  return run_lowered(x.device(), [&](const auto& i, const auto& k, const auto& c) { return conv2d(i, k, c, o); }, x, w, b);
}
FROST_AUTOCAST_API Tensor<float> autocast_conv1d(const Tensor<float>& x, const Tensor<float>& w, const Tensor<float>& b,
                                                 const Conv1dOptions& o) {
  return run_lowered(x.device(), [&](const auto& i, const auto& k, const auto& c) { return conv1d(i, k, c, o); }, x, w, b);
}
FROST_AUTOCAST_API Tensor<float> autocast_conv_transpose2d(const Tensor<float>& x, const Tensor<float>& w,
                                                           const Tensor<float>& b, const ConvTranspose2dOptions& o) {
  return run_lowered(
      x.device(), [&](const auto& i, const auto& k, const auto& c) { return conv_transpose2d(i, k, c, o); }, x, w, b);
}

}  // namespace amp::detail
#endif

}  // namespace frost
