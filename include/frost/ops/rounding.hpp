// Rounded division and remainders of floating tensors: div(a, b,
// rounding_mode), floor_divide, remainder (Python's %, the sign of b) and
// fmod (C's, the sign of a), as PyTorch computes them (fn::float_floor_div,
// fn::float_remainder). The integer forms are in integer.hpp.
#pragma once
#include <string_view>

#include "common.hpp"

namespace frost {

/// y = a - b q, q = floor(a / b) (remainder) or trunc(a / b) (fmod);
/// da = dy, db = -dy q (q is piecewise constant), as PyTorch's.
template <BinaryOp K>
struct RemainderOp {
  static constexpr const char* name = op_name(K);
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b) const {
    if (g.needs(0)) g[0] = sum_to(dy, a.shape());
    if (!g.needs(1)) return;
    const auto q = detail::binary_raw(K == BinaryOp::remainder ? BinaryOp::floor_divide : BinaryOp::trunc_divide, a, b);
    g[1] = sum_to(-(dy * q), b.shape());
  }
};
/// y = a / b rounded: piecewise constant, so both gradients are zeros
/// (recorded, as PyTorch records them, so a loss through it still backpropagates).
struct RoundedDivOp {
  static constexpr const char* name = "div";
  Shape a, b;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const {
    if (g.needs(0)) g[0] = Tensor<T>::zeros(a, dy.device());
    if (g.needs(1)) g[1] = Tensor<T>::zeros(b, dy.device());
  }
};

namespace detail {
template <BinaryOp K, class T>
Tensor<T> remainder_op(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = binary_raw(K, a, b);
  if (any_requires_grad<T>({&a, &b}))
    record(y, RemainderOp<K>{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}
}  // namespace detail

/// a / b rounded: "trunc" toward zero, "floor" toward -inf (Python's //).
template <FloatingScalar T> Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b, std::string_view rounding_mode) {
  FROST_CHECK(rounding_mode == "trunc" || rounding_mode == "floor", "frost::div: rounding_mode must be \"trunc\" or ",
              "\"floor\", got \"", rounding_mode, "\" (true division is a / b)");
  auto y = detail::binary_raw(rounding_mode == "trunc" ? BinaryOp::trunc_divide : BinaryOp::floor_divide, a, b);
  if (detail::any_requires_grad<T>({&a, &b})) detail::record(y, RoundedDivOp{a.shape(), b.shape()}, {&a, &b});
  return y;
}
template <FloatingScalar T> Tensor<T> floor_divide(const Tensor<T>& a, const Tensor<T>& b) { return div(a, b, "floor"); }
template <FloatingScalar T> Tensor<T> remainder(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::remainder_op<BinaryOp::remainder>(a, b);
}
template <FloatingScalar T> Tensor<T> fmod(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::remainder_op<BinaryOp::fmod>(a, b);
}
template <FloatingScalar T> Tensor<T> remainder(const Tensor<T>& a, std::type_identity_t<T> b) {
  return remainder(a, Tensor<T>::full({}, b, a.device()));
}
template <FloatingScalar T> Tensor<T> fmod(const Tensor<T>& a, std::type_identity_t<T> b) {
  return fmod(a, Tensor<T>::full({}, b, a.device()));
}
template <FloatingScalar T> Tensor<T> operator%(const Tensor<T>& a, const Tensor<T>& b) { return remainder(a, b); }

}  // namespace frost
