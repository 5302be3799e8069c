// Autograd semantics: accumulation, retain_graph, create_graph (second
// derivatives), grad modes, version counters, views, detach, autograd::grad,
// explicit seed gradients, deep graphs, in-place ops under autograd and the
// reverse tape order. PyTorch's behaviour is the reference throughout.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <frost/frost.hpp>

#include "support.hpp"

using frost::Error;
using frost::Generator;
using frost::InferenceMode;
using frost::NoGradGuard;
using frost::Shape;
using frost::test::check_close;
using frost::test::error_of;
using frost::test::TD;
using frost::test::TF;

namespace {

/// A small tanh MLP: loss = 0.5 * sum((tanh(x W1 + b1) W2)^2).
TD mlp_loss(const TD& x, const TD& w1, const TD& b1, const TD& w2) {
  auto h = (x.matmul(w1) + b1).tanh();
  auto y = h.matmul(w2);
  return (y * y).sum() * 0.5;
}

}  // namespace

TEST_CASE("autograd: grad accumulates over two backward calls") {
  auto x = TD::from({1.0, -2.0, 3.0}).requires_grad_();
  (x * x).sum().backward();
  check_close(x.grad(), {2.0, -4.0, 6.0});
  (x * x).sum().backward();
  check_close(x.grad(), {4.0, -8.0, 12.0});
  // A third, different function keeps adding.
  (x * 3.0).sum().backward();
  check_close(x.grad(), {7.0, -5.0, 15.0});

  // zero_() on .grad resets it; the next backward fills it again.
  x.grad().zero_();
  (x * x).sum().backward();
  check_close(x.grad(), {2.0, -4.0, 6.0});

  // Resetting to undefined (like grad = None) starts from scratch.
  x.set_grad(TD());
  CHECK_FALSE(x.grad().defined());
  x.sum().backward();
  check_close(x.grad(), {1.0, 1.0, 1.0});
}

TEST_CASE("autograd: grad accumulation from shared and broadcast gradients") {
  // x + x: both edges hit the same leaf with the same gradient buffer.
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  (x + x).sum().backward();
  check_close(x.grad(), {2.0, 2.0});
  (x + x).sum().backward();
  check_close(x.grad(), {4.0, 4.0});

  // The first gradient is a broadcast (stride-0) view of the seed: .grad must
  // hold real memory so the second backward accumulates element by element.
  auto b = TD::from({0.5, 0.5, 0.5}).requires_grad_();
  auto m = TD::from({1, 2, 3, 4, 5, 6}, {2, 3});
  (m + b).sum().backward();
  check_close(b.grad(), {2.0, 2.0, 2.0});
  (m * b).sum().backward();
  check_close(b.grad(), {2.0 + 5.0, 2.0 + 7.0, 2.0 + 9.0});

  auto s = TD::from({1.0, 2.0, 3.0}).requires_grad_();
  s.sum().backward();
  s.sum().backward();
  check_close(s.grad(), {2.0, 2.0, 2.0});
  // Gradient of a non-contiguous sum: the seed reshaped through a transpose.
  auto w = TD::from({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  w.t().sum({1}).sum().backward();
  w.t().sum({1}).sum().backward();
  check_close(w.grad(), std::vector<double>(6, 2.0));
  CHECK(w.grad().is_contiguous());
}

TEST_CASE("autograd: retain_graph allows a second backward") {
  auto x = TD::from({1.0, 2.0, 3.0}).requires_grad_();
  auto y = (x * x * x).sum();
  y.backward({}, /*retain_graph=*/true);
  check_close(x.grad(), {3.0, 12.0, 27.0});
  y.backward({}, true);
  check_close(x.grad(), {6.0, 24.0, 54.0});
  y.backward();  // last use frees the graph
  check_close(x.grad(), {9.0, 36.0, 81.0});
  const std::string msg = error_of([&] { y.backward(); });
  CHECK(msg.find("second time") != std::string::npos);
  CHECK(msg.find("retain_graph") != std::string::npos);
}

TEST_CASE("autograd: a second backward without retain_graph is an error") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  auto y = (x * x).exp().sum();
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("second time"), Error);
  // The first backward's gradient stays as it was.
  check_close(x.grad(), {2.0 * std::exp(1.0), 4.0 * std::exp(4.0)}, 1e-9, 1e-9);
  // A freed graph also fails under autograd::grad.
  auto z = (x * x).sum();
  z.backward();
  CHECK_THROWS_AS(frost::autograd::grad(std::vector<TD>{z}, std::vector<TD>{x}), Error);
  // A fresh graph works again.
  x.set_grad(TD());
  (x * x).sum().backward();
  check_close(x.grad(), {2.0, 4.0});
}

TEST_CASE("autograd: create_graph gives the second derivative of x cubed") {
  auto x = TD::from({-1.5, 0.5, 2.0}).requires_grad_();
  auto y = (x * x * x).sum();
  auto g = frost::autograd::grad({y}, {x}, {}, true, true);
  REQUIRE(g.size() == 1);
  check_close(g[0], {3 * 2.25, 3 * 0.25, 12.0});
  CHECK(g[0].requires_grad());
  auto h = frost::autograd::grad({g[0].sum()}, {x});
  check_close(h[0], {-9.0, 3.0, 12.0});  // 6x
  CHECK_FALSE(x.grad().defined());

  // The same through pow(x, 3) and a third derivative (6 everywhere).
  auto p = x.pow(3.0).sum();
  auto d1 = frost::autograd::grad({p}, {x}, {}, true, true);
  auto d2 = frost::autograd::grad({d1[0].sum()}, {x}, {}, true, true);
  check_close(d2[0], {-9.0, 3.0, 12.0});
  auto d3 = frost::autograd::grad({d2[0].sum()}, {x});
  check_close(d3[0], {6.0, 6.0, 6.0});

  // create_graph through backward(): .grad carries history.
  auto z = TD::from({2.0}).requires_grad_();
  (z * z * z).sum().backward({}, false, true);
  check_close(z.grad(), {12.0});
  CHECK(z.grad().requires_grad());
  auto zz = frost::autograd::grad({z.grad().sum()}, {z});
  check_close(zz[0], {12.0});
  z.set_grad(TD());  // break the grad -> graph -> leaf cycle, as PyTorch recommends
}

