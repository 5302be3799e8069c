// Activation layers: thin modules over the elementwise ops, so they can sit
// in a Sequential and be found by type (the tracer fuses them later).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

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
#undef FROST_ACTIVATION_LAYER

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
