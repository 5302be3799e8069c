// Activation layers: thin modules over the elementwise ops, so they can sit
// in a Sequential and be found by type (the tracer fuses them later).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "../functional/activation.hpp"
#include "../module.hpp"

namespace frost::nn {

#define FROST_ACTIVATION_LAYER(Name, expr)                                              \
  template <class T>                                                                    \
  struct Name##Impl : ModuleT<T> {                                                      \
    Tensor<T> forward(const Tensor<T>& x) { return expr; }                              \
    std::string type_name() const override { return #Name; }                           \
  };                                                                                    \
  template <class T>                                                                    \
  class Name##T : public ModuleHolder<Name##Impl<T>> {                                  \
   public:                                                                              \
    Name##T() : ModuleHolder<Name##Impl<T>>(std::make_shared<Name##Impl<T>>()) {}       \
  };                                                                                    \
  using Name = Name##T<float>;

FROST_ACTIVATION_LAYER(ReLU, x.relu())
FROST_ACTIVATION_LAYER(SiLU, x.silu())
FROST_ACTIVATION_LAYER(Sigmoid, x.sigmoid())
FROST_ACTIVATION_LAYER(Tanh, x.tanh())
FROST_ACTIVATION_LAYER(ReLU6, relu6(x))
FROST_ACTIVATION_LAYER(Hardsigmoid, functional::hardsigmoid(x))
FROST_ACTIVATION_LAYER(Hardswish, functional::hardswish(x))
FROST_ACTIVATION_LAYER(Mish, functional::mish(x))
FROST_ACTIVATION_LAYER(SELU, functional::selu(x))
FROST_ACTIVATION_LAYER(LogSigmoid, functional::logsigmoid(x))
#undef FROST_ACTIVATION_LAYER

/// log(1 + e^(beta x)) / beta, x where beta x > threshold.
template <class T>
struct SoftplusImpl : ModuleT<T> {
  double beta, threshold;
  explicit SoftplusImpl(double b = 1, double t = 20) : beta(b), threshold(t) {}
  Tensor<T> forward(const Tensor<T>& x) { return softplus(x, beta, threshold); }
  std::string type_name() const override { return "Softplus"; }
  std::string extra_repr() const override {
    return "beta=" + std::to_string(beta) + ", threshold=" + std::to_string(threshold);
  }
};
template <class T>
class SoftplusT : public ModuleHolder<SoftplusImpl<T>> {
 public:
  explicit SoftplusT(double beta = 1, double threshold = 20)
      : ModuleHolder<SoftplusImpl<T>>(std::make_shared<SoftplusImpl<T>>(beta, threshold)) {}
};
using Softplus = SoftplusT<float>;

/// x for x > 0, alpha (e^x - 1) elsewhere.
template <class T>
struct ELUImpl : ModuleT<T> {
  double alpha;
  explicit ELUImpl(double a = 1) : alpha(a) {}
  Tensor<T> forward(const Tensor<T>& x) { return elu(x, alpha); }
  std::string type_name() const override { return "ELU"; }
  std::string extra_repr() const override { return "alpha=" + std::to_string(alpha); }
};
template <class T>
class ELUT : public ModuleHolder<ELUImpl<T>> {
 public:
  explicit ELUT(double alpha = 1) : ModuleHolder<ELUImpl<T>>(std::make_shared<ELUImpl<T>>(alpha)) {}
};
using ELU = ELUT<float>;

/// x clamped to [min_val, max_val], the gradient 0 at the bounds.
template <class T>
struct HardtanhImpl : ModuleT<T> {
  double min_val, max_val;
  explicit HardtanhImpl(double lo = -1, double hi = 1) : min_val(lo), max_val(hi) {
    FROST_CHECK(max_val > min_val, "frost::nn::Hardtanh: max_val (", max_val, ") must be above min_val (", min_val, ")");
  }
  Tensor<T> forward(const Tensor<T>& x) { return hardtanh(x, min_val, max_val); }
  std::string type_name() const override { return "Hardtanh"; }
  std::string extra_repr() const override {
    return "min_val=" + std::to_string(min_val) + ", max_val=" + std::to_string(max_val);
  }
};
template <class T>
class HardtanhT : public ModuleHolder<HardtanhImpl<T>> {
 public:
  explicit HardtanhT(double min_val = -1, double max_val = 1)
      : ModuleHolder<HardtanhImpl<T>>(std::make_shared<HardtanhImpl<T>>(min_val, max_val)) {}
};
using Hardtanh = HardtanhT<float>;

