// nn::functional losses: values against PyTorch (tests/reference/losses_reference.py),
// plain-loop references, gradchecks in double, and bad input.
#include "support.hpp"

using namespace frost;
using namespace frost::test;
namespace F = frost::nn::functional;

namespace {
TD logits() {
  return TD::from({0.2, -1.0, 0.5, 1.5, 1.0, 0.3, -0.7, 0.1, -0.4, 0.9, 0.0, 0.6}, {3, 4});
}
IndexTensor ints(std::vector<std::int64_t> v) { return IndexTensor::from(v); }
}  // namespace

TEST_CASE("losses: cross_entropy matches PyTorch with weight, ignore_index and label smoothing") {
  const auto w = TD::from({0.5, 2.0, 1.0, 1.5});
  const auto t = ints({3, -100, 1});
  F::ClassLossOptions<double> o{.weight = w, .ignore_index = -100, .label_smoothing = 0.2};
  CHECK(F::cross_entropy(logits(), t, o).item() == doctest::Approx(0.8159661771697344).epsilon(1e-12));
  o.reduction = F::Reduction::sum;
  CHECK(F::cross_entropy(logits(), t, o).item() == doctest::Approx(2.8558816200940704).epsilon(1e-12));
  o.reduction = F::Reduction::none;
  check_close(F::cross_entropy(logits(), t, o), {1.1209730784566068, 0.0, 1.7349085416374639}, 1e-12, 1e-12);
  CHECK(F::cross_entropy(logits(), ints({3, 0, 1})).item() == doctest::Approx(0.7208932701419007).epsilon(1e-12));
  CHECK(F::cross_entropy(logits(), ints({3, 0, 1}), {.label_smoothing = 0.1}).item() ==
        doctest::Approx(0.8092266034752341).epsilon(1e-12));
  const auto p = TD::from({0.1, 0.2, 0.3, 0.4, 1, 0, 0, 0, 0.5, 0.5, 0, 0}, {3, 4}).softmax(1);
  CHECK(F::cross_entropy(logits(), p, {.label_smoothing = 0.1}).item() ==
        doctest::Approx(1.5106899412555101).epsilon(1e-12));
}

TEST_CASE("losses: binary losses and smooth_l1 match PyTorch") {
  const auto y = TD::from({1.0, 0.0, 0.0, 1.0, 0.5, 0.25}, {3, 2});
  const auto z = TD::from({0.3, -2.0, 4.0, 0.7, -0.2, 1.3}, {3, 2});
  CHECK(F::binary_cross_entropy_with_logits(z, y, F::Reduction::mean, {}, TD::from({2.0, 0.5})).item() ==
        doctest::Approx(1.2897453589194703).epsilon(1e-12));
  CHECK(F::binary_cross_entropy(z.sigmoid(), y).item() == doctest::Approx(1.1694610925882254).epsilon(1e-12));
  CHECK(F::smooth_l1_loss(z, y, F::Reduction::mean, 0.5).item() == doctest::Approx(1.215).epsilon(1e-12));
}

TEST_CASE("losses: binary losses at saturated probabilities and at zero logits, as PyTorch") {
  // Probabilities of exactly 0 or 1: PyTorch's rule (x - t) / max(x (1 - x), 1e-12), not 0/0.
  auto p = TD::from({1, 0, 0}).requires_grad_();
  const auto l = F::binary_cross_entropy(p, TD::from({1, 0, 1}), F::Reduction::sum);
  CHECK(l.item() == 100.0);  // the clamped log
  l.backward();
  check_close(p.grad(), {0.0, 0.0, -1000000003995.8029}, 0, 1e-15);  // PyTorch 1.13
  // A float sigmoid saturates to exactly 1 at 20: the gradient is 0, not NaN.
  auto z = TF::from({20.0f}).requires_grad_();
  F::binary_cross_entropy(z.sigmoid(), TF::from({1.0f})).backward();
  CHECK(z.grad().item() == 0.0f);
  // Logits at exactly 0 (a zero-initialised head): sigmoid(x) - t, not the abs/relu subgradients.
  auto x = TD::zeros({3}).requires_grad_();
  F::binary_cross_entropy_with_logits(x, TD::from({0, 1, 0.3}), F::Reduction::sum).backward();
  check_close(x.grad(), {0.5, -0.5, 0.2}, 1e-15, 1e-15);
  auto x2 = TD::zeros({2}).requires_grad_();
  F::binary_cross_entropy_with_logits(x2, TD::from({1, 0}), F::Reduction::sum, {}, TD::from({3.0})).backward();
  check_close(x2.grad(), {-1.5, 0.5}, 1e-15, 1e-15);
}

