// Elementwise ops: forward through the backend's functor kernels, backward
// rules written with ops (fused *_backward kernels where a rule would
// otherwise take several passes), so second derivatives work.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "common.hpp"

namespace frost {

template <class T>
Tensor<T> sum_to(const Tensor<T>& x, const Shape& shape);

namespace detail {

enum class Save { none, input, output };

/// Runs unary kernel `k` and records `op` with nothing, the input, or the output saved.
template <Save W, class Op, class T>
Tensor<T> unary_op(UnaryOp k, const Tensor<T>& x, Op op, opmath_t<T> p0 = 0, opmath_t<T> p1 = 0) {
  auto y = unary_raw(k, x, p0, p1);
  if (any_requires_grad<T>({&x})) {
    if constexpr (W == Save::none) record(y, std::move(op), {&x});
    else if constexpr (W == Save::input) record(y, std::move(op), {&x}, SavedTensor<T>::input(x));
    else record(y, std::move(op), {&x}, SavedTensor<T>::output(y));
  }
  return y;
}

template <class T>
Tensor<T> binary_grad(BinaryOp k, const Tensor<T>& a, const Tensor<T>& b, opmath_t<T> p = 0);
template <class T>
Tensor<T> activation_grad(BinaryOp k, const Tensor<T>& dy, const Tensor<T>& saved, opmath_t<T> p = 0);
template <class T>
bool owns_gradient(const Tensor<T>& dy, const Tensor<T>& other);

/// `dy * other` or `dy / other` in a backward rule, at dy's last use: written over dy when
/// backward holds the only reference to it (see owns_gradient).
template <class T>
Tensor<T> grad_binary(BinaryOp k, const Tensor<T>& dy, const Tensor<T>& other) {
  if (!owns_gradient(dy, other)) return k == BinaryOp::mul ? dy * other : dy / other;
  backend_for<T>(dy.device()).binary(k, dy.view_of(), broadcast_view(other, dy.shape()), dy.view_of(), T(0));
  return dy;
}

}  // namespace detail

// Each op struct: `name` for errors and the tracer, attributes as members,
// and `backward(dy, dx, saved...)` next to the forward below it.

/// y = -x; dx = -dy
struct NegOp {
  static constexpr const char* name = "neg";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = -dy; }
};
template <FloatingScalar T> Tensor<T> neg(const Tensor<T>& x) { return detail::unary_op<detail::Save::none>(UnaryOp::neg, x, NegOp{}); }

/// y = |x|; dx = dy sign(x)
struct AbsOp {
  static constexpr const char* name = "abs";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const { g[0] = dy * x.sign(); }
};
template <FloatingScalar T> Tensor<T> abs(const Tensor<T>& x) { return detail::unary_op<detail::Save::input>(UnaryOp::abs, x, AbsOp{}); }

/// y = sign(x), floor, ceil, round (halves to even, as PyTorch's), trunc:
/// piecewise constant, so dx = 0 wherever the derivative exists. Recorded as
/// PyTorch records them (a gradient of zeros, not none), so a loss that
/// reaches x only through them still backpropagates.
template <UnaryOp K>
struct PiecewiseConstantOp {
  static constexpr const char* name = op_name(K);
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = zeros_like(dy); }
};
namespace detail {
template <UnaryOp K, class T>
Tensor<T> piecewise_constant(const Tensor<T>& x) {
  return unary_op<Save::none>(K, x, PiecewiseConstantOp<K>{});
}
}  // namespace detail
template <FloatingScalar T> Tensor<T> sign(const Tensor<T>& x) { return detail::piecewise_constant<UnaryOp::sign>(x); }
template <FloatingScalar T> Tensor<T> floor(const Tensor<T>& x) { return detail::piecewise_constant<UnaryOp::floor>(x); }
template <FloatingScalar T> Tensor<T> ceil(const Tensor<T>& x) { return detail::piecewise_constant<UnaryOp::ceil>(x); }
template <FloatingScalar T> Tensor<T> round(const Tensor<T>& x) { return detail::piecewise_constant<UnaryOp::round>(x); }
template <FloatingScalar T> Tensor<T> trunc(const Tensor<T>& x) { return detail::piecewise_constant<UnaryOp::trunc>(x); }

