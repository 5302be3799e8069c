// The default initialisation PyTorch's layers use in reset_parameters():
// uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)] (kaiming_uniform_ with a =
// sqrt(5) reduces to this bound), drawn from frost's generator.
#pragma once
#include <cmath>
#include <cstdint>

#include "../../tensor.hpp"
#include "../init.hpp"

namespace frost::nn::detail {

/// A new leaf of `shape` uniform in [-bound, bound).
template <class T>
Tensor<T> uniform_param(const Shape& shape, double bound) {
  return init::uniform_(Tensor<T>::empty(shape), -bound, bound);
}

inline double fan_in_bound(std::int64_t fan_in) { return fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0; }

inline const char* py_bool(bool b) { return b ? "True" : "False"; }

}  // namespace frost::nn::detail
