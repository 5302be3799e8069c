// Coverage of the op table: every public op (frost::public_op_names) has a
// row, every op with a gradient has a gradcheck row, binary ops have
// broadcasting rows and every input layout is used; and the generic checks
// themselves reject a wrong value or shape, a missing record, a wrong gradient
// and a wrong second derivative.
#include <algorithm>
#include <string>

#include "op_table.hpp"

namespace frost::test::optable {

namespace {

struct Table {
  const char* name;
  std::vector<Row> rows;
};

std::vector<Table> tables() {
  return {{"elementwise", elementwise_rows()}, {"reduce/linalg", reduce_linalg_rows()}, {"views/index", views_index_rows()},
          {"conv/pool", conv_pool_rows()}};
}

std::vector<Row> all_rows() {
  std::vector<Row> all;
  for (auto& t : tables()) all.insert(all.end(), t.rows.begin(), t.rows.end());
  return all;
}

bool records_no_gradient(std::string_view op) {
  return std::find(kNoGradientOps.begin(), kNoGradientOps.end(), op) != kNoGradientOps.end();
}

bool broadcasts(const Row& r) {
  return std::any_of(r.shapes.begin(), r.shapes.end(), [&](const Shape& s) { return !(s == r.shapes[0]); });
}

/// y = x^2 whose backward is right but detached: its second derivative is lost.
struct SquareDetachedBackwardOp {
  static constexpr const char* name = "square_detached_backward";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const { g[0] = dy * x.detach() * T(2); }
};
template <class T>
Tensor<T> square_detached_backward(const Tensor<T>& x) {
  Tensor<T> y;
  {
    NoGradGuard ng;
    y = x * x;
  }
  if (frost::detail::any_requires_grad<T>({&x}))
    frost::detail::record(y, SquareDetachedBackwardOp{}, {&x}, SavedTensor<T>::input(x));
  return y;
}

}  // namespace

TEST_CASE("op table: every row names a public op") {
  for (const auto& r : all_rows()) {
    INFO("row: ", r.describe());
    CHECK(std::find(public_op_names.begin(), public_op_names.end(), std::string_view(r.name)) != public_op_names.end());
  }
  for (auto op : kNoGradientOps) {
    INFO("no-gradient op: ", std::string(op));
    CHECK(std::find(public_op_names.begin(), public_op_names.end(), op) != public_op_names.end());
  }
}

TEST_CASE("op table: every public op has a row") {
  const auto rows = all_rows();
  for (auto op : public_op_names) {
    INFO("op: ", std::string(op));
    CHECK(std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.name == op; }));
  }
}

TEST_CASE("op table: every differentiable op has a gradcheck row") {
  const auto rows = all_rows();
  for (auto op : public_op_names) {
    INFO("op: ", std::string(op));
    const bool gradchecked = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.name == op && r.gradchecked(); });
    // An op listed as recording no gradient must not claim one either.
    CHECK(gradchecked != records_no_gradient(op));
  }
}

TEST_CASE("op table: binary ops have broadcasting rows") {
  const auto rows = all_rows();
  for (std::string_view op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                              "where", "masked_fill", "matmul", "addmm", "relu_backward", "tanh_backward",
                              "sigmoid_backward", "leaky_relu_backward", "gelu_backward", "silu_backward",
                              "gelu_tanh_backward", "floor_divide", "remainder", "fmod"}) {
    INFO("op: ", std::string(op));
    CHECK(std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.name == op && broadcasts(r); }));
  }
}

TEST_CASE("op table: every table feeds non-contiguous inputs") {
  for (const auto& t : tables()) {
    INFO("table: ", t.name);
    for (Layout l : {kT, kS, kE}) {
      INFO("layout: ", layout_name(l));
      CHECK(std::any_of(t.rows.begin(), t.rows.end(), [&](const Row& r) {
        return std::any_of(r.layouts.begin(), r.layouts.end(), [&](Layout x) { return x == l; });
      }));
    }
  }
}

TEST_CASE("op table: the generic checks reject wrong ops") {
  const Gen u = uniform(-2, 2);
  SUBCASE("a wrong value") {
    const Row r = row("neg", {{2, 3}}, u, FN(-x[0]), ew1([](double a) { return -a * 1.001; }));
    CHECK_FALSE(forward_double_problems(r).empty());
    CHECK_FALSE(forward_float_problems(r).empty());
  }
  SUBCASE("a wrong shape") {
    const Row r = row("sum", {{2, 3}}, u, FN(x[0].sum({1}, true)), reduced({1}, false, sum_of));
    CHECK_FALSE(forward_double_problems(r).empty());
  }
  SUBCASE("an op that claims a gradient but records none") {
    const Row r = row("mul_scalar", {{2, 3}}, u, FN(x[0].detach() * 2.0), ew1([](double a) { return 2 * a; }));
    CHECK_FALSE(forward_double_problems(r).empty());
  }
  SUBCASE("a wrong gradient") {
    // Right values, but half of the gradient is cut off by detach().
    const Row r = row("neg", {{2, 3}}, away(-2, 2), FN(frost::where(x[0] > 0.0, x[0], x[0].detach())), ew1([](double a) { return a; }));
    CHECK(forward_double_problems(r).empty());
    INFO("expected: this row's gradient is wrong on purpose");
    CHECK_FALSE(gradients_match(r));
  }
  SUBCASE("a wrong second derivative") {
    const Row r = row("mul", {{2, 3}}, u, FN(square_detached_backward(x[0])), ew1([](double a) { return a * a; }));
    CHECK(forward_double_problems(r).empty());
    CHECK(gradients_match(r));
    INFO("expected: this row's second derivative is wrong on purpose");
    CHECK_FALSE(second_derivatives_match(r));
  }
}

}  // namespace frost::test::optable