/// y = log(1 + e^(beta x)) / beta (x where beta x > threshold);
/// dx = dy sigmoid(beta x) (dy where the op is x itself). At beta x =
/// threshold exactly, PyTorch's slope is sigmoid(threshold) with no second
/// derivative, so there it is a constant here too.
struct SoftplusOp {
  static constexpr const char* name = "softplus";
  double beta, threshold;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    const auto bx = x * T(beta);
    const T at_threshold = T(1 / (1 + std::exp(-threshold)));
    g[0] = where(detail::m01(bx) > T(threshold), dy,
                 where(detail::m01(bx) < T(threshold), dy * bx.sigmoid(), dy * at_threshold));
  }
};
template <FloatingScalar T> Tensor<T> softplus(const Tensor<T>& x, double beta = 1, double threshold = 20) {
  FROST_CHECK(beta != 0, "frost::softplus: beta must be non-zero");
  return detail::unary_op<detail::Save::input>(UnaryOp::softplus, x, SoftplusOp{beta, threshold}, opmath_t<T>(beta), opmath_t<T>(threshold));
}

/// y = x (x > 0), alpha (e^x - 1) elsewhere; dx = dy, or dy alpha e^x. At
/// x = 0 exactly the slope is alpha with no second derivative (PyTorch's).
struct EluOp {
  static constexpr const char* name = "elu";
  double alpha;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = where(detail::m01(x) > T(0), dy, where(detail::m01(x) < T(0), dy * x.exp() * T(alpha), dy * T(alpha)));
  }
};
template <FloatingScalar T> Tensor<T> elu(const Tensor<T>& x, double alpha = 1) {
  return detail::unary_op<detail::Save::input>(UnaryOp::elu, x, EluOp{alpha}, opmath_t<T>(alpha));
}

/// y = clamp(x, min_val, max_val); dx = dy strictly between the bounds and 0
/// at them (PyTorch's hardtanh; relu6 is hardtanh(x, 0, 6), so an input of
/// exactly 0 passes no gradient, as through relu; clamp's the same)
struct HardtanhOp {
  static constexpr const char* name = "hardtanh";
  double lo, hi;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = dy * ((detail::m01(x) > T(lo)) * (detail::m01(x) < T(hi)));
  }
};
template <FloatingScalar T> Tensor<T> hardtanh(const Tensor<T>& x, double min_val = -1, double max_val = 1) {
  FROST_CHECK(min_val <= max_val, "frost::hardtanh: min_val ", min_val, " is above max_val ", max_val);
  return detail::unary_op<detail::Save::input>(UnaryOp::clamp, x, HardtanhOp{min_val, max_val}, opmath_t<T>(min_val), opmath_t<T>(max_val));
}
template <FloatingScalar T> Tensor<T> relu6(const Tensor<T>& x) { return hardtanh(x, 0, 6); }

/// y = e^x; dx = dy y
struct ExpOp {
  static constexpr const char* name = "exp";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const { g[0] = dy * y; }
};
template <FloatingScalar T> Tensor<T> exp(const Tensor<T>& x) { return detail::unary_op<detail::Save::output>(UnaryOp::exp, x, ExpOp{}); }

/// y = ln x; dx = dy / x
struct LogOp {
  static constexpr const char* name = "log";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const { g[0] = dy / x; }
};
template <FloatingScalar T> Tensor<T> log(const Tensor<T>& x) { return detail::unary_op<detail::Save::input>(UnaryOp::log, x, LogOp{}); }

/// y = sqrt x; dx = dy / (2 y)
struct SqrtOp {
  static constexpr const char* name = "sqrt";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const { g[0] = dy / (y * T(2)); }
};
template <FloatingScalar T> Tensor<T> sqrt(const Tensor<T>& x) { return detail::unary_op<detail::Save::output>(UnaryOp::sqrt, x, SqrtOp{}); }