TEST_CASE("autograd: Hessian-vector product of a tanh MLP matches finite differences") {
  Generator gen(7);
  auto x = TD::randn({5, 3}, &gen);
  auto w1 = (TD::randn({3, 4}, &gen) * 0.7).requires_grad_();
  auto b1 = (TD::randn({4}, &gen) * 0.3).requires_grad_();
  auto w2 = (TD::randn({4, 2}, &gen) * 0.7).requires_grad_();
  const std::vector<TD> params{w1, b1, w2};
  std::vector<TD> v;
  for (auto& p : params) v.push_back(TD::randn(p.shape(), &gen));

  auto loss = mlp_loss(x, w1, b1, w2);
  auto g = frost::autograd::grad({loss}, params, {}, true, true);
  REQUIRE(g.size() == 3);
  TD gv = (g[0] * v[0]).sum() + (g[1] * v[1]).sum() + (g[2] * v[2]).sum();
  auto hv = frost::autograd::grad({gv}, params);
  REQUIRE(hv.size() == 3);
  for (auto& p : params) CHECK_FALSE(p.grad().defined());

  // Finite differences of the first derivative along v.
  const double eps = 1e-5;
  auto grads_at = [&](double t) {
    std::vector<TD> ps;
    for (std::size_t i = 0; i < params.size(); ++i) {
      NoGradGuard ng;
      ps.push_back((params[i].detach() + v[i] * t).requires_grad_());
    }
    auto l = mlp_loss(x, ps[0], ps[1], ps[2]);
    return frost::autograd::grad({l}, ps);
  };
  auto gp = grads_at(eps), gm = grads_at(-eps);
  for (std::size_t i = 0; i < params.size(); ++i) {
    NoGradGuard ng;
    TD fd = (gp[i] - gm[i]) / (2 * eps);
    check_close(hv[i], fd, 1e-6, 1e-5);
  }

  // A full second derivative w.r.t. one input element: d2 loss / d x00^2.
  auto xs = x.clone().requires_grad_();
  auto l2 = mlp_loss(xs, w1.detach(), b1.detach(), w2.detach());
  auto gx = frost::autograd::grad({l2}, {xs}, {}, true, true)[0];
  auto hxx = frost::autograd::grad({gx.narrow(0, 0, 1).narrow(1, 0, 1).sum()}, {xs})[0];
  auto gx_at = [&](double t) {
    auto xp = x.clone();
    xp.data()[0] += t;
    xp.requires_grad_();
    return frost::autograd::grad({mlp_loss(xp, w1.detach(), b1.detach(), w2.detach())}, {xp})[0].to_vector()[0];
  };
  const double fd00 = (gx_at(eps) - gx_at(-eps)) / (2 * eps);
  CHECK(hxx.to_vector()[0] == doctest::Approx(fd00).epsilon(1e-5));
}

TEST_CASE("autograd: second derivatives of elementwise and reduction ops") {
  // For each f: the Hessian-vector product of sum(w * f(x)) against finite
  // differences of its gradient.
  using Fn = std::function<TD(const TD&)>;
  Generator gen(11);
  const auto w = TD::rand({2, 3}, &gen) + 0.5;
  const auto c = TD::rand({2, 3}, &gen) + 0.5;
  const auto m = TD::randn({3, 2}, &gen);
  struct Case {
    const char* name;
    Fn f;
    bool positive;
  };
  const std::vector<Case> cases{
      {"exp", [](const TD& x) { return x.exp(); }, false},
      {"log", [](const TD& x) { return x.log(); }, true},
      {"sqrt", [](const TD& x) { return x.sqrt(); }, true},
      {"rsqrt", [](const TD& x) { return x.rsqrt(); }, true},
      {"sin", [](const TD& x) { return x.sin(); }, false},
      {"cos", [](const TD& x) { return x.cos(); }, false},
      {"tanh", [](const TD& x) { return x.tanh(); }, false},
      {"sigmoid", [](const TD& x) { return x.sigmoid(); }, false},
      {"gelu", [](const TD& x) { return x.gelu(); }, false},
      {"gelu_tanh", [](const TD& x) { return x.gelu("tanh"); }, false},
      {"silu", [](const TD& x) { return x.silu(); }, false},
      {"pow_scalar", [](const TD& x) { return x.pow(2.5); }, true},
      {"pow", [&](const TD& x) { return x.pow(c * x); }, true},
      {"div", [&](const TD& x) { return c / (x * x + 1.0); }, false},
      {"rdiv_scalar", [](const TD& x) { return 2.0 / x; }, true},
      {"mul", [](const TD& x) { return x * x * x; }, false},
      {"softmax", [](const TD& x) { return x.softmax(1); }, false},
      {"log_softmax", [](const TD& x) { return x.log_softmax(0); }, false},
      {"logsumexp", [](const TD& x) { return x.logsumexp({1}, true).expand({2, 3}); }, false},
      {"var", [](const TD& x) { return x.var({1}, true, true).expand({2, 3}) * x; }, false},
      {"norm", [](const TD& x) { return x.norm(2, {1}, true).expand({2, 3}) * x; }, false},
      {"prod", [](const TD& x) { return x.prod(1, true).expand({2, 3}) * x; }, true},
      {"matmul", [&](const TD& x) { return x.matmul(m).matmul(x).tanh(); }, false},
      {"max_dim", [](const TD& x) { return (x * x).max(1, true).values.expand({2, 3}) * x; }, false},
  };
  for (const auto& cs : cases) {
    CAPTURE(cs.name);
    TD base = cs.positive ? TD::rand({2, 3}, &gen) + 0.5 : TD::randn({2, 3}, &gen);
    TD v = TD::randn({2, 3}, &gen);
    auto x = base.clone().requires_grad_();
    auto g = frost::autograd::grad({(cs.f(x) * w).sum()}, {x}, {}, true, true)[0];
    auto hv = frost::autograd::grad({(g * v).sum()}, {x})[0];
    const double eps = 1e-6;
    auto grad_at = [&](double t) {
      auto xp = (base + v * t).requires_grad_();
      return frost::autograd::grad({(cs.f(xp) * w).sum()}, {xp})[0];
    };
    TD fd = (grad_at(eps) - grad_at(-eps)) / (2 * eps);
    check_close(hv, fd, 1e-5, 1e-4);
  }
}

