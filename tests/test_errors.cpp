// Bad input raises frost::Error whose message names the op and the shapes,
// dims, indices or dtypes involved (and what was expected).
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include <frost/frost.hpp>

#include "support.hpp"

using frost::Error;
using frost::NoGradGuard;
using frost::Shape;
using frost::test::TD;
using frost::test::TF;
using TI = frost::Tensor<std::int64_t>;

namespace {

/// Checks that `f` throws a frost::Error (not another exception) whose
/// message contains every one of `parts`.
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> parts) {
  bool threw = false;
  try {
    f();
  } catch (const Error& e) {
    threw = true;
    const std::string msg = e.what();
    for (const char* p : parts) {
      INFO("message: ", msg);
      const std::string want = std::string("missing \"") + p + "\"";
      CHECK_MESSAGE(msg.find(p) != std::string::npos, want);
    }
  } catch (const std::exception& e) {
    FAIL("expected frost::Error, got std::exception: ", e.what());
  }
  CHECK_MESSAGE(threw, "no frost::Error was thrown");
}

TF m23() { return TF::from({1, 2, 3, 4, 5, 6}, {2, 3}); }

}  // namespace

// ---- compile-time dtype rules ----------------------------------------------

// Tensors are typed: elementwise ops on two dtypes promote as
// torch.result_type (float with double is double, int64 with float is
// float); matmul and cat take one dtype, and nothing converts implicitly.
static_assert(std::is_invocable_v<std::plus<>, const TF&, const TF&>);
static_assert(std::is_invocable_v<std::plus<>, const TD&, const TD&>);
static_assert(std::is_same_v<std::invoke_result_t<std::plus<>, const TF&, const TD&>, TD>);
static_assert(std::is_same_v<std::invoke_result_t<std::multiplies<>, const TD&, const TF&>, TD>);
static_assert(std::is_same_v<std::invoke_result_t<std::divides<>, const TI&, const TI&>, TF>);
static_assert(std::is_same_v<std::invoke_result_t<std::plus<>, const TI&, const TI&>, TI>);
static_assert(std::is_same_v<std::invoke_result_t<std::plus<>, const TF&, const TI&>, TF>);
static_assert(!std::is_invocable_v<decltype([](const auto& a, const auto& b) -> decltype(a.matmul(b)) { return a.matmul(b); }),
                                   const TF&, const TD&>);
static_assert(!std::is_invocable_v<decltype([](const auto& a, const auto& b) -> decltype(frost::cat(std::vector{a, b})) {
                                     return frost::cat(std::vector{a, b});
                                   }),
                                   const TF&, const TD&>);
static_assert(!std::is_constructible_v<TF, TD>);
static_assert(!std::is_convertible_v<TD, TF>);
static_assert(TF::dtype() == frost::DType::float32 && TD::dtype() == frost::DType::float64 &&
              TI::dtype() == frost::DType::int64);

TEST_CASE("errors: non-broadcastable shapes in add and mul") {
  auto a = m23();
  auto b = TF::ones({4});
  expect_error([&] { (void)(a + b); }, {"add", "[2, 3]", "[4]", "broadcast"});
  expect_error([&] { (void)(a * b); }, {"mul", "[2, 3]", "[4]", "broadcast"});
  expect_error([&] { (void)(a - TF::ones({3, 3})); }, {"sub", "[2, 3]", "[3, 3]"});
  expect_error([&] { (void)(a / TF::ones({2, 1, 2})); }, {"div", "[2, 3]", "[2, 1, 2]"});
  expect_error([&] { (void)frost::maximum(a, b); }, {"maximum", "[4]"});
  expect_error([&] { (void)(a > b); }, {"gt", "[2, 3]", "[4]"});
  expect_error([&] { (void)frost::where(TF::ones({2}), a, a); }, {"where", "[2]", "[2, 3]"});
  expect_error([&] { (void)a.masked_fill(TF::ones({3, 1}), 0.0f); }, {"masked_fill", "[3, 1]", "[2, 3]"});
  // in place: the result must keep the tensor's shape
  auto c = TF::ones({3});
  expect_error([&] { c.add_(a); }, {"add_", "[2, 3]", "[3]"});
  expect_error([&] { c.mul_(TF::ones({2})); }, {"mul_", "[2]", "[3]"});
  expect_error([&] { c.copy_(TF::ones({2})); }, {"copy_", "[2]", "[3]"});
  // broadcasting that does work
  CHECK((a + TF::ones({3})).shape() == Shape{2, 3});
  CHECK((a * TF::ones({2, 1})).shape() == Shape{2, 3});
}