/// y = 1 / sqrt x; dx = -dy y^3 / 2
struct RsqrtOp {
  static constexpr const char* name = "rsqrt";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    g[0] = dy * y.pow(T(3)) * T(-0.5);
  }
};
template <FloatingScalar T> Tensor<T> rsqrt(const Tensor<T>& x) { return detail::unary_op<detail::Save::output>(UnaryOp::rsqrt, x, RsqrtOp{}); }

/// y = sin x; dx = dy cos x
struct SinOp {
  static constexpr const char* name = "sin";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const { g[0] = dy * x.cos(); }
};
template <FloatingScalar T> Tensor<T> sin(const Tensor<T>& x) { return detail::unary_op<detail::Save::input>(UnaryOp::sin, x, SinOp{}); }

/// y = cos x; dx = -dy sin x
struct CosOp {
  static constexpr const char* name = "cos";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const { g[0] = -(dy * x.sin()); }
};
template <FloatingScalar T> Tensor<T> cos(const Tensor<T>& x) { return detail::unary_op<detail::Save::input>(UnaryOp::cos, x, CosOp{}); }

/// y = tanh x; dx = dy (1 - y^2)
struct TanhOp {
  static constexpr const char* name = "tanh";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    g[0] = detail::activation_grad(BinaryOp::tanh_backward, dy, y);
  }
};
template <FloatingScalar T> Tensor<T> tanh(const Tensor<T>& x) { return detail::unary_op<detail::Save::output>(UnaryOp::tanh, x, TanhOp{}); }

/// y = 1 / (1 + e^-x); dx = dy y (1 - y)
struct SigmoidOp {
  static constexpr const char* name = "sigmoid";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    g[0] = detail::activation_grad(BinaryOp::sigmoid_backward, dy, y);
  }
};
template <FloatingScalar T> Tensor<T> sigmoid(const Tensor<T>& x) { return detail::unary_op<detail::Save::output>(UnaryOp::sigmoid, x, SigmoidOp{}); }

/// y = max(x, 0); dx = dy (y > 0)
struct ReluOp {
  static constexpr const char* name = "relu";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    g[0] = detail::activation_grad(BinaryOp::relu_backward, dy, y);
  }
};
template <FloatingScalar T> Tensor<T> relu(const Tensor<T>& x) { return detail::unary_op<detail::Save::output>(UnaryOp::relu, x, ReluOp{}); }

/// y = x > 0 ? x : slope x
struct LeakyReluOp {
  static constexpr const char* name = "leaky_relu";
  double slope;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = detail::activation_grad(BinaryOp::leaky_relu_backward, dy, x, opmath_t<T>(slope));
  }
};
template <FloatingScalar T> Tensor<T> leaky_relu(const Tensor<T>& x, double slope = 0.01) {
  return detail::unary_op<detail::Save::input>(UnaryOp::leaky_relu, x, LeakyReluOp{slope}, opmath_t<T>(slope));
}

/// y = x Phi(x) (exact, erf-based GELU)
struct GeluOp {
  static constexpr const char* name = "gelu";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = detail::activation_grad(BinaryOp::gelu_backward, dy, x);
  }
};
/// y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): GELU's tanh approximation
struct GeluTanhOp {
  static constexpr const char* name = "gelu_tanh";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = detail::activation_grad(BinaryOp::gelu_tanh_backward, dy, x);
  }
};
/// GELU as PyTorch's gelu(input, approximate): "none" is exact (x Phi(x)),
/// "tanh" the tanh approximation (GPT-2's; a plan's linear layer takes it as
/// cuBLASLt's GELU epilogue on CUDA).
template <FloatingScalar T> Tensor<T> gelu(const Tensor<T>& x, std::string_view approximate = "none") {
  if (approximate == "tanh") return detail::unary_op<detail::Save::input>(UnaryOp::gelu_tanh, x, GeluTanhOp{});
  FROST_CHECK(approximate == "none", "frost::gelu: approximate must be \"none\" or \"tanh\", got \"", approximate,
              "\" (input of shape ", x.shape().str(), ")");
  return detail::unary_op<detail::Save::input>(UnaryOp::gelu, x, GeluOp{});
}

