// Layer modules: PyTorch's parameter names, shapes, defaults and
// initialisation; train/eval behaviour; gradchecks through the modules in double.
#include "support.hpp"

#include <frost/nn/nn.hpp>
#include <sstream>

using namespace frost;
using namespace frost::test;
using T = Tensor<float>;

namespace {
std::vector<std::string> keys(const auto& m) { return m->state_dict().keys(); }
template <class M>
std::string repr(const M& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}
}  // namespace

TEST_CASE("nn layers: conv and pooling modules follow PyTorch's names, shapes and printing") {
  auto conv = nn::Conv2d(3, 8, 3, {.padding = 1, .groups = 1});
  CHECK(keys(conv) == std::vector<std::string>{"weight", "bias"});
  CHECK(conv->weight.shape() == Shape{8, 3, 3, 3});
  const double bound = 1 / std::sqrt(27.0);
  CHECK(conv->weight.abs().max().item() <= bound);
  CHECK(conv->bias.abs().max().item() <= bound);
  CHECK(conv(T::randn({2, 3, 10, 10})).shape() == Shape{2, 8, 10, 10});
  CHECK(repr(conv) == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");

  auto same = nn::Conv2d(4, 4, {2, 3}, {.padding = "same", .groups = 2, .bias = false});
  CHECK(same->weight.shape() == Shape{4, 2, 2, 3});
  CHECK_FALSE(same->bias.defined());
  CHECK(same(T::randn({1, 4, 5, 6})).shape() == Shape{1, 4, 5, 6});

  auto c1 = nn::Conv1d(2, 6, 3, {.stride = 2});
  CHECK(c1->weight.shape() == Shape{6, 2, 3});
  CHECK(c1(T::randn({3, 2, 9})).shape() == Shape{3, 6, 4});

  auto ct = nn::ConvTranspose2d(4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
  CHECK(ct->weight.shape() == Shape{4, 3, 3, 3});
  CHECK(ct(T::randn({1, 4, 5, 5})).shape() == Shape{1, 6, 10, 10});

  CHECK_THROWS_WITH_AS(nn::Conv2d(3, 8, 3, {.groups = 2}),
                       doctest::Contains("in_channels (3) and out_channels (8) must both be divisible by groups (2)"),
                       Error);

  auto pool = nn::MaxPool2d(2);
  CHECK(pool(T::randn({2, 3, 8, 8})).shape() == Shape{2, 3, 4, 4});
  CHECK(repr(pool) == "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)");
  CHECK(nn::AvgPool2d(3, {.stride = 1, .padding = 1})(T::randn({1, 1, 5, 5})).shape() == Shape{1, 1, 5, 5});
  CHECK(nn::AdaptiveAvgPool2d(1)(T::randn({2, 7, 5, 3})).shape() == Shape{2, 7, 1, 1});
}

TEST_CASE("nn layers: BatchNorm2d tracks running statistics like PyTorch") {
  auto bn = nn::BatchNorm2dT<double>(3);
  CHECK(keys(bn) == std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(bn->state_dict().index_at("num_batches_tracked").dim() == 0);
  const auto x = TD::randn({4, 3, 2, 2}) * 2.0 + 1.0;
  auto y = bn(x);
  // Training: batch statistics, so each channel of y has mean 0, variance 1.
  check_close(y.mean({0, 2, 3}), std::vector<double>(3, 0.0), 1e-9, 0);
  check_close(y.var({0, 2, 3}, false), std::vector<double>(3, 1.0), 1e-4, 1e-4);
  check_close(bn->running_mean, (x.mean({0, 2, 3}) * 0.1).to_vector(), 1e-12, 1e-12);
  check_close(bn->running_var, (x.var({0, 2, 3}, true) * 0.1 + 0.9).to_vector(), 1e-12, 1e-12);
  CHECK(bn->num_batches_tracked.item() == 1);
  // Evaluation: the running statistics, and nothing is updated.
  bn->eval();
  auto ye = bn(x);
  check_close(ye, (x - bn->running_mean.reshape({1, 3, 1, 1})) / (bn->running_var.reshape({1, 3, 1, 1}) + 1e-5).sqrt(),
              1e-12, 1e-12);
  CHECK(bn->num_batches_tracked.item() == 1);
  CHECK_THROWS_WITH_AS(bn(TD::randn({4, 3})), doctest::Contains("expected 4-D input [N, C, H, W], got shape [4, 3]"),
                       Error);

  // momentum = None: a cumulative average over batches.
  auto cum = nn::BatchNorm1dT<double>(2, {.momentum = std::nullopt});
  const auto a = TD::randn({5, 2}), b = TD::randn({5, 2});
  cum(a);
  cum(b);
  check_close(cum->running_mean, ((a.mean({0}) + b.mean({0})) * 0.5).to_vector(), 1e-12, 1e-12);
  CHECK(repr(cum) == "BatchNorm1d(2, eps=1e-05, momentum=None, affine=True, track_running_stats=True)");

  // Without running statistics, evaluation still normalises by the batch.
  auto nostats = nn::BatchNorm1dT<double>(2, {.affine = false, .track_running_stats = false});
  CHECK(nostats->state_dict().size() == 0);
  nostats->eval();
  check_close(nostats(a).mean({0}), std::vector<double>(2, 0.0), 1e-9, 0);

  nn::BatchNorm2dT<double> g(2);
  CHECK(gradcheck([&](const std::vector<TD>& in) { return nn::functional::batch_norm(in[0], TD(), TD(), in[1], in[2], true); },
                  {TD::randn({3, 2, 2, 2}), g->weight, g->bias}));
}

TEST_CASE("nn layers: LayerNorm, GroupNorm, Embedding, Dropout") {
  auto ln = nn::LayerNormT<double>({4});
  CHECK(keys(ln) == std::vector<std::string>{"weight", "bias"});
  auto y = ln(TD::randn({3, 4}) * 3.0);
  check_close(y.mean({1}), std::vector<double>(3, 0.0), 1e-9, 0);
  auto gn = nn::GroupNormT<double>(2, 4);
  CHECK(gn(TD::randn({2, 4, 3})).shape() == Shape{2, 4, 3});
  CHECK_THROWS_WITH_AS(nn::GroupNorm(3, 4), doctest::Contains("num_channels (4) must be divisible by num_groups (3)"),
                       Error);

  auto emb = nn::Embedding(10, 3, {.padding_idx = 2});
  CHECK(emb->weight.shape() == Shape{10, 3});
  CHECK(emb->weight.select(0, 2).to_vector() == std::vector<float>(3, 0.0f));
  auto e = emb(IndexTensor::from({1, 2, 2, 9}, {2, 2}));
  CHECK(e.shape() == Shape{2, 2, 3});
  e.sum().backward();
  CHECK(emb->weight.grad().select(0, 2).to_vector() == std::vector<float>(3, 0.0f));
  CHECK(emb->weight.grad().select(0, 1).to_vector() == std::vector<float>(3, 1.0f));

  auto drop = nn::Dropout(0.5);
  manual_seed(3);
  auto x = T::ones({1000});
  auto d = drop(x);
  const auto kept = (d > 0.0f).sum().item();
  CHECK(kept > 400);
  CHECK(kept < 600);
  CHECK(d.max().item() == doctest::Approx(2.0f));
  drop->eval();
  CHECK(drop(x).is_same(x));
  auto d2 = nn::Dropout2d(0.5)(T::ones({2, 8, 3, 3}));
  for (int c = 0; c < 8; ++c) {
    const auto ch = d2.select(1, c).select(0, 0);
    CHECK((ch.min().item() == ch.max().item()));
  }
  CHECK_THROWS_WITH_AS(nn::Dropout(1.5), doctest::Contains("p must be in [0, 1], got 1.5"), Error);
}

TEST_CASE("nn layers: the guide's ResearchModel trunk in double passes a gradcheck through the modules") {
  manual_seed(0);
  auto net = nn::SequentialT<double>(nn::Conv2dT<double>(2, 3, 3, {.padding = 1}), nn::ReLUT<double>(),
                                     nn::MaxPool2dT<double>(2), nn::Conv2dT<double>(3, 2, 3, {.padding = 1}),
                                     nn::BatchNorm2dT<double>(2), nn::GELUT<double>(), nn::FlattenT<double>(),
                                     nn::LinearT<double>(2 * 2 * 2, 3));
  const auto params = net->parameters();
  CHECK(params.size() == 8);
  // Training mode: batch norm uses batch statistics, so the output is a
  // function of the input alone (the running statistics only accumulate).
  CHECK(gradcheck([&](const std::vector<TD>& in) { return net(in[0]); }, {TD::randn({2, 2, 4, 4})}));
  // Gradients reach every parameter.
  net(TD::randn({2, 2, 4, 4})).sum().backward();
  for (const auto& p : params) CHECK(p.grad().defined());
}

TEST_CASE("nn layers: GELU exact and tanh-approximate, as nn.GELU(approximate=...)") {
  const auto x = TD::from({-2.0, -0.5, 0.0, 0.7, 3.0});
  const auto exact = nn::GELUT<double>()(x), approx = nn::GELUT<double>("tanh")(x);
  // PyTorch: gelu(x) and gelu(x, approximate="tanh") at these points.
  const double k = std::sqrt(2 / 3.14159265358979323846);
  for (std::size_t i = 0; i < 5; ++i) {
    const double v = x.to_vector()[i];
    CHECK(exact.to_vector()[i] == doctest::Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).epsilon(1e-14));
    CHECK(approx.to_vector()[i] == doctest::Approx(0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v)))).epsilon(1e-14));
  }
  // The two differ by up to about 1e-3 around |x| ~ 2.
  CHECK((exact - approx).abs().max().item() > 1e-5);
  CHECK(repr(nn::GELU("tanh")) == "GELU(approximate='tanh')");
  CHECK(repr(nn::GELU()) == "GELU()");
  CHECK_THROWS_WITH_AS(nn::GELU("erf"), doctest::Contains("approximate must be \"none\" or \"tanh\", got \"erf\""),
                       Error);
  CHECK_THROWS_WITH_AS(T::ones({2}).gelu("fast"), doctest::Contains("frost::gelu: approximate must be"), Error);
}
