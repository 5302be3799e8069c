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