TEST_CASE("autograd: NoGradGuard records nothing") {
  auto x = TF::from({1.0f, 2.0f}).requires_grad_();
  {
    NoGradGuard ng;
    CHECK_FALSE(frost::is_grad_enabled());
    auto y = x * 2.0f + x.exp();
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK(std::string(y.grad_fn_name()).empty());
    auto v = x.view({2, 1});
    CHECK_FALSE(v.requires_grad());
    {
      NoGradGuard nested;
      CHECK_FALSE((x * x).requires_grad());
    }
    CHECK_FALSE(frost::is_grad_enabled());
    {
      frost::AutoGradMode on(true);  // re-enables inside a no-grad scope
      CHECK((x * x).requires_grad());
    }
    CHECK_FALSE((x + x).requires_grad());
  }
  CHECK(frost::is_grad_enabled());
  auto z = x * 2.0f;
  CHECK(z.requires_grad());
  CHECK(std::string(z.grad_fn_name()) == "mul_scalar");

  // Grad mode is per thread.
  bool other_thread_enabled = false;
  {
    NoGradGuard ng;
    std::thread t([&] { other_thread_enabled = frost::is_grad_enabled() && (x * x).requires_grad(); });
    t.join();
  }
  CHECK(other_thread_enabled);
}

TEST_CASE("autograd: InferenceMode records nothing and skips version counters") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  auto buf = TD::zeros({2});
  const auto v0 = buf.version();
  {
    InferenceMode im;
    CHECK(frost::is_inference_mode());
    CHECK_FALSE(frost::is_grad_enabled());
    auto y = x.exp() * x;
    CHECK_FALSE(y.requires_grad());
    buf.add_(1.0);
    buf.mul_(TD::from({2.0, 3.0}));
    buf.fill_(4.0);
    buf.copy_(TD::from({5.0, 6.0}));
    CHECK(buf.version() == v0);
    {
      InferenceMode off(false);  // disabled mode changes nothing
      CHECK(frost::is_inference_mode());
    }
  }
  check_close(buf, {5.0, 6.0});
  CHECK_FALSE(frost::is_inference_mode());
  CHECK(frost::is_grad_enabled());
  buf.add_(1.0);
  CHECK(buf.version() == v0 + 1);
  {
    NoGradGuard ng;  // NoGradGuard still counts versions
    buf.add_(1.0);
  }
  CHECK(buf.version() == v0 + 2);
}

TEST_CASE("autograd: in-place edit of a tensor saved by mul is detected") {
  auto a = TD::from({1.0, 2.0}).requires_grad_();
  auto b = TD::from({3.0, 4.0}).requires_grad_();
  auto y = (a * b).sum();
  {
    NoGradGuard ng;
    b.add_(1.0);
  }
  const std::string msg = error_of([&] { y.backward(); });
  CHECK(msg.find("mul") != std::string::npos);
  CHECK(msg.find("in-place") != std::string::npos);
  CHECK(msg.find("[2]") != std::string::npos);
  CHECK_THROWS_AS(y.backward(), Error);

  // After the failed backward the library still works.
  auto z = (a * a).sum();
  z.backward();
  check_close(a.grad(), {2.0, 4.0});
}

TEST_CASE("autograd: in-place edit of a tensor saved by exp is detected") {
  auto x = TD::from({0.5, 1.0}).requires_grad_();
  auto e = x.exp();  // exp saves its output
  auto y = (e * 2.0).sum();
  {
    NoGradGuard ng;
    e.mul_(3.0);
  }
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("exp"), Error);

  // Under autograd the in-place op itself refuses: exp's saved output shares
  // e2's memory, and rebasing e2 would leave that saved copy stale.
  auto e2 = x.exp();
  auto y2 = e2.sum();
  CHECK_THROWS_WITH_AS(e2.add_(1.0), doctest::Contains("add_: in-place update under autograd"), Error);
  CHECK_NOTHROW(y2.backward());
  x.set_grad({});

  // Through a view of the saved tensor (shared version counter).
  auto e3 = x.exp();
  auto y3 = e3.sum();
  {
    NoGradGuard ng;
    e3.narrow(0, 0, 1).fill_(0.0);
  }
  CHECK_THROWS_WITH_AS(y3.backward(), doctest::Contains("modified by an in-place operation"), Error);

  // An edit that does not touch saved tensors is fine.
  auto e4 = x.exp();
  auto y4 = (e4 + 1.0).sum();  // add_scalar saves nothing
  {
    NoGradGuard ng;
    auto t = e4 * 1.0;
    t.add_(5.0);
  }
  y4.backward();
  check_close(x.grad(), {std::exp(0.5), std::exp(1.0)}, 1e-12, 1e-12);
}

TEST_CASE("autograd: views share storage with their base") {
  auto base = TD::zeros({3, 4});
  auto v = base.view({4, 3});
  CHECK(v.data() == base.data());
  auto n = base.narrow(1, 1, 2);
  n.fill_(7.0);
  auto t = base.t();
  t.select(0, 3).fill_(9.0);  // column 3 of base
  check_close(base, {0, 7, 7, 9, 0, 7, 7, 9, 0, 7, 7, 9});
  CHECK(v.to_vector() == base.to_vector());
  // All views share one version counter.
  const auto ver = base.version();
  n.add_(1.0);
  CHECK(base.version() == ver + 1);
  CHECK(v.version() == ver + 1);
  CHECK(base.to_vector()[1] == 8.0);
}

