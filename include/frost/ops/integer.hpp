// Integer and bool tensors' math, PyTorch's semantics: arithmetic that wraps
// (two's complement), `/` as true division into float32, div with
// rounding_mode, remainder / fmod, bitwise ops and shifts, comparisons into
// Tensor<bool>, logical ops, any / all, where and masked_fill with a bool
// condition, and reductions (sum / prod of integers and bools in int64). No
// op here records a gradient: integer results carry none. The float ops live
// in elementwise.hpp / reduce.hpp; the two sets have disjoint constraints.
#pragma once
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>

#include "../core/promote.hpp"
#include "common.hpp"

namespace frost {

/// The integer element types (bool aside): those with arithmetic.
template <class T>
concept IntScalar = IntegralScalar<T> && !std::same_as<T, bool>;

namespace detail {

/// The scalar c as T, refused where T cannot hold it (as PyTorch's "value
/// cannot be converted to type int8_t without overflow").
template <IntegralScalar T, class S>
T int_scalar(S c, const char* op) {
  if constexpr (std::is_same_v<T, bool> && !std::is_same_v<S, bool>)
    FROST_CHECK(c == S(0) || c == S(1), "frost::", op, ": the scalar ", +c, " is not a bool (0 or 1)");
  else if constexpr (!std::is_same_v<S, bool>)
    FROST_CHECK(std::in_range<T>(c), "frost::", op, ": the scalar ", +c, " does not fit the ", dtype_name<T>(),
                " tensor's dtype (", +std::numeric_limits<T>::lowest(), " to ", +std::numeric_limits<T>::max(),
                "); convert the tensor first, e.g. to<std::int64_t>()");
  return static_cast<T>(c);
}

/// An integer division, remainder or fmod by zero is an Error (PyTorch's
/// ZeroDivisionError) rather than the trap or garbage the hardware gives.
/// One pass over the divisor and a one-element read back.
template <IntScalar T>
void check_no_zero_divisor(const Tensor<T>& b, const char* op) {
  if (b.numel() == 0) return;
  auto zero = unary_raw(UnaryOp::eq_scalar, b, T(0));
  auto any = reduce_raw(ReduceOp::max, zero, reduction_dims(Shape{}, b.dim(), op), op);
  // A condition, not item(): traced, a plan guard that fails (an Error) when
  // a later run's divisor holds a zero, with no warning at trace time.
  if (tracing()) trace_hooks->note_location(any.data(), SourceLocation::current());
  FROST_CHECK(!static_cast<bool>(any), "frost::", op, ": integer division by zero (a ", dtype_name<T>(),
              " divisor of shape ", b.shape().str(), " holds a 0)");
}

template <IntScalar T>
Tensor<T> int_divide(BinaryOp k, const Tensor<T>& a, const Tensor<T>& b, const char* op) {
  check_same_device(a, b, op);
  check_no_zero_divisor(b, op);
  return binary_raw(k, a, b);
}

template <IntegralScalar T>
Tensor<bool> int_compare(BinaryOp k, const Tensor<T>& a, const Tensor<T>& b) {
  if constexpr (std::is_same_v<T, bool>) return binary_raw(k, a, b);
  else return binary_raw(k, a, b).template to<bool>();
}

/// x compared with the scalar c: in T when c is an integer T holds, else in
/// double (an int tensor against 0.5, or against a bound beyond its range).
template <IntegralScalar T>
Tensor<bool> int_compare_scalar(UnaryOp k, const Tensor<T>& x, double c) {
  bool exact = c >= -9.2233720368547758e18 && c < 9.2233720368547758e18 &&
               c == static_cast<double>(static_cast<std::int64_t>(c));
  if constexpr (std::is_same_v<T, bool>) exact = exact && (c == 0 || c == 1);
  else exact = exact && std::in_range<T>(static_cast<std::int64_t>(c));
  if (!exact) return unary_raw(k, x.template to<double>(), c).template to<bool>();
  auto y = unary_raw(k, x, static_cast<T>(static_cast<std::int64_t>(c)));
  if constexpr (std::is_same_v<T, bool>) return y;
  else return y.template to<bool>();
}

}  // namespace detail

// ---- arithmetic -------------------------------------------------------------

template <IntScalar T> Tensor<T> neg(const Tensor<T>& x) { return detail::unary_raw(UnaryOp::neg, x); }
template <IntScalar T> Tensor<T> operator-(const Tensor<T>& x) { return neg(x); }
/// |x|; |MIN| wraps to MIN, as PyTorch's.
template <IntScalar T> Tensor<T> abs(const Tensor<T>& x) { return detail::unary_raw(UnaryOp::abs, x); }
template <IntScalar T> Tensor<T> sign(const Tensor<T>& x) { return detail::unary_raw(UnaryOp::sign, x); }
template <IntScalar T> Tensor<T> relu(const Tensor<T>& x) { return detail::unary_raw(UnaryOp::relu, x); }

template <IntScalar T> Tensor<T> operator+(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::add, a, b); }
template <IntScalar T> Tensor<T> operator-(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::sub, a, b); }
template <IntScalar T> Tensor<T> operator*(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::mul, a, b); }
/// True division, as PyTorch's: integers divide into float32 (the default float dtype).
template <IntegralScalar T> Tensor<float> operator/(const Tensor<T>& a, const Tensor<T>& b) {
  return a.template to<float>() / b.template to<float>();
}

