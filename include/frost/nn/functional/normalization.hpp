// Normalization layers as functions (frost::nn::functional): batch_norm,
// layer_norm, group_norm, with PyTorch's arguments and semantics.
//
// All three share one op: y = xhat w + b with xhat = (x - mean) / sqrt(var +
// eps) over some dims. Its forward runs the existing kernels with no tape and
// keeps x - mean; its backward is the closed-form rule written with ops, so a
// training step makes a handful of passes over the activation instead of
// the dozen or so the composite (sub, mul, rsqrt, two means) would record.
#pragma once
#include <cstdint>

#include "../../tensor.hpp"

namespace frost::nn::functional {

namespace detail {

/// Backward of y = xhat w + b, xhat = d rstd, d = x - mean over `red`, n
/// elements per mean. w and b are seen with shape `affine` (broadcast to x).
///   db = sum(dy), dw = sum(dy xhat)        (summed down to `affine`)
///   dx = rstd (g - mean(g) - xhat mean(g xhat)),  g = dy w
/// The forward keeps d rather than xhat, one broadcast pass fewer. When w is
/// constant over the reduced dims (`per_group`: batch norm, or no weight)
/// mean(g) and mean(g xhat) are w db / n and w dw / n, so the parameter
/// gradients are reused rather than reduced again.
struct NormalizeRule {
  Shape red, affine, wshape;
  std::int64_t n;
  double eps;
  bool per_group;
  std::uint32_t w_version;

  /// The saved weight (kept as a handle, not a SavedTensor) was not written since.
  template <class T>
  void check_weight(const Tensor<T>& w, const char* name) const {
    FROST_CHECK(!w.defined() || w.version() == w_version, "frost::backward: the weight of shape ", w.shape().str(),
                " saved by ", name, " was modified by an in-place operation (version ", w_version, " when saved, ",
                w.version(), " now); use an out-of-place op or clone() it first");
  }

  template <class T>
  void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& d_saved,
                const Tensor<T>& rstd_saved, const Tensor<T>& w, const char* name) const {
    check_weight(w, name);
    const bool create_graph = is_grad_enabled();
    Tensor<T> d = d_saved, rstd = rstd_saved;
    if (create_graph) {
      // The saved d and rstd carry no history; rebuild them from x with ops
      // so that second derivatives see how they depend on x.
      d = x - frost::mean(x, red, true);
      rstd = frost::rsqrt(frost::mean(d * d, red, true) + T(eps));
    }
    const Tensor<T> wv = w.defined() ? w.reshape(affine) : Tensor<T>();
    const T inv_n = T(1) / T(n);
    Tensor<T> dx, c_mean, c_d;  // dx = dy k - c_mean - d c_d
    if (per_group) {
      // rstd is constant over the reduced dims too: sum(dy xhat) = rstd sum(dy d).
      Tensor<T> db, dw;
      if (g.needs(2) || g.needs(0)) db = frost::sum_to(dy, affine);
      if (g.needs(1) || g.needs(0)) dw = frost::sum_to(dy * d, affine) * rstd;
      if (g.needs(2)) g[2] = db.reshape(wshape);
      if (g.needs(1)) g[1] = dw.reshape(wshape);
      if (!g.needs(0)) return;
      const Tensor<T> k = wv.defined() ? wv * rstd : rstd;
      dx = dy * k;
      c_mean = k * db * inv_n;
      c_d = k * dw * rstd * inv_n;
    } else {
      const Tensor<T> xhat = d * rstd;
      if (g.needs(2)) g[2] = frost::sum_to(dy, affine).reshape(wshape);
      if (g.needs(1)) g[1] = frost::sum_to(dy * xhat, affine).reshape(wshape);
      if (!g.needs(0)) return;
      const Tensor<T> gw = wv.defined() ? dy * wv : dy;
      dx = gw * rstd;
      c_mean = frost::sum(gw, red, true) * (inv_n * rstd);
      c_d = frost::sum(gw * xhat, red, true) * (inv_n * rstd * rstd);
    }
    if (create_graph) {
      dx = dx - c_mean - d * c_d;
    } else {  // dx is a fresh buffer nobody else sees: update it in place
      dx.sub_(c_mean);
      dx.sub_(d * c_d);
    }
    g[0] = dx;
  }
};

struct BatchNormOp : NormalizeRule {
  static constexpr const char* name = "batch_norm";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& d,
                                   const Tensor<T>& rstd, const Tensor<T>& w) const {
    NormalizeRule::backward(dy, g, x, d, rstd, w, name);
  }
};
struct LayerNormOp : NormalizeRule {
  static constexpr const char* name = "layer_norm";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& d,
                                   const Tensor<T>& rstd, const Tensor<T>& w) const {
    NormalizeRule::backward(dy, g, x, d, rstd, w, name);
  }
};
struct GroupNormOp : NormalizeRule {
  static constexpr const char* name = "group_norm";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& d,
                                   const Tensor<T>& rstd, const Tensor<T>& w) const {
    NormalizeRule::backward(dy, g, x, d, rstd, w, name);
  }
};

