// Identity, Linear, Bilinear, Flatten, Unflatten.
#pragma once
#include <cstdint>
#include <string>

#include "../functional/linear.hpp"
#include "../module.hpp"
#include "init_detail.hpp"

namespace frost::nn {

/// Returns its input.
template <class T>
struct IdentityImpl : ModuleT<T> {
  Tensor<T> forward(const Tensor<T>& x) { return x; }
  std::string type_name() const override { return "Identity"; }
};

/// y = x W^T + b. Weight [out_features, in_features], initialised like
/// PyTorch: uniform in +-1/sqrt(in_features), bias too.
template <class T>
struct LinearImpl : ModuleT<T> {
  std::int64_t in_features, out_features;
  Tensor<T> weight, bias;

  LinearImpl(std::int64_t in, std::int64_t out, bool with_bias = true) : in_features(in), out_features(out) {
    FROST_CHECK(in >= 0 && out >= 0, "frost::nn::Linear: in_features (", in, ") and out_features (", out,
                ") must be non-negative");
    const double b = detail::fan_in_bound(in);
    weight = this->register_parameter("weight", detail::uniform_param<T>({out, in}, b));
    if (with_bias) bias = this->register_parameter("bias", detail::uniform_param<T>({out}, b));
  }
  Tensor<T> forward(const Tensor<T>& x) { return functional::linear(x, weight, bias); }
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override {
    return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
           ", bias=" + detail::py_bool(bias.defined());
  }
};

/// y = x1^T A x2 + b. Weight [out, in1, in2].
template <class T>
struct BilinearImpl : ModuleT<T> {
  std::int64_t in1_features, in2_features, out_features;
  Tensor<T> weight, bias;

  BilinearImpl(std::int64_t in1, std::int64_t in2, std::int64_t out, bool with_bias = true)
      : in1_features(in1), in2_features(in2), out_features(out) {
    const double b = detail::fan_in_bound(in1);
    weight = this->register_parameter("weight", detail::uniform_param<T>({out, in1, in2}, b));
    if (with_bias) bias = this->register_parameter("bias", detail::uniform_param<T>({out}, b));
  }
  Tensor<T> forward(const Tensor<T>& x1, const Tensor<T>& x2) { return functional::bilinear(x1, x2, weight, bias); }
  std::string type_name() const override { return "Bilinear"; }
  std::string extra_repr() const override {
    return "in1_features=" + std::to_string(in1_features) + ", in2_features=" + std::to_string(in2_features) +
           ", out_features=" + std::to_string(out_features) + ", bias=" + detail::py_bool(bias.defined());
  }
};

/// Flattens dims start_dim..end_dim (default: all but the batch dim).
template <class T>
struct FlattenImpl : ModuleT<T> {
  std::int64_t start_dim, end_dim;
  explicit FlattenImpl(std::int64_t start = 1, std::int64_t end = -1) : start_dim(start), end_dim(end) {}
  Tensor<T> forward(const Tensor<T>& x) { return x.flatten(start_dim, end_dim); }
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override {
    return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
  }
};

/// Splits dim `dim` into `sizes`.
template <class T>
struct UnflattenImpl : ModuleT<T> {
  std::int64_t dim;
  Shape sizes;
  UnflattenImpl(std::int64_t d, const Shape& s) : dim(d), sizes(s) {}
  Tensor<T> forward(const Tensor<T>& x) { return x.unflatten(dim, sizes); }
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim) + ", unflattened_size=" + sizes.str(); }
};

template <class T>
class IdentityT : public ModuleHolder<IdentityImpl<T>> {
 public:
  IdentityT() : ModuleHolder<IdentityImpl<T>>(std::make_shared<IdentityImpl<T>>()) {}
};
template <class T>
class LinearT : public ModuleHolder<LinearImpl<T>> {
 public:
  LinearT(std::int64_t in, std::int64_t out, bool bias = true)
      : ModuleHolder<LinearImpl<T>>(std::make_shared<LinearImpl<T>>(in, out, bias)) {}
};
template <class T>
class BilinearT : public ModuleHolder<BilinearImpl<T>> {
 public:
  BilinearT(std::int64_t in1, std::int64_t in2, std::int64_t out, bool bias = true)
      : ModuleHolder<BilinearImpl<T>>(std::make_shared<BilinearImpl<T>>(in1, in2, out, bias)) {}
};
template <class T>
class FlattenT : public ModuleHolder<FlattenImpl<T>> {
 public:
  explicit FlattenT(std::int64_t start = 1, std::int64_t end = -1)
      : ModuleHolder<FlattenImpl<T>>(std::make_shared<FlattenImpl<T>>(start, end)) {}
};
template <class T>
class UnflattenT : public ModuleHolder<UnflattenImpl<T>> {
 public:
  UnflattenT(std::int64_t dim, const Shape& sizes)
      : ModuleHolder<UnflattenImpl<T>>(std::make_shared<UnflattenImpl<T>>(dim, sizes)) {}
};

using Identity = IdentityT<float>;
using Linear = LinearT<float>;
using Bilinear = BilinearT<float>;
using Flatten = FlattenT<float>;
using Unflatten = UnflattenT<float>;

}  // namespace frost::nn