// With a C++ scalar: an integer scalar keeps the tensor's dtype (checked to
// fit it), a floating one computes in float32 (promote_scalar_t).
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> operator+(const Tensor<T>& x, S c) {
  if constexpr (scalar_kind<S>() == ScalarKind::floating) return x.template to<float>() + static_cast<float>(c);
  else return detail::unary_raw(UnaryOp::add_scalar, x, detail::int_scalar<T>(c, "add"));
}
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> operator+(S c, const Tensor<T>& x) { return x + c; }
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> operator-(const Tensor<T>& x, S c) {
  if constexpr (scalar_kind<S>() == ScalarKind::floating) return x.template to<float>() - static_cast<float>(c);
  else return detail::unary_raw(UnaryOp::add_scalar, x, fn::wrap_sub(T(0), detail::int_scalar<T>(c, "sub")));
}
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> operator-(S c, const Tensor<T>& x) {
  if constexpr (scalar_kind<S>() == ScalarKind::floating) return static_cast<float>(c) - x.template to<float>();
  else return detail::unary_raw(UnaryOp::rsub_scalar, x, detail::int_scalar<T>(c, "sub"));
}
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> operator*(const Tensor<T>& x, S c) {
  if constexpr (scalar_kind<S>() == ScalarKind::floating) return x.template to<float>() * static_cast<float>(c);
  else return detail::unary_raw(UnaryOp::mul_scalar, x, detail::int_scalar<T>(c, "mul"));
}
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> operator*(S c, const Tensor<T>& x) { return x * c; }
template <IntegralScalar T, ScalarOperand S> Tensor<float> operator/(const Tensor<T>& x, S c) {
  return x.template to<float>() / static_cast<float>(c);
}
template <IntegralScalar T, ScalarOperand S> Tensor<float> operator/(S c, const Tensor<T>& x) {
  return static_cast<float>(c) / x.template to<float>();
}
// A bool tensor with an integer (floating) scalar computes in int64 (float32), as PyTorch.
template <ScalarOperand S> requires(!std::is_same_v<S, bool>) Tensor<promote_scalar_t<bool, S>> operator+(const Tensor<bool>& x, S c) {
  return x.template to<promote_scalar_t<bool, S>>() + c;
}
template <ScalarOperand S> requires(!std::is_same_v<S, bool>) Tensor<promote_scalar_t<bool, S>> operator*(const Tensor<bool>& x, S c) {
  return x.template to<promote_scalar_t<bool, S>>() * c;
}

/// a / b rounded: "trunc" toward zero, "floor" toward -inf (Python's //).
/// The quotient keeps the integer dtype; a zero divisor is an Error.
template <IntScalar T> Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b, std::string_view rounding_mode) {
  FROST_CHECK(rounding_mode == "trunc" || rounding_mode == "floor", "frost::div: rounding_mode must be \"trunc\" or ",
              "\"floor\", got \"", rounding_mode, "\" (true division is a / b, into float32)");
  return detail::int_divide(rounding_mode == "trunc" ? BinaryOp::trunc_divide : BinaryOp::floor_divide, a, b, "div");
}
template <IntScalar T> Tensor<T> floor_divide(const Tensor<T>& a, const Tensor<T>& b) { return div(a, b, "floor"); }
/// Python's a % b: the sign of b.
template <IntScalar T> Tensor<T> remainder(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::int_divide(BinaryOp::remainder, a, b, "remainder");
}
/// C's a % b: the sign of a.
template <IntScalar T> Tensor<T> fmod(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::int_divide(BinaryOp::fmod, a, b, "fmod");
}
template <IntScalar T, std::integral S> Tensor<T> remainder(const Tensor<T>& a, S b) {
  return remainder(a, Tensor<T>::full({}, detail::int_scalar<T>(b, "remainder"), a.device()));
}
template <IntScalar T, std::integral S> Tensor<T> fmod(const Tensor<T>& a, S b) {
  return fmod(a, Tensor<T>::full({}, detail::int_scalar<T>(b, "fmod"), a.device()));
}
template <IntScalar T> Tensor<T> operator%(const Tensor<T>& a, const Tensor<T>& b) { return remainder(a, b); }
template <IntScalar T, std::integral S> Tensor<T> operator%(const Tensor<T>& a, S b) { return remainder(a, b); }