/// Shape [1, C, 1, ...] with x's number of dims: a per-channel tensor seen against x.
inline Shape channel_shape(const Shape& x) {
  Shape s = Shape::filled(x.ndim(), 1);
  s[1] = x[1];
  return s;
}

/// Batch norm through the backend's own kernels (cuDNN): the forward writes
/// y and the batch's mean and 1 / sqrt(var + eps) in one call, the backward
/// reads them back in one call. Gradients of gradients take the composite
/// rule above, which rebuilds the statistics from x with ops.
struct BatchNormKernelOp : NormalizeRule {
  static constexpr const char* name = "batch_norm";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& mean,
                                   const Tensor<T>& invstd, const Tensor<T>& w) const {
    if (is_grad_enabled()) {
      NormalizeRule::backward(dy, g, x, Tensor<T>(), Tensor<T>(), w, name);
      return;
    }
    check_weight(w, name);
    const std::int64_t batch = x.size(0), c = x.size(1), inner = x.numel() / (batch * c);
    const Tensor<T> dyc = dy.contiguous();
    const Tensor<T> wk = w.defined() ? w.contiguous() : Tensor<T>::ones({c}, x.device());
    auto dx = Tensor<T>::empty(x.shape(), x.device());
    auto dw = Tensor<T>::empty({c}, x.device()), db = Tensor<T>::empty({c}, x.device());
    backend_for<T>(x.device())
        .batch_norm_backward(batch, c, inner, x.data(), dyc.data(), wk.data(), mean.data(), invstd.data(), dx.data(),
                             dw.data(), db.data(), eps);
    if (g.needs(0)) g[0] = dx;
    if (g.needs(1)) g[1] = dw.reshape(wshape);
    if (g.needs(2)) g[2] = db.reshape(wshape);
  }
};

/// Batch norm of x [N, C, *] (dense, more than one value per channel when
/// training) through the backend's kernels; the caller checked batch_norm_runs.
/// Training updates running_mean / running_var (contiguous, or both
/// undefined) in place; inference reads them and records nothing.
template <class T>
Tensor<T> batch_norm_kernel(Backend<T>& be, const Tensor<T>& x, const Tensor<T>& running_mean,
                            const Tensor<T>& running_var, const Tensor<T>& weight, const Tensor<T>& bias,
                            bool training, double momentum, double eps) {
  const std::int64_t batch = x.size(0), c = x.size(1), inner = x.numel() / (batch * c);
  const Device dev = x.device();
  const Tensor<T> w = weight.defined() ? weight.contiguous() : Tensor<T>::ones({c}, dev);
  const Tensor<T> b = bias.defined() ? bias.contiguous() : Tensor<T>::zeros({c}, dev);
  auto y = Tensor<T>::empty(x.shape(), dev);
  if (!training) {
    const Tensor<T> mean = running_mean.contiguous(), var = running_var.contiguous();
    be.batch_norm_inference(batch, c, inner, x.data(), w.data(), b.data(), mean.data(), var.data(), y.data(), eps);
    return y;
  }
  auto save_mean = Tensor<T>::empty({c}, dev), save_invstd = Tensor<T>::empty({c}, dev);
  const bool update = running_mean.defined();
  be.batch_norm_training(batch, c, inner, x.data(), w.data(), b.data(), y.data(), save_mean.data(),
                         save_invstd.data(), update ? running_mean.data() : nullptr,
                         update ? running_var.data() : nullptr, momentum, eps);
  if (update) {  // written in place, as the composite path's mul_ / add_ would
    frost::detail::bump_version(running_mean);
    frost::detail::bump_version(running_var);
  }
  if (!frost::detail::any_requires_grad<T>({&x, &weight, &bias})) return y;
  BatchNormKernelOp op;
  op.red = Shape{0};
  for (int d = 2; d < x.dim(); ++d) op.red.push_back(d);
  op.affine = channel_shape(x.shape());
  op.wshape = weight.defined() ? weight.shape() : bias.defined() ? bias.shape() : op.affine;
  op.n = batch * inner;
  op.eps = eps;
  op.per_group = true;
  op.w_version = weight.defined() ? weight.version() : 0;
  frost::detail::record(y, op, {&x, &weight, &bias}, SavedTensor<T>::input(x), SavedTensor<T>::input(save_mean),
                        SavedTensor<T>::input(save_invstd), weight);
  return y;
}