TEST_CASE("losses: huber_loss and kl_div match PyTorch") {
  const auto y = TD::from({1.0, 0.0, 0.0, 1.0, 0.5, 0.25}, {3, 2});
  const auto z = TD::from({0.3, -2.0, 4.0, 0.7, -0.2, 1.3}, {3, 2});
  CHECK(F::huber_loss(z, y, F::Reduction::mean, 0.7).item() == doctest::Approx(0.7891666666666666).epsilon(1e-13));
  check_close(F::huber_loss(z, y, F::Reduction::none, 2.0),
              {0.24499999999999997, 2.0, 6.0, 0.04500000000000001, 0.24499999999999997, 0.55125}, 1e-15, 1e-13);
  const auto lp = z.log_softmax(1);
  const auto q = TD::from({0.25, 0.75, 0.0, 1.0, 0.5, 0.5}, {3, 2});
  CHECK(F::kl_div(lp, q, F::KLDivReduction::batchmean).item() == doctest::Approx(1.617565225424207).epsilon(1e-13));
  CHECK(F::kl_div(lp, q).item() == doctest::Approx(0.8087826127121035).epsilon(1e-13));
  CHECK(F::kl_div(lp, q, F::KLDivReduction::sum).item() == doctest::Approx(4.852695676272621).epsilon(1e-13));
  check_close(F::kl_div(lp, q, F::KLDivReduction::none),
              {-0.3226872241304819, 1.5808975441096367, 0.0, 3.336219258870659, 0.5041330487114035, -0.24586695128859642},
              1e-15, 1e-13);
  CHECK(F::kl_div(lp, y.log_softmax(1), F::KLDivReduction::batchmean, true).item() ==
        doctest::Approx(0.7858999396587488).epsilon(1e-13));
  auto x = lp.detach().requires_grad_();
  F::kl_div(x, q, F::KLDivReduction::batchmean).backward();  // a zero target: gradient 0, no NaN
  check_close(x.grad(), {-0.08333333333333333, -0.25, 0.0, -0.3333333333333333, -0.16666666666666666, -0.16666666666666666},
              1e-15, 1e-13);
  CHECK(gradcheck([](const std::vector<TD>& a) { return F::huber_loss(a[0], a[1], F::Reduction::sum, 0.5); },
                  {TD::from({0.1, -1.0, 2.0, -0.3}), TD::from({0.0, 0.2, 0.0, 0.0})}));
  CHECK(gradcheck([&](const std::vector<TD>& a) { return F::kl_div(a[0].log_softmax(1), a[1].softmax(1)); },
                  {TD::randn({2, 3}), TD::randn({2, 3})}));
  CHECK_THROWS_WITH_AS(F::huber_loss(z, y, F::Reduction::mean, 0.0), doctest::Contains("huber_loss: delta must be positive"),
                       Error);
  CHECK_THROWS_WITH_AS(F::kl_div(lp, TD::zeros({2, 3})), doctest::Contains("kl_div: input of shape [3, 2]"), Error);
}