TEST_CASE("errors: bad dims") {
  auto a = m23();
  expect_error([&] { (void)a.sum({5}); }, {"sum", "dim 5", "2 dims"});
  expect_error([&] { (void)a.sum({-3}); }, {"sum", "dim -3"});
  expect_error([&] { (void)a.sum({0, 0}); }, {"sum", "appears twice"});
  expect_error([&] { (void)a.mean({2}); }, {"mean", "dim 2"});
  expect_error([&] { (void)a.transpose(0, 2); }, {"transpose", "dim 2"});
  expect_error([&] { (void)a.transpose(-3, 0); }, {"transpose", "dim -3"});
  expect_error([&] { (void)a.unsqueeze(3); }, {"unsqueeze", "dim 3", "[2, 3]"});
  expect_error([&] { (void)a.unsqueeze(-4); }, {"unsqueeze", "dim -4"});
  expect_error([&] { (void)a.softmax(2); }, {"softmax", "dim 2"});
  expect_error([&] { (void)a.log_softmax(-3); }, {"log_softmax", "dim -3"});
  expect_error([&] { (void)a.squeeze(2); }, {"squeeze", "dim 2"});
  expect_error([&] { (void)a.permute({0}); }, {"permute", "[2, 3]"});
  expect_error([&] { (void)a.permute({0, 0}); }, {"permute", "repeats"});
  expect_error([&] { (void)a.max(2); }, {"max", "dim 2"});
  expect_error([&] { (void)a.argmin(-5); }, {"argmin", "dim -5"});
  expect_error([&] { (void)a.flatten(1, 0); }, {"flatten", "[2, 3]"});
  expect_error([&] { (void)a.size(2); }, {"size", "dim 2"});
  expect_error([&] { (void)TF::ones({2, 2, 2}).t(); }, {"t", "[2, 2, 2]"});
  expect_error([&] { (void)frost::cat(std::vector<TF>{a, a}, 2); }, {"cat", "dim 2"});
  expect_error([&] { (void)frost::stack(std::vector<TF>{a, a}, 3); }, {"stack", "dim 3", "[2, 3]"});
  expect_error([&] { (void)a.split(1, 4); }, {"split", "dim 4"});
  // negative dims that are in range work
  CHECK(a.sum({-1}).shape() == Shape{2});
  CHECK(a.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(a.unsqueeze(2).shape() == Shape{2, 3, 1});
}

TEST_CASE("errors: out-of-range indices") {
  auto a = m23();
  expect_error([&] { (void)a.index_select(0, TI::from({0, 2})); }, {"index_select", "index 2", "size 2"});
  expect_error([&] { (void)a.index_select(1, TI::from({-4})); }, {"index_select", "-4", "size 3"});
  expect_error([&] { (void)a.index_select(0, TI::zeros({2, 2})); }, {"index_select", "[2, 2]"});
  expect_error([&] { (void)a.gather(1, TI::from({0, 3}, {2, 1})); }, {"gather", "index 3", "size 3"});
  expect_error([&] { (void)a.gather(0, TI::zeros({2})); }, {"gather", "[2]", "[2, 3]"});
  expect_error([&] { (void)a.scatter_add(0, TI::from({5}, {1, 1}), TF::ones({1, 1})); }, {"scatter_add", "index 5"});
  expect_error([&] { (void)a.select(0, 2); }, {"select", "index 2", "size 2", "[2, 3]"});
  expect_error([&] { (void)a.select(1, -4); }, {"select", "index -4", "size 3"});
  expect_error([&] { (void)a.narrow(1, 2, 2); }, {"narrow", "start 2", "length 2", "size 3"});
  expect_error([&] { (void)a.narrow(0, 0, 3); }, {"narrow", "size 2", "[2, 3]"});
  expect_error([&] { (void)a.narrow(0, 0, -1); }, {"narrow", "length -1"});
  expect_error([&] { (void)a.narrow(1, 4, 0); }, {"narrow", "start 4", "size 3", "-3 <= start <= 3"});
  expect_error([&] { (void)a.narrow(1, -4, 1); }, {"narrow", "start -4", "size 3"});
  expect_error([&] { (void)a.narrow(1, 1, INT64_MAX); }, {"narrow", "start 1", "size 3"});  // no overflow
  CHECK_THROWS_AS((void)a.narrow(1, 4, 0), frost::IndexError);
  expect_error([&] { (void)frost::one_hot(TI::from({0, 3}), 3); }, {"one_hot", "3", "[0, 3)"});
  CHECK_THROWS_AS((void)frost::one_hot(TI::from({0, 3}), 3), frost::IndexError);
  // Every index out of its bounds is a frost::IndexError (a frost::Error).
  CHECK_THROWS_AS((void)a.gather(1, TI::from({0, 3}, {2, 1})), frost::IndexError);
  CHECK_THROWS_AS((void)a.index_select(0, TI::from({2})), frost::IndexError);
  CHECK_THROWS_AS((void)a.select(0, 2), frost::IndexError);
  CHECK_THROWS_AS((void)a.sum({2}), frost::IndexError);
  expect_error([&] { (void)a.slice(0, 0, 2, 0); }, {"slice", "step"});
  // the valid neighbours
  CHECK(a.select(1, -3).to_vector() == std::vector<float>{1, 4});
  CHECK(a.narrow(1, -2, 2).to_vector() == std::vector<float>{2, 3, 5, 6});
}

TEST_CASE("errors: empty reductions with no value") {
  auto e = TF::empty({0});
  auto e2 = TF::empty({3, 0});
  expect_error([&] { (void)e.max(); }, {"max", "no elements", "[0]"});
  expect_error([&] { (void)e.min(); }, {"min", "no elements"});
  expect_error([&] { (void)e.argmax(); }, {"argmax", "no elements"});
  expect_error([&] { (void)e.argmin(); }, {"argmin", "no elements"});
  expect_error([&] { (void)e2.max(1); }, {"max", "dim 1", "size 0", "[3, 0]"});
  expect_error([&] { (void)e2.min(1, true); }, {"min", "dim 1", "size 0"});
  expect_error([&] { (void)e2.argmax(1); }, {"argmax", "dim 1", "size 0"});
  expect_error([&] { (void)e2.norm(INFINITY); }, {"norm", "dim 1", "size 0", "[3, 0]", "no value"});
  CHECK(e2.norm(INFINITY, {0}).shape() == Shape{0});  // reducing a non-empty dim
  // reductions that have a value on empty input, as in PyTorch
  CHECK(e.sum().item() == 0.0f);
  CHECK(e.prod().item() == 1.0f);
  CHECK(e2.sum({1}).to_vector() == std::vector<float>{0, 0, 0});
  CHECK(e2.max(0).values.shape() == Shape{0});  // reducing a non-empty dim of an empty tensor
  CHECK(std::isnan(e.mean().item()));
}

TEST_CASE("errors: item and operator bool need exactly one element") {
  auto a = m23();
  expect_error([&] { (void)a.item(); }, {"item", "6 elements", "[2, 3]"});
  expect_error([&] { (void)TF::empty({0}).item(); }, {"item", "0 elements"});
  expect_error([&] { (void)static_cast<bool>(a); }, {"operator bool", "6 elements", "[2, 3]"});
  expect_error([&] {
    if (a > 2.0f) (void)0;
  }, {"bool", "[2, 3]"});
  CHECK(static_cast<bool>(TF::from({2.0f})));
  CHECK_FALSE(static_cast<bool>(TF::scalar(0.0f)));
  CHECK(TF::ones({1, 1, 1}).item() == 1.0f);
}

TEST_CASE("errors: backward without a usable gradient") {
  auto x = TF::from({1.0f, 2.0f, 3.0f}).requires_grad_();
  auto y = x * 2.0f;
  expect_error([&] { y.backward(); }, {"backward", "[3]", "one-element"});
  expect_error([&] { y.backward(TF::ones({2})); }, {"backward", "[2]", "[3]"});
  expect_error([&] { y.backward(TF::ones({3, 1})); }, {"backward", "[3, 1]", "[3]"});
  expect_error([&] { TF::ones({2}).sum().backward(); }, {"backward", "does not require grad"});
  expect_error([&] { (void)frost::autograd::grad(std::vector<TF>{y}, std::vector<TF>{x}); },
               {"backward", "[3]"});
  expect_error([&] { (void)frost::autograd::grad(std::vector<TF>{y.sum()}, std::vector<TF>{}); },
               {"autograd::grad", "no inputs"});
  expect_error([&] { TI::from({1, 2}).backward(); }, {"backward", "int64"});
  // the graph is still usable after the failures
  y.backward(TF::ones({3}));
  CHECK(x.grad().to_vector() == std::vector<float>{2, 2, 2});
}

TEST_CASE("errors: matrix product shape mismatch") {
  auto a = m23();
  expect_error([&] { (void)a.mm(TF::ones({2, 3})); }, {"mm", "[2, 3]", "3 != 2"});
  expect_error([&] { (void)a.mm(TF::ones({3})); }, {"mm", "2-D", "[3]"});
  expect_error([&] { (void)a.matmul(TF::ones({4, 2})); }, {"matmul", "[2, 3]", "[4, 2]"});
  expect_error([&] { (void)a.matmul(TF::ones({2})); }, {"matmul", "[2, 3]", "[2]"});
  expect_error([&] { (void)TF::ones({3}).matmul(TF::ones({4})); }, {"matmul", "[3]", "[4]"});
  expect_error([&] { (void)TF::ones({2, 2, 3}).matmul(TF::ones({3, 3, 4})); }, {"matmul", "[2, 2, 3]", "[3, 3, 4]", "batch"});
  expect_error([&] { (void)TF::scalar(1.0f).matmul(a); }, {"matmul", "[]"});
  expect_error([&] { (void)TF::ones({2, 2, 3}).bmm(TF::ones({2, 4, 5})); }, {"bmm", "[2, 2, 3]", "[2, 4, 5]"});
  expect_error([&] { (void)TF::ones({2, 2, 3}).bmm(TF::ones({3, 3, 5})); }, {"bmm", "[3, 3, 5]"});
  expect_error([&] { (void)TF::ones({2, 3}).bmm(TF::ones({2, 3, 5})); }, {"bmm", "3-D", "[2, 3]"});
  expect_error([&] { (void)frost::addmm(TF::ones({3}), a, TF::ones({3, 2})); }, {"addmm", "[3]", "[2, 2]"});
  expect_error([&] { (void)frost::outer(a, TF::ones({2})); }, {"outer", "1-D", "[2, 3]"});
}

TEST_CASE("errors: view and reshape with incompatible shapes") {
  auto a = m23();
  expect_error([&] { (void)a.view({4, 2}); }, {"view", "[4, 2]", "[2, 3]"});
  expect_error([&] { (void)a.view({-1, -1}); }, {"view", "only one dimension can be -1", "[-1, -1]"});
  expect_error([&] { (void)a.view({-1, 4}); }, {"view", "[-1, 4]", "[2, 3]"});
  expect_error([&] { (void)a.view({-2, 3}); }, {"view", "-2"});
  expect_error([&] { (void)a.reshape({7}); }, {"reshape", "[7]", "[2, 3]"});
  expect_error([&] { (void)a.reshape({-1, -1, 3}); }, {"reshape", "only one dimension can be -1"});
  expect_error([&] { (void)a.t().view({6}); }, {"view", "[3, 2]", "reshape"});
  expect_error([&] { (void)a.unflatten(1, {2, 2}); }, {"unflatten", "[2, 2]"});
  expect_error([&] { (void)a.expand({4, 3}); }, {"expand", "[2, 3]", "[4, 3]"});
  expect_error([&] { (void)a.expand({3}); }, {"expand", "fewer dims"});
  expect_error([&] { (void)a.expand({-1, 2, 3}); }, {"expand", "-1"});
  expect_error([&] { (void)TF::zeros({2, -1}); }, {"negative", "[2, -1]"});
  expect_error([&] { (void)TF::from({1, 2, 3}, {2, 2}); }, {"from", "3 values", "[2, 2]"});
  expect_error([&] { (void)TF::empty({1, 1, 1, 1, 1, 1, 1, 1, 1}); }, {"Shape", "8"});
  // the same reshapes that are fine
  CHECK(a.t().reshape({6}).to_vector() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(a.view({-1}).shape() == Shape{6});
  CHECK(a.view({3, -1}).shape() == Shape{3, 2});
}

TEST_CASE("errors: cat and stack shape mismatch") {
  auto a = m23();
  expect_error([&] { (void)frost::cat(std::vector<TF>{a, TF::ones({2, 4})}, 0); },
               {"cat", "tensor 1", "[2, 4]", "[2, 3]"});
  expect_error([&] { (void)frost::cat(std::vector<TF>{a, TF::ones({3})}, 0); }, {"cat", "[3]", "[2, 3]"});
  expect_error([&] { (void)frost::cat(std::vector<TF>{}); }, {"cat", "non-empty"});
  expect_error([&] { (void)frost::cat(std::vector<TF>{TF::scalar(1.0f)}); }, {"cat", "zero-dimensional"});
  expect_error([&] { (void)frost::stack(std::vector<TF>{a, a.t()}); }, {"stack", "tensor 1", "[3, 2]", "[2, 3]"});
  expect_error([&] { (void)frost::stack(std::vector<TF>{}); }, {"stack", "non-empty"});
  CHECK(frost::cat(std::vector<TF>{a, TF::ones({2, 4})}, 1).shape() == Shape{2, 7});
}

TEST_CASE("errors: requires_grad_ on an int64 tensor") {
  auto i = TI::from({1, 2, 3});
  expect_error([&] { i.requires_grad_(); }, {"requires_grad_", "int64", "floating-point"});
  i.requires_grad_(false);  // turning it off is fine
  CHECK_FALSE(i.requires_grad());
}

TEST_CASE("errors: math on int64 tensors through the backend") {
  auto i = TI::from({1, 2, 3});
  auto out = TI::empty({3});
  auto& be = frost::cpu_backend<std::int64_t>();
  // integer kernels exist for arithmetic and reductions; float-only math is refused by name
  expect_error([&] { be.unary(frost::UnaryOp::exp, i.view_of(), out.view_of(), 0, 0); }, {"exp", "int64", "to<float>"});
  be.binary(frost::BinaryOp::add, i.view_of(), i.view_of(), out.view_of(), 0);
  CHECK(out.to_vector() == std::vector<std::int64_t>{2, 4, 6});
  auto one = TI::empty({});
  be.reduce(frost::ReduceOp::sum, i.view_of(), 1, one.view_of());
  CHECK(one.item() == 6);
  auto b = frost::Tensor<bool>::from({true, false, true});
  auto bout = frost::Tensor<bool>::empty({3});
  expect_error([&] { frost::cpu_backend<bool>().binary(frost::BinaryOp::sub, b.view_of(), b.view_of(), bout.view_of(), false); },
               {"sub", "bool"});
  expect_error([&] { be.softmax(i.view_of(), out.view_of(), false); }, {"softmax", "int64"});
  std::int64_t c = 0;
  expect_error([&] { be.gemm(false, false, 1, 1, 1, 1, i.data(), 1, 0, i.data(), 1, 0, 0, &c, 1, 0, 1); },
               {"gemm", "int64"});
  // index tensors still support creation, views, copies and indexing
  CHECK(i.view({3, 1}).select(0, 2).item() == 3);
  CHECK(i.index_select(0, TI::from({2, 0})).to_vector() == std::vector<std::int64_t>{3, 1});
  CHECK(i.to<float>().sum().item() == 6.0f);
  CHECK(i.clone().to_vector() == std::vector<std::int64_t>{1, 2, 3});
  CHECK(frost::cat(std::vector<TI>{i, i}).numel() == 6);
}

TEST_CASE("errors: in-place edits under autograd") {
  auto x = TF::from({1.0f, 2.0f}).requires_grad_();
  expect_error([&] { x.add_(1.0f); }, {"add_", "leaf", "[2]", "NoGradGuard"});
  expect_error([&] { x.fill_(0.0f); }, {"fill_", "[2]", "NoGradGuard"});
  expect_error([&] { x.copy_(TF::ones({2})); }, {"copy_", "[2]"});
  auto h = x * 2.0f;
  auto v = h.view({2, 1});
  expect_error([&] { v.mul_(2.0f); }, {"mul_", "view", "[2, 1]"});
  auto y = (h * h).sum();
  {
    NoGradGuard ng;
    h.add_(1.0f);
  }
  expect_error([&] { y.backward(); }, {"backward", "mul", "in-place", "[2]", "version"});
}

TEST_CASE("errors: factory arguments") {
  expect_error([&] { (void)TF::arange(0, 1, 0); }, {"arange", "step"});
  expect_error([&] { (void)TF::arange(0, 5, -1); }, {"arange", "-1"});
  expect_error([&] { (void)TF::arange(0, INFINITY); }, {"arange", "finite"});
  expect_error([&] { (void)TF::linspace(0, 1, -1); }, {"linspace", "-1"});
  expect_error([&] { (void)TF::eye(-1); }, {"eye", "-1"});
  expect_error([&] { (void)TI::randint(3, 3, {2}); }, {"randint", "[3, 3)"});
  constexpr std::int64_t p53 = std::int64_t(1) << 53;
  expect_error([&] { (void)TI::randint(p53 + 1, p53 + 2, {2}); }, {"randint", "53 bits"});  // would round to 2^53
  expect_error([&] { (void)TI::randint(-p53, p53, {2}); }, {"randint", "width of at most 2^53"});
  for (auto v : TI::randint(p53 - 2, p53, {64}).to_vector()) CHECK((v == p53 - 2 || v == p53 - 1));
  expect_error([&] { (void)frost::bernoulli(1.5); }, {"bernoulli", "1.5"});
  expect_error([&] { (void)TF::ones({2}).clamp(1.0f, 0.0f); }, {"clamp", "bound"});
  expect_error([&] { (void)TF::ones({4}).split(0); }, {"split", "positive"});
  expect_error([&] { (void)TF::ones({4}).chunk(0); }, {"chunk", "positive"});
  expect_error([&] { (void)TF::ones({2}).norm(-1.0); }, {"norm", "positive"});
  expect_error([&] { (void)frost::one_hot(TI::empty({0})); }, {"one_hot", "empty"});
  expect_error([&] { (void)TF::ones({1 << 20, 1 << 20, 1 << 20}); }, {"too large", "[1048576, 1048576, 1048576]"});
}

TEST_CASE("errors: undefined tensors") {
  TF u;
  CHECK_FALSE(u.defined());
  expect_error([&] { (void)u.clone(); }, {"clone", "undefined"});
  expect_error([&] { (void)u.item(); }, {"item", "undefined"});
  expect_error([&] { (void)u.to_vector(); }, {"to_vector", "undefined"});
  expect_error([&] { (void)(u + TF::ones({1})); }, {"add", "undefined"});
  expect_error([&] { (void)u.exp(); }, {"exp", "undefined"});
  expect_error([&] { (void)u.sum(); }, {"sum", "undefined"});
  expect_error([&] { (void)u.view({1}); }, {"view", "undefined"});
  expect_error([&] { u.backward(); }, {"backward", "undefined"});
  expect_error([&] { u.requires_grad_(); }, {"requires_grad_", "undefined"});
}

TEST_CASE("errors: in-place writes onto overlapping memory are refused, as in PyTorch") {
  frost::NoGradGuard ng;
  auto x = TF::from({0, 1, 2, 3, 4});
  // A shifted view of the same memory would read elements already overwritten.
  expect_error([&] { x.slice(0, 1, 5).copy_(x.slice(0, 0, 4)); }, {"copy_", "single memory location", "clone()"});
  expect_error([&] { auto v = x.slice(0, 1, 5); v.add_(x.slice(0, 0, 4)); }, {"add_", "single memory location"});
  // An expanded tensor would update one element several times.
  expect_error([&] { auto e = TF::zeros({1, 3}).expand({2, 3}); e.add_(TF::ones({2, 3})); },
               {"add_", "more than one element", "strides [0, 1]"});
  expect_error([&] { auto e = TF::zeros({1, 3}).expand({2, 3}); e.mul_(2.0f); }, {"mul_", "more than one element"});
  expect_error([&] { auto e = TF::zeros({1, 3}).expand({2, 3}); e.copy_(TF::ones({2, 3})); }, {"copy_", "more than one element"});
  CHECK(x.to_vector() == std::vector<float>{0, 1, 2, 3, 4});  // nothing was written
  // The same view, disjoint views, and a clone are fine.
  x.add_(x);
  x.slice(0, 0, 2).copy_(x.slice(0, 3, 5));
  auto v = x.slice(0, 1, 5);
  v.copy_(x.slice(0, 0, 4).clone());
  CHECK(x.to_vector() == std::vector<float>{6, 6, 8, 4, 6});
  auto row = TF::ones({1, 4});
  row.copy_(row.reshape({4}));  // the same elements, another shape
}