/// a^e elementwise, wrapping; a negative exponent gives 1 / a^|e| truncated
/// (1 for a = 1, +-1 for a = -1, else 0), as PyTorch.
template <IntScalar T> Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& e) { return detail::binary_raw(BinaryOp::pow, a, e); }
/// x^e: an integer exponent keeps the dtype (and must be >= 0, as PyTorch
/// requires); a floating one computes in float32.
template <IntScalar T, ScalarOperand S> Tensor<promote_scalar_t<T, S>> pow(const Tensor<T>& x, S e) {
  if constexpr (scalar_kind<S>() == ScalarKind::floating) {
    return x.template to<float>().pow(static_cast<float>(e));
  } else {
    FROST_CHECK(!(e < S(0)), "frost::pow: integers to negative integer powers are not allowed (a ", dtype_name<T>(),
                " tensor to the power ", +e, "); convert to a floating dtype first");
    return detail::unary_raw(UnaryOp::pow_scalar, x, detail::int_scalar<T>(e, "pow"));
  }
}

template <IntScalar T>
Tensor<T> clamp(const Tensor<T>& x, std::type_identity_t<T> lo, std::type_identity_t<T> hi) {
  FROST_CHECK(!(lo > hi), "frost::clamp: lower bound ", +lo, " is above upper bound ", +hi);
  return detail::unary_raw(UnaryOp::clamp, x, lo, hi);
}
template <IntegralScalar T> Tensor<T> maximum(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::maximum, a, b); }
template <IntegralScalar T> Tensor<T> minimum(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::minimum, a, b); }

// ---- bitwise and shifts -----------------------------------------------------

#define FROST_BITWISE(NAME, OPER)                                                                             \
  template <IntegralScalar T> Tensor<T> bitwise_##NAME(const Tensor<T>& a, const Tensor<T>& b) {              \
    return detail::binary_raw(BinaryOp::bitwise_##NAME, a, b);                                                \
  }                                                                                                           \
  template <IntegralScalar T> Tensor<T> operator OPER(const Tensor<T>& a, const Tensor<T>& b) {               \
    return bitwise_##NAME(a, b);                                                                              \
  }                                                                                                           \
  template <IntegralScalar T, std::integral S> Tensor<T> operator OPER(const Tensor<T>& a, S c) {            \
    return bitwise_##NAME(a, Tensor<T>::full({}, detail::int_scalar<T>(c, "bitwise_" #NAME), a.device()));  \
  }
FROST_BITWISE(and, &)
FROST_BITWISE(or, |)
FROST_BITWISE(xor, ^)
#undef FROST_BITWISE
/// ~x: every bit flipped; for bool, logical not.
template <IntegralScalar T> Tensor<T> bitwise_not(const Tensor<T>& x) { return detail::unary_raw(UnaryOp::bitwise_not, x); }
template <IntegralScalar T> Tensor<T> operator~(const Tensor<T>& x) { return bitwise_not(x); }

