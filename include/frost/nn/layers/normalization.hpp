// BatchNorm1d/2d, LayerNorm, GroupNorm: parameters, buffers and defaults as in
// PyTorch (weight 1, bias 0, running_mean 0, running_var 1,
// num_batches_tracked an int64 scalar), over the functional forms.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "../functional/normalization.hpp"
#include "../module.hpp"
#include "init_detail.hpp"

namespace frost::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  /// nullopt: a cumulative moving average (PyTorch's momentum=None).
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

/// Batch normalisation over dim 1; `Rank` names the accepted input ranks
/// (BatchNorm1d: [N, C] or [N, C, L]; BatchNorm2d: [N, C, H, W]).
template <class T, int Dims>
struct BatchNormImpl : ModuleT<T> {
  std::int64_t num_features;
  BatchNormOptions options;
  Tensor<T> weight, bias, running_mean, running_var;
  IndexTensor num_batches_tracked;

  explicit BatchNormImpl(std::int64_t features, BatchNormOptions o = {}) : num_features(features), options(o) {
    FROST_CHECK(features > 0, "frost::nn::", type_name(), ": num_features must be positive, got ", features);
    if (o.affine) {
      weight = this->register_parameter("weight", Tensor<T>::ones({features}));
      bias = this->register_parameter("bias", Tensor<T>::zeros({features}));
    }
    if (o.track_running_stats) {
      running_mean = this->register_buffer("running_mean", Tensor<T>::zeros({features}));
      running_var = this->register_buffer("running_var", Tensor<T>::ones({features}));
      num_batches_tracked = this->register_buffer("num_batches_tracked", IndexTensor::zeros({}));
    }
  }

  Tensor<T> forward(const Tensor<T>& x) {
    const bool ok = Dims == 2 ? x.dim() == 4 : (x.dim() == 2 || x.dim() == 3);
    FROST_CHECK(ok, "frost::nn::", type_name(), ": expected ", Dims == 2 ? "4-D input [N, C, H, W]" : "2-D or 3-D input [N, C] or [N, C, L]",
                ", got shape ", x.shape().str());
    double factor = options.momentum.value_or(0.0);
    const bool training = this->is_training();
    if (training && options.track_running_stats) {
      std::int64_t seen = 0;
      if (num_batches_tracked.device().is_cpu()) {
        seen = ++num_batches_tracked.data()[0];  // host memory: no kernel, nothing for a trace to record
      } else {
        num_batches_tracked.add_(1);  // a kernel, no read back
        // Only the cumulative average needs the count (a sync, as in PyTorch).
        if (!options.momentum) seen = num_batches_tracked.item();
      }
      if (!options.momentum) factor = 1.0 / double(seen);
    }
    // Batch statistics in training, and always when no running stats exist.
    const bool use_batch = training || !running_mean.defined();
    const bool pass_stats = !training || options.track_running_stats;
    return functional::batch_norm(x, pass_stats ? running_mean : Tensor<T>(), pass_stats ? running_var : Tensor<T>(),
                                  weight, bias, use_batch, factor, options.eps);
  }

  /// Back to the initial state: statistics reset, weight 1, bias 0.
  void reset_running_stats() {
    if (!options.track_running_stats) return;
    NoGradGuard ng;
    running_mean.zero_();
    running_var.fill_(T(1));
    num_batches_tracked.zero_();
  }

  std::string type_name() const override { return Dims == 2 ? "BatchNorm2d" : "BatchNorm1d"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << num_features << ", eps=" << options.eps << ", momentum=";
    if (options.momentum) s << *options.momentum;
    else s << "None";
    s << ", affine=" << detail::py_bool(options.affine)
      << ", track_running_stats=" << detail::py_bool(options.track_running_stats);
    return s.str();
  }
};
template <class T>
using BatchNorm1dImpl = BatchNormImpl<T, 1>;
template <class T>
using BatchNorm2dImpl = BatchNormImpl<T, 2>;

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
};

/// Normalises over the trailing `normalized_shape` dims.
template <class T>
struct LayerNormImpl : ModuleT<T> {
  Shape normalized_shape;
  LayerNormOptions options;
  Tensor<T> weight, bias;

  explicit LayerNormImpl(const Shape& shape, LayerNormOptions o = {}) : normalized_shape(shape), options(o) {
    if (o.elementwise_affine) {
      weight = this->register_parameter("weight", Tensor<T>::ones(shape));
      if (o.bias) bias = this->register_parameter("bias", Tensor<T>::zeros(shape));
    }
  }
  Tensor<T> forward(const Tensor<T>& x) { return functional::layer_norm(x, normalized_shape, weight, bias, options.eps); }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << normalized_shape.str() << ", eps=" << options.eps
      << ", elementwise_affine=" << detail::py_bool(options.elementwise_affine);
    return s.str();
  }
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;
};

/// Normalises groups of channels of [N, C, *].
template <class T>
struct GroupNormImpl : ModuleT<T> {
  std::int64_t num_groups, num_channels;
  GroupNormOptions options;
  Tensor<T> weight, bias;

  GroupNormImpl(std::int64_t groups, std::int64_t channels, GroupNormOptions o = {})
      : num_groups(groups), num_channels(channels), options(o) {
    FROST_CHECK(groups > 0 && channels % groups == 0, "frost::nn::GroupNorm: num_channels (", channels,
                ") must be divisible by num_groups (", groups, ")");
    if (o.affine) {
      weight = this->register_parameter("weight", Tensor<T>::ones({channels}));
      bias = this->register_parameter("bias", Tensor<T>::zeros({channels}));
    }
  }
  Tensor<T> forward(const Tensor<T>& x) { return functional::group_norm(x, num_groups, weight, bias, options.eps); }
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << num_groups << ", " << num_channels << ", eps=" << options.eps << ", affine=" << detail::py_bool(options.affine);
    return s.str();
  }
};

template <class T>
class BatchNorm1dT : public ModuleHolder<BatchNorm1dImpl<T>> {
 public:
  explicit BatchNorm1dT(std::int64_t features, BatchNormOptions o = {})
      : ModuleHolder<BatchNorm1dImpl<T>>(std::make_shared<BatchNorm1dImpl<T>>(features, o)) {}
};
template <class T>
class BatchNorm2dT : public ModuleHolder<BatchNorm2dImpl<T>> {
 public:
  explicit BatchNorm2dT(std::int64_t features, BatchNormOptions o = {})
      : ModuleHolder<BatchNorm2dImpl<T>>(std::make_shared<BatchNorm2dImpl<T>>(features, o)) {}
};
template <class T>
class LayerNormT : public ModuleHolder<LayerNormImpl<T>> {
 public:
  explicit LayerNormT(const Shape& shape, LayerNormOptions o = {})
      : ModuleHolder<LayerNormImpl<T>>(std::make_shared<LayerNormImpl<T>>(shape, o)) {}
};
template <class T>
class GroupNormT : public ModuleHolder<GroupNormImpl<T>> {
 public:
  GroupNormT(std::int64_t groups, std::int64_t channels, GroupNormOptions o = {})
      : ModuleHolder<GroupNormImpl<T>>(std::make_shared<GroupNormImpl<T>>(groups, channels, o)) {}
};

using BatchNorm1d = BatchNorm1dT<float>;
using BatchNorm2d = BatchNorm2dT<float>;
using LayerNorm = LayerNormT<float>;
using GroupNorm = GroupNormT<float>;

}  // namespace frost::nn
