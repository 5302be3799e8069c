// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d over the pooling ops.
#pragma once
#include <sstream>
#include <string>

#include "../../ops/pool.hpp"
#include "../module.hpp"
#include "init_detail.hpp"

namespace frost::nn {

template <class T>
struct MaxPool2dImpl : ModuleT<T> {
  Pair kernel_size;
  MaxPool2dOptions options;
  explicit MaxPool2dImpl(Pair kernel, MaxPool2dOptions o = {}) : kernel_size(kernel), options(o) {}
  Tensor<T> forward(const Tensor<T>& x) { return max_pool2d(x, kernel_size, options); }
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << "kernel_size=" << kernel_size.str() << ", stride=" << options.stride.value_or(kernel_size).str()
      << ", padding=" << options.padding.str() << ", dilation=" << options.dilation.str()
      << ", ceil_mode=" << detail::py_bool(options.ceil_mode);
    return s.str();
  }
};

template <class T>
struct AvgPool2dImpl : ModuleT<T> {
  Pair kernel_size;
  AvgPool2dOptions options;
  explicit AvgPool2dImpl(Pair kernel, AvgPool2dOptions o = {}) : kernel_size(kernel), options(o) {}
  Tensor<T> forward(const Tensor<T>& x) { return avg_pool2d(x, kernel_size, options); }
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << "kernel_size=" << kernel_size.str() << ", stride=" << options.stride.value_or(kernel_size).str()
      << ", padding=" << options.padding.str();
    return s.str();
  }
};

template <class T>
struct AdaptiveAvgPool2dImpl : ModuleT<T> {
  Pair output_size;
  explicit AdaptiveAvgPool2dImpl(Pair out) : output_size(out) {}
  Tensor<T> forward(const Tensor<T>& x) { return adaptive_avg_pool2d(x, output_size); }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + output_size.str(); }
};

template <class T>
class MaxPool2dT : public ModuleHolder<MaxPool2dImpl<T>> {
 public:
  explicit MaxPool2dT(Pair kernel, MaxPool2dOptions o = {})
      : ModuleHolder<MaxPool2dImpl<T>>(std::make_shared<MaxPool2dImpl<T>>(kernel, o)) {}
};
template <class T>
class AvgPool2dT : public ModuleHolder<AvgPool2dImpl<T>> {
 public:
  explicit AvgPool2dT(Pair kernel, AvgPool2dOptions o = {})
      : ModuleHolder<AvgPool2dImpl<T>>(std::make_shared<AvgPool2dImpl<T>>(kernel, o)) {}
};
template <class T>
class AdaptiveAvgPool2dT : public ModuleHolder<AdaptiveAvgPool2dImpl<T>> {
 public:
  explicit AdaptiveAvgPool2dT(Pair out)
      : ModuleHolder<AdaptiveAvgPool2dImpl<T>>(std::make_shared<AdaptiveAvgPool2dImpl<T>>(out)) {}
};
using MaxPool2d = MaxPool2dT<float>;
using AvgPool2d = AvgPool2dT<float>;
using AdaptiveAvgPool2d = AdaptiveAvgPool2dT<float>;

}  // namespace frost::nn
