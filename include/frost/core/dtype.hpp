// Scalar types a Tensor<T> may hold, and their names.
#pragma once
#include <concepts>
#include <cstdint>

namespace frost {

enum class DType : std::uint8_t { float32, float64, int64 };

/// Element types of Tensor<T>: floating types do math; int64 holds indices.
template <class T>
concept Scalar = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::int64_t>;

/// Element types that support arithmetic and autograd.
template <class T>
concept FloatScalar = std::same_as<T, float> || std::same_as<T, double>;

template <Scalar T>
constexpr DType dtype_of() {
  if constexpr (std::same_as<T, float>) return DType::float32;
  else if constexpr (std::same_as<T, double>) return DType::float64;
  else return DType::int64;
}

constexpr const char* dtype_name(DType d) {
  switch (d) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int64: return "int64";
  }
  return "?";
}

template <Scalar T>
constexpr const char* dtype_name() { return dtype_name(dtype_of<T>()); }

}  // namespace frost
