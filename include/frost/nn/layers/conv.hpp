// Conv1d, Conv2d, ConvTranspose2d: PyTorch's argument order, weight layouts
// and default initialisation (uniform in +-1/sqrt(fan_in), the bound
// kaiming_uniform_(a = sqrt(5)) gives, for weight and bias alike).
#pragma once
#include <cstdint>
#include <sstream>
#include <string>

#include "../../ops/conv.hpp"
#include "../module.hpp"
#include "init_detail.hpp"

namespace frost::nn {

/// Conv2d's options after (in_channels, out_channels, kernel_size).
struct Conv2dOptions {
  Pair stride = 1;
  Padding padding = 0;
  Pair dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};
struct Conv1dOptions {
  std::int64_t stride = 1;
  Padding padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};
struct ConvTranspose2dOptions {
  Pair stride = 1;
  Pair padding = 0;
  Pair output_padding = 0;
  std::int64_t groups = 1;
  bool bias = true;
  Pair dilation = 1;
};

namespace detail {
inline void check_channels(const char* layer, std::int64_t in, std::int64_t out, std::int64_t groups) {
  FROST_CHECK(in > 0 && out > 0 && groups > 0, "frost::nn::", layer, ": in_channels (", in, "), out_channels (", out,
              ") and groups (", groups, ") must be positive");
  FROST_CHECK(in % groups == 0 && out % groups == 0, "frost::nn::", layer, ": in_channels (", in,
              ") and out_channels (", out, ") must both be divisible by groups (", groups, ")");
}
inline std::string padding_repr(const Padding& p) {
  if (p.mode == Padding::Mode::same) return "'same'";
  if (p.mode == Padding::Mode::valid) return "'valid'";
  return p.value.str();
}
}  // namespace detail

template <class T>
struct Conv2dImpl : ModuleT<T> {
  std::int64_t in_channels, out_channels;
  Pair kernel_size;
  Conv2dOptions options;
  Tensor<T> weight, bias;

  Conv2dImpl(std::int64_t in, std::int64_t out, Pair kernel, Conv2dOptions o = {})
      : in_channels(in), out_channels(out), kernel_size(kernel), options(o) {
    detail::check_channels("Conv2d", in, out, o.groups);
    const double b = detail::fan_in_bound(in / o.groups * kernel.h * kernel.w);
    weight = this->register_parameter("weight", detail::uniform_param<T>({out, in / o.groups, kernel.h, kernel.w}, b));
    if (o.bias) bias = this->register_parameter("bias", detail::uniform_param<T>({out}, b));
  }
  Tensor<T> forward(const Tensor<T>& x) {
    return conv2d(x, weight, bias, {options.stride, options.padding, options.dilation, options.groups});
  }
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << in_channels << ", " << out_channels << ", kernel_size=" << kernel_size.str()
      << ", stride=" << options.stride.str();
    if (options.padding.mode != Padding::Mode::explicit_ || options.padding.value.h || options.padding.value.w)
      s << ", padding=" << detail::padding_repr(options.padding);
    if (options.dilation.h != 1 || options.dilation.w != 1) s << ", dilation=" << options.dilation.str();
    if (options.groups != 1) s << ", groups=" << options.groups;
    if (!options.bias) s << ", bias=False";
    return s.str();
  }
};

template <class T>
struct Conv1dImpl : ModuleT<T> {
  std::int64_t in_channels, out_channels, kernel_size;
  Conv1dOptions options;
  Tensor<T> weight, bias;

  Conv1dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel, Conv1dOptions o = {})
      : in_channels(in), out_channels(out), kernel_size(kernel), options(o) {
    detail::check_channels("Conv1d", in, out, o.groups);
    const double b = detail::fan_in_bound(in / o.groups * kernel);
    weight = this->register_parameter("weight", detail::uniform_param<T>({out, in / o.groups, kernel}, b));
    if (o.bias) bias = this->register_parameter("bias", detail::uniform_param<T>({out}, b));
  }
  Tensor<T> forward(const Tensor<T>& x) {
    return conv1d(x, weight, bias, {options.stride, options.padding, options.dilation, options.groups});
  }
  std::string type_name() const override { return "Conv1d"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << in_channels << ", " << out_channels << ", kernel_size=(" << kernel_size << ",), stride=(" << options.stride
      << ",)";
    if (options.groups != 1) s << ", groups=" << options.groups;
    if (!options.bias) s << ", bias=False";
    return s.str();
  }
};

template <class T>
struct ConvTranspose2dImpl : ModuleT<T> {
  std::int64_t in_channels, out_channels;
  Pair kernel_size;
  ConvTranspose2dOptions options;
  Tensor<T> weight, bias;

  ConvTranspose2dImpl(std::int64_t in, std::int64_t out, Pair kernel, ConvTranspose2dOptions o = {})
      : in_channels(in), out_channels(out), kernel_size(kernel), options(o) {
    detail::check_channels("ConvTranspose2d", in, out, o.groups);
    // PyTorch computes fan_in from the weight's dim 1: out_channels / groups.
    const double b = detail::fan_in_bound(out / o.groups * kernel.h * kernel.w);
    weight = this->register_parameter("weight", detail::uniform_param<T>({in, out / o.groups, kernel.h, kernel.w}, b));
    if (o.bias) bias = this->register_parameter("bias", detail::uniform_param<T>({out}, b));
  }
  Tensor<T> forward(const Tensor<T>& x) {
    return conv_transpose2d(x, weight, bias,
                            {options.stride, options.padding, options.output_padding, options.groups, options.dilation});
  }
  std::string type_name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << in_channels << ", " << out_channels << ", kernel_size=" << kernel_size.str()
      << ", stride=" << options.stride.str();
    if (options.padding.h || options.padding.w) s << ", padding=" << options.padding.str();
    if (options.output_padding.h || options.output_padding.w) s << ", output_padding=" << options.output_padding.str();
    if (options.groups != 1) s << ", groups=" << options.groups;
    if (!options.bias) s << ", bias=False";
    return s.str();
  }
};

template <class T>
class Conv2dT : public ModuleHolder<Conv2dImpl<T>> {
 public:
  Conv2dT(std::int64_t in, std::int64_t out, Pair kernel, Conv2dOptions o = {})
      : ModuleHolder<Conv2dImpl<T>>(std::make_shared<Conv2dImpl<T>>(in, out, kernel, o)) {}
};
template <class T>
class Conv1dT : public ModuleHolder<Conv1dImpl<T>> {
 public:
  Conv1dT(std::int64_t in, std::int64_t out, std::int64_t kernel, Conv1dOptions o = {})
      : ModuleHolder<Conv1dImpl<T>>(std::make_shared<Conv1dImpl<T>>(in, out, kernel, o)) {}
};
template <class T>
class ConvTranspose2dT : public ModuleHolder<ConvTranspose2dImpl<T>> {
 public:
  ConvTranspose2dT(std::int64_t in, std::int64_t out, Pair kernel, ConvTranspose2dOptions o = {})
      : ModuleHolder<ConvTranspose2dImpl<T>>(std::make_shared<ConvTranspose2dImpl<T>>(in, out, kernel, o)) {}
};
using Conv2d = Conv2dT<float>;
using Conv1d = Conv1dT<float>;
using ConvTranspose2d = ConvTranspose2dT<float>;

}  // namespace frost::nn