/// Mean and biased variance over `red` (keepdim shape), from the batch.
template <class T>
struct Moments {
  Tensor<T> mean, var;
};

/// y = (x - mean) / sqrt(var + eps) * w + b over dims `red` (sorted), with w
/// and b (either may be undefined) seen with shape `affine`. Returns y; the
/// batch moments go to `moments` when asked for (batch norm's running stats).
template <class Op, class T>
Tensor<T> normalize(const Tensor<T>& x, const Shape& red, const Tensor<T>& w, const Tensor<T>& b, Shape affine,
                    double eps, Moments<T>* moments = nullptr) {
  if constexpr (HalfScalar<T>) {
    // 16 bits: the whole normalization in float, rounded once at the end (as
    // PyTorch's fused kernels), not every step of the composite rounded.
    if (!moments) {
      const auto wide = [](const Tensor<T>& t) { return t.defined() ? t.template to<float>() : Tensor<float>(); };
      return normalize<Op, float>(wide(x), red, wide(w), wide(b), affine, eps).template to<T>();
    }
  }
  const Shape keep = frost::detail::keepdim_shape(x.shape(), red);
  std::int64_t n = 1;
  for (auto d : red) n *= x.shape()[static_cast<int>(d)];
  if (!w.defined() && !b.defined()) affine = keep;
  const bool record = frost::detail::any_requires_grad<T>({&x, &w, &b});
  Tensor<T> y, d, rstd;
  {
    NoGradGuard ng;
    const T inv_n = T(1) / T(n);
    auto mu = frost::sum(x, red, true);
    mu.mul_(inv_n);
    d = x - mu;
    auto var = frost::sum(d * d, red, true);
    var.mul_(inv_n);
    rstd = frost::rsqrt(var + T(eps));
    if (moments) *moments = {mu, var};
    // y = d (rstd w) + b: one scale pass, since xhat itself is never stored.
    const bool fold = affine == keep;  // rstd and w line up: fold them into one factor
    const Tensor<T> scale = fold && w.defined() ? rstd * w.reshape(affine) : rstd;
    if (!record) {  // nothing to save: finish in d's memory
      y = d;
      y.mul_(scale);
      if (w.defined() && !fold) y.mul_(w.reshape(affine));
      if (b.defined()) y.add_(b.reshape(affine));
      return y;
    }
    y = d * scale;
    if (w.defined() && !fold) y.mul_(w.reshape(affine));
    if (b.defined()) y.add_(b.reshape(affine));
  }
  Op op;
  op.red = red;
  op.affine = affine;
  op.wshape = w.defined() ? w.shape() : b.defined() ? b.shape() : keep;
  op.n = n;
  op.eps = eps;
  op.per_group = affine == keep;
  op.w_version = w.defined() ? w.version() : 0;
  frost::detail::record(y, op, {&x, &w, &b}, SavedTensor<T>::input(x), SavedTensor<T>::input(d),
                        SavedTensor<T>::input(rstd), w);
  return y;
}