TEST_CASE("losses: K-dimensional cross_entropy and nll_loss, as PyTorch's [N, C, d1, ..., dk]") {
  const auto x = TD::from({0.2, -1.0, 0.5, 1.5, 1.0, 0.3, -0.7, 0.1, -0.4, 0.9, 0.0, 0.6,
                           0.8, -0.3, 0.4, -1.2, 0.7, 0.05, 0.3, -0.6, 1.1, -0.2, 0.9, 0.25}, {2, 4, 3});
  const auto t = IndexTensor::from({3, 0, 1, 2, -100, 0}, {2, 3});
  // Each position on its own, with loops over the classes.
  const auto xv = x.to_vector();
  const auto tv = t.to_vector();
  std::vector<double> each;
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < 3; ++d) {
      const std::int64_t c = tv[std::size_t(n * 3 + d)];
      if (c < 0) {
        each.push_back(0);
        continue;
      }
      double s = 0;
      for (int k = 0; k < 4; ++k) s += std::exp(xv[std::size_t(n * 12 + k * 3 + d)]);
      each.push_back(std::log(s) - xv[std::size_t(n * 12 + c * 3 + d)]);
    }
  const auto none = F::cross_entropy(x, t, {.reduction = F::Reduction::none});
  CHECK(none.shape() == Shape{2, 3});
  check_close(none, each, 1e-12, 1e-12);
  check_close(none, {1.2586316063543042, 2.6469903478059367, 1.403113834785475, 1.246567269173791, 0.0, 1.5215131235630217},
              1e-13, 1e-13);  // PyTorch 1.13
  CHECK(F::cross_entropy(x, t).item() == doctest::Approx(1.6153632363365058).epsilon(1e-13));
  double total = 0;
  for (double e : each) total += e;
  CHECK(F::cross_entropy(x, t).item() == doctest::Approx(total / 5).epsilon(1e-12));  // the ignored one is not counted
  CHECK(F::nll_loss(x.log_softmax(1), t, {.reduction = F::Reduction::sum}).item() == doctest::Approx(total).epsilon(1e-12));
  CHECK(gradcheck([&](const std::vector<TD>& in) { return F::cross_entropy(in[0], t, {.label_smoothing = 0.1}); }, {x}));
  // Soft targets of the input's shape; 'none' keeps [N, d1, ..., dk].
  const auto probs = TD::ones({2, 4, 3}) * 0.25;
  CHECK(F::cross_entropy(x, probs, {.reduction = F::Reduction::none}).shape() == Shape{2, 3});
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, IndexTensor::zeros({2, 4})),
                       doctest::Contains("target of shape [2, 4] does not match input of shape [2, 4, 3]"), Error);
}

TEST_CASE("losses: mse, l1 and nll against plain loops") {
  const auto a = TD::randn({4, 3}), b = TD::randn({4, 3});
  const auto av = a.to_vector(), bv = b.to_vector();
  double se = 0, ae = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    se += (av[i] - bv[i]) * (av[i] - bv[i]);
    ae += std::fabs(av[i] - bv[i]);
  }
  CHECK(F::mse_loss(a, b).item() == doctest::Approx(se / 12).epsilon(1e-12));
  CHECK(F::mse_loss(a, b, F::Reduction::sum).item() == doctest::Approx(se).epsilon(1e-12));
  CHECK(F::l1_loss(a, b).item() == doctest::Approx(ae / 12).epsilon(1e-12));
  CHECK(F::l1_loss(a, b, F::Reduction::none).shape() == Shape{4, 3});

  const auto lp = logits().log_softmax(1);
  const auto v = lp.to_vector();
  const double expect = -(v[0 * 4 + 2] + v[1 * 4 + 0] + v[2 * 4 + 3]) / 3;
  CHECK(F::nll_loss(lp, ints({2, 0, 3})).item() == doctest::Approx(expect).epsilon(1e-12));
  // A 1-D input is one sample.
  CHECK(F::nll_loss(lp.select(0, 1), IndexTensor::from({0}, Shape{})).item() == doctest::Approx(-v[4]).epsilon(1e-12));
}