TEST_CASE("autograd: gradients flow through narrow transpose and expand views") {
  auto x = TD::from({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  // narrow: gradient lands in the narrowed columns only
  (x.narrow(1, 1, 2) * x.narrow(1, 1, 2)).sum().backward();
  check_close(x.grad(), {0, 4, 6, 0, 10, 12});
  x.set_grad(TD());

  // transpose: d/dx sum(x^T W) = (W summed over cols)^T
  auto w = TD::from({1, -1, 2, 0.5, 3, 1}, {2, 3});  // x^T is [3, 2] -> x^T * w^T elementwise
  (x.t() * w.t()).sum().backward();
  check_close(x.grad(), w.to_vector());
  x.set_grad(TD());
  auto m = TD::from({1, 2, 3, 4}, {2, 2});
  x.t().matmul(m).sum().backward();  // d/dx_ij = sum_k m_ik
  check_close(x.grad(), {3, 3, 3, 7, 7, 7});
  x.set_grad(TD());

  // expand: gradient summed over the broadcast dim
  auto col = TD::from({1, 2}, {2, 1}).requires_grad_();
  auto e = col.expand({2, 5});
  CHECK(e.data() == col.data());
  CHECK(e.stride(1) == 0);
  (e * TD::arange(5).expand({2, 5})).sum().backward();
  check_close(col.grad(), {10, 10});

  // chains of views: select, permute, unsqueeze, slice with a step
  auto y = TD::arange(24).reshape({2, 3, 4}).requires_grad_();
  auto z = y.permute({2, 0, 1}).select(0, 1).unsqueeze(0).slice(2, 0, 3, 2);  // [1, 2, 2]
  (z * 2.0).sum().backward();
  std::vector<double> expect(24, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j : {0, 2}) expect[static_cast<std::size_t>(i * 12 + j * 4 + 1)] = 2.0;
  check_close(y.grad(), expect);
  CHECK(y.grad().shape() == Shape{2, 3, 4});
}

TEST_CASE("autograd: detach shares data but cuts history") {
  auto x = TD::from({1.0, 2.0, 3.0}).requires_grad_();
  auto h = x * 2.0;
  auto d = h.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.data() == h.data());
  CHECK(d.version() == h.version());
  // No gradient through the detached operand: d/dx (x * detach(x)) = x
  (x * x.detach()).sum().backward();
  check_close(x.grad(), {1.0, 2.0, 3.0});
  // Writing the detached tensor changes the original (shared storage).
  {
    NoGradGuard ng;
    d.fill_(0.0);
  }
  check_close(h, {0.0, 0.0, 0.0});
  // A detached tensor can become a new leaf.
  auto leaf = x.detach().requires_grad_();
  (leaf * leaf).sum().backward();
  check_close(leaf.grad(), {2.0, 4.0, 6.0});
  check_close(x.grad(), {1.0, 2.0, 3.0});  // untouched
}

TEST_CASE("autograd: autograd::grad returns gradients without touching .grad") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  auto w = TD::from({3.0, -1.0}).requires_grad_();
  auto y = (x * w).sum() + (x * x).sum();
  auto g = frost::autograd::grad({y}, {x, w});
  REQUIRE(g.size() == 2);
  check_close(g[0], {5.0, 3.0});
  check_close(g[1], {1.0, 2.0});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  CHECK_FALSE(g[0].requires_grad());

  // Only some of the leaves: the others are not accumulated either.
  auto y2 = (x * w).sum();
  auto gx = frost::autograd::grad({y2}, {x});
  check_close(gx[0], {3.0, -1.0});
  CHECK_FALSE(w.grad().defined());

  // A non-leaf input: gradient w.r.t. an intermediate.
  auto h = x * 3.0;
  auto y3 = (h * h).sum();
  auto gh = frost::autograd::grad({y3}, {h, x});
  check_close(gh[0], {6.0, 12.0});   // 2h
  check_close(gh[1], {18.0, 36.0});  // 18x

  // The output itself as the input.
  auto gy = frost::autograd::grad({x}, {x}, {TD::from({2.0, 5.0})});
  check_close(gy[0], {2.0, 5.0});
  auto s = (x * 2.0).sum();
  auto gs = frost::autograd::grad({s}, {s});
  check_close(gs[0], {1.0});

  // With explicit grad_outputs and several outputs.
  auto a = x * 2.0, b = x * x;
  auto gab = frost::autograd::grad({a, b}, {x}, {TD::from({1.0, 1.0}), TD::from({0.5, 2.0})});
  check_close(gab[0], {2.0 + 1.0, 2.0 + 8.0});
  CHECK_FALSE(x.grad().defined());

  // An input that does not require grad is an error.
  CHECK_THROWS_WITH_AS(frost::autograd::grad({(x * 2.0).sum()}, {TD::from({1.0})}),
                       doctest::Contains("does not require grad"), Error);
}

TEST_CASE("autograd: backward with an explicit gradient for a non-scalar") {
  auto x = TD::from({1.0, 2.0, 3.0, 4.0}, {2, 2}).requires_grad_();
  auto y = x * x;
  y.backward(TD::from({1.0, 0.0, 0.5, -1.0}, {2, 2}));
  check_close(x.grad(), {2.0, 0.0, 3.0, -8.0});
  // A one-element output may also take an explicit seed.
  auto z = (x * 1.0).sum();
  x.set_grad(TD());
  z.backward(TD::scalar(3.0));
  check_close(x.grad(), {3.0, 3.0, 3.0, 3.0});
  // A leaf itself as the root.
  auto l = TD::from({1.0, 2.0}).requires_grad_();
  l.backward(TD::from({4.0, 5.0}));
  check_close(l.grad(), {4.0, 5.0});
  // The float path.
  auto f = TF::from({1.0f, 2.0f}).requires_grad_();
  (f * f).backward(TF::from({1.0f, 1.0f}));
  check_close(f.grad(), {2.0f, 4.0f});
}