/// x for x > 0, weight x elsewhere, with a learned weight: one value, or one
/// per channel (num_parameters = channels), initialised to `init`.
template <class T>
struct PReLUImpl : ModuleT<T> {
  Tensor<T> weight;
  explicit PReLUImpl(std::int64_t num_parameters = 1, double init = 0.25) {
    FROST_CHECK(num_parameters > 0, "frost::nn::PReLU: num_parameters must be positive, got ", num_parameters);
    weight = this->register_parameter("weight", Tensor<T>::full({num_parameters}, T(init)));
  }
  Tensor<T> forward(const Tensor<T>& x) { return functional::prelu(x, weight); }
  std::string type_name() const override { return "PReLU"; }
  std::string extra_repr() const override { return "num_parameters=" + std::to_string(weight.numel()); }
};
template <class T>
class PReLUT : public ModuleHolder<PReLUImpl<T>> {
 public:
  explicit PReLUT(std::int64_t num_parameters = 1, double init = 0.25)
      : ModuleHolder<PReLUImpl<T>>(std::make_shared<PReLUImpl<T>>(num_parameters, init)) {}
};
using PReLU = PReLUT<float>;

/// GELU, exact or (approximate = "tanh") its tanh approximation, as nn.GELU.
template <class T>
struct GELUImpl : ModuleT<T> {
  std::string approximate;
  explicit GELUImpl(std::string approx = "none") : approximate(std::move(approx)) {
    FROST_CHECK(approximate == "none" || approximate == "tanh",
                "frost::nn::GELU: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  }
  Tensor<T> forward(const Tensor<T>& x) { return x.gelu(approximate); }
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override { return approximate == "none" ? "" : "approximate='" + approximate + "'"; }
};
template <class T>
class GELUT : public ModuleHolder<GELUImpl<T>> {
 public:
  GELUT() : GELUT("none") {}
  explicit GELUT(std::string approximate)
      : ModuleHolder<GELUImpl<T>>(std::make_shared<GELUImpl<T>>(std::move(approximate))) {}
};
using GELU = GELUT<float>;

/// max(0, x) + negative_slope * min(0, x)
template <class T>
struct LeakyReLUImpl : ModuleT<T> {
  double negative_slope;
  explicit LeakyReLUImpl(double slope = 0.01) : negative_slope(slope) {}
  Tensor<T> forward(const Tensor<T>& x) { return leaky_relu(x, negative_slope); }
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override { return "negative_slope=" + std::to_string(negative_slope); }
};
template <class T>
class LeakyReLUT : public ModuleHolder<LeakyReLUImpl<T>> {
 public:
  explicit LeakyReLUT(double slope = 0.01)
      : ModuleHolder<LeakyReLUImpl<T>>(std::make_shared<LeakyReLUImpl<T>>(slope)) {}
};
using LeakyReLU = LeakyReLUT<float>;

/// Softmax (or log-softmax) over `dim`.
template <class T, bool Log>
struct SoftmaxImplBase : ModuleT<T> {
  std::int64_t dim;
  explicit SoftmaxImplBase(std::int64_t d) : dim(d) {}
  Tensor<T> forward(const Tensor<T>& x) { return Log ? x.log_softmax(dim) : x.softmax(dim); }
  std::string type_name() const override { return Log ? "LogSoftmax" : "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
};
template <class T>
using SoftmaxImpl = SoftmaxImplBase<T, false>;
template <class T>
using LogSoftmaxImpl = SoftmaxImplBase<T, true>;
template <class T>
class SoftmaxT : public ModuleHolder<SoftmaxImpl<T>> {
 public:
  explicit SoftmaxT(std::int64_t dim) : ModuleHolder<SoftmaxImpl<T>>(std::make_shared<SoftmaxImpl<T>>(dim)) {}
};
template <class T>
class LogSoftmaxT : public ModuleHolder<LogSoftmaxImpl<T>> {
 public:
  explicit LogSoftmaxT(std::int64_t dim) : ModuleHolder<LogSoftmaxImpl<T>>(std::make_shared<LogSoftmaxImpl<T>>(dim)) {}
};
using Softmax = SoftmaxT<float>;
using LogSoftmax = LogSoftmaxT<float>;

}  // namespace frost::nn