TEST_CASE("losses: gradcheck in double") {
  const auto t = ints({3, -100, 1});
  const auto w = TD::from({0.5, 2.0, 1.0, 1.5});
  CHECK(gradcheck([&](const std::vector<TD>& x) { return F::cross_entropy(x[0], t, {.weight = w, .label_smoothing = 0.2}); },
                  {logits()}));
  CHECK(gradcheck([&](const std::vector<TD>& x) { return F::cross_entropy(x[0], x[1].softmax(1)); },
                  {logits(), TD::randn({3, 4})}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return F::mse_loss(x[0], x[1]); }, {TD::randn({5}), TD::randn({5})}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return F::l1_loss(x[0], x[1]); },
                  {TD::from({0.5, -1.0, 2.0}), TD::from({0.0, 0.0, 0.0})}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return F::smooth_l1_loss(x[0], x[1], F::Reduction::sum, 0.5); },
                  {TD::from({0.1, -1.0, 2.0, -0.3}), TD::from({0.0, 0.0, 0.0, 0.0})}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return F::binary_cross_entropy(x[0].sigmoid(), x[1]); },
                  {TD::randn({4}), TD::rand({4})}));
  CHECK(gradcheck([](const std::vector<TD>& x) {
          return F::binary_cross_entropy_with_logits(x[0], x[1], F::Reduction::mean, {}, TD::from({2.0, 0.5}));
        },
        {TD::from({0.3, -2.0, 4.0, 0.7}, {2, 2}), TD::rand({2, 2})}));
}

TEST_CASE("losses: bad input is a frost::Error naming the loss") {
  CHECK_THROWS_WITH_AS(F::mse_loss(TD::zeros({2, 3}), TD::zeros({3, 2})),
                       doctest::Contains("mse_loss: input of shape [2, 3] and target of shape [3, 2]"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, 4, 1})),
                       doctest::Contains("nll_loss: a target is out of bounds for 4 classes"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, 4, 1})), doctest::Contains("index 4 is out of bounds"), Error);
  CHECK_THROWS_WITH_AS(F::nll_loss(logits(), ints({0, -3, 1}), {.ignore_index = -1}),
                       doctest::Contains("index -3 is out of bounds"), Error);
  // Targets beyond float range still fail (the mask is exact in double),
  // and an ignore_index too large to compare exactly is refused.
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, (std::int64_t(1) << 40) + 1, 1})),
                       doctest::Contains("a target is out of bounds for 4 classes"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, 1, 2}), {.ignore_index = std::int64_t(1) << 60}),
                       doctest::Contains("ignore_index 1152921504606846976 is 2^53 or more"), Error);
  // 2^53 itself is refused too: the target 2^53 + 1 rounds to it in double
  // and would be ignored instead of failing.
  constexpr std::int64_t p53 = std::int64_t(1) << 53;
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, p53 + 1, 2}), {.ignore_index = p53}),
                       doctest::Contains("is 2^53 or more"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, -p53 - 1, 2}), {.ignore_index = -p53}),
                       doctest::Contains("is 2^53 or more"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, p53, 2}), {.ignore_index = p53 - 1}),
                       doctest::Contains("a target is out of bounds"), IndexError);
  CHECK(F::cross_entropy(logits(), ints({0, p53 - 1, 2}), {.ignore_index = p53 - 1}).item() ==
        doctest::Approx(F::cross_entropy(logits(), ints({0, -100, 2})).item()));
  // A bad target is an IndexError (an Error), so code catching either sees it.
  CHECK_THROWS_AS(F::nll_loss(logits(), ints({0, 9, 1})), IndexError);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, 1})), doctest::Contains("does not match input of shape [3, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, 1, 2}), {.weight = TD::ones({3})}),
                       doctest::Contains("weight of shape [3] does not match 4 classes"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(logits(), ints({0, 1, 2}), {.label_smoothing = 1.5}),
                       doctest::Contains("label_smoothing must be in [0, 1]"), Error);
}