/// a << b and a >> b (arithmetic for signed types); amounts of the type's
/// width or more, or negative, shift every bit out (to 0, or the sign), as PyTorch.
template <IntScalar T> Tensor<T> bitwise_left_shift(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::shift_left, a, b); }
template <IntScalar T> Tensor<T> bitwise_right_shift(const Tensor<T>& a, const Tensor<T>& b) { return detail::binary_raw(BinaryOp::shift_right, a, b); }
template <IntScalar T> Tensor<T> operator<<(const Tensor<T>& a, const Tensor<T>& b) { return bitwise_left_shift(a, b); }
template <IntScalar T> Tensor<T> operator>>(const Tensor<T>& a, const Tensor<T>& b) { return bitwise_right_shift(a, b); }
template <IntScalar T, std::integral S> Tensor<T> operator<<(const Tensor<T>& a, S c) {
  return bitwise_left_shift(a, Tensor<T>::full({}, detail::int_scalar<T>(c, "bitwise_left_shift"), a.device()));
}
template <IntScalar T, std::integral S> Tensor<T> operator>>(const Tensor<T>& a, S c) {
  return bitwise_right_shift(a, Tensor<T>::full({}, detail::int_scalar<T>(c, "bitwise_right_shift"), a.device()));
}

// ---- comparisons, logical ops, any / all --------------------------------------

// Integer and bool tensors compare into Tensor<bool>, as PyTorch (float
// tensors too: elementwise.hpp).
#define FROST_INT_COMPARISON(OPER, NAME)                                                                  \
  template <IntegralScalar T> Tensor<bool> operator OPER(const Tensor<T>& a, const Tensor<T>& b) {        \
    return detail::int_compare(BinaryOp::NAME, a, b);                                                     \
  }                                                                                                       \
  template <IntegralScalar T, ScalarOperand S> Tensor<bool> operator OPER(const Tensor<T>& a, S c) {      \
    return detail::int_compare_scalar(UnaryOp::NAME##_scalar, a, static_cast<double>(c));                 \
  }
FROST_INT_COMPARISON(==, eq)
FROST_INT_COMPARISON(!=, ne)
FROST_INT_COMPARISON(<, lt)
FROST_INT_COMPARISON(<=, le)
FROST_INT_COMPARISON(>, gt)
FROST_INT_COMPARISON(>=, ge)
#undef FROST_INT_COMPARISON

/// x != 0 of any dtype, as bool (NaN is true).
template <Scalar T> Tensor<bool> truth(const Tensor<T>& x) { return x.template to<bool>(); }
template <Scalar A, Scalar B> Tensor<bool> logical_and(const Tensor<A>& a, const Tensor<B>& b) { return truth(a) & truth(b); }
template <Scalar A, Scalar B> Tensor<bool> logical_or(const Tensor<A>& a, const Tensor<B>& b) { return truth(a) | truth(b); }
template <Scalar A, Scalar B> Tensor<bool> logical_xor(const Tensor<A>& a, const Tensor<B>& b) { return truth(a) ^ truth(b); }
template <Scalar T> Tensor<bool> logical_not(const Tensor<T>& x) { return ~truth(x); }

namespace detail {
/// any (op max, `empty` false) or all (op min, `empty` true) of x != 0 over
/// `dims`; a reduction over no elements gives `empty`, as PyTorch.
template <Scalar T>
Tensor<bool> truth_reduce(const Tensor<T>& x, const Shape& dims, bool keepdim, ReduceOp op, bool empty, const char* name) {
  check_defined(x, name);
  const Shape red = reduction_dims(dims, x.dim(), name);
  bool none = x.numel() == 0;
  for (auto d : red) none = none || x.shape()[static_cast<int>(d)] == 0;
  if (none)
    return Tensor<bool>::full(keepdim ? keepdim_shape(x.shape(), red) : squeezed_shape(x.shape(), red), empty, x.device());
  return finish_keepdim(reduce_raw(op, truth(x), red, name), x.shape(), red, keepdim);
}
}  // namespace detail

/// Whether any (all) elements are non-zero, over `dims` (all of them when
/// empty), as Tensor<bool>; any of nothing is false, all of nothing true.
template <Scalar T> Tensor<bool> any(const Tensor<T>& x, const Shape& dims = {}, bool keepdim = false) {
  return detail::truth_reduce(x, dims, keepdim, ReduceOp::max, false, "any");
}
template <Scalar T> Tensor<bool> all(const Tensor<T>& x, const Shape& dims = {}, bool keepdim = false) {
  return detail::truth_reduce(x, dims, keepdim, ReduceOp::min, true, "all");
}

// ---- where / masked_fill with a bool condition ---------------------------------

namespace detail {
template <class T>
Tensor<T> where_raw(const Tensor<T>& cond, const Tensor<T>& a, const Tensor<T>& b) {
  check_same_device(cond, a, "where");
  check_same_device(a, b, "where");
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  auto y = Tensor<T>::empty(s, a.device());
  backend_for<T>(a.device()).where(broadcast_view(cond, s), broadcast_view(a, s), broadcast_view(b, s), y.view_of());
  return y;
}
}  // namespace detail

/// cond ? a : b (broadcast) for integer and bool tensors.
template <IntegralScalar T> Tensor<T> where(const Tensor<T>& cond, const Tensor<T>& a, const Tensor<T>& b) {
  return detail::where_raw(cond, a, b);
}
/// cond ? a : b with a bool condition, for every dtype with math; a and b of
/// different dtypes compute in their promoted dtype (torch.where's rule).
/// Float a and b keep their gradients.
template <Scalar A, Scalar B>
  requires(!std::is_same_v<A, bool> || !std::is_same_v<B, bool>)
Tensor<promote_t<A, B>> where(const Tensor<bool>& cond, const Tensor<A>& a, const Tensor<B>& b) {
  using C = promote_t<A, B>;
  return where(cond.template to<C>(), a.template to<C>(), b.template to<C>());
}
template <Scalar T>
  requires(!std::is_same_v<T, bool>)
Tensor<T> masked_fill(const Tensor<T>& x, const Tensor<bool>& mask, std::type_identity_t<T> value) {
  return masked_fill(x, mask.template to<T>(), value);
}
template <IntScalar T> Tensor<T> masked_fill(const Tensor<T>& x, const Tensor<T>& mask, std::type_identity_t<T> value) {
  detail::check_same_device(x, mask, "masked_fill");
  FROST_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(), "frost::masked_fill: mask of shape ",
              mask.shape().str(), " does not broadcast to the input's shape ", x.shape().str());
  return detail::where_raw(mask, Tensor<T>::full({}, value, x.device()), x);
}

