// Elementwise math, written once as host+device functors: the CPU backend
// loops over them and the CUDA kernels call the same code, so CPU tests cover
// the arithmetic of both. Each list below is the single place an elementwise
// op kind is declared.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "macros.hpp"

namespace frost {

// Unary ops: y = f(x; p0, p1). The parameter is the scalar of scalar forms
// (x + c), the slope of leaky_relu, the bounds of clamp, the exponent of pow,
// softplus's beta and threshold, elu's alpha.
// Saved plans store these by number: new entries go at the end.
#define FROST_UNARY_OPS(X) \
  X(neg) X(abs) X(sign) X(exp) X(log) X(sqrt) X(rsqrt) X(sin) X(cos) X(tanh) X(sigmoid) X(relu) X(leaky_relu) \
  X(gelu) X(silu) X(erf) X(clamp) X(pow_scalar) X(rpow_scalar) X(add_scalar) X(mul_scalar) X(rsub_scalar)    \
  X(rdiv_scalar) X(eq_scalar) X(ne_scalar) X(lt_scalar) X(le_scalar) X(gt_scalar) X(ge_scalar) X(copy)        \
  X(gelu_tanh) X(floor) X(ceil) X(round) X(trunc) X(softplus) X(elu)

// Binary ops: y = f(a, b; p). The *_backward entries are the fused gradient
// kernels backward rules call (dy, saved) -> dx; they are ops too, so their
// own gradients make second derivatives work.
#define FROST_BINARY_OPS(X)                                                                                   \
  X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(relu_backward) \
  X(tanh_backward) X(sigmoid_backward) X(leaky_relu_backward) X(gelu_backward) X(silu_backward)                \
  X(gelu_tanh_backward)

#define FROST_ENUM_ENTRY(name) name,
enum class UnaryOp : std::uint8_t { FROST_UNARY_OPS(FROST_ENUM_ENTRY) };
enum class BinaryOp : std::uint8_t { FROST_BINARY_OPS(FROST_ENUM_ENTRY) };
#undef FROST_ENUM_ENTRY
#define FROST_COUNT_ENTRY(name) +1
/// How many kinds each list has (a saved plan's op numbers stay below these).
inline constexpr int kUnaryOpCount = 0 FROST_UNARY_OPS(FROST_COUNT_ENTRY);
inline constexpr int kBinaryOpCount = 0 FROST_BINARY_OPS(FROST_COUNT_ENTRY);
#undef FROST_COUNT_ENTRY

namespace fn {

template <class T>
FROST_HOST_DEVICE inline T sigmoid(T x) {
  // Split on the sign so exp never overflows.
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}
template <class T>
FROST_HOST_DEVICE inline T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
/// d gelu / dx = Phi(x) + x phi(x)
template <class T>
FROST_HOST_DEVICE inline T gelu_grad(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
/// GELU's tanh approximation (PyTorch's approximate="tanh", cuBLASLt's GELU
/// epilogue): 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
template <class T>
FROST_HOST_DEVICE inline T gelu_tanh(T x) {
  const T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(u));
}
/// d gelu_tanh / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), u' = sqrt(2 / pi) (1 + 3 0.044715 x^2)
template <class T>
FROST_HOST_DEVICE inline T gelu_tanh_grad(T x) {
  const T k = T(0.79788456080286535588);
  const T t = std::tanh(k * (x + T(0.044715) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * x * x);
}
/// PyTorch's softplus: log(1 + e^(beta x)) / beta, and x itself where
/// beta x > threshold (the two agree there to rounding).
template <class T>
FROST_HOST_DEVICE inline T softplus(T x, T beta, T threshold) {
  const T bx = x * beta;
  return bx > threshold ? x : std::log1p(std::exp(bx)) / beta;
}
/// d silu / dx = s (1 + x (1 - s)), s = sigmoid(x)
template <class T>
FROST_HOST_DEVICE inline T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

template <class T>
FROST_HOST_DEVICE inline T unary(UnaryOp op, T x, T p0, T p1) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::abs: return x < T(0) ? -x : x;
    case UnaryOp::sign: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::rsqrt: return T(1) / std::sqrt(x);
    case UnaryOp::sin: return std::sin(x);
    case UnaryOp::cos: return std::cos(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::sigmoid: return sigmoid(x);
    case UnaryOp::relu: return x > T(0) ? x : T(0);
    case UnaryOp::leaky_relu: return x > T(0) ? x : x * p0;
    case UnaryOp::gelu: return gelu(x);
    case UnaryOp::silu: return x * sigmoid(x);
    case UnaryOp::erf: return std::erf(x);
    case UnaryOp::clamp: return x < p0 ? p0 : (x > p1 ? p1 : x);
    // x^0.5 is sqrt, as PyTorch computes it: sqrt(-inf) is NaN where pow gives inf.
    case UnaryOp::pow_scalar: return p0 == T(0.5) ? std::sqrt(x) : std::pow(x, p0);
    case UnaryOp::rpow_scalar: return std::pow(p0, x);
    case UnaryOp::add_scalar: return x + p0;
    case UnaryOp::mul_scalar: return x * p0;
    case UnaryOp::rsub_scalar: return p0 - x;
    case UnaryOp::rdiv_scalar: return p0 / x;
    case UnaryOp::eq_scalar: return T(x == p0);
    case UnaryOp::ne_scalar: return T(x != p0);
    case UnaryOp::lt_scalar: return T(x < p0);
    case UnaryOp::le_scalar: return T(x <= p0);
    case UnaryOp::gt_scalar: return T(x > p0);
    case UnaryOp::ge_scalar: return T(x >= p0);
    case UnaryOp::copy: return x;
    case UnaryOp::gelu_tanh: return gelu_tanh(x);
    // round: halves to even, as PyTorch's (nearbyint in the default rounding mode).
    case UnaryOp::floor: return std::floor(x);
    case UnaryOp::ceil: return std::ceil(x);
    case UnaryOp::round: return std::nearbyint(x);
    case UnaryOp::trunc: return std::trunc(x);
    case UnaryOp::softplus: return softplus(x, p0, p1);
    case UnaryOp::elu: return x > T(0) ? x : p0 * std::expm1(x);
  }
  return x;
}

template <class T>
FROST_HOST_DEVICE inline T binary(BinaryOp op, T a, T b, T p) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::pow: return std::pow(a, b);
    // A NaN in either input wins, as in PyTorch (a NaN fails every comparison).
    case BinaryOp::maximum: return a > b || a != a ? a : b;
    case BinaryOp::minimum: return a < b || a != a ? a : b;
    case BinaryOp::eq: return T(a == b);
    case BinaryOp::ne: return T(a != b);
    case BinaryOp::lt: return T(a < b);
    case BinaryOp::le: return T(a <= b);
    case BinaryOp::gt: return T(a > b);
    case BinaryOp::ge: return T(a >= b);
    // (dy, y): relu's output y > 0 exactly where the input was.
    case BinaryOp::relu_backward: return b > T(0) ? a : T(0);
    case BinaryOp::tanh_backward: return a * (T(1) - b * b);
    case BinaryOp::sigmoid_backward: return a * b * (T(1) - b);
    // (dy, x): these need the input, not the output.
    case BinaryOp::leaky_relu_backward: return b > T(0) ? a : a * p;
    case BinaryOp::gelu_backward: return a * gelu_grad(b);
    case BinaryOp::silu_backward: return a * silu_grad(b);
    case BinaryOp::gelu_tanh_backward: return a * gelu_tanh_grad(b);
  }
  return a;
}