TEST_CASE("autograd: a deep chain of 100000 ops backward and destroys without overflow") {
  const int n = 100000;
  {
    auto x = TD::from({1.0}).requires_grad_();
    TD y = x;
    for (int i = 0; i < n; ++i) y = y + 1e-5;
    CHECK(y.item() == doctest::Approx(2.0));
    y.backward();
    check_close(x.grad(), {1.0});
  }
  {
    // Ops that save tensors: the chain goes node -> saved tensor -> node.
    auto x = TD::from({0.5}).requires_grad_();
    TD y = x;
    for (int i = 0; i < n; ++i) y = y * TD::scalar(1.0) + y * 0.0;
    y.sum().backward({}, /*retain_graph=*/true);
    check_close(x.grad(), {1.0});
  }
  {
    // Never backwarded: the whole tape dies with the last handle.
    auto x = TF::from({1.0f}).requires_grad_();
    TF y = x;
    for (int i = 0; i < n; ++i) y = (y * 1.0f).exp().log();
  }
  {
    // A long chain of views.
    auto x = TD::zeros({4}).requires_grad_();
    TD y = x;
    for (int i = 0; i < n; ++i) y = (i % 2 == 0) ? y.view({2, 2}) : y.view({4});
  }
}

TEST_CASE("autograd: in-place add_ on a non-leaf gives correct gradients") {
  auto x = TD::from({1.0, 2.0, 3.0}).requires_grad_();
  auto w = TD::from({0.5, -1.0, 2.0}).requires_grad_();
  auto h = x * 2.0;
  h.add_(w);  // h = 2x + w
  CHECK(h.requires_grad());
  CHECK(std::string(h.grad_fn_name()) == "add");
  auto loss = (h * h).sum();  // d/dx = 4h, d/dw = 2h
  loss.backward();
  check_close(x.grad(), {4 * 2.5, 4 * 3.0, 4 * 8.0});
  check_close(w.grad(), {2 * 2.5, 2 * 3.0, 2 * 8.0});

  // sub_, scalar add_/mul_ on non-leaves.
  x.set_grad(TD());
  w.set_grad(TD());
  auto k = x.exp();
  auto k2 = k * 1.0;
  k2.sub_(w);
  k2.mul_(3.0);
  k2.add_(1.0);
  k2.sum().backward();
  check_close(x.grad(), {3 * std::exp(1.0), 3 * std::exp(2.0), 3 * std::exp(3.0)}, 1e-9, 1e-9);
  check_close(w.grad(), {-3.0, -3.0, -3.0});

  // A buffer without grad that accumulates a tensor requiring grad.
  x.set_grad(TD());
  auto acc = TD::zeros({3});
  acc.add_(x * x);
  acc.add_(x);
  CHECK(acc.requires_grad());
  acc.sum().backward();
  check_close(x.grad(), {3.0, 5.0, 7.0});
}

TEST_CASE("autograd: in-place mul_ and div_ on a non-leaf give correct gradients") {
  // mul_ and div_ need self's old value in backward (PyTorch saves a copy).
  auto x = TD::from({1.0, 2.0, 3.0}).requires_grad_();
  auto w = TD::from({0.5, -1.0, 2.0}).requires_grad_();
  auto h = x + 1.0;
  h.mul_(w);  // h = (x + 1) w
  h.sum().backward();
  check_close(x.grad(), {0.5, -1.0, 2.0});
  check_close(w.grad(), {2.0, 3.0, 4.0});

  x.set_grad(TD());
  w.set_grad(TD());
  auto q = x * 1.0;
  q.div_(w);  // q = x / w
  q.sum().backward();
  check_close(x.grad(), {2.0, -1.0, 0.5});
  check_close(w.grad(), {-1.0 / 0.25, -2.0 / 1.0, -3.0 / 4.0});

  // Against the out-of-place version on a mixed chain.
  auto run = [&](bool inplace) {
    auto a = TD::from({0.3, -0.7, 1.1}).requires_grad_();
    auto b = TD::from({1.5, 0.2, -0.4}).requires_grad_();
    TD t = a.sin();  // sin saves its input, not t (tanh would save t: PyTorch errors too)
    if (inplace) {
      t.mul_(b);
      t.add_(a);
      t.div_(b * b + 1.0);
    } else {
      t = ((t * b) + a) / (b * b + 1.0);
    }
    (t * t).sum().backward();
    std::vector<double> out = a.grad().to_vector();
    for (double v : b.grad().to_vector()) out.push_back(v);
    return out;
  };
  const auto in = run(true), out = run(false);
  REQUIRE(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(in[i] == doctest::Approx(out[i]).epsilon(1e-12));
}

TEST_CASE("autograd: in-place on a leaf that requires grad is an error") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  CHECK_THROWS_WITH_AS(x.add_(TD::from({1.0, 1.0})), doctest::Contains("leaf"), Error);
  CHECK_THROWS_WITH_AS(x.mul_(2.0), doctest::Contains("mul_"), Error);
  CHECK_THROWS_WITH_AS(x.add_(1.0), doctest::Contains("add_"), Error);
  CHECK_THROWS_AS(x.sub_(TD::from({1.0, 1.0})), Error);
  CHECK_THROWS_AS(x.div_(TD::from({1.0, 1.0})), Error);
  CHECK_THROWS_WITH_AS(x.fill_(0.0), doctest::Contains("requires grad"), Error);
  CHECK_THROWS_WITH_AS(x.zero_(), doctest::Contains("fill_"), Error);
  CHECK_THROWS_WITH_AS(x.copy_(TD::from({3.0, 4.0})), doctest::Contains("copy_"), Error);
  CHECK_THROWS_AS(x += 1.0, Error);  // operator+= is in place too
  check_close(x, {1.0, 2.0});        // nothing was written
}