/// y = x sigmoid(x)
struct SiluOp {
  static constexpr const char* name = "silu";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = detail::activation_grad(BinaryOp::silu_backward, dy, x);
  }
};
template <FloatingScalar T> Tensor<T> silu(const Tensor<T>& x) { return detail::unary_op<detail::Save::input>(UnaryOp::silu, x, SiluOp{}); }

/// y = erf x; dx = dy 2/sqrt(pi) e^(-x^2)
struct ErfOp {
  static constexpr const char* name = "erf";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = dy * (x * x * T(-1)).exp() * T(1.12837916709551257390);
  }
};
template <FloatingScalar T> Tensor<T> erf(const Tensor<T>& x) { return detail::unary_op<detail::Save::input>(UnaryOp::erf, x, ErfOp{}); }

/// y = min(max(x, lo), hi); dx = dy where lo < x < hi, and 0 at the bounds
/// themselves (PyTorch 2.15's, pinned by tests/test_kinks.cpp)
struct ClampOp {
  static constexpr const char* name = "clamp";
  double lo, hi;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = dy * (detail::m01(x) > T(lo)) * (detail::m01(x) < T(hi));
  }
};
template <FloatingScalar T> Tensor<T> clamp(const Tensor<T>& x, std::type_identity_t<opmath_t<T>> lo, std::type_identity_t<opmath_t<T>> hi) {
  FROST_CHECK(!(lo > hi), "frost::clamp: lower bound ", lo, " is above upper bound ", hi);
  return detail::unary_op<detail::Save::input>(UnaryOp::clamp, x, ClampOp{double(lo), double(hi)}, lo, hi);
}

/// y = x^e; dx = dy e x^(e-1)
struct PowScalarOp {
  static constexpr const char* name = "pow_scalar";
  double e;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    g[0] = e == 0 ? dy * T(0) : dy * x.pow(T(e - 1)) * T(e);
  }
};
template <FloatingScalar T> Tensor<T> pow(const Tensor<T>& x, std::type_identity_t<opmath_t<T>> e) {
  return detail::unary_op<detail::Save::input>(UnaryOp::pow_scalar, x, PowScalarOp{double(e)}, e);
}

/// y = c^x; dx = dy y ln c, and 0 where c = 0 and x >= 0 (PyTorch's limit;
/// there y is 0 or 1, and ln 0 would make it -inf or NaN)
struct RpowScalarOp {
  static constexpr const char* name = "rpow_scalar";
  double c;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    if (c != 0) g[0] = dy * y * T(std::log(c));
    else g[0] = where(detail::m01(y) <= T(1), Tensor<T>::zeros({}, dy.device()), dy * y * T(std::log(c)));
  }
};
template <FloatingScalar T> Tensor<T> pow(std::type_identity_t<opmath_t<T>> c, const Tensor<T>& x) {
  return detail::unary_op<detail::Save::output>(UnaryOp::rpow_scalar, x, RpowScalarOp{double(c)}, c);
}

/// y = x + c; dx = dy
struct AddScalarOp {
  static constexpr const char* name = "add_scalar";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy; }
};
/// y = x c; dx = dy c
struct MulScalarOp {
  static constexpr const char* name = "mul_scalar";
  double c;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy * T(c); }
};
/// y = c - x; dx = -dy
struct RsubScalarOp {
  static constexpr const char* name = "rsub_scalar";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = -dy; }
};
/// y = c / x; dx = -dy y / x
struct RdivScalarOp {
  static constexpr const char* name = "rdiv_scalar";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& y) const {
    g[0] = -(dy * y / x);
  }
};

