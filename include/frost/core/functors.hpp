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
  X(gelu_tanh) X(floor) X(ceil) X(round) X(trunc) X(softplus) X(elu) X(bitwise_not)

// Binary ops: y = f(a, b; p). The *_backward entries are the fused gradient
// kernels backward rules call (dy, saved) -> dx; they are ops too, so their
// own gradients make second derivatives work.
#define FROST_BINARY_OPS(X)                                                                                   \
  X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(relu_backward) \
  X(tanh_backward) X(sigmoid_backward) X(leaky_relu_backward) X(gelu_backward) X(silu_backward)                \
  X(gelu_tanh_backward) X(floor_divide) X(trunc_divide) X(remainder) X(fmod) X(bitwise_and) X(bitwise_or)         \
  X(bitwise_xor) X(shift_left) X(shift_right)

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


// ---- integers and bool -------------------------------------------------
// Two's-complement wraparound as PyTorch: the arithmetic runs in an unsigned
// type at least as wide as int (so neither signed overflow nor the int
// promotion of int16 products is undefined) and is narrowed back.

template <class T, bool Small = (sizeof(T) < sizeof(unsigned))>
struct wrap_type {
  using type = unsigned;
};
template <class T>
struct wrap_type<T, false> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using wrap_t = typename wrap_type<T>::type;
template <class T>
FROST_HOST_DEVICE inline T wrap_add(T a, T b) { return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b)); }
template <class T>
FROST_HOST_DEVICE inline T wrap_sub(T a, T b) { return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b)); }
template <class T>
FROST_HOST_DEVICE inline T wrap_mul(T a, T b) { return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b)); }

/// a / b truncated toward zero. The ops refuse a zero divisor before the
/// kernel runs (a frost::Error, as PyTorch's ZeroDivisionError); the kernel
/// still gives 0 for it rather than trap. MIN / -1 wraps to MIN (where
/// PyTorch's CPU dies of SIGFPE).
template <class T>
FROST_HOST_DEVICE inline T int_trunc_div(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>)
    if (b == T(-1)) return wrap_sub(T(0), a);
  return static_cast<T>(a / b);
}
/// a - b trunc(a / b): C++'s %, the sign of a (0 for a zero divisor and MIN % -1).
template <class T>
FROST_HOST_DEVICE inline T int_fmod(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>)
    if (b == T(-1)) return T(0);
  return static_cast<T>(a % b);
}
/// Python's a // b and a % b: rounded toward -inf, the remainder the sign of b.
template <class T>
FROST_HOST_DEVICE inline T int_floor_div(T a, T b) {
  const T q = int_trunc_div(a, b);
  if constexpr (std::is_signed_v<T>)
    if (int_fmod(a, b) != T(0) && ((a < T(0)) != (b < T(0)))) return static_cast<T>(q - T(1));
  return q;
}
template <class T>
FROST_HOST_DEVICE inline T int_remainder(T a, T b) {
  const T r = int_fmod(a, b);
  if constexpr (std::is_signed_v<T>)
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) return wrap_add(r, b);
  return r;
}
/// a^e by squaring, wrapping; a negative e gives 1 / a^|e| truncated: 1 for
/// a = 1, +-1 for a = -1, 0 otherwise (PyTorch's; the ops refuse a negative
/// scalar exponent, as PyTorch does).
template <class T>
FROST_HOST_DEVICE inline T int_pow(T a, T e) {
  if constexpr (std::is_signed_v<T>) {
    if (e < T(0)) {
      if (a == T(1)) return T(1);
      if (a == T(-1)) return (e % T(2)) != T(0) ? T(-1) : T(1);
      return T(0);
    }
  }
  T r = T(1);
  for (auto n = static_cast<wrap_t<T>>(e); n != 0; n >>= 1) {
    if (n & 1u) r = wrap_mul(r, a);
    a = wrap_mul(a, a);
  }
  return r;
}
/// PyTorch's shifts: amounts beyond the type's width (or negative) shift
/// every bit out, to 0 (left) or the sign (right).
template <class T>
FROST_HOST_DEVICE inline T int_shift_left(T a, T b) {
  constexpr auto bits = static_cast<std::make_unsigned_t<T>>(sizeof(T) * 8);
  if (static_cast<std::make_unsigned_t<T>>(b) >= bits) return T(0);
  return static_cast<T>(static_cast<wrap_t<T>>(a) << static_cast<int>(b));
}
template <class T>
FROST_HOST_DEVICE inline T int_shift_right(T a, T b) {
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  if constexpr (std::is_signed_v<T>) {
    if (b < T(0) || b >= T(bits)) return a < T(0) ? T(-1) : T(0);
  } else {
    if (b >= T(bits)) return T(0);
  }
  return static_cast<T>(a >> static_cast<int>(b));
}

