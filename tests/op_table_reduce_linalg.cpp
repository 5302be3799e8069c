// Op table rows for reductions (all dims, chosen dims, keepdim, negative
// dims), softmaxes and the matrix products (2-D, batched, broadcast batch
// dims, 1-D operands).
#include <cmath>
#include <limits>

#include "op_table.hpp"

namespace frost::test::optable {

namespace {

const auto var_u = [](const std::vector<double>& v) { return var_of(v, true); };
const auto var_b = [](const std::vector<double>& v) { return var_of(v, false); };
const auto std_u = [](const std::vector<double>& v) { return std::sqrt(var_of(v, true)); };
const auto std_b = [](const std::vector<double>& v) { return std::sqrt(var_of(v, false)); };
auto norm_p(double p) {
  return [p](const std::vector<double>& v) { return norm_of(v, p); };
}
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Rows of 3 with a zero at position (row mod 4), the fourth row without:
/// prod's gradient where a slice has one zero (the second derivative is
/// fair there; with two zeros it is not kept, as in PyTorch).
Gen one_zero_per_row = [](std::int64_t n, std::mt19937_64& rng) {
  std::vector<double> v = away(-2, 2, 0.3)(n, rng);
  for (std::int64_t i = 0; i < n; ++i)
    if ((i / 3) % 4 == i % 3) v[static_cast<std::size_t>(i)] = 0;
  return v;
};

/// beta c + alpha a b
RefFn addmm_ref(double beta, double alpha) {
  return [=](const std::vector<Arr>& x) {
    return elementwise({x[0], matmul_ref(x[1], x[2])}, [=](const std::vector<double>& a) { return beta * a[0] + alpha * a[1]; });
  };
}

}  // namespace

std::vector<Row> reduce_linalg_rows() {
  const Gen u = uniform(-2, 2);
  const Gen d = distinct(-2, 2);
  const Gen nonzero = away(-1.5, 1.5, 0.5);
  const Gen large = uniform(90, 100);
  const auto mm_ref = REF(matmul_ref(x[0], x[1]));
  return {
      // ---- sum, mean, var, std, prod ------------------------------------------
      row("sum", {{2, 3, 4}}, u, FN(x[0].sum()), reduced({}, false, sum_of)),
      row("sum", {{2, 3, 4}}, u, FN(x[0].sum({1})), reduced({1}, false, sum_of)),
      row("sum", {{2, 3, 4}}, u, FN(x[0].sum({0, 2}, true)), reduced({0, 2}, true, sum_of)),
      row("sum", {{3, 4}}, u, FN(x[0].sum({-1})), reduced({-1}, false, sum_of)).layout({kT}),
      row("sum", {{2, 3}}, u, FN(frost::sum(x[0], {0, 1}, true)), reduced({}, true, sum_of)).layout({kE}),
      row("sum", {{2, 3}}, u, FN(x[0].sum({0})), reduced({0}, false, sum_of)).layout({kS}),
      row("sum", {Shape{}}, u, FN(x[0].sum()), reduced({}, false, sum_of)),
      row("sum", {{2, 0}}, u, FN(x[0].sum({1})), reduced({1}, false, sum_of)).with_note("empty"),
      row("mean", {{0, 3}}, u, FN(x[0].mean({1}, true)), reduced({1}, true, mean_of)).with_note("empty"),
      row("mean", {{2, 3, 4}}, u, FN(x[0].mean()), reduced({}, false, mean_of)),
      row("mean", {{2, 3, 4}}, u, FN(x[0].mean({0})), reduced({0}, false, mean_of)),
      row("mean", {{2, 3, 4}}, u, FN(frost::mean(x[0], {1, 2}, true)), reduced({1, 2}, true, mean_of)),
      row("mean", {{3, 4}}, u, FN(x[0].mean({-2}, true)), reduced({-2}, true, mean_of)).layout({kT}),
      row("var", {{2, 3}}, u, FN(x[0].var()), reduced({}, false, var_u)),
      row("var", {{2, 3, 4}}, u, FN(x[0].var({1}, false)), reduced({1}, false, var_b)),
      row("var", {{3, 4}}, u, FN(frost::var(x[0], {0}, true, true)), reduced({0}, true, var_u)).layout({kS}),
      row("std", {{2, 3}}, u, FN(x[0].std()), reduced({}, false, std_u)),
      row("std", {{2, 4}}, u, FN(x[0].std({1}, false, true)), reduced({1}, true, std_b)),
      row("std", {{3, 3}}, u, FN(frost::std(x[0], {0})), reduced({0}, false, std_u)).layout({kT}),
      row("prod", {{2, 3}}, nonzero, FN(x[0].prod()), reduced({}, false, prod_of)),
      row("prod", {{2, 3}}, nonzero, FN(x[0].prod(1, true)), reduced({1}, true, prod_of)),
      row("prod", {{3, 3}}, nonzero, FN(x[0].prod(0)), reduced({0}, false, prod_of)).layout({kT}),
      row("prod", {{2, 3, 2}}, nonzero, FN(frost::prod(x[0], {0, 2})), reduced({0, 2}, false, prod_of)),
      row("prod", {{4, 3}}, one_zero_per_row, FN(x[0].prod(1)), reduced({1}, false, prod_of)).with_note("zeros"),
      row("prod", {{3, 4}}, one_zero_per_row, FN(x[0].prod(0, true)), reduced({0}, true, prod_of)).layout({kT}).with_note("zeros"),

      // ---- max / min / arg: distinct values, no ties ---------------------------
      row("max", {{2, 3}}, d, FN(x[0].max()), reduced({}, false, max_of)),
      row("max", {{3, 3}}, d, FN(frost::max(x[0])), reduced({}, false, max_of)).layout({kT}),
      row("min", {{2, 3}}, d, FN(x[0].min()), reduced({}, false, min_of)),
      row("min", {{2, 4}}, d, FN(frost::min(x[0])), reduced({}, false, min_of)).layout({kS}),
      row("max_dim", {{2, 3}}, d, FN(x[0].max(1).values), reduced({1}, false, max_of)),
      row("max_dim", {{2, 3, 2}}, d, FN(x[0].max(1, true).values), reduced({1}, true, max_of)),
      row("max_dim", {{3, 4}}, d, FN(x[0].max(-1).values), reduced({-1}, false, max_of)).layout({kT}),
      row("max_dim", {{2, 3}}, d, FN(x[0].max(0).values), reduced({0}, false, max_of)).layout({kE}).with_note("ties across the expanded dim"),
      row("max_dim", {Shape{}}, d, FN(x[0].max(0).values), reduced({}, false, max_of)),
      row("max_dim", {{4}}, d, FN(x[0].max(-1).values), reduced({0}, false, max_of)),
      row("max_dim", {{2, 3}}, d, FN(as_values(x, x[0].max(1).indices)), reduced({1}, false, argmax_of)).no_grad().with_note("indices"),
      row("max_dim", {{2, 3, 2}}, d, FN(as_values(x, x[0].max(0, true).indices)), reduced({0}, true, argmax_of)).no_grad().with_note("indices"),
      row("min_dim", {{2, 3}}, d, FN(x[0].min(1).values), reduced({1}, false, min_of)),
      row("min_dim", {{2, 3, 2}}, d, FN(x[0].min(0, true).values), reduced({0}, true, min_of)),
      row("min_dim", {{3, 3}}, d, FN(x[0].min(-2).values), reduced({-2}, false, min_of)).layout({kT}),
      row("min_dim", {{2, 3}}, d, FN(as_values(x, x[0].min(-1, true).indices)), reduced({-1}, true, argmin_of)).no_grad().with_note("indices"),
      row("argmax", {{2, 3}}, d, FN(as_values(x, x[0].argmax())), reduced({}, false, argmax_of)).no_grad(),
      row("argmax", {{2, 3, 2}}, d, FN(as_values(x, x[0].argmax(1))), reduced({1}, false, argmax_of)).no_grad(),
      row("argmax", {{3, 4}}, d, FN(as_values(x, x[0].argmax(0, true))), reduced({0}, true, argmax_of)).no_grad().layout({kT}),
      row("argmin", {{2, 3}}, d, FN(as_values(x, x[0].argmin())), reduced({}, false, argmin_of)).no_grad(),
      row("argmin", {{2, 4}}, d, FN(as_values(x, x[0].argmin(-1))), reduced({-1}, false, argmin_of)).no_grad().layout({kS}),
      row("argmin", {{3, 2}}, d, FN(as_values(x, x[0].argmin(0, true))), reduced({0}, true, argmin_of)).no_grad(),

      // ---- norm, logsumexp, softmax -----------------------------------------------
      row("norm", {{2, 3}}, u, FN(x[0].norm()), reduced({}, false, norm_p(2))),
      row("norm", {{2, 3, 2}}, u, FN(x[0].norm(2, {0, 2})), reduced({0, 2}, false, norm_p(2))),
      row("norm", {{2, 3}}, nonzero, FN(x[0].norm(1, {1})), reduced({1}, false, norm_p(1))),
      row("norm", {{3, 3}}, nonzero, FN(frost::norm(x[0], 3, {0}, true)), reduced({0}, true, norm_p(3))).layout({kT}),
      row("norm", {{2, 3}}, distinct_abs(0.2, 2), FN(x[0].norm(kInf)), reduced({}, false, norm_p(kInf))),
      row("norm", {{2, 3, 2}}, distinct_abs(0.2, 2), FN(x[0].norm(kInf, {1, 2})), reduced({1, 2}, false, norm_p(kInf))),
      row("norm", {{3, 4}}, distinct_abs(0.2, 2), FN(frost::norm(x[0], -kInf, {0}, true)), reduced({0}, true, norm_p(-kInf))).layout({kT}),
      row("norm", {{2, 4}}, lattice(-1, 1, 0.5, 0), FN(x[0].norm(0, {1})), reduced({1}, false, norm_p(0))).kinks(),
      row("norm", {{2, 3}}, nonzero, FN(x[0].norm(0)), reduced({}, false, norm_p(0))),
      row("norm", {{2, 3}}, nonzero, FN(x[0].norm(0.5, {1})), reduced({1}, false, norm_p(0.5))),
      row("logsumexp", {{2, 3}}, u, FN(x[0].logsumexp({1})), reduced({1}, false, logsumexp_of)),
      row("logsumexp", {{2, 3, 2}}, u, FN(frost::logsumexp(x[0], {0, 2}, true)), reduced({0, 2}, true, logsumexp_of)),
      row("logsumexp", {{2, 3}}, u, FN(x[0].logsumexp({})), reduced({}, false, logsumexp_of)).with_note("all dims"),
      row("logsumexp", {{3, 4}}, u, FN(x[0].logsumexp({0})), reduced({0}, false, logsumexp_of)).layout({kT}),
      row("logsumexp", {{2, 4}}, large, FN(x[0].logsumexp({1})), reduced({1}, false, logsumexp_of)).with_note("large inputs"),
      row("softmax", {{2, 3}}, u, FN(x[0].softmax(1)), lines(1, softmax_of)),
      row("softmax", {{2, 3}}, u, FN(frost::softmax(x[0], 0)), lines(0, softmax_of)),
      row("softmax", {{2, 3, 2}}, u, FN(x[0].softmax(1)), lines(1, softmax_of)),
      row("softmax", {{3, 4}}, u, FN(x[0].softmax(-1)), lines(-1, softmax_of)).layout({kT}),
      row("softmax", {{2, 4}}, large, FN(x[0].softmax(1)), lines(1, softmax_of)).with_note("large inputs"),
      row("softmax", {Shape{}}, u, FN(x[0].softmax(0)), lines(0, [](const std::vector<double>&) { return std::vector<double>{1.0}; })),
      row("log_softmax", {{2, 3}}, u, FN(x[0].log_softmax(1)), lines(1, log_softmax_of)),
      row("log_softmax", {{2, 3}}, u, FN(frost::log_softmax(x[0], 0)), lines(0, log_softmax_of)),
      row("log_softmax", {{2, 3, 2}}, u, FN(x[0].log_softmax(-2)), lines(-2, log_softmax_of)),
      row("log_softmax", {{3, 4}}, u, FN(x[0].log_softmax(0)), lines(0, log_softmax_of)).layout({kT}),
      row("log_softmax", {{2, 4}}, large, FN(x[0].log_softmax(1)), lines(1, log_softmax_of)).with_note("large inputs"),

      // ---- matrix products ----------------------------------------------------------
      row("mm", {{2, 3}, {3, 4}}, u, FN(x[0].mm(x[1])), mm_ref),
      row("mm", {{2, 3}, {3, 4}}, u, FN(frost::mm(x[0], x[1])), mm_ref).layout({kT, kT}),
      row("mm", {{3, 2}, {2, 3}}, u, FN(x[0].mm(x[1])), mm_ref).layout({kS, kC}),
      row("mm", {{1, 3}, {3, 1}}, u, FN(x[0].mm(x[1])), mm_ref),
      row("mm", {{2, 3}, {3, 2}}, u, FN(x[0].mm(x[1])), mm_ref).layout({kE, kE}),
      row("mm", {{2, 0}, {0, 3}}, u, FN(x[0].mm(x[1])), mm_ref).with_note("k = 0"),
      row("mm", {{3, 1}, {1, 2}}, u, FN(x[0].mm(x[1])), mm_ref).with_note("rank 1"),
      row("bmm", {{2, 2, 3}, {2, 3, 2}}, u, FN(x[0].bmm(x[1])), mm_ref),
      row("bmm", {{2, 2, 3}, {2, 3, 2}}, u, FN(frost::bmm(x[0], x[1])), mm_ref).layout({kT, kC}),
      row("bmm", {{2, 2, 3}, {2, 3, 2}}, u, FN(x[0].bmm(x[1])), mm_ref).layout({kC, kE}),
      row("matmul", {{3}, {3}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{2, 3}, {3}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{3}, {3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{2, 3}, {3, 4}}, u, FN(frost::matmul(x[0], x[1])), mm_ref),
      row("matmul", {{2, 2, 3}, {3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{2, 2, 3}, {3}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{3}, {2, 3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{2, 2, 3}, {2, 3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref),
      row("matmul", {{2, 1, 2, 3}, {3, 3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref).with_note("broadcast batch"),
      row("matmul", {{2, 3}, {2, 3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref).with_note("2-D times batched"),
      row("matmul", {{2, 3, 2}, {2, 3}}, u, FN(x[0].matmul(x[1])), mm_ref).layout({kT, kT}),
      row("matmul", {{2, 2, 3}, {1, 3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref).layout({kE}),
      row("matmul", {{0, 2, 3}, {3, 2}}, u, FN(x[0].matmul(x[1])), mm_ref).with_note("empty batch"),
      row("outer", {{3}, {4}}, u, FN(frost::outer(x[0], x[1])), REF(matmul_ref(reshaped(x[0], {3, 1}), reshaped(x[1], {1, 4})))),
      row("outer", {{2}, {3}}, u, FN(frost::outer(x[0], x[1])), REF(matmul_ref(reshaped(x[0], {2, 1}), reshaped(x[1], {1, 3})))).layout({kS, kS}),
      row("addmm", {{2, 4}, {2, 3}, {3, 4}}, u, FN(frost::addmm(x[0], x[1], x[2])), addmm_ref(1, 1)),
      row("addmm", {{4}, {2, 3}, {3, 4}}, u, FN(frost::addmm(x[0], x[1], x[2], 0.5, 2.0)), addmm_ref(0.5, 2)),
      row("addmm", {Shape{}, {2, 3}, {3, 2}}, u, FN(frost::addmm(x[0], x[1], x[2], -1.0)), addmm_ref(-1, 1)),
      row("addmm", {{2, 1}, {2, 3}, {3, 3}}, u, FN(frost::addmm(x[0], x[1], x[2], 1.0, -0.5)), addmm_ref(1, -0.5)).layout({kC, kT, kT}),
  };
}

TEST_CASE("op table: reduction and linalg rows: forward in double") { check_forward_double(reduce_linalg_rows()); }
TEST_CASE("op table: reduction and linalg rows: forward in float") { check_forward_float(reduce_linalg_rows()); }
TEST_CASE("op table: reduction and linalg rows: frozen plan equals eager") { check_frozen(reduce_linalg_rows()); }
TEST_CASE("op table: reduction and linalg rows: gradcheck in double") { check_gradients(reduce_linalg_rows()); }
TEST_CASE("op table: reduction and linalg rows: second derivatives in double") { check_second_derivatives(reduce_linalg_rows()); }

}  // namespace frost::test::optable
