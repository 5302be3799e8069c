// Op table rows for the elementwise ops: unary, scalar forms, binary with
// broadcasting, comparisons, selection and the fused gradient kernels.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "op_table.hpp"

namespace frost::test::optable {

namespace {

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2)); }
double gelu_grad_ref(double x) {
  return 0.5 * (1 + std::erf(x / std::numbers::sqrt2)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
}
double silu_grad_ref(double x) { return sigmoid_ref(x) * (1 + x * (1 - sigmoid_ref(x))); }
// GELU's tanh approximation and its derivative, from the formula (PyTorch's approximate="tanh").
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double gelu_tanh_grad_ref(double x) {
  const double k = std::sqrt(2 / std::numbers::pi), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

/// Zeros of `shape` with src written at start, start + step, ... along dim.
Arr slice_backward_ref(const Arr& src, const Shape& shape, int dim, std::int64_t start, std::int64_t step) {
  Arr y{shape, std::vector<double>(static_cast<std::size_t>(shape.numel()), 0.0)};
  for (std::int64_t i = 0; i < src.shape.numel(); ++i) {
    Coord c = unravel(i, src.shape);
    c[static_cast<std::size_t>(dim)] = start + c[static_cast<std::size_t>(dim)] * step;
    y.v[static_cast<std::size_t>(ravel(c, shape))] = src.v[static_cast<std::size_t>(i)];
  }
  return y;
}

using frost::BinaryOp;

}  // namespace

std::vector<Row> elementwise_rows() {
  const Gen u = uniform(-2, 2);
  const Gen pos = uniform(0.3, 2.5);
  // maximum/minimum: the two inputs sit on lattices 1/8 apart, so they never tie.
  const Gens no_ties{lattice(-2, 2, 0.25, 0), lattice(-2, 2, 0.25, 0.125)};
  return {
      // ---- unary ----------------------------------------------------------
      row("neg", {{2, 3}}, u, FN(-x[0]), EW1(-a)),
      row("neg", {{3, 4}}, u, FN(x[0].neg()), EW1(-a)).layout({kT}),
      row("abs", {{2, 3}}, away(-2, 2), FN(x[0].abs()), EW1(std::fabs(a))),
      row("abs", {{2, 4}}, away(-2, 2), FN(frost::abs(x[0])), EW1(std::fabs(a))).layout({kS}),
      // Piecewise constant: the rows on the kinks check the values there, the
      // rows between them the (zero) gradient.
      row("sign", {{3, 4}}, ints(-2, 2), FN(x[0].sign()), EW1(a > 0 ? 1.0 : a < 0 ? -1.0 : 0.0)).kinks(),
      row("sign", {{2, 3}}, away(-2, 2), FN(x[0].sign()), EW1(a > 0 ? 1.0 : -1.0)),
      // On a lattice of quarters: the halves test round's ties to even, and
      // every value is exact in float. Offset by an eighth, no value is a kink.
      row("floor", {{3, 4}}, lattice(-3, 3, 0.25, 0), FN(x[0].floor()), EW1(std::floor(a))).kinks(),
      row("floor", {{2, 3}}, lattice(-3, 3, 0.25, 0.125), FN(x[0].floor()), EW1(std::floor(a))),
      row("ceil", {{3, 4}}, lattice(-3, 3, 0.25, 0), FN(frost::ceil(x[0])), EW1(std::ceil(a))).kinks().layout({kT}),
      row("ceil", {{2, 3}}, lattice(-3, 3, 0.25, 0.125), FN(frost::ceil(x[0])), EW1(std::ceil(a))),
      row("round", {{3, 4}}, lattice(-3, 3, 0.25, 0), FN(x[0].round()), EW1(std::nearbyint(a))).kinks(),
      row("round", {{2, 5}}, lattice(-3, 3, 0.5, 0), FN(x[0].round()), EW1(std::nearbyint(a))).kinks().with_note("halves"),
      row("round", {{2, 3}}, lattice(-3, 3, 0.25, 0.125), FN(x[0].round()), EW1(std::nearbyint(a))),
      row("trunc", {{3, 4}}, lattice(-3, 3, 0.25, 0), FN(x[0].trunc()), EW1(std::trunc(a))).kinks().layout({kS}),
      row("trunc", {{2, 3}}, lattice(-3, 3, 0.25, 0.125), FN(x[0].trunc()), EW1(std::trunc(a))),
      row("exp", {{2, 3}}, u, FN(x[0].exp()), EW1(std::exp(a))),
      row("exp", {Shape{}}, u, FN(frost::exp(x[0])), EW1(std::exp(a))),
      row("exp", {{3, 2}}, u, FN(x[0].exp()), EW1(std::exp(a))).layout({kS}),
      row("log", {{2, 3}}, uniform(0.2, 3), FN(x[0].log()), EW1(std::log(a))),
      row("sqrt", {{2, 3}}, uniform(0.2, 3), FN(x[0].sqrt()), EW1(std::sqrt(a))),
      row("sqrt", {{3, 3}}, uniform(0.2, 3), FN(x[0].sqrt()), EW1(std::sqrt(a))).layout({kT}),
      row("rsqrt", {{2, 3}}, uniform(0.3, 3), FN(x[0].rsqrt()), EW1(1 / std::sqrt(a))),
      row("sin", {{2, 3}}, uniform(-3, 3), FN(x[0].sin()), EW1(std::sin(a))),
      row("cos", {{2, 3}}, uniform(-3, 3), FN(x[0].cos()), EW1(std::cos(a))),
      row("tanh", {{2, 3}}, u, FN(x[0].tanh()), EW1(std::tanh(a))),
      row("tanh", {{2, 3}}, u, FN(x[0].tanh()), EW1(std::tanh(a))).layout({kE}),
      row("sigmoid", {{2, 3}}, uniform(-4, 4), FN(x[0].sigmoid()), EW1(sigmoid_ref(a))),
      row("relu", {{2, 3}}, away(-2, 2), FN(x[0].relu()), EW1(std::max(a, 0.0))),
      row("relu", {{3, 4}}, away(-2, 2), FN(x[0].relu()), EW1(std::max(a, 0.0))).layout({kT}),
      row("leaky_relu", {{2, 3}}, away(-2, 2), FN(frost::leaky_relu(x[0], 0.1)), EW1(a > 0 ? a : 0.1 * a)),
      row("leaky_relu", {{2, 4}}, away(-2, 2), FN(frost::leaky_relu(x[0])), EW1(a > 0 ? a : 0.01 * a)).layout({kS}),
      row("softplus", {{2, 3}}, uniform(-3, 3), FN(frost::softplus(x[0])), EW1(std::log1p(std::exp(a)))),
      // beta 2, threshold 1: x itself above 0.5 (kept away from the switch, where the value jumps).
      row("softplus", {{3, 4}}, avoiding(-2, 2, {0.5}, 0.1), FN(frost::softplus(x[0], 2.0, 1.0)),
          EW1(2 * a > 1 ? a : std::log1p(std::exp(2 * a)) / 2)).layout({kT}),
      row("elu", {{2, 3}}, away(-2, 2), FN(frost::elu(x[0])), EW1(a > 0 ? a : std::expm1(a))),
      row("elu", {{2, 4}}, away(-2, 2), FN(frost::elu(x[0], 0.5)), EW1(a > 0 ? a : 0.5 * std::expm1(a))).layout({kS}),
      row("hardtanh", {{2, 3}}, avoiding(-2, 2, {-1, 1}, 0.2), FN(frost::hardtanh(x[0])), EW1(std::clamp(a, -1.0, 1.0))),
      row("hardtanh", {{3, 4}}, avoiding(-3, 8, {0, 6}, 0.2), FN(frost::relu6(x[0])), EW1(std::clamp(a, 0.0, 6.0))).with_note("relu6"),
      row("hardtanh", {{2, 4}}, lattice(-2, 2, 0.5, 0), FN(frost::hardtanh(x[0], -0.5, 1.0)), EW1(std::clamp(a, -0.5, 1.0))).kinks(),
      row("gelu", {{2, 3}}, uniform(-3, 3), FN(x[0].gelu()), EW1(gelu_ref(a))),
      row("silu", {{2, 3}}, uniform(-4, 4), FN(x[0].silu()), EW1(a * sigmoid_ref(a))),
      row("gelu_tanh", {{2, 3}}, uniform(-3, 3), FN(x[0].gelu("tanh")), EW1(gelu_tanh_ref(a))),
      row("erf", {{2, 3}}, u, FN(frost::erf(x[0])), EW1(std::erf(a))),
      row("clamp", {{2, 4}}, avoiding(-1.5, 1.5, {-0.5, 0.8}, 0.05), FN(x[0].clamp(-0.5, 0.8)),
          EW1(std::clamp(a, -0.5, 0.8))),
      row("clamp", {{3, 3}}, avoiding(-1.5, 1.5, {0.0, 1.0}, 0.05), FN(frost::clamp(x[0], 0.0, 1.0)),
          EW1(std::clamp(a, 0.0, 1.0))).layout({kT}),
      row("pow_scalar", {{2, 3}}, pos, FN(x[0].pow(2.5)), EW1(std::pow(a, 2.5))),
      row("pow_scalar", {{2, 3}}, u, FN(frost::pow(x[0], 3.0)), EW1(a * a * a)).with_note("negative base"),
      row("pow_scalar", {{2, 3}}, pos, FN(x[0].pow(-0.5)), EW1(1 / std::sqrt(a))),
      row("pow_scalar", {{2, 3}}, u, FN(x[0].pow(0.0)), ew1([](double) { return 1.0; })).with_note("exponent 0"),
      row("rpow_scalar", {{2, 3}}, u, FN(frost::pow(2.0, x[0])), EW1(std::pow(2.0, a))),
      row("rpow_scalar", {{2, 3}}, u, FN(frost::pow(0.5, x[0])), EW1(std::pow(0.5, a))).layout({kT}),
      row("add_scalar", {{2, 3}}, u, FN(x[0] + 1.5), EW1(a + 1.5)),
      row("add_scalar", {{2, 3}}, u, FN(0.75 + x[0]), EW1(0.75 + a)).with_note("c + x"),
      row("add_scalar", {{2, 3}}, u, FN(x[0] - 0.25), EW1(a - 0.25)).with_note("x - c"),
      row("mul_scalar", {{2, 3}}, u, FN(x[0] * -2.5), EW1(a * -2.5)),
      row("mul_scalar", {{2, 3}}, u, FN(3.0 * x[0]), EW1(3 * a)).layout({kE}),
      row("mul_scalar", {{2, 3}}, u, FN(x[0] / 4.0), EW1(a / 4)).with_note("x / c"),
      row("rsub_scalar", {{2, 3}}, u, FN(1.5 - x[0]), EW1(1.5 - a)),
      row("rdiv_scalar", {{2, 3}}, away(-2, 2, 0.3), FN(2.0 / x[0]), EW1(2 / a)),
      row("rdiv_scalar", {{3, 3}}, away(-2, 2, 0.3), FN(-1.5 / x[0]), EW1(-1.5 / a)).layout({kT}),

      // 24 contiguous elements: whole SIMD packets on the vectorised (Eigen) paths, then a tail
      row("exp", {{4, 6}}, uniform(-5, 5), FN(x[0].exp()), EW1(std::exp(a))).with_note("vector path"),
      row("log", {{4, 6}}, uniform(0.05, 20), FN(x[0].log()), EW1(std::log(a))).with_note("vector path"),
      row("sqrt", {{4, 6}}, uniform(0.05, 20), FN(x[0].sqrt()), EW1(std::sqrt(a))).with_note("vector path"),
      row("rsqrt", {{4, 6}}, uniform(0.1, 20), FN(x[0].rsqrt()), EW1(1 / std::sqrt(a))).with_note("vector path"),
      row("sin", {{4, 6}}, uniform(-6, 6), FN(x[0].sin()), EW1(std::sin(a))).with_note("vector path"),
      row("cos", {{4, 6}}, uniform(-6, 6), FN(x[0].cos()), EW1(std::cos(a))).with_note("vector path"),
      row("tanh", {{4, 6}}, uniform(-10, 10), FN(x[0].tanh()), EW1(std::tanh(a))).with_note("vector path"),
      row("sigmoid", {{4, 6}}, uniform(-30, 30), FN(x[0].sigmoid()), EW1(sigmoid_ref(a))).with_note("vector path, saturated tails"),
      row("silu", {{4, 6}}, uniform(-30, 30), FN(x[0].silu()), EW1(a * sigmoid_ref(a))).with_note("vector path"),
      row("softplus", {{4, 6}}, uniform(-30, 30), FN(frost::softplus(x[0])), EW1(a > 20 ? a : std::log1p(std::exp(a)))).with_note("saturated tails"),
      row("gelu_tanh", {{4, 6}}, uniform(-8, 8), FN(x[0].gelu("tanh")), EW1(gelu_tanh_ref(a))).with_note("vector path"),

      // ---- binary, broadcasting ---------------------------------------------
      row("add", {{2, 3}, {2, 3}}, u, FN(x[0] + x[1]), EW2(a + b)),
      row("add", {{2, 3}, {3}}, u, FN(x[0] + x[1]), EW2(a + b)),
      row("add", {{3, 1}, {1, 4}}, u, FN(x[0] + x[1]), EW2(a + b)),
      row("add", {Shape{}, {2, 3}}, u, FN(x[0] + x[1]), EW2(a + b)),
      row("add", {{2, 3}, Shape{}}, u, FN(x[0] + x[1]), EW2(a + b)),
      row("add", {Shape{}, Shape{}}, u, FN(x[0] + x[1]), EW2(a + b)),
      row("add", {{3, 3}, {3, 3}}, u, FN(x[0] + x[1]), EW2(a + b)).layout({kT, kS}),
      row("add", {{2, 3}, {3, 2}}, u, FN(x[0] + x[1].t()),
          REF(elementwise({x[0], transposed(x[1], 0, 1)}, [](const std::vector<double>& v) { return v[0] + v[1]; })))
          .layout({kE}),
      row("add", {{2, 3}}, u, FN(x[0] + x[0]), EW1(2 * a)).with_note("same tensor twice"),
      row("add", {{0, 3}, {3}}, u, FN(x[0] + x[1]), EW2(a + b)).with_note("empty"),
      row("sub", {{2, 3}, {3}}, u, FN(x[0] - x[1]), EW2(a - b)),
      row("sub", {{2, 1, 4}, {3, 1}}, u, FN(x[0] - x[1]), EW2(a - b)),
      row("sub", {{3, 2}, {3, 2}}, u, FN(x[0] - x[1]), EW2(a - b)).layout({kS, kT}),
      row("mul", {{2, 3}, {2, 3}}, u, FN(x[0] * x[1]), EW2(a * b)),
      row("mul", {{2, 1, 4}, {3, 1}}, u, FN(x[0] * x[1]), EW2(a * b)),
      row("mul", {Shape{}, {4}}, u, FN(x[0] * x[1]), EW2(a * b)),
      row("mul", {{3, 3}, {3}}, u, FN(x[0] * x[1]), EW2(a * b)).layout({kT}),
      row("mul", {{2, 3}}, u, FN(x[0] * x[0]), EW1(a * a)).with_note("same tensor twice"),
      row("div", {{2, 3}, {2, 3}}, Gens{u, away(-2, 2, 0.5)}, FN(x[0] / x[1]), EW2(a / b)),
      row("div", {{2, 3}, {3}}, Gens{u, away(-2, 2, 0.5)}, FN(x[0] / x[1]), EW2(a / b)),
      row("div", {{4}, {2, 1}}, Gens{u, away(-2, 2, 0.5)}, FN(x[0] / x[1]), EW2(a / b)),
      row("div", {{2, 3}, Shape{}}, Gens{u, away(-2, 2, 0.5)}, FN(x[0] / x[1]), EW2(a / b)),
      row("div", {{3, 3}, {3, 3}}, Gens{u, away(-2, 2, 0.5)}, FN(x[0] / x[1]), EW2(a / b)).layout({kC, kT}),
      row("pow", {{2, 3}, {2, 3}}, Gens{pos, u}, FN(x[0].pow(x[1])), EW2(std::pow(a, b))),
      row("pow", {{2, 3}, {3}}, Gens{pos, u}, FN(frost::pow(x[0], x[1])), EW2(std::pow(a, b))),
      row("pow", {{2, 1}, {1, 3}}, Gens{pos, u}, FN(x[0].pow(x[1])), EW2(std::pow(a, b))),
      row("pow", {{2, 3}, Shape{}}, Gens{pos, u}, FN(x[0].pow(x[1])), EW2(std::pow(a, b))),
      row("maximum", {{2, 3}, {2, 3}}, no_ties, FN(x[0].maximum(x[1])), EW2(std::max(a, b))),
      // Ties split the gradient in halves, as the central difference does.
      row("maximum", {{3, 4}, {3, 4}}, ints(-1, 1), FN(x[0].maximum(x[1])), EW2(std::max(a, b))).first_order_only().with_note("ties"),
      row("minimum", {{3, 4}, {4}}, ints(-1, 1), FN(x[0].minimum(x[1])), EW2(std::min(a, b))).first_order_only().with_note("ties"),
      row("maximum", {{2, 3}, {3}}, no_ties, FN(frost::maximum(x[0], x[1])), EW2(std::max(a, b))),
      row("maximum", {{2, 1}, {1, 3}}, no_ties, FN(x[0].maximum(x[1])), EW2(std::max(a, b))),
      row("maximum", {{3, 3}, {3, 3}}, no_ties, FN(x[0].maximum(x[1])), EW2(std::max(a, b))).layout({kT}),
      row("minimum", {{2, 3}, {2, 3}}, no_ties, FN(x[0].minimum(x[1])), EW2(std::min(a, b))),
      row("minimum", {{2, 3}, {3}}, no_ties, FN(frost::minimum(x[0], x[1])), EW2(std::min(a, b))),
      row("minimum", {Shape{}, {2, 3}}, no_ties, FN(x[0].minimum(x[1])), EW2(std::min(a, b))),
      row("minimum", {{3, 3}, {3, 3}}, no_ties, FN(x[0].minimum(x[1])), EW2(std::min(a, b))).layout({kC, kT}),

      // ---- rounded division and remainders (ops/rounding.hpp): divisors away
      // from 0; a uniform a / b lands on a jump (an integer) with probability 0
      row("div", {{2, 3}, {2, 3}}, Gens{u, away(-2, 2, 0.5)}, FN(frost::div(x[0], x[1], "floor")), EW2(std::floor(a / b)))
          .with_note("floor: zero gradients"),
      row("div", {{2, 3}, {3}}, Gens{u, away(-2, 2, 0.5)}, FN(frost::div(x[0], x[1], "trunc")), EW2(std::trunc(a / b)))
          .with_note("trunc"),
      row("floor_divide", {{2, 3}, {2, 1}}, Gens{u, away(-2, 2, 0.5)}, FN(frost::floor_divide(x[0], x[1])),
          EW2(std::floor(a / b))),
      row("remainder", {{2, 3}, {2, 3}}, Gens{u, away(-2, 2, 0.5)}, FN(frost::remainder(x[0], x[1])),
          EW2(a - b * std::floor(a / b))),
      row("remainder", {{2, 3}, {3}}, Gens{u, away(-2, 2, 0.5)}, FN(x[0] % x[1]), EW2(a - b * std::floor(a / b))),
      row("remainder", {{3, 3}}, Gens{u}, FN(frost::remainder(x[0], -0.75)), EW1(a + 0.75 * std::floor(a / -0.75)))
          .layout({kT}).with_note("scalar divisor"),
      row("fmod", {{2, 3}, {2, 3}}, Gens{u, away(-2, 2, 0.5)}, FN(frost::fmod(x[0], x[1])), EW2(std::fmod(a, b))),
      row("fmod", {{2, 3}, Shape{}}, Gens{u, away(-2, 2, 0.5)}, FN(frost::fmod(x[0], x[1])), EW2(std::fmod(a, b))),

      // ---- comparisons (bool results, compared as 0/1; no gradient); integer inputs make ties --
      row("eq", {{2, 3}, {2, 3}}, ints(-1, 1), FN(x[0] == x[1]), EW2(double(a == b))).no_grad(),
      row("eq", {{2, 3}, {3}}, ints(-1, 1), FN(x[0] == x[1]), EW2(double(a == b))).no_grad(),
      row("eq", {{2, 3}}, ints(-1, 1), FN(x[0] == 1.0), EW1(double(a == 1))).no_grad().with_note("scalar"),
      row("ne", {{2, 3}, {2, 1}}, ints(-1, 1), FN(x[0] != x[1]), EW2(double(a != b))).no_grad(),
      row("ne", {{2, 3}}, ints(-1, 1), FN(x[0] != 0.0), EW1(double(a != 0))).no_grad().with_note("scalar"),
      row("lt", {{2, 3}, {3}}, ints(-1, 1), FN(x[0] < x[1]), EW2(double(a < b))).no_grad(),
      row("lt", {{2, 3}}, ints(-1, 1), FN(x[0] < 0.0), EW1(double(a < 0))).no_grad().with_note("scalar"),
      row("le", {{2, 3}, {3}}, ints(-1, 1), FN(x[0] <= x[1]), EW2(double(a <= b))).no_grad(),
      row("le", {{3, 3}}, ints(-1, 1), FN(x[0] <= 0.0), EW1(double(a <= 0))).no_grad().layout({kT}),
      row("gt", {{2, 3}, Shape{}}, ints(-1, 1), FN(x[0] > x[1]), EW2(double(a > b))).no_grad(),
      row("gt", {{2, 3}}, ints(-1, 1), FN(x[0] > 0.0), EW1(double(a > 0))).no_grad().with_note("scalar"),
      row("ge", {{2, 1}, {1, 3}}, ints(-1, 1), FN(x[0] >= x[1]), EW2(double(a >= b))).no_grad(),
      row("ge", {{2, 3}}, ints(-1, 1), FN(x[0] >= 1.0), EW1(double(a >= 1))).no_grad().with_note("scalar"),

      // ---- selection: the condition comes from an input kept away from 0 ----
      row("where", {{2, 3}, {2, 3}, {2, 3}}, Gens{away(-1, 1), u}, FN(frost::where(x[0] > 0.0, x[1], x[2])),
          ew3([](double c, double a, double b) { return c > 0 ? a : b; })),
      row("where", {{3}, {2, 3}, Shape{}}, Gens{away(-1, 1), u}, FN(frost::where(x[0] > 0.0, x[1], x[2])),
          ew3([](double c, double a, double b) { return c > 0 ? a : b; })),
      row("where", {{2, 1}, {1, 3}, {2, 3}}, Gens{away(-1, 1), u}, FN(frost::where(x[0] < 0.0, x[1], x[2])),
          ew3([](double c, double a, double b) { return c < 0 ? a : b; })).layout({kC, kC, kE}),
      row("masked_fill", {{2, 3}, {2, 3}}, Gens{u, away(-1, 1)}, FN(x[0].masked_fill(x[1] > 0.0, 9.5)),
          ew2([](double a, double m) { return m > 0 ? 9.5 : a; })),
      row("masked_fill", {{2, 3}, {3}}, Gens{u, away(-1, 1)}, FN(frost::masked_fill(x[0], x[1] > 0.0, -1.0)),
          ew2([](double a, double m) { return m > 0 ? -1.0 : a; })),
      row("masked_fill", {{3, 3}, {3, 1}}, Gens{u, away(-1, 1)}, FN(x[0].masked_fill(x[1] < 0.0, 0.0)),
          ew2([](double a, double m) { return m < 0 ? 0.0 : a; })).layout({kT}),

      // ---- fused gradient kernels: (dy, saved) -> dy f'(saved) -----------------
      row("relu_backward", {{2, 3}, {2, 3}}, Gens{u, away(-2, 2)},
          FN(frost::detail::binary_grad(BinaryOp::relu_backward, x[0], x[1])),
          ew2([](double dy, double y) { return y > 0 ? dy : 0.0; })),
      row("tanh_backward", {{2, 3}, {2, 3}}, Gens{u, uniform(-0.9, 0.9)},
          FN(frost::detail::binary_grad(BinaryOp::tanh_backward, x[0], x[1])),
          ew2([](double dy, double y) { return dy * (1 - y * y); })),
      row("tanh_backward", {{3, 3}, {3, 3}}, Gens{u, uniform(-0.9, 0.9)},
          FN(frost::detail::binary_grad(BinaryOp::tanh_backward, x[0], x[1])),
          ew2([](double dy, double y) { return dy * (1 - y * y); })).layout({kT, kS}),
      row("sigmoid_backward", {{2, 3}, {2, 3}}, Gens{u, uniform(0.05, 0.95)},
          FN(frost::detail::binary_grad(BinaryOp::sigmoid_backward, x[0], x[1])),
          ew2([](double dy, double y) { return dy * y * (1 - y); })),
      row("leaky_relu_backward", {{2, 3}, {2, 3}}, Gens{u, away(-2, 2)},
          FN(frost::detail::binary_grad(BinaryOp::leaky_relu_backward, x[0], x[1], sc(x, 0.2))),
          ew2([](double dy, double v) { return v > 0 ? dy : 0.2 * dy; })),
      row("gelu_backward", {{2, 3}, {2, 3}}, Gens{u, uniform(-3, 3)},
          FN(frost::detail::binary_grad(BinaryOp::gelu_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * gelu_grad_ref(v); })),
      row("gelu_backward", {{3, 3}, {3, 3}}, Gens{u, uniform(-3, 3)},
          FN(frost::detail::binary_grad(BinaryOp::gelu_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * gelu_grad_ref(v); })).layout({kC, kT}),
      row("silu_backward", {{2, 3}, {2, 3}}, Gens{u, uniform(-4, 4)},
          FN(frost::detail::binary_grad(BinaryOp::silu_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * silu_grad_ref(v); })),
      row("gelu_tanh_backward", {{2, 3}, {2, 3}}, Gens{u, uniform(-3, 3)},
          FN(frost::detail::binary_grad(BinaryOp::gelu_tanh_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * gelu_tanh_grad_ref(v); })),
      // broadcasting (dy, saved) pairs: each gradient sums back to its input's shape
      row("relu_backward", {{2, 3}, {3}}, Gens{u, away(-2, 2)},
          FN(frost::detail::binary_grad(BinaryOp::relu_backward, x[0], x[1])),
          ew2([](double dy, double y) { return y > 0 ? dy : 0.0; })),
      row("tanh_backward", {{2, 3}, {3}}, Gens{u, uniform(-0.9, 0.9)},
          FN(frost::detail::binary_grad(BinaryOp::tanh_backward, x[0], x[1])),
          ew2([](double dy, double y) { return dy * (1 - y * y); })),
      row("sigmoid_backward", {{3}, {2, 3}}, Gens{u, uniform(0.05, 0.95)},
          FN(frost::detail::binary_grad(BinaryOp::sigmoid_backward, x[0], x[1])),
          ew2([](double dy, double y) { return dy * y * (1 - y); })),
      row("leaky_relu_backward", {{2, 1}, {1, 3}}, Gens{u, away(-2, 2)},
          FN(frost::detail::binary_grad(BinaryOp::leaky_relu_backward, x[0], x[1], sc(x, 0.2))),
          ew2([](double dy, double v) { return v > 0 ? dy : 0.2 * dy; })),
      row("gelu_backward", {{2, 3}, {2, 1}}, Gens{u, uniform(-3, 3)},
          FN(frost::detail::binary_grad(BinaryOp::gelu_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * gelu_grad_ref(v); })),
      row("silu_backward", {Shape{}, {2, 3}}, Gens{u, uniform(-4, 4)},
          FN(frost::detail::binary_grad(BinaryOp::silu_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * silu_grad_ref(v); })),
      row("gelu_tanh_backward", {{3, 1}, {3, 4}}, Gens{u, uniform(-3, 3)},
          FN(frost::detail::binary_grad(BinaryOp::gelu_tanh_backward, x[0], x[1])),
          ew2([](double dy, double v) { return dy * gelu_tanh_grad_ref(v); })),
      row("slice_backward", {{2, 3}}, u, FN(frost::detail::slice_backward(x[0], Shape{2, 7}, 1, 1, 2)),
          REF(slice_backward_ref(x[0], Shape{2, 7}, 1, 1, 2))),
      row("slice_backward", {{2, 3}}, u, FN(frost::detail::slice_backward(x[0], Shape{5, 3}, 0, 2, 1)),
          REF(slice_backward_ref(x[0], Shape{5, 3}, 0, 2, 1))),
      row("slice_backward", {{2, 3}}, u, FN(frost::detail::slice_backward(x[0], Shape{2, 9}, 1, 0, 3)),
          REF(slice_backward_ref(x[0], Shape{2, 9}, 1, 0, 3))).layout({kT}),
  };
}

TEST_CASE("op table: elementwise rows: forward in double") { check_forward_double(elementwise_rows()); }
TEST_CASE("op table: elementwise rows: forward in float") { check_forward_float(elementwise_rows()); }
TEST_CASE("op table: elementwise rows: frozen plan equals eager") { check_frozen(elementwise_rows()); }
TEST_CASE("op table: elementwise rows: gradcheck in double") { check_gradients(elementwise_rows()); }
TEST_CASE("op table: elementwise rows: second derivatives in double") { check_second_derivatives(elementwise_rows()); }

}  // namespace frost::test::optable
