// PyTorch's type promotion (torch.result_type) for frost's dtypes: the
// dtype an op on two tensors, or on a tensor and a C++ scalar, computes in.
// Tensor<T> is statically typed, so the rules are constexpr and a mixed op's
// result type is known at compile time.
//
// One divergence from PyTorch, by design: PyTorch lets a zero-dimensional
// tensor promote like a scalar (an int32 vector + a 0-dim int64 tensor stays
// int32), so its result dtype depends on a run-time rank. Here a tensor is a
// tensor whatever its rank; pass a C++ scalar for the scalar rule.
#pragma once
#include <cstdint>
#include <type_traits>

#include "dtype.hpp"

namespace frost {

/// The kind of a C++ scalar operand, as PyTorch's Python scalars: bool, int, float.
enum class ScalarKind : unsigned char { boolean, integer, floating };

namespace detail {
constexpr int float_rank(DType d) {  // float16 and bfloat16 share a rank: neither holds the other
  return d == DType::float64 ? 3 : d == DType::float32 ? 2 : 1;
}
constexpr bool is_signed_int(DType d) {
  return d == DType::int8 || d == DType::int16 || d == DType::int32 || d == DType::int64;
}
}  // namespace detail

/// The dtype PyTorch computes a binary op on tensors of dtypes a and b in
/// (torch.promote_types): bool < integers < floating types; uint8 with a
/// signed integer takes the signed type, at least int16; float16 with
/// bfloat16 is float32.
constexpr DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::bool_) return b;
  if (b == DType::bool_) return a;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && fb) {
    const int ra = detail::float_rank(a), rb = detail::float_rank(b);
    if (ra == rb) return DType::float32;  // float16 + bfloat16
    return ra > rb ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Two different integer types.
  if (a == DType::uint8 || b == DType::uint8) {
    const DType s = a == DType::uint8 ? b : a;  // the signed one
    return s == DType::int8 ? DType::int16 : s;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

/// The dtype of a tensor of dtype t combined with a scalar of kind k: the
/// tensor's, unless the scalar is of a higher category (an int scalar with a
/// bool tensor gives int64, a float scalar with an integer or bool tensor
/// the default float dtype, float32).
constexpr DType promote_scalar(DType t, ScalarKind k) {
  switch (k) {
    case ScalarKind::boolean: return t;
    case ScalarKind::integer: return t == DType::bool_ ? DType::int64 : t;
    case ScalarKind::floating: return is_floating_point(t) ? t : DType::float32;
  }
  return t;
}

/// The kind of C++ scalar type S (half and bfloat16 count as floating).
template <class S>
constexpr ScalarKind scalar_kind() {
  if constexpr (std::is_same_v<S, bool>) return ScalarKind::boolean;
  else if constexpr (std::is_integral_v<S>) return ScalarKind::integer;
  else return ScalarKind::floating;
}

namespace detail {
template <DType D>
struct dtype_type;
#define FROST_DTYPE_TYPE(cxx, e, name, st) \
  template <>                             \
  struct dtype_type<DType::e> {           \
    using type = cxx;                     \
  };
FROST_FOR_EACH_DTYPE(FROST_DTYPE_TYPE)
#undef FROST_DTYPE_TYPE
}  // namespace detail

/// The C++ element type of dtype D.
template <DType D>
using dtype_type_t = typename detail::dtype_type<D>::type;

/// The element type an op on Tensor<A> and Tensor<B> computes in.
template <Scalar A, Scalar B>
using promote_t = dtype_type_t<promote_types(dtype_of<A>(), dtype_of<B>())>;

/// The element type an op on Tensor<T> and a C++ scalar of type S computes in.
template <Scalar T, class S>
using promote_scalar_t = dtype_type_t<promote_scalar(dtype_of<T>(), scalar_kind<S>())>;

/// The element type of a sum or product of Tensor<T>: int64 for integers and bool, as PyTorch.
template <Scalar T>
using sum_result_t = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;

/// A C++ value usable as a scalar operand: the arithmetic types, half and bfloat16.
template <class S>
concept ScalarOperand = std::is_arithmetic_v<S> || std::is_same_v<S, half> || std::is_same_v<S, bfloat16>;

}  // namespace frost