// x + c, x - c and c - x round c to T first, x c and x / c keep it in
// opmath_t (float for the 16-bit types): PyTorch's CPU kernels do so.
template <FloatingScalar T> Tensor<T> operator+(const Tensor<T>& x, std::type_identity_t<opmath_t<T>> c) {
  return detail::unary_op<detail::Save::none>(UnaryOp::add_scalar, x, AddScalarOp{}, opmath_t<T>(T(c)));
}
template <FloatingScalar T> Tensor<T> operator+(std::type_identity_t<opmath_t<T>> c, const Tensor<T>& x) { return x + c; }
template <FloatingScalar T> Tensor<T> operator-(const Tensor<T>& x, std::type_identity_t<opmath_t<T>> c) { return x + (-c); }
template <FloatingScalar T> Tensor<T> operator-(std::type_identity_t<opmath_t<T>> c, const Tensor<T>& x) {
  return detail::unary_op<detail::Save::none>(UnaryOp::rsub_scalar, x, RsubScalarOp{}, opmath_t<T>(T(c)));
}
template <FloatingScalar T> Tensor<T> operator*(const Tensor<T>& x, std::type_identity_t<opmath_t<T>> c) {
  return detail::unary_op<detail::Save::none>(UnaryOp::mul_scalar, x, MulScalarOp{double(c)}, c);
}
template <FloatingScalar T> Tensor<T> operator*(std::type_identity_t<opmath_t<T>> c, const Tensor<T>& x) { return x * c; }
template <FloatingScalar T> Tensor<T> operator/(const Tensor<T>& x, std::type_identity_t<opmath_t<T>> c) { return x * (opmath_t<T>(1) / c); }
template <FloatingScalar T> Tensor<T> operator/(std::type_identity_t<opmath_t<T>> c, const Tensor<T>& x) {
  auto y = detail::unary_raw(UnaryOp::rdiv_scalar, x, c);
  if (detail::any_requires_grad<T>({&x}))
    detail::record(y, RdivScalarOp{}, {&x}, SavedTensor<T>::input(x), SavedTensor<T>::output(y));
  return y;
}
template <FloatingScalar T> Tensor<T> operator-(const Tensor<T>& x) { return neg(x); }

// Comparisons give Tensor<bool>, as PyTorch's, and carry no gradient: the
// kernel's 0 / 1 in T, cast (a frozen plan folds the cast away where a
// where() or a product reads it back as T). Against a scalar they remember
// the caller's line for a jit guard.
#define FROST_COMPARISON(OPER, NAME)                                                            \
  template <FloatingScalar T> Tensor<bool> operator OPER(const Tensor<T>& a, const Tensor<T>& b) { \
    return detail::binary_raw(BinaryOp::NAME, a, b).template to<bool>();                        \
  }                                                                                             \
  template <FloatingScalar T>                                                                      \
  Tensor<bool> operator OPER(const Tensor<T>& a, detail::Located<std::type_identity_t<opmath_t<T>>> c) {  \
    auto y = detail::unary_raw(UnaryOp::NAME##_scalar, a, c.value).template to<bool>();         \
    if (detail::tracing()) detail::trace_hooks->note_location(y.data(), c.loc);                \
    return y;                                                                                   \
  }
FROST_COMPARISON(==, eq)
FROST_COMPARISON(!=, ne)
FROST_COMPARISON(<, lt)
FROST_COMPARISON(<=, le)
FROST_COMPARISON(>, gt)
FROST_COMPARISON(>=, ge)
#undef FROST_COMPARISON

/// y = a + b (broadcast); da, db = dy summed back to each input's shape
struct AddOp {
  static constexpr const char* name = "add";
  Shape a, b;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const {
    if (g.needs(0)) g[0] = sum_to(dy, a);
    if (g.needs(1)) g[1] = sum_to(dy, b);
  }
};
/// y = a - b; da = dy, db = -dy
struct SubOp {
  static constexpr const char* name = "sub";
  Shape a, b;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const {
    if (g.needs(0)) g[0] = sum_to(dy, a);
    if (g.needs(1)) g[1] = sum_to(-dy, b);
  }
};
/// y = a b; da = dy b, db = dy a
struct MulOp {
  static constexpr const char* name = "mul";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b) const {
    if (g.needs(1)) g[1] = sum_to(dy * a, b.shape());
    // dy's last use: may be overwritten (see grad_binary)
    if (g.needs(0)) g[0] = sum_to(detail::grad_binary(BinaryOp::mul, dy, b), a.shape());
  }
};
/// y = a / b; da = dy / b, db = -dy y / b
struct DivOp {
  static constexpr const char* name = "div";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b,
                                   const Tensor<T>& y) const {
    auto da = dy / b;
    if (g.needs(0)) g[0] = sum_to(da, a.shape());
    if (g.needs(1)) g[1] = sum_to(-(da * y), b.shape());
  }
};
/// y = a^b; da = dy b a^(b-1), db = dy y ln a. As PyTorch: da = 0 where
/// b = 0 and db = 0 where a = 0 and b >= 0 (the limits; the formulas give
/// 0 * inf and ln 0 there).
struct PowOp {
  static constexpr const char* name = "pow";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b,
                                   const Tensor<T>& y) const {
    const auto zero = Tensor<T>::zeros({}, dy.device());
    if (g.needs(0)) g[0] = sum_to(where(detail::m01(b) == T(0), zero, dy * b * a.pow(b - T(1))), a.shape());
    if (g.needs(1))
      g[1] = sum_to(where((detail::m01(a) == T(0)) * (detail::m01(b) >= T(0)), zero, dy * y * a.log()), b.shape());
  }
};
/// y = max(a, b) (min(a, b) with is_max false); the gradient goes to the
/// larger (smaller) input and is split in halves on ties, as PyTorch's.
template <bool is_max>
struct ExtremumOf2Op {
  static constexpr const char* name = is_max ? "maximum" : "minimum";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b) const {
    // Each side's share: 1, less 1 where the other wins and 1/2 on a tie.
    using detail::m01;
    const auto half_tie = (m01(a) == b) * T(0.5);
    if (g.needs(0)) g[0] = sum_to(dy * (T(1) - (is_max ? m01(a) < b : m01(a) > b) - half_tie), a.shape());
    if (g.needs(1)) g[1] = sum_to(dy * (T(1) - (is_max ? m01(a) > b : m01(a) < b) - half_tie), b.shape());
  }
};
using MaximumOp = ExtremumOf2Op<true>;
using MinimumOp = ExtremumOf2Op<false>;