/// `p` (weight, bias, running stat) is undefined or a 1-D tensor of `c` values.
template <class T>
void check_per_channel(const Tensor<T>& p, const Tensor<T>& input, std::int64_t c, const char* op, const char* what) {
  if (!p.defined()) return;
  frost::detail::check_same_device(input, p, op);
  FROST_CHECK(p.shape() == Shape{c}, "frost::nn::functional::", op, ": ", what, " of shape ", p.shape().str(),
              " does not match input of shape ", input.shape().str(), " (expected [", c, "], one value per channel)");
}

}  // namespace detail

/// Batch normalization over [N, C] or [N, C, *] (PyTorch's
/// torch.nn.functional.batch_norm): normalizes each channel with the batch
/// statistics when `training` (or when no running statistics are given), with
/// `running_mean` / `running_var` otherwise. In training, defined running
/// statistics are updated in place as (1 - momentum) running + momentum batch,
/// with the unbiased batch variance (normalization itself uses the biased
/// one). Modules that want PyTorch's cumulative average (momentum=None) pass
/// 1 / num_batches_tracked as `momentum`.
template <FloatingScalar T>
Tensor<T> batch_norm(const Tensor<T>& input, const Tensor<T>& running_mean, const Tensor<T>& running_var,
                     const Tensor<T>& weight = {}, const Tensor<T>& bias = {}, bool training = false,
                     double momentum = 0.1, double eps = 1e-5) {
  frost::detail::check_defined(input, "batch_norm");
  FROST_CHECK(input.dim() >= 2, "frost::nn::functional::batch_norm: input must be [N, C] or [N, C, *], got shape ",
              input.shape().str());
  const std::int64_t c = input.size(1);
  detail::check_per_channel(running_mean, input, c, "batch_norm", "running_mean");
  detail::check_per_channel(running_var, input, c, "batch_norm", "running_var");
  detail::check_per_channel(weight, input, c, "batch_norm", "weight");
  detail::check_per_channel(bias, input, c, "batch_norm", "bias");
  FROST_CHECK(running_mean.defined() == running_var.defined(),
              "frost::nn::functional::batch_norm: running_mean and running_var must both be given or both be "
              "undefined (got only ", running_mean.defined() ? "running_mean" : "running_var", ")");
  const Shape cs = detail::channel_shape(input.shape());
  const std::int64_t per_channel = c > 0 ? input.numel() / c : 0;
  FROST_CHECK(!training || per_channel > 1,
              "frost::nn::functional::batch_norm: expected more than 1 value per channel when training, got input "
              "of shape ", input.shape().str());
  const bool batch_stats = training || !running_mean.defined();

  // The backend's own kernels (cuDNN) where it has them: one pass each way.
  // Not while tracing (the tracer's backend has none, so a trace records the
  // composite below), nor for eval-mode inputs that need gradients (the
  // composite's mul and add give those), nor for strided running statistics.
  Backend<T>& be = backend_for<T>(input.device());
  const bool kernel_fits =
      input.numel() > 0 &&
      (batch_stats ? per_channel > 1 : !frost::detail::any_requires_grad<T>({&input, &weight, &bias})) &&
      (!running_mean.defined() || (running_mean.is_contiguous() && running_var.is_contiguous()));
  if (kernel_fits && be.batch_norm_runs(input.size(0), c, per_channel / input.size(0), eps, batch_stats))
    return detail::batch_norm_kernel(be, input.contiguous(), running_mean, running_var, weight, bias, batch_stats,
                                     momentum, eps);

  if (!training && running_mean.defined()) {
    // Fixed statistics: one scale and shift per channel, two passes over x,
    // and the gradients of x, weight and bias come from mul and add.
    frost::detail::TraceOpScope scope;  // a trace records one batch_norm node (freeze folds it)
    auto scale = frost::rsqrt(running_var + T(eps));
    if (weight.defined()) scale = scale * weight;
    auto shift = -(running_mean * scale);
    if (bias.defined()) shift = shift + bias;
    auto y = input * scale.reshape(cs) + shift.reshape(cs);
    auto raw = [](const Tensor<T>& t) { return t.defined() ? frost::detail::raw_view(t) : frost::detail::RawView{}; };
    scope.done({"batch_norm", {raw(input), raw(running_mean), raw(running_var), raw(weight), raw(bias)}, raw(y), eps});
    return y;
  }

  Shape red{0};
  for (int d = 2; d < input.dim(); ++d) red.push_back(d);
  detail::Moments<T> m;
  const bool update = training && running_mean.defined();
  auto y = detail::normalize<detail::BatchNormOp>(input, red, weight, bias, cs, eps, update ? &m : nullptr);
  if (update) {
    NoGradGuard ng;
    const T mom = T(momentum);
    Tensor<T> rm = running_mean, rv = running_var;  // handles on the caller's buffers
    rm.mul_(T(1) - mom);
    rm.add_(m.mean.reshape({c}) * mom);
    rv.mul_(T(1) - mom);
    rv.add_(m.var.reshape({c}) * T(momentum * double(per_channel) / double(per_channel - 1)));
  }
  return y;
}