/// Whether op has an integer (and bool) kernel: what the ops offer integer
/// tensors; the backends refuse the rest (exp, sin, ...) before they run.
constexpr bool int_unary_supported(UnaryOp op, bool is_bool) {
  switch (op) {
    case UnaryOp::eq_scalar: case UnaryOp::ne_scalar: case UnaryOp::lt_scalar: case UnaryOp::le_scalar:
    case UnaryOp::gt_scalar: case UnaryOp::ge_scalar: case UnaryOp::copy: case UnaryOp::bitwise_not:
      return true;
    case UnaryOp::neg: case UnaryOp::abs: case UnaryOp::sign: case UnaryOp::relu: case UnaryOp::clamp:
    case UnaryOp::pow_scalar: case UnaryOp::rpow_scalar: case UnaryOp::add_scalar: case UnaryOp::mul_scalar:
    case UnaryOp::rsub_scalar:
      return !is_bool;
    default: return false;
  }
}
constexpr bool int_binary_supported(BinaryOp op, bool is_bool) {
  switch (op) {
    case BinaryOp::eq: case BinaryOp::ne: case BinaryOp::lt: case BinaryOp::le: case BinaryOp::gt: case BinaryOp::ge:
    case BinaryOp::maximum: case BinaryOp::minimum: case BinaryOp::bitwise_and: case BinaryOp::bitwise_or:
    case BinaryOp::bitwise_xor: case BinaryOp::add: case BinaryOp::mul:
      return true;
    case BinaryOp::sub: case BinaryOp::pow: case BinaryOp::floor_divide: case BinaryOp::trunc_divide:
    case BinaryOp::remainder: case BinaryOp::fmod: case BinaryOp::shift_left: case BinaryOp::shift_right:
      return !is_bool;
    default: return false;
  }
}

/// bool: add is or, mul is and (PyTorch's), the bitwise ops are the logical ones.
FROST_HOST_DEVICE inline bool bool_binary(BinaryOp op, bool a, bool b) {
  switch (op) {
    case BinaryOp::eq: return a == b;
    case BinaryOp::ne: return a != b;
    case BinaryOp::lt: return !a && b;
    case BinaryOp::le: return !a || b;
    case BinaryOp::gt: return a && !b;
    case BinaryOp::ge: return a || !b;
    case BinaryOp::add: case BinaryOp::maximum: case BinaryOp::bitwise_or: return a || b;
    case BinaryOp::mul: case BinaryOp::minimum: case BinaryOp::bitwise_and: return a && b;
    case BinaryOp::bitwise_xor: return a != b;
    default: return false;
  }
}

/// x < 0, written so that unsigned types compare nothing (nvcc warns of it).
template <class T>
FROST_HOST_DEVICE inline bool is_negative(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0);
  else return false;
}

template <class T>
FROST_HOST_DEVICE inline T int_unary(UnaryOp op, T x, T p0, T p1) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case UnaryOp::eq_scalar: return x == p0;
      case UnaryOp::ne_scalar: return x != p0;
      case UnaryOp::lt_scalar: return !x && p0;
      case UnaryOp::le_scalar: return !x || p0;
      case UnaryOp::gt_scalar: return x && !p0;
      case UnaryOp::ge_scalar: return x || !p0;
      case UnaryOp::bitwise_not: return !x;
      default: return x;
    }
  } else {
    switch (op) {
      case UnaryOp::neg: return wrap_sub(T(0), x);
      case UnaryOp::abs: return is_negative(x) ? wrap_sub(T(0), x) : x;  // |MIN| wraps to MIN, as PyTorch
      case UnaryOp::sign: return static_cast<T>((T(0) < x) - is_negative(x));
      case UnaryOp::relu: return x > T(0) ? x : T(0);
      case UnaryOp::clamp: return x < p0 ? p0 : (x > p1 ? p1 : x);
      case UnaryOp::pow_scalar: return int_pow(x, p0);
      case UnaryOp::rpow_scalar: return int_pow(p0, x);
      case UnaryOp::add_scalar: return wrap_add(x, p0);
      case UnaryOp::mul_scalar: return wrap_mul(x, p0);
      case UnaryOp::rsub_scalar: return wrap_sub(p0, x);
      case UnaryOp::eq_scalar: return T(x == p0);
      case UnaryOp::ne_scalar: return T(x != p0);
      case UnaryOp::lt_scalar: return T(x < p0);
      case UnaryOp::le_scalar: return T(x <= p0);
      case UnaryOp::gt_scalar: return T(x > p0);
      case UnaryOp::ge_scalar: return T(x >= p0);
      case UnaryOp::bitwise_not: return static_cast<T>(~x);
      default: return x;
    }
  }
}