/// A floating x truncated toward zero into the signed integer I (int32 or
/// int64), with what C++ leaves undefined defined the same on every device:
/// NaN is I's lowest value (what x86's and CUDA's conversions give, so
/// PyTorch's casts too), values beyond I's range saturate.
template <class I, class F>
FROST_HOST_DEVICE inline I float_to_int(F x) {
  constexpr F hi = F(sizeof(I) == 8 ? 9223372036854775808.0 : 2147483648.0);  // 2^63 / 2^31: exact in float
  if (x != x) return sizeof(I) == 8 ? I(INT64_MIN) : I(INT32_MIN);
  if (x >= hi) return sizeof(I) == 8 ? I(INT64_MAX) : I(INT32_MAX);
  if (x < -hi) return sizeof(I) == 8 ? I(INT64_MIN) : I(INT32_MIN);
  return static_cast<I>(x);
}

/// x as U (Tensor::to<U>), PyTorch's conversions defined on every device:
/// - to bool: x != 0 (NaN is true); from bool: 0 or 1;
/// - floating to int64 / int32: truncated toward zero (float_to_int: NaN the
///   lowest value, saturated beyond the range); to int16 / int8 / uint8:
///   truncated into int32, then wrapped (two's complement) as PyTorch's CPU
///   does, so uint8(-1.0) is 255 and uint8(300.0) is 44;
/// - integer to narrower integer: wrapped; integer to floating: rounded;
/// - to and from float16 / bfloat16: through float (as c10::Half does, so a
///   double rounds twice), to nearest even, overflowing to infinity.
template <class U, class T>
FROST_HOST_DEVICE inline U cast(T x) {
  if constexpr (std::is_same_v<U, T>) {
    return x;
  } else if constexpr (std::is_same_v<U, bool>) {
    if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>) return x != T(0);
    else return static_cast<float>(x) != 0.0f;  // half / bfloat16
  } else if constexpr (std::is_same_v<T, bool>) {
    return U(x ? 1 : 0);
  } else if constexpr (!std::is_integral_v<T> && !std::is_floating_point_v<T>) {  // from half / bfloat16
    return cast<U>(static_cast<float>(x));
  } else if constexpr (!std::is_integral_v<U> && !std::is_floating_point_v<U>) {  // to half / bfloat16
    return U(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<U> && std::is_floating_point_v<T>) {
    if constexpr (sizeof(U) == 8) return float_to_int<std::int64_t>(x);
    else return static_cast<U>(float_to_int<std::int32_t>(x));
  } else {
    return static_cast<U>(x);
  }
}

}  // namespace fn

// Constant expressions, so an op struct can take its static name from its kernel's.
#define FROST_NAME_ENTRY(name) #name,
inline constexpr const char* kUnaryOpNames[] = {FROST_UNARY_OPS(FROST_NAME_ENTRY)};
inline constexpr const char* kBinaryOpNames[] = {FROST_BINARY_OPS(FROST_NAME_ENTRY)};
#undef FROST_NAME_ENTRY
constexpr const char* op_name(UnaryOp op) { return kUnaryOpNames[static_cast<int>(op)]; }
constexpr const char* op_name(BinaryOp op) { return kBinaryOpNames[static_cast<int>(op)]; }

}  // namespace frost