TEST_CASE("autograd: in-place on a leaf under NoGradGuard is allowed") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  {
    NoGradGuard ng;
    x.add_(1.0);
    x.mul_(TD::from({2.0, 3.0}));
    x -= TD::from({1.0, 1.0});
  }
  check_close(x, {3.0, 8.0});
  CHECK(x.is_leaf());
  CHECK(x.requires_grad());
  (x * x).sum().backward();
  check_close(x.grad(), {6.0, 16.0});
}

TEST_CASE("autograd: diamond graph runs in reverse tape order") {
  // x feeds two branches that meet again: a node must run only once all of
  // its gradient has arrived.
  auto x = TD::from({0.3, -0.8, 1.2}).requires_grad_();
  auto a = x.exp();
  auto b = x.sin();
  auto c = a * b;
  auto d = c + a;  // a used twice
  auto e = (d * x).sum();  // x used a third time
  e.backward();
  std::vector<double> expect;
  for (double v : {0.3, -0.8, 1.2}) {
    const double ex = std::exp(v), s = std::sin(v), co = std::cos(v);
    const double dd = ex * s + ex;  // d
    const double ddx = ex * s + ex * co + ex;
    expect.push_back(dd + v * ddx);
  }
  check_close(x.grad(), expect, 1e-12, 1e-10);

  // A node created late but consumed early: h2 depends on h1 through a long
  // branch and directly.
  auto y = TD::from({0.5}).requires_grad_();
  auto h1 = y * 2.0;
  TD long_branch = h1;
  for (int i = 0; i < 10; ++i) long_branch = long_branch + 0.0;
  auto h2 = long_branch * h1;  // 4 y^2
  h2.sum().backward();
  check_close(y.grad(), {4.0});  // 8y

  // gradcheck on a graph with heavy reuse.
  CHECK(frost::test::gradcheck(
      [](const std::vector<TD>& in) {
        auto p = in[0] * in[1];
        auto q = p.tanh() + p * in[0];
        return (q * p).sum({1}) + in[1].sum({1}) * q.mean({1});
      },
      {TD::randn({2, 3}), TD::randn({2, 3})}));
}