template <FloatingScalar T> Tensor<T> operator+(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::add, a, b);
  if (detail::any_requires_grad<T>({&a, &b})) detail::record(y, AddOp{a.shape(), b.shape()}, {&a, &b});
  return y;
}
template <FloatingScalar T> Tensor<T> operator-(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::sub, a, b);
  if (detail::any_requires_grad<T>({&a, &b})) detail::record(y, SubOp{a.shape(), b.shape()}, {&a, &b});
  return y;
}
template <FloatingScalar T> Tensor<T> operator*(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::mul, a, b);
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, MulOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}
template <FloatingScalar T> Tensor<T> operator/(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::div, a, b);
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, DivOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b), SavedTensor<T>::output(y));
  return y;
}
template <FloatingScalar T> Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::pow, a, b);
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, PowOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b), SavedTensor<T>::output(y));
  return y;
}
template <FloatingScalar T> Tensor<T> maximum(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::maximum, a, b);
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, MaximumOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}
template <FloatingScalar T> Tensor<T> minimum(const Tensor<T>& a, const Tensor<T>& b) {
  auto y = detail::binary_raw(BinaryOp::minimum, a, b);
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, MinimumOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}

// ---- fused gradient kernels, differentiable for second derivatives -------

/// dx = f'(saved) dy for tanh, sigmoid, relu, leaky_relu, gelu, gelu_tanh, silu. Its own
/// backward: d/d(dy) is the same kernel on the incoming gradient; d/d(saved)
/// is f''(saved) dy, written with ops.
struct ActivationBackwardOp {
  static constexpr const char* name = "activation_backward";
  BinaryOp kind;
  double p;
  template <class T> void backward(const Tensor<T>& gg, Grads<T> g, const Tensor<T>& dy, const Tensor<T>& s) const {
    // dy and s may broadcast: sum each gradient back to its input's shape.
    if (g.needs(0)) g[0] = sum_to(detail::binary_grad(kind, gg, s, opmath_t<T>(p)), dy.shape());
    if (!g.needs(1)) return;
    switch (kind) {
      case BinaryOp::tanh_backward: g[1] = sum_to(gg * dy * s * T(-2), s.shape()); break;
      case BinaryOp::sigmoid_backward: g[1] = sum_to(gg * dy * (T(1) - s * T(2)), s.shape()); break;
      case BinaryOp::gelu_backward: {
        auto phi = (s * s * T(-0.5)).exp() * T(0.39894228040143267794);
        g[1] = sum_to(gg * dy * phi * (T(2) - s * s), s.shape());
        break;
      }
      case BinaryOp::gelu_tanh_backward: {
        // f'' = (1 - t^2) (u' + x (u'' / 2 - t u'^2)), u = k (x + a x^3), t = tanh(u)
        const T k = T(0.79788456080286535588), a = T(0.044715);
        auto t = ((s + s * s * s * a) * k).tanh();
        auto du = (s * s * T(3) * a + T(1)) * k;
        auto f2 = (T(1) - t * t) * (du + s * (s * T(3) * a * k - t * du * du));
        g[1] = sum_to(gg * dy * f2, s.shape());
        break;
      }
      case BinaryOp::silu_backward: {
        auto sg = s.sigmoid();
        g[1] = sum_to(gg * dy * sg * (T(1) - sg) * (T(2) + s * (T(1) - sg * T(2))), s.shape());
        break;
      }
      default: break;  // relu / leaky_relu: piecewise linear, f'' = 0
    }
  }
};

