// Scalar types a Tensor<T> may hold, and their names: PyTorch's dtypes but
// the complex ones and the unsigned types beyond uint8.
#pragma once
#include <concepts>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "half.hpp"

namespace frost {

/// The element type of a tensor. Saved plans store these by number: the
/// first three keep their numbers, new entries go at the end.
enum class DType : std::uint8_t { float32, float64, int64, bool_, uint8, int8, int16, int32, float16, bfloat16 };

/// Every dtype as X(C++ type, DType enumerator, PyTorch's name, safetensors' name),
/// in DType's order: the one list the dtype tables, casts and dispatch come from.
#define FROST_FOR_EACH_DTYPE(X)                  \
  X(float, float32, "float32", "F32")            \
  X(double, float64, "float64", "F64")           \
  X(std::int64_t, int64, "int64", "I64")         \
  X(bool, bool_, "bool", "BOOL")                 \
  X(std::uint8_t, uint8, "uint8", "U8")          \
  X(std::int8_t, int8, "int8", "I8")             \
  X(std::int16_t, int16, "int16", "I16")         \
  X(std::int32_t, int32, "int32", "I32")         \
  X(::frost::half, float16, "float16", "F16")    \
  X(::frost::bfloat16, bfloat16, "bfloat16", "BF16")

inline constexpr int kDTypeCount = 10;

namespace detail {
template <class T>
struct dtype_traits {
  static constexpr bool known = false;
};
#define FROST_DTYPE_TRAITS(type, e, name, st)      \
  template <>                                      \
  struct dtype_traits<type> {                      \
    static constexpr bool known = true;            \
    static constexpr DType dtype = DType::e;       \
  };
FROST_FOR_EACH_DTYPE(FROST_DTYPE_TRAITS)
#undef FROST_DTYPE_TRAITS
}  // namespace detail

/// Element types of Tensor<T>: bool, uint8, int8, int16, int32, int64,
/// float16 (frost::half), bfloat16 (frost::bfloat16), float and double.
template <class T>
concept Scalar = detail::dtype_traits<T>::known;

/// float and double: the element types of frozen plans, optimizers and
/// modules' parameters, whose kernels compute in their own type.
template <class T>
concept FloatScalar = std::same_as<T, float> || std::same_as<T, double>;

/// Floating element types, the 16-bit ones included: the dtypes with float
/// math and autograd (float16 and bfloat16 compute in float: opmath_t).
template <class T>
concept FloatingScalar = FloatScalar<T> || std::same_as<T, half> || std::same_as<T, bfloat16>;

/// float16 and bfloat16.
template <class T>
concept HalfScalar = std::same_as<T, half> || std::same_as<T, bfloat16>;

namespace detail {
template <class T>
struct opmath {
  using type = T;
};
template <HalfScalar T>
struct opmath<T> {
  using type = float;
};
}  // namespace detail
/// The type T's math runs in and its kernels take scalar operands as: float
/// for float16 and bfloat16 (PyTorch's opmath_type: a 16-bit op computes in
/// float and rounds its result once, and `x * 0.1` multiplies by 0.1f, not
/// by 0.1 rounded to 16 bits), T itself for the others.
template <class T>
using opmath_t = typename detail::opmath<T>::type;

/// bool and the integers.
template <class T>
concept IntegralScalar = Scalar<T> && std::is_integral_v<T>;

template <Scalar T>
constexpr DType dtype_of() {
  return detail::dtype_traits<T>::dtype;
}

constexpr const char* dtype_name(DType d) {
  switch (d) {
#define FROST_DTYPE_NAME(type, e, name, st) \
  case DType::e: return name;
    FROST_FOR_EACH_DTYPE(FROST_DTYPE_NAME)
#undef FROST_DTYPE_NAME
  }
  return "?";
}

template <Scalar T>
constexpr const char* dtype_name() { return dtype_name(dtype_of<T>()); }

/// Bytes per element.
constexpr std::size_t dtype_size(DType d) {
  switch (d) {
#define FROST_DTYPE_SIZE(type, e, name, st) \
  case DType::e: return sizeof(type);
    FROST_FOR_EACH_DTYPE(FROST_DTYPE_SIZE)
#undef FROST_DTYPE_SIZE
  }
  return 0;
}

constexpr bool is_floating_point(DType d) {
  return d == DType::float32 || d == DType::float64 || d == DType::float16 || d == DType::bfloat16;
}

/// The dtype named `name` (PyTorch's name, with or without "torch."; also
/// its aliases float, double, half, long, int, short); false when none is.
constexpr bool dtype_from_name(std::string_view name, DType& out) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
#define FROST_DTYPE_PARSE(type, e, nm, st) \
  if (name == nm) {                        \
    out = DType::e;                        \
    return true;                           \
  }
  FROST_FOR_EACH_DTYPE(FROST_DTYPE_PARSE)
#undef FROST_DTYPE_PARSE
  constexpr std::pair<std::string_view, DType> aliases[] = {{"float", DType::float32}, {"double", DType::float64},
                                                            {"half", DType::float16},  {"long", DType::int64},
                                                            {"int", DType::int32},     {"short", DType::int16}};
  for (const auto& [a, d] : aliases)
    if (name == a) {
      out = d;
      return true;
    }
  return false;
}

/// Calls f(T{}) with the element type of `d`: the run-time dtype to a static one.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
#define FROST_DTYPE_VISIT(type, e, name, st) \
  case DType::e: return f(type{});
    FROST_FOR_EACH_DTYPE(FROST_DTYPE_VISIT)
#undef FROST_DTYPE_VISIT
  }
  return f(float{});  // unreachable for a valid DType
}

}  // namespace frost