TEST_CASE("autograd: requires_grad propagation and grad_fn names") {
  auto a = TD::from({1.0, 2.0});
  auto b = TD::from({3.0, 4.0}).requires_grad_();
  CHECK(b.is_leaf());
  CHECK_FALSE((a * a).requires_grad());
  auto c = a * b;
  CHECK(c.requires_grad());
  CHECK_FALSE(c.is_leaf());
  CHECK(std::string(c.grad_fn_name()) == "mul");
  CHECK(std::string(b.grad_fn_name()).empty());
  CHECK(std::string(b.unsqueeze(0).t().grad_fn_name()) == "permute");
  CHECK(std::string((b + b).grad_fn_name()) == "add");
  // Turning requires_grad off on a non-leaf is an error; on a leaf it works.
  CHECK_THROWS_AS(c.requires_grad_(false), Error);
  b.requires_grad_(false);
  CHECK_FALSE((a * b).requires_grad());
  // Backward through a tensor that does not require grad.
  CHECK_THROWS_WITH_AS(a.sum().backward(), doctest::Contains("does not require grad"), Error);
  // A gradient does not flow into a no-grad operand: only the leaf gets one.
  auto p = TD::from({2.0}).requires_grad_();
  (p * a.narrow(0, 0, 1)).sum().backward();
  check_close(p.grad(), {1.0});
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("autograd: gradients of clone contiguous and to") {
  auto x = TD::from({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  auto y = x.t().contiguous();
  CHECK(y.is_contiguous());
  (y * TD::arange(6).view({3, 2})).sum().backward();
  check_close(x.grad(), {0, 2, 4, 1, 3, 5});
  x.set_grad(TD());
  (x.clone() * 2.0).sum().backward();
  check_close(x.grad(), std::vector<double>(6, 2.0));
  // A cast to its own dtype is the tensor itself; to int64 carries no gradient.
  CHECK(x.to<double>().requires_grad());
  CHECK_FALSE(x.to<std::int64_t>().requires_grad());
  CHECK_FALSE(x.to<float>().detach().requires_grad());
  NoGradGuard ng;
  CHECK_FALSE(x.to<float>().requires_grad());
}

TEST_CASE("autograd: gradients flow through casts between float and double") {
  // A double leaf and a float loss: d/dx sum(x^2) = 2x, in x's dtype.
  auto x = TD::from({0.5, -1.25, 2.0}).requires_grad_();
  auto y = x.to<float>();
  CHECK(y.requires_grad());
  CHECK(std::string(y.grad_fn_name()) == "to");
  (y * y).sum().backward();
  check_close(x.grad(), {1.0, -2.5, 4.0});

  // A float leaf and a double loss (a loss summed in double precision).
  auto w = TF::from({1.5f, -0.5f}).requires_grad_();
  w.to<double>().exp().sum().backward();
  check_close(w.grad(), {std::exp(1.5f), std::exp(-0.5f)});

  // Two casts of one tensor, and a direct use: the gradients add up.
  auto v = TD::from({1.0, 3.0}).requires_grad_();
  (v.to<float>() * 2.0f).sum().to<double>().backward();
  (((v.to<float>() * 2.0f).sum() + (v.to<float>() * 3.0f).sum()).to<double>() + v.sum()).backward();
  check_close(v.grad(), {8.0, 8.0});
}

TEST_CASE("autograd: a node reached both directly and through a round trip to float runs once") {
  // h gets one gradient from h*h and one back from the float branch; both
  // dtypes share one queue, so h's node runs once with their sum, and a pass
  // without retain_graph frees the graph without tripping over itself.
  auto x = TD::from({0.25, -0.5, 0.1}).requires_grad_();
  auto h = x * 3.0;
  auto a = h.to<float>().exp().to<double>();
  (a + h * h).sum().backward();
  std::vector<double> want;
  for (double xi : {0.25, -0.5, 0.1}) want.push_back(3.0 * (std::exp(3.0 * xi) + 2.0 * 3.0 * xi));
  check_close(x.grad(), want, 1e-5, 1e-5);
  CHECK(error_of([&] { (a + h).sum().backward(); }).find("backward through the graph a second time") !=
        std::string::npos);
}

TEST_CASE("autograd: gradcheck through a round trip double -> float -> double") {
  // Inputs and steps exactly representable in float, and no float-side
  // rounding before the cast back, so finite differences are exact.
  auto f = [](const std::vector<TD>& in) {
    return in[0].to<float>().to<double>() * in[1] + in[1].to<float>().neg().to<double>().exp();
  };
  CHECK(frost::test::gradcheck(f, {TD::from({0.5, -1.25, 2.0}), TD::from({0.75, 1.5, -0.25})}, 1.0 / 1024));
}

TEST_CASE("autograd: autograd::grad and second derivatives across a cast") {
  auto x = TD::from({0.5, 2.0}).requires_grad_();
  auto xf = x.to<float>();
  auto y = (xf * xf * xf).sum();  // float
  auto g = frost::autograd::grad({y}, {xf}, {}, true, true);
  check_close(g[0], {0.75f, 12.0f});  // 3x^2
  // The float gradient, cast back, depends on the double leaf: d/dx of
  // sum(3x^2) = 6x, and .grad is left alone by autograd::grad.
  auto gd = g[0].to<double>().sum();
  auto h = frost::autograd::grad({gd}, {x});
  check_close(h[0], {3.0, 12.0});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(xf.grad().defined());

  // create_graph through backward(): x.grad carries history across the cast.
  auto z = TD::from({2.0}).requires_grad_();
  auto zf = z.to<float>();
  (zf * zf * zf).sum().backward({}, false, true);
  check_close(z.grad(), {12.0});
  CHECK(z.grad().requires_grad());
  auto zz = frost::autograd::grad({z.grad().sum()}, {z});
  check_close(zz[0], {12.0});
  z.set_grad(TD());
}

TEST_CASE("autograd: a failed backward leaves the graph usable") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  auto a = x * 2.0;
  auto b = x * x;
  // The second root's seed has the wrong shape: nothing may stay queued.
  CHECK_THROWS_AS(frost::autograd::grad({a, b}, {x}, {TD::ones({2}), TD::ones({3})}), Error);
  CHECK_THROWS_AS(frost::autograd::grad({a, TD::ones({2})}, {x}, {TD::ones({2}), TD::ones({2})}), Error);
  auto g = frost::autograd::grad({a.sum()}, {x}, {}, /*retain_graph=*/true);
  check_close(g[0], {2.0, 2.0});
  a.sum().backward();
  check_close(x.grad(), {2.0, 2.0});
  // An error in the middle of the tape (a modified saved tensor) likewise.
  auto c = x * 3.0;
  auto d = (c * c).sum() + (c * 2.0).sum();
  {
    NoGradGuard ng;
    c.add_(0.0);
  }
  CHECK_THROWS_AS(d.backward({}, true), Error);
  x.set_grad(TD());
  (c * 2.0).sum().backward();
  check_close(x.grad(), {6.0, 6.0});
}

TEST_CASE("autograd: the tape frees all its memory") {
  const auto before = frost::memory_stats().current_bytes;
  {
    auto x = TD::randn({8, 8}).requires_grad_();
    auto w = TD::randn({8, 8}).requires_grad_();
    {
      // in-place ops on non-leaves, views, retain_graph, create_graph
      auto h = x.matmul(w);
      h.mul_(w);
      h.div_(x * x + 1.0);
      h.add_(x.t());
      auto loss = (h.tanh() * h.narrow(0, 1, 7).sum()).sum();
      loss.backward({}, true);
      loss.backward();
      auto g = frost::autograd::grad({(x * x * w).sigmoid().sum()}, {x, w}, {}, true, true);
      auto hv = frost::autograd::grad({(g[0] * g[1]).sum()}, {x});
      CHECK(hv[0].shape() == Shape{8, 8});
      auto y = x.exp();
      auto z = y.sum();
      {
        NoGradGuard ng;
        y.add_(1.0);
      }
      CHECK_THROWS_AS(z.backward(), Error);  // a failed backward frees everything too
    }
    x.set_grad(TD());
    w.set_grad(TD());
  }
  CHECK(frost::memory_stats().current_bytes == before);
}

TEST_CASE("autograd: backward frees saved tensors unless retain_graph") {
  auto x = TD::rand({1000}).requires_grad_();
  const std::int64_t bytes = 1000 * 8;
  {
    auto y = x.exp().sin().cos().sum();  // sin saves exp(x), cos saves sin(exp(x))
    const auto before = frost::memory_stats().current_bytes;
    y.backward({}, /*retain_graph=*/true);
    CHECK(frost::memory_stats().current_bytes == before + bytes);  // + x.grad; saved tensors kept
    y.backward();
    CHECK(frost::memory_stats().current_bytes == before + bytes - 2 * bytes);  // both saved tensors freed
  }
  x.set_grad(TD());
}

TEST_CASE("autograd: overlapping views and copies of one leaf") {
  auto x = TD::from({1.0, 2.0, 3.0}).requires_grad_();
  (x.narrow(0, 0, 2) + x.narrow(0, 1, 2)).sum().backward();
  check_close(x.grad(), {1.0, 2.0, 1.0});
  x.set_grad(TD());
  (x.slice(0, 0, 3, 2) * x.select(0, 1)).sum().backward();  // (x0 + x2) * x1
  check_close(x.grad(), {2.0, 4.0, 2.0});

  auto m = TD::arange(6).view({2, 3}).requires_grad_();
  auto r = m.t().reshape({6});  // not viewable: a copy, with its gradient
  CHECK(r.data() != m.data());
  (r * TD::arange(6)).sum().backward();
  check_close(m.grad(), {0, 2, 4, 1, 3, 5});
  // the gradient of a non-leaf is not kept
  auto h = m * 2.0;
  h.sum().backward();
  CHECK_FALSE(h.grad().defined());
}

TEST_CASE("autograd: grad of an unused input is an error unless allow_unused") {
  auto x = TD::from({1.0, 2.0}).requires_grad_();
  auto w = TD::from({3.0}).requires_grad_();
  auto y = (x * x).sum();
  CHECK_THROWS_WITH_AS(frost::autograd::grad({y}, {x, w}, {}, true), doctest::Contains("input 1 (shape [1]) was not used"),
                       Error);
  auto g = frost::autograd::grad({y}, {x, w}, {}, false, false, true);
  check_close(g[0], {2.0, 4.0});
  CHECK_FALSE(g[1].defined());
}

TEST_CASE("autograd: norm has a zero gradient at the zero vector") {
  auto x = TD::zeros({3}).requires_grad_();
  x.norm().backward();
  check_close(x.grad(), {0.0, 0.0, 0.0});
  auto z = TD::from({3.0, 4.0, 0.0, 0.0}, {2, 2}).requires_grad_();
  z.norm(2, {1}).sum().backward();
  check_close(z.grad(), {0.6, 0.8, 0.0, 0.0}, 1e-12, 1e-12);
}

TEST_CASE("autograd: PyTorch's gradients where the textbook rule divides by zero") {
  const double nan = std::nan(""), inf = INFINITY;
  SUBCASE("std of constant values: 0, not NaN") {
    auto x = TD::from({1, 1, 1, 2, 3, 4}, {2, 3}).requires_grad_();
    x.std({1}).sum().backward();
    const auto g = x.grad().to_vector();
    CHECK(g[0] == 0.0);
    CHECK(g[2] == 0.0);
    check_close(TD::from({g[3], g[4], g[5]}), {-0.5, 0.0, 0.5}, 1e-12, 1e-12);  // d std / dx = (x - m) / (2 s), s = 1
  }
  SUBCASE("norm for p other than 1 and 2 at zero") {
    auto x = TD::zeros({2}).requires_grad_();
    x.norm(3).backward();
    check_close(x.grad(), {0.0, 0.0});
    auto z = TD::from({0.0, 4.0}).requires_grad_();
    z.norm(0.5).backward();  // (sqrt|z0| + sqrt|z1|)^2: 1 for z1, 0 (PyTorch's choice) at z0
    check_close(z.grad(), {0.0, 1.0}, 1e-12, 1e-12);
  }
  SUBCASE("max over all elements with a NaN: the NaN gets the gradient") {
    auto x = TD::from({1, nan, 3, nan}).requires_grad_();
    auto y = x.max();
    CHECK(std::isnan(y.item()));
    y.backward();
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0, 0.5});
  }
  SUBCASE("maximum and minimum: a NaN wins on either side; ties split the gradient") {
    const auto a = TD::from({nan, 1, 2}), b = TD::from({1, nan, 2});
    for (const auto& y : {a.maximum(b), b.maximum(a), a.minimum(b), b.minimum(a)}) {
      const auto v = y.to_vector();
      CHECK(std::isnan(v[0]));
      CHECK(std::isnan(v[1]));
      CHECK(v[2] == 2.0);
    }
    auto p = TD::from({1, 2, 3}).requires_grad_(), q = TD::from({1, 5, 0}).requires_grad_();
    p.maximum(q).sum().backward();
    CHECK(p.grad().to_vector() == std::vector<double>{0.5, 0, 1});
    CHECK(q.grad().to_vector() == std::vector<double>{0.5, 1, 0});
  }
  SUBCASE("pow at base 0") {
    auto a = TD::zeros({3}).requires_grad_(), b = TD::from({0, 0.5, 2}).requires_grad_();
    a.pow(b).sum().backward();
    CHECK(a.grad().to_vector() == std::vector<double>{0, inf, 0});
    CHECK(b.grad().to_vector() == std::vector<double>{0, 0, 0});
    auto x = TD::from({0, 0.5, 2}).requires_grad_();
    frost::pow(0.0, x).sum().backward();
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0, 0});
    CHECK(std::isnan(TD::from({-inf}).pow(0.5).item()));  // as sqrt, as PyTorch
  }
  SUBCASE("prod with zeros: one zero gets the product of the rest") {
    auto x = TD::from({0, 2, 3, 0, 2, 0}, {2, 3}).requires_grad_();
    x.prod(1).sum().backward();
    CHECK(x.grad().to_vector() == std::vector<double>{6, 0, 0, 0, 0, 0});
    auto z = TD::from({0, 2, 3}).requires_grad_();
    auto g = frost::autograd::grad({z.prod()}, {z}, {}, true, true);
    CHECK(g[0].to_vector() == std::vector<double>{6, 0, 0});
    g[0].sum().backward();  // d(z1 z2 + z0 z2 + z0 z1)/dz = (z2 + z1, z2 + z0, z1 + z0)
    CHECK(z.grad().to_vector() == std::vector<double>{5, 3, 2});
  }
}

TEST_CASE("autograd: var and std with a braced dim reduce that dim; degenerate sizes are NaN") {
  const auto x = TD::from({1, 2, 4, 3, 3, 3}, {2, 3});
  CHECK(x.var({1}).shape() == Shape{2});  // not var(bool): a braced 1 also converts to bool
  check_close(x.var({1}), {7.0 / 3.0, 0.0}, 1e-12, 1e-12);
  CHECK(x.std({0}).shape() == Shape{3});
  CHECK(x.var(false).shape() == Shape{});
  CHECK(std::isnan(TD::from({5.0}).var().item()));                      // one value, unbiased: 0 / 0
  const auto empty = TD::zeros({0, 2}).var({0}).to_vector();             // no values: 0 / 0, not -0
  CHECK((empty.size() == 2 && std::isnan(empty[0]) && std::isnan(empty[1])));
}