/// Layer normalization over the trailing dims `normalized_shape`
/// (torch.nn.functional.layer_norm); weight and bias, when given, have shape
/// `normalized_shape` and apply elementwise.
template <FloatingScalar T>
Tensor<T> layer_norm(const Tensor<T>& input, const Shape& normalized_shape, const Tensor<T>& weight = {},
                     const Tensor<T>& bias = {}, double eps = 1e-5) {
  frost::detail::check_defined(input, "layer_norm");
  const int k = normalized_shape.ndim(), nd = input.dim();
  FROST_CHECK(k >= 1, "frost::nn::functional::layer_norm: normalized_shape must have at least one dim, got ",
              normalized_shape.str());
  bool ok = nd >= k;
  for (int i = 0; ok && i < k; ++i) ok = input.shape()[nd - k + i] == normalized_shape[i];
  FROST_CHECK(ok, "frost::nn::functional::layer_norm: input of shape ", input.shape().str(),
              " does not end with normalized_shape ", normalized_shape.str());
  for (const Tensor<T>* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    frost::detail::check_same_device(input, *p, "layer_norm");
    FROST_CHECK(p->shape() == normalized_shape, "frost::nn::functional::layer_norm: ",
                p == &weight ? "weight" : "bias", " of shape ", p->shape().str(), " does not match normalized_shape ",
                normalized_shape.str());
  }
  Shape red;
  for (int d = nd - k; d < nd; ++d) red.push_back(d);
  return detail::normalize<detail::LayerNormOp>(input, red, weight, bias, normalized_shape, eps);
}

/// Group normalization (torch.nn.functional.group_norm): the C channels of
/// [N, C, *] are split into `num_groups` groups, each normalized over its
/// channels and spatial positions; weight and bias are per channel.
template <FloatingScalar T>
Tensor<T> group_norm(const Tensor<T>& input, std::int64_t num_groups, const Tensor<T>& weight = {},
                     const Tensor<T>& bias = {}, double eps = 1e-5) {
  frost::detail::check_defined(input, "group_norm");
  FROST_CHECK(input.dim() >= 2, "frost::nn::functional::group_norm: input must be [N, C] or [N, C, *], got shape ",
              input.shape().str());
  const std::int64_t n = input.size(0), c = input.size(1);
  FROST_CHECK(num_groups > 0 && c % num_groups == 0, "frost::nn::functional::group_norm: num_groups ", num_groups,
              " must be positive and divide the ", c, " channels of input of shape ", input.shape().str());
  detail::check_per_channel(weight, input, c, "group_norm", "weight");
  detail::check_per_channel(bias, input, c, "group_norm", "bias");
  if (input.numel() == 0) return input * T(1);
  // Normalize [N, G, C/G * spatial] over its last dim; the per-channel affine
  // does not line up with that view, so it is applied on x's own shape.
  auto y = detail::normalize<detail::GroupNormOp>(input.reshape({n, num_groups, -1}), Shape{2}, Tensor<T>(),
                                                  Tensor<T>(), Shape{}, eps)
               .reshape(input.shape());
  const Shape cs = detail::channel_shape(input.shape());
  if (weight.defined()) y = y * weight.reshape(cs);
  if (bias.defined()) y = y + bias.reshape(cs);
  return y;
}

}  // namespace frost::nn::functional