template <class T>
FROST_HOST_DEVICE inline T int_binary(BinaryOp op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return bool_binary(op, a, b);
  } else {
    switch (op) {
      case BinaryOp::add: return wrap_add(a, b);
      case BinaryOp::sub: return wrap_sub(a, b);
      case BinaryOp::mul: return wrap_mul(a, b);
      case BinaryOp::pow: return int_pow(a, b);
      case BinaryOp::maximum: return a > b ? a : b;
      case BinaryOp::minimum: return a < b ? a : b;
      case BinaryOp::eq: return T(a == b);
      case BinaryOp::ne: return T(a != b);
      case BinaryOp::lt: return T(a < b);
      case BinaryOp::le: return T(a <= b);
      case BinaryOp::gt: return T(a > b);
      case BinaryOp::ge: return T(a >= b);
      case BinaryOp::floor_divide: return int_floor_div(a, b);
      case BinaryOp::trunc_divide: return int_trunc_div(a, b);
      case BinaryOp::remainder: return int_remainder(a, b);
      case BinaryOp::fmod: return int_fmod(a, b);
      case BinaryOp::bitwise_and: return static_cast<T>(a & b);
      case BinaryOp::bitwise_or: return static_cast<T>(a | b);
      case BinaryOp::bitwise_xor: return static_cast<T>(a ^ b);
      case BinaryOp::shift_left: return int_shift_left(a, b);
      case BinaryOp::shift_right: return int_shift_right(a, b);
      default: return a;
    }
  }
}

// ---- floating division with rounding (PyTorch's div_floor_floating) -----

/// a // b for floats: (a - fmod(a, b)) / b, less 1 when the remainder and b
/// differ in sign, then the floor taken with care for results near a half
/// (as PyTorch's, so 0.3 // 0.1 is 2, not 3); a zero divisor gives a / b.
template <class T>
FROST_HOST_DEVICE inline T float_floor_div(T a, T b) {
  if (b == T(0)) return a / b;
  const T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
  if (div == T(0)) return std::copysign(T(0), a / b);
  T fl = std::floor(div);
  if (div - fl > T(0.5)) fl += T(1);
  return fl;
}
/// Python's a % b for floats: the sign of b (PyTorch's remainder).
template <class T>
FROST_HOST_DEVICE inline T float_remainder(T a, T b) {
  T mod = std::fmod(a, b);
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) mod += b;
  return mod;
}

template <class T>
FROST_HOST_DEVICE inline T float_unary(UnaryOp op, T x, T p0, T p1) {
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
    case UnaryOp::bitwise_not: return x;  // integers only (the ops refuse floats)
  }
  return x;
}

template <class T>
FROST_HOST_DEVICE inline T float_binary(BinaryOp op, T a, T b, T p) {
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
    case BinaryOp::floor_divide: return float_floor_div(a, b);
    case BinaryOp::trunc_divide: return std::trunc(a / b);
    case BinaryOp::remainder: return float_remainder(a, b);
    case BinaryOp::fmod: return std::fmod(a, b);
    // integers only (the ops refuse floats)
    case BinaryOp::bitwise_and: case BinaryOp::bitwise_or: case BinaryOp::bitwise_xor: case BinaryOp::shift_left:
    case BinaryOp::shift_right: return a;
  }
  return a;
}

/// y = f(x; p0, p1) for every element type with math: the integer forms for
/// integers and bool, the floating ones otherwise.
template <class T>
FROST_HOST_DEVICE inline T unary(UnaryOp op, T x, T p0, T p1) {
  if constexpr (std::is_integral_v<T>) return int_unary(op, x, p0, p1);
  else return float_unary(op, x, p0, p1);
}
/// y = f(a, b; p), likewise.
template <class T>
FROST_HOST_DEVICE inline T binary(BinaryOp op, T a, T b, T p) {
  if constexpr (std::is_integral_v<T>) {
    (void)p;
    return int_binary(op, a, b);
  } else {
    return float_binary(op, a, b, p);
  }
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