namespace detail {
template <class T>
Tensor<T> binary_grad(BinaryOp k, const Tensor<T>& a, const Tensor<T>& b, opmath_t<T> p) {
  auto y = binary_raw(k, a, b, p);
  if (any_requires_grad<T>({&a, &b}))
    record(y, ActivationBackwardOp{k, double(p)}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}

/// First-order rules call this: when backward holds the only reference to
/// dy (no create_graph, nobody else sees the buffer), the gradient is
/// written over dy instead of into a new tensor.
/// Whether a backward rule may write its result over dy: no create_graph,
/// nobody else references dy or its memory, and the result has dy's shape.
template <class T>
bool owns_gradient(const Tensor<T>& dy, const Tensor<T>& other) {
  return !is_grad_enabled() && dy.impl()->use_count() == 1 && dy.impl()->storage->use_count() == 1 &&
         !dy.impl()->is_view && dy.device() == other.device() && dy.is_contiguous() &&
         (other.shape() == dy.shape() || broadcast_shapes(dy.shape(), other.shape(), "backward") == dy.shape());
}

template <class T>
Tensor<T> activation_grad(BinaryOp k, const Tensor<T>& dy, const Tensor<T>& saved, opmath_t<T> p) {
  if (!(owns_gradient(dy, saved) && dy.shape() == saved.shape())) return binary_grad(k, dy, saved, p);
  backend_for<T>(dy.device()).binary(k, dy.view_of(), saved.view_of(), dy.view_of(), p);
  return dy;
}
}  // namespace detail

/// y = cond != 0 ? a : b (broadcast); the gradient follows the chosen side
struct WhereOp {
  static constexpr const char* name = "where";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& c, const Shape& as,
                                   const Shape& bs) const {
    auto zero = Tensor<T>::zeros({}, dy.device());
    if (g.needs(0)) g[0] = sum_to(where(c, dy, zero), as);
    if (g.needs(1)) g[1] = sum_to(where(c, zero, dy), bs);
  }
};
template <FloatingScalar T> Tensor<T> where(const Tensor<T>& cond, const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_same_device(cond, a, "where");
  detail::check_same_device(a, b, "where");
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  auto y = Tensor<T>::empty(s, a.device());
  backend_for<T>(a.device()).where(detail::broadcast_view(cond, s), detail::broadcast_view(a, s),
                                   detail::broadcast_view(b, s), y.view_of());
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, WhereOp{}, {&a, &b}, SavedTensor<T>::input(cond), a.shape(), b.shape());
  return y;
}

/// x with `value` where mask != 0 (mask broadcast to x).
template <FloatingScalar T> Tensor<T> masked_fill(const Tensor<T>& x, const Tensor<T>& mask, std::type_identity_t<T> value) {
  detail::check_same_device(x, mask, "masked_fill");
  FROST_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(), "frost::masked_fill: mask of shape ",
              mask.shape().str(), " does not broadcast to the input's shape ", x.shape().str());
  return where(mask, Tensor<T>::full({}, value, x.device()), x);
}

}  // namespace frost