// ---- mixed dtypes: both sides promoted (torch.result_type), then the op ---------

#define FROST_MIXED(OPER)                                                                                 \
  template <Scalar A, Scalar B>                                                                           \
    requires(!std::is_same_v<A, B>)                                                                       \
  auto operator OPER(const Tensor<A>& a, const Tensor<B>& b) {                                            \
    using C = promote_t<A, B>;                                                                            \
    return a.template to<C>() OPER b.template to<C>();                                                    \
  }
FROST_MIXED(+)
FROST_MIXED(-)
FROST_MIXED(*)
FROST_MIXED(/)
FROST_MIXED(==)
FROST_MIXED(!=)
FROST_MIXED(<)
FROST_MIXED(<=)
FROST_MIXED(>)
FROST_MIXED(>=)
#undef FROST_MIXED
template <Scalar A, Scalar B> requires(!std::is_same_v<A, B>) auto maximum(const Tensor<A>& a, const Tensor<B>& b) {
  return maximum(a.template to<promote_t<A, B>>(), b.template to<promote_t<A, B>>());
}
template <Scalar A, Scalar B> requires(!std::is_same_v<A, B>) auto minimum(const Tensor<A>& a, const Tensor<B>& b) {
  return minimum(a.template to<promote_t<A, B>>(), b.template to<promote_t<A, B>>());
}

// ---- reductions -------------------------------------------------------------------

/// Sums and products of integers and bools are int64, as PyTorch's (each
/// element widened first, so an int8 sum does not wrap at 127).
template <IntegralScalar T> Tensor<std::int64_t> sum(const Tensor<T>& x, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "sum");
  const Shape red = detail::reduction_dims(dims, x.dim(), "sum");
  return detail::finish_keepdim(detail::reduce_raw(ReduceOp::sum, x.template to<std::int64_t>(), red, "sum"), x.shape(),
                                red, keepdim);
}
template <IntegralScalar T> Tensor<std::int64_t> sum(const Tensor<T>& x) { return sum(x, Shape{}, false); }
template <IntegralScalar T> Tensor<std::int64_t> prod(const Tensor<T>& x, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "prod");
  const Shape red = detail::reduction_dims(dims, x.dim(), "prod");
  return detail::finish_keepdim(detail::reduce_raw(ReduceOp::prod, x.template to<std::int64_t>(), red, "prod"),
                                x.shape(), red, keepdim);
}
template <IntegralScalar T> Tensor<T> max(const Tensor<T>& x) { return detail::extremum_all(x, ReduceOp::max, "max"); }
template <IntegralScalar T> Tensor<T> min(const Tensor<T>& x) { return detail::extremum_all(x, ReduceOp::min, "min"); }

}  // namespace frost
