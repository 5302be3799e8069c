// Freeze passes one by one (each against the graph without it), the guide's
// models frozen against eager, and jit::compile across branches.
#include <doctest/doctest.h>

#include <functional>

#include <cstdio>
#include <filesystem>
#include <frost/frost.hpp>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../examples/research_model.hpp"
#include "support.hpp"

using namespace frost;
using T = Tensor<float>;

namespace {

double max_diff(const T& a, const T& b) { return (a - b).abs().max().item(); }
bool close(const T& a, const T& b, double tol = 1e-5) {
  return a.shape() == b.shape() && max_diff(a, b) <= tol * (1.0 + b.abs().max().item());
}

int count(const jit::Graph& g, jit::StepKind k) {
  int n = 0;
  for (const auto& s : g.steps) n += s.kind == k;
  return n;
}

template <class U>
bool reported(const jit::Plan<U>& p, const std::string& what) {
  return p.summary().find(what) != std::string::npos;
}

/// The plan after a round trip through a file.
jit::Plan<float> saved_and_loaded(const jit::Plan<float>& p) {
  const auto path = test::temp_path("round_trip.frost");
  p.save(path);
  auto loaded = jit::Plan<float>::load(path);
  std::remove(path.c_str());
  return loaded;
}

/// Batch-norm statistics away from the identity, so folding changes weights.
template <class M>
void warm_batch_norm(M& m, const Shape& input) {
  m->train();
  NoGradGuard ng;
  for (int i = 0; i < 3; ++i) m(T::randn(input) * 0.7f + 0.2f);
  m->eval();
}

struct ConvBn : nn::Module {
  nn::Conv2d conv = register_module("conv", nn::Conv2d(3, 6, 3, {.padding = 1}));
  nn::BatchNorm2d bn = register_module("bn", nn::BatchNorm2d(6));
  T forward(const T& x) { return bn(conv(x)).relu(); }
};

struct BnUsedTwice : nn::Module {  // the conv output is read again: batch norm cannot fold
  nn::Conv2d conv = register_module("conv", nn::Conv2d(3, 6, 3, {.padding = 1}));
  nn::BatchNorm2d bn = register_module("bn", nn::BatchNorm2d(6));
  T forward(const T& x) {
    auto y = conv(x);
    return bn(y) + y;
  }
};

}  // namespace

TEST_CASE("freeze pass: batch norm folds into the conv before it, in double") {
  manual_seed(10);
  auto m = nn::make<ConvBn>();
  warm_batch_norm(m, {4, 3, 8, 8});
  const auto x = T::randn({2, 3, 8, 8});
  const auto g = jit::trace(m, x);
  CHECK(count(g, jit::StepKind::batch_norm) == 1);
  jit::FreezeOptions no_fold;
  no_fold.fold_affine = false;
  auto folded = jit::freeze<float>(g);
  auto unfolded = jit::freeze<float>(g, no_fold);
  CHECK(count(folded.graph(), jit::StepKind::batch_norm) == 0);
  CHECK(count(unfolded.graph(), jit::StepKind::batch_norm) == 1);
  CHECK(reported(folded, "batch norm folding: 1 folded"));
  const T eager = [&] { InferenceMode im; return m(x); }();
  CHECK(close(folded.run(x), unfolded.run(x)));
  CHECK(close(folded.run(x), eager));
  // The folded weights are w * gamma / sqrt(var + eps), computed in double and rounded once.
  const auto& conv = m->conv;
  const auto& bnm = m->bn;
  const auto s = (bnm->weight / (bnm->running_var + 1e-5f).sqrt()).reshape({6, 1, 1, 1});
  const T expect_w = conv->weight * s;
  bool found = false;
  for (const auto& b : folded.graph().buffers)
    if (b.name == "conv.weight'") {
      found = true;
      const T got = T::from(std::vector<float>(static_cast<const float*>(b.data->data),
                                               static_cast<const float*>(b.data->data) + b.numel), expect_w.shape());
      CHECK(max_diff(got, expect_w) < 1e-6);
    }
  CHECK(found);
}

TEST_CASE("freeze pass: a batch norm whose input is used elsewhere stays as one scale-and-shift step") {
  manual_seed(11);
  auto m = nn::make<BnUsedTwice>();
  warm_batch_norm(m, {4, 3, 8, 8});
  const auto x = T::randn({2, 3, 8, 8});
  auto plan = jit::freeze(m, x);
  CHECK(count(plan.graph(), jit::StepKind::batch_norm) == 1);
  CHECK(reported(plan, "0 folded into conv/linear, 1 left as scale-and-shift"));
  const T eager = [&] { InferenceMode im; return m(x); }();
  CHECK(close(plan.run(x), eager));
}

TEST_CASE("freeze pass: constant scale and shift fold into a linear layer") {
  manual_seed(12);
  auto lin = nn::Linear(5, 4);
  const auto scale = T::rand({4}) + 0.5f, shift = T::randn({4});
  auto f = [&](const T& x) { return (lin(x) * 2.0f + 1.0f) * scale.reshape({1, 4}) - shift.reshape({1, 4}); };
  const auto x = T::randn({3, 5});
  // scale and shift are captured from outside: register them by tracing a module holding them instead.
  struct Holder : nn::Module {
    nn::Linear lin;
    T scale, shift;
    Holder(nn::Linear l, T s, T b) : lin(register_module("lin", l)) {
      scale = register_buffer("scale", s);
      shift = register_buffer("shift", b);
    }
    T forward(const T& x) { return (lin(x) * 2.0f + 1.0f) * scale.reshape({1, 4}) - shift.reshape({1, 4}); }
  };
  auto h = nn::make<Holder>(lin, scale, shift);
  auto plan = jit::freeze(h, x);
  CHECK(reported(plan, "constant add/mul folding: 4 folded"));
  CHECK(plan.graph().steps.size() == 1);
  CHECK(close(plan.run(x), f(x)));
}

TEST_CASE("freeze pass: activations fuse into conv and linear epilogues") {
  manual_seed(13);
  auto m = guide::make_mlp();
  m->eval();
  const auto x = T::randn({4, 784});
  const auto g = jit::trace(m, x);
  jit::FreezeOptions off;
  off.fuse_epilogues = false;
  auto fused = jit::freeze<float>(g), plain = jit::freeze<float>(g, off);
  CHECK(reported(fused, "2 activations fused"));
  CHECK(fused.graph().steps.size() == 3);
  CHECK(plain.graph().steps.size() == 5);
  CHECK(close(fused.run(x), plain.run(x)));
  // GELU, exact and tanh-approximate (cuBLASLt's GELU epilogue on CUDA), after linears.
  nn::Sequential gm(nn::Linear(784, 64), nn::GELU("tanh"), nn::Linear(64, 32), nn::GELU(), nn::Linear(32, 10));
  gm->eval();
  auto gp = jit::freeze(gm, x);
  CHECK(reported(gp, "2 activations fused"));
  CHECK(gp.graph().steps.size() == 3);
  const T want = [&] { InferenceMode im; return gm(x); }();
  CHECK(close(gp.run(x), want));
}

TEST_CASE("freeze pass: conv + relu + max pool run block by block, the conv output never stored whole") {
  manual_seed(17);
  auto m = nn::make<guide::ResearchModel>();
  m->eval();
  const auto x = T::randn({30, 3, 32, 32});  // conv2 takes blocks of 4 images: the last block is short
  const auto g = jit::trace(m, x);
  jit::FreezeOptions off;
  off.fuse_conv_pool = false;
  auto fused = jit::freeze<float>(g), plain = jit::freeze<float>(g, off);
  CHECK(count(fused.graph(), jit::StepKind::conv2d_pool) == 2);
  CHECK(count(fused.graph(), jit::StepKind::max_pool2d) == 0);
  CHECK(count(plain.graph(), jit::StepKind::max_pool2d) == 2);
  CHECK(reported(fused, "conv + max pool: 2 pairs"));
  CHECK(close(fused.run(x), plain.run(x)));
  CHECK(fused.arena_bytes() < plain.arena_bytes());
}

TEST_CASE("freeze pass: conv + pool steps that pool in the convolution's pass keep no scratch") {
  manual_seed(19);
  auto m = nn::make<guide::ResearchModel>();
  m->eval();
  for (std::int64_t batch : {1, 9}) {
    INFO("batch " << batch);
    const auto x = T::randn({batch, 3, 32, 32});
    auto plan = jit::freeze(m, x);
    // conv1 (3 channels: the direct kernel) and conv2 (F(4x4) filters) both pool in registers.
    int without = 0;
    for (const auto& s : plan.graph().steps)
      if (s.kind == jit::StepKind::conv2d_pool) without += s.out[1].buf < 0 && s.out[1].numel() == 0;
    CHECK(without == 2);
    CHECK(reported(plan, "conv + max pool in one pass: 2 steps"));
    CHECK(close(plan.run(x), [&] { InferenceMode im; return m(x); }()));
    CHECK(close(saved_and_loaded(plan).run(x), plan.run(x), 0));
    // Without prepared filters conv2 has no one-pass kernel here and keeps its scratch.
    jit::FreezeOptions plain;
    plain.prepare_weights = false;
    auto unprepared = jit::freeze<float>(jit::trace(m, x), plain);
    int kept = 0;
    for (const auto& s : unprepared.graph().steps)
      if (s.kind == jit::StepKind::conv2d_pool) kept += s.out[1].buf >= 0;
    CHECK(kept == 1);
    CHECK(unprepared.arena_bytes() > plan.arena_bytes());
    CHECK(close(unprepared.run(x), plan.run(x)));
  }
}

TEST_CASE("freeze pass: one image's conv + relu + max pool runs by blocks of filters") {
  manual_seed(18);
  auto m = nn::make<guide::ResearchModel>();
  m->eval();
  const auto x = T::randn({1, 3, 32, 32});
  const auto g = jit::trace(m, x);
  jit::FreezeOptions off;
  off.fuse_conv_pool = false;
  auto fused = jit::freeze<float>(g), plain = jit::freeze<float>(g, off);
  CHECK(count(fused.graph(), jit::StepKind::conv2d_pool) == 2);
  CHECK(count(plain.graph(), jit::StepKind::max_pool2d) == 2);
  for (const auto& s : fused.graph().steps)  // 32x32 planes of 64 filters: blocks of 16 (64 KiB of outputs)
    if (s.kind == jit::StepKind::conv2d_pool && s.conv.out_h == 32) CHECK(s.out[1].shape[1] == 16);
  CHECK(close(fused.run(x), plain.run(x)));
  CHECK(close(fused.run(x), [&] { InferenceMode im; return m(x); }()));
  // The first conv's output (256 KiB) is never stored: the arena holds the pooled maps and the blocks.
  CHECK(fused.arena_bytes() < 64 * 32 * 32 * 4);
  CHECK(fused.arena_bytes() < plain.arena_bytes());
  // 20 filters go as 16 + 4; the plan survives its own validation on load.
  struct Net : nn::Module {
    nn::Conv2d conv = register_module("conv", nn::Conv2d(3, 20, 3, {.padding = 1}));
    T forward(const T& x) { return frost::max_pool2d(conv(x).relu(), 2); }
  };
  auto net = nn::make<Net>();
  auto p20 = jit::freeze(net, x);
  CHECK(count(p20.graph(), jit::StepKind::conv2d_pool) == 1);
  CHECK(close(p20.run(x), [&] { InferenceMode im; return net(x); }()));
  CHECK(close(saved_and_loaded(p20).run(x), p20.run(x), 0));
}

TEST_CASE("freeze pass: Winograd filters are transformed once, at freeze") {
  manual_seed(23);
  auto m = nn::make<guide::ResearchModel>();
  m->eval();
  for (std::int64_t batch : {1, 9}) {
    INFO("batch " << batch);
    const auto x = T::randn({batch, 3, 32, 32});
    const auto g = jit::trace(m, x);
    jit::FreezeOptions off;
    off.prepare_weights = false;
    auto prepared = jit::freeze<float>(g), plain = jit::freeze<float>(g, off);
    // conv2 (64 -> 128, 3x3) is Winograd's; conv1 (3 input channels) is not.
    CHECK(reported(prepared, "weight preparation: 1 convolutions' filters Winograd-transformed"));
    std::int64_t positions = 0;
    for (const auto& s : prepared.graph().steps)
      if (s.in.size() == 4 && s.kind != jit::StepKind::linear) positions = s.in[3].shape[0];
    CHECK(positions == 36);  // F(4x4, 3x3) for 16x16 planes, one image's too: its filters cost nothing per run
    CHECK(close(prepared.run(x), plain.run(x)));
    CHECK(close(prepared.run(x), [&] { InferenceMode im; return m(x); }()));
    CHECK(close(saved_and_loaded(prepared).run(x), prepared.run(x), 0));
  }
  // Planes under 8x8 take F(2x2, 3x3)'s bank of 16 positions.
  auto small = nn::Conv2d(16, 24, 3, {.padding = 1});
  const auto x = T::randn({2, 16, 6, 6});
  auto plan = jit::freeze(small, x);
  std::int64_t positions = 0;
  for (const auto& s : plan.graph().steps)
    if (s.in.size() == 4) positions = s.in[3].shape[0];
  CHECK(positions == 16);
  CHECK(close(plan.run(x), [&] { InferenceMode im; return small(x); }()));
  CHECK(close(saved_and_loaded(plan).run(x), plan.run(x), 0));
}

TEST_CASE("freeze pass: linear weights go into the kernels' panels once (GEMM: 9+ rows, matrix-vector: 1-8)") {
  manual_seed(24);
  auto m = guide::make_mlp();
  m->eval();
  for (std::int64_t batch : {20, 3}) {
    INFO("batch " << batch);
    const auto x = T::randn({batch, 784});
    const auto g = jit::trace(m, x);
    jit::FreezeOptions off;
    off.prepare_weights = false;
    auto prepared = jit::freeze<float>(g), plain = jit::freeze<float>(g, off);
    // Three layers (784 -> 256 -> 256 -> 10); a few rows go into matrix-vector panels instead.
    CHECK(reported(prepared, batch == 20 ? "3 linear weights in GEMM panels, 0 in matrix-vector panels"
                                         : "0 linear weights in GEMM panels, 3 in matrix-vector panels"));
    CHECK(close(prepared.run(x), plain.run(x)));
    CHECK(close(prepared.run(x), [&] { InferenceMode im; return m(x); }()));
  }
  // Uneven blocks: 300 outputs (128 + 128 + 44 rows) over 700 inputs (256 + 256 + 188 deep), in double.
  using TD = Tensor<double>;
  struct Layer : nn::ModuleT<double> {
    TD w = register_parameter("w", TD::randn({300, 700}));
    TD b = register_parameter("b", TD::randn({300}));
    TD forward(const TD& x) { return nn::functional::linear(x, w, b).tanh(); }
  };
  auto layer = nn::make<Layer>();
  const TD xd = TD::randn({17, 700});
  auto plan = jit::freeze(layer, xd);
  CHECK(reported(plan, "1 linear weights in GEMM panels"));
  const TD eager = [&] { InferenceMode im; return layer(xd); }();
  CHECK((plan.run(xd) - eager).abs().max().item() < 1e-12);
}

TEST_CASE("backend: linear panels give any part of a product of 1-8 rows, whole products of more") {
  // y[:, n0:n1] = x[:, k0:k1] W[n0:n1, k0:k1]^T from the panels, in double,
  // against the sums written out; n = 75 leaves a short last panel.
  auto& be = backend_for<double>(Device::cpu());
  const std::int64_t n = 75, k = 37;
  const auto w = Tensor<double>::randn({n, k});
  for (std::int64_t m : {1, 2, 3, 5, 8}) {
    INFO(m << " rows");
    REQUIRE(be.gemm_prepared_part(m) == 16);
    std::vector<double> panels(static_cast<std::size_t>(be.gemm_prepared_size(m, n, k)));
    CHECK(panels.size() == 80 * 37 + (m == 1 ? 1 : 0));  // one row: kilobyte rows and a flag (gemv_rows.hpp)
    be.gemm_prepare(m, w.data(), n, k, panels.data());
    const auto x = Tensor<double>::randn({m, k + 3});  // row stride k + 3
    for (const auto& [n0, n1, k0, k1] : {std::array<std::int64_t, 4>{0, 75, 0, 37}, {16, 75, 5, 30}, {32, 48, 0, 1}, {64, 70, 36, 37}}) {
      std::vector<double> y(static_cast<std::size_t>(m * n), -1.0);
      be.gemm_prepared(m, m, n, k, x.data(), k + 3, panels.data(), y.data(), n, n0, n1, k0, k1);
      double worst = 0;
      bool untouched = true;
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t o = 0; o < n; ++o) {
          const double got = y[static_cast<std::size_t>(r * n + o)];
          if (o < n0 || o >= n1) {
            untouched = untouched && got == -1.0;
            continue;
          }
          double want = 0;
          for (std::int64_t i = k0; i < k1; ++i) want += x.data()[r * (k + 3) + i] * w.data()[o * k + i];
          worst = std::max(worst, std::abs(got - want));
        }
      CHECK(worst < 1e-13);
      CHECK(untouched);  // outputs outside [n0, n1) are left alone
    }
    // A part must start on a panel.
    std::vector<double> y(static_cast<std::size_t>(m * n));
    CHECK_THROWS_WITH_AS(be.gemm_prepared(m, m, n, k, x.data(), k + 3, panels.data(), y.data(), n, 8, 75, 0, k),
                         doctest::Contains("not a part of the matrix-vector panels"), Error);
  }
  // More rows take the same panels as a GEMM (blocks of 8, 4, 2, 1 rows; 3
  // panels, then single ones), whole products only.
  for (std::int64_t m : {9, 12, 16, 33}) {
    INFO(m << " rows");
    CHECK(be.gemm_prepared_part(m) == 0);
    std::vector<double> panels(static_cast<std::size_t>(be.gemm_prepared_size(m, n, k)));
    CHECK(panels.size() == 80 * 37);
    be.gemm_prepare(m, w.data(), n, k, panels.data());
    const auto x = Tensor<double>::randn({m, k + 3});
    std::vector<double> y(static_cast<std::size_t>(m * n), -1.0);
    be.gemm_prepared(m, m, n, k, x.data(), k + 3, panels.data(), y.data(), n, 0, n, 0, k);
    double worst = 0;
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t o = 0; o < n; ++o) {
        double want = 0;
        for (std::int64_t i = 0; i < k; ++i) want += x.data()[r * (k + 3) + i] * w.data()[o * k + i];
        worst = std::max(worst, std::abs(y[static_cast<std::size_t>(r * n + o)] - want));
      }
    CHECK(worst < 1e-13);
    CHECK_THROWS_WITH_AS(be.gemm_prepared(m, m, n, k, x.data(), k + 3, panels.data(), y.data(), n, 16, 75, 0, k),
                         doctest::Contains("whole products only"), Error);
  }
}

TEST_CASE("backend: one row's product skips zero inputs exactly, and reads them when a weight is not finite") {
  // The one-row form (gemv_rows.hpp): groups of kilobyte rows (600 floats:
  // two of 256 and one of 96; 300 doubles: two of 128 and one of 48), inputs
  // listed 1024 at a time (k = 2500: three lists), a third of them zero.
  auto check = [](auto zero) {
    using S = decltype(zero);
    auto& be = backend_for<S>(Device::cpu());
    const std::int64_t n = sizeof(S) == 4 ? 600 : 300, k = 2500;
    auto w = Tensor<S>::randn({n, k});
    auto x = Tensor<S>::randn({1, k});
    for (std::int64_t i = 0; i < k; i += 3) x.data()[i] = zero;
    x.data()[7] = std::numeric_limits<S>::quiet_NaN();  // NaN is not zero: read
    x.data()[1000] = -zero;
    std::vector<S> form(static_cast<std::size_t>(be.gemm_prepared_size(1, n, k)));
    auto want = [&](std::int64_t o, std::int64_t k0, std::int64_t k1) {
      double sum = 0;
      for (std::int64_t i = k0; i < k1; ++i)
        if (i != 7) sum += double(x.data()[i]) * double(w.data()[o * k + i]);
      return sum;
    };
    be.gemm_prepare(1, w.data(), n, k, form.data());
    // Parts: whole, from inside a group to inside the next, one panel, the short last group.
    for (const auto& [n0, n1, k0, k1] : {std::array<std::int64_t, 4>{0, n, 0, k}, {48, 272, 8, 2100}, {112, 128, 0, 5}, {256, n, 1020, 1030}}) {
      INFO(sizeof(S) << "-byte, outputs [" << n0 << ", " << n1 << "), inputs [" << k0 << ", " << k1 << ")");
      std::vector<S> y(static_cast<std::size_t>(n), S(-1));
      be.gemm_prepared(1, 1, n, k, x.data(), k, form.data(), y.data(), n, n0, n1, k0, k1);
      double worst = 0;
      bool untouched = true, nan = true;
      for (std::int64_t o = 0; o < n; ++o) {
        const S got = y[static_cast<std::size_t>(o)];
        if (o < n0 || o >= n1) untouched = untouched && got == S(-1);
        else if (k0 <= 7 && 7 < k1) nan = nan && std::isnan(got);
        else worst = std::max(worst, std::abs(double(got) - want(o, k0, k1)));
      }
      CHECK(worst < (sizeof(S) == 4 ? 2e-3 : 1e-11));
      CHECK(untouched);
      CHECK(nan);
    }
    // An infinite weight meets a zero input: eager's 0 * inf is NaN, so the zeros are read.
    w.data()[5 * k + 9] = std::numeric_limits<S>::infinity();  // x[9] is zero
    be.gemm_prepare(1, w.data(), n, k, form.data());
    std::vector<S> y(static_cast<std::size_t>(n));
    be.gemm_prepared(1, 1, n, k, x.data(), k, form.data(), y.data(), n, 0, n, 8, k);
    CHECK(std::isnan(y[5]));
    CHECK(std::isfinite(y[4]));
    // A form made for one row takes one row only.
    const std::string rows = "2 rows of input for a [" + std::to_string(n) + ", 2500] weight prepared for 1 rows";
    CHECK_THROWS_WITH_AS(be.gemm_prepared(2, 1, n, k, x.data(), k, form.data(), y.data(), n, 0, n, 0, k),
                         doctest::Contains(rows.c_str()), Error);
  };
  check(0.0f);
  check(0.0);
}

TEST_CASE("freeze: a run of matrix-vector layers shares one parallel region, any thread count") {
  // One region for the run: a layer split by its outputs, then the next by
  // its inputs (no barrier between them, partial sums reduced after), layers
  // too small to split on one thread, in the region or after it. The widths
  // give pairs reduced inside the region and at its end, an unpaired split
  // layer and small layers first and last.
  manual_seed(31);
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
#endif
  for (const auto& widths : {std::vector<std::int64_t>{300, 256, 512, 256, 256, 7},
                             std::vector<std::int64_t>{40, 50, 2000, 64, 1024, 10}}) {
    auto chain = nn::make<test::LinearLayers>(widths);
    for (std::int64_t rows : {1, 3}) {
      const Tensor<double> x = Tensor<double>::randn({rows, widths[0]});
      // The layers alone, or with a step after them.
      for (bool tail : {false, true}) {
        chain->scale = tail ? 2.0 : 1.0;
        const Tensor<double> eager = [&] { InferenceMode im; return chain(x); }();
        const auto g = jit::trace(chain, x);
        for (bool prepared : {true, false}) {  // W in matrix-vector panels, or as it is
          jit::FreezeOptions opt;
          opt.prepare_weights = prepared;
          auto plan = jit::freeze<double>(g, opt);
          CHECK(count(plan.graph(), jit::StepKind::linear) == static_cast<int>(widths.size()) - 1);
          CHECK(plan.graph().steps.size() == widths.size() - (tail ? 0 : 1));
          CHECK(reported(plan, (prepared ? std::to_string(widths.size() - 1) : std::string("0")) + " in matrix-vector panels") ==
                prepared);
          for (int threads : {1, 2, 3, 5}) {
            INFO("widths from " << widths[0] << ", " << rows << " rows, " << threads << " threads, prepared " << prepared
                                << ", tail " << tail);
#ifdef _OPENMP
            omp_set_num_threads(threads);
#endif
            CHECK((plan.run(x) - eager).abs().max().item() < 1e-12);
          }
        }
      }
#ifdef _OPENMP
      omp_set_num_threads(saved);
#endif
    }
  }
}

TEST_CASE("memory plan: one-row linears write over their input; the MLP's arena at batch 1 is one hidden vector") {
  manual_seed(32);
  auto mlp = guide::make_mlp();
  mlp->eval();
  const T x = T::randn({1, 784});
  const T eager = [&] { InferenceMode im; return mlp(x); }();
  auto plan = jit::freeze(mlp, x);
  // 784 -> 256 -> 256 -> 10: the second and third layers write over the first's output.
  CHECK(plan.arena_bytes() == 256 * 4);
  CHECK(reported(plan, "2 written in place"));
  int over = 0;
  for (const auto& s : plan.graph().steps) over += jit::writes_over_input(s);
  CHECK(over == 2);
  (void)plan.run(x);
  CHECK(plan.graph_launches() == 0);  // CUDA Graphs are for device plans only
  frost::reset_peak_memory_stats();
  const auto before = memory_stats().current_bytes;
  {
    InferenceMode im;
    mlp(x);
  }
  CHECK(2 * plan.arena_bytes() <= memory_stats().peak_bytes - before);
  // Every way the layers run: one thread, split over threads (the second
  // layer by its inputs), and from threads of the caller's own.
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    CHECK(close(plan.run(x), eager));
  }
  omp_set_num_threads(saved);
  int bad = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad)
  bad += !close(plan.run(x), eager);
  CHECK(bad == 0);
#endif
  auto loaded = saved_and_loaded(plan);
  CHECK(loaded.arena_bytes() == plan.arena_bytes());
  CHECK(max_diff(loaded.run(x), plan.run(x)) == 0);
  // Not when the weights are not the CPU's prepared ones, nor for several rows.
  jit::FreezeOptions plain;
  plain.prepare_weights = false;
  CHECK(jit::freeze<float>(jit::trace(mlp, x), plain).arena_bytes() == 2 * 256 * 4);
  CHECK(jit::freeze(mlp, T::randn({2, 784})).arena_bytes() >= 2 * 2 * 256 * 4);
  // A plan file may not ask for it elsewhere.
  jit::Graph g = plan.graph();
  std::vector<std::int64_t> offsets(g.buffers.size(), 0);
  auto rejected = [&](const jit::Graph& b) {
    CHECK_THROWS_WITH_AS(jit::detail::validate_plan(b, offsets, std::int64_t{1} << 30, "test"),
                         doctest::Contains("may write over its input"), Error);
  };
  jit::Graph unprepared = g;
  unprepared.steps[1].in.pop_back();
  rejected(unprepared);
  manual_seed(33);
  auto wide = nn::Sequential(nn::Linear(10, 2000), nn::ReLU(), nn::Linear(2000, 8));
  wide->eval();
  jit::Graph big = jit::freeze(wide, T::randn({1, 10})).graph();
  REQUIRE(big.steps.size() == 2);
  CHECK(!jit::writes_over_input(big.steps[1]));  // 8000 bytes of input: more than a stack copy takes
  big.steps[1].out[0].buf = big.steps[1].in[0].buf;
  offsets.assign(big.buffers.size(), 0);
  rejected(big);
}

TEST_CASE("memory plan: an elementwise step writes over its input only when it reads it through one window") {
  // h + h.t() or h * h[0] written over h would read elements already overwritten.
  const std::vector<std::function<T(const T&)>> fs = {
      [](const T& x) { const T h = (x * 2.0f).tanh(); return h + h.t(); },
      [](const T& x) { const T h = (x * 2.0f).tanh(); return h.t() * h; },
      [](const T& x) { const T h = x.exp(); return (h * h.narrow(0, 0, 1).expand({h.shape()[0], h.shape()[1]})).tanh(); },
      [](const T& x) { const T h = x.exp(); return h.narrow(0, h.shape()[0] - 1, 1).expand({h.shape()[0], h.shape()[1]}) - h; },
  };
  for (std::int64_t n : {1, 3, 9}) {
    const T x = T::randn({n, n});
    for (const auto& f : fs) {
      auto plan = jit::freeze<float>(jit::trace(f, x));
      CHECK(close(plan.run(x), f(x)));
    }
  }
  // One window (h * h, the same view twice): still in place.
  auto square = [](const T& x) { const T h = x.exp(); return (h * h).tanh(); };
  jit::FreezeOptions unfused;
  unfused.fuse_elementwise = false;
  const T x = T::randn({4, 4});
  auto plan = jit::freeze<float>(jit::trace(square, x), unfused);
  CHECK(close(plan.run(x), square(x)));
  CHECK(reported(plan, "2 written in place"));
}

TEST_CASE("freeze passes: a weight that is a window of a larger parameter (W[2:6]) is folded, packed, prepared "
          "and quantized alone, not as its whole buffer nor shared with W") {
  namespace F = nn::functional;
  manual_seed(33);
  // Batch norm / a constant scale folded into a linear or conv over rows
  // 2..5 of W (a window at an offset: the fold reads that window only).
  struct LinearScale : nn::Module {
    T W = register_parameter("W", T::randn({8, 6}));
    T s = register_buffer("s", T::randn({4}));
    T forward(const T& x) { return F::linear(x, W.narrow(0, 2, 4)) * s; }
  };
  struct ConvNorm : nn::Module {
    T W = register_parameter("W", T::randn({8, 3, 3, 3}));
    nn::BatchNorm2d bn = register_module("bn", nn::BatchNorm2d(4));
    T forward(const T& x) { return bn(conv2d(x, W.narrow(0, 2, 4), T(), {.padding = 1})); }
  };
  // Two convolutions (Winograd-prepared) and two linears (packed [K, N]:
  // a transposed input is not prepared) over W and a window of W starting
  // at `first`, each order; eager gives zeros. (No constant scale: it would
  // fold into a weight copy.)
  struct SharedConv : nn::Module {
    bool narrow_first = false;
    std::int64_t first = 0;
    T W = register_parameter("W", T::randn({32, 16, 3, 3}));
    T forward(const T& x) {
      auto part = [&] { return conv2d(x, W.narrow(0, first, 16), T(), {.padding = 1}); };
      auto whole = [&] { return conv2d(x, W, T(), {.padding = 1}).narrow(1, first, 16); };
      if (narrow_first) {
        const T a = part();
        return a - whole();
      }
      const T b = whole();
      return part() - b;
    }
  };
  struct SharedLinear : nn::Module {
    bool narrow_first = false;
    std::int64_t first = 0;
    T W = register_parameter("W", T::randn({8, 6}));
    T forward(const T& x) {
      const T xt = x.t();
      auto part = [&] { return F::linear(xt, W.narrow(0, first, 4)); };
      auto whole = [&] { return F::linear(xt, W).narrow(1, first, 4); };
      if (narrow_first) {
        const T a = part();
        return a - whole();
      }
      const T b = whole();
      return part() - b;
    }
  };
  // int8 linears: a window's channels keep their own per-channel scales, so
  // W[2:6]'s int8 rows are W's rows 2..5 and the two products agree exactly.
  struct QuantizedWindow : nn::Module {
    T W = register_parameter("W", T::randn({8, 64}));
    T forward(const T& x) { return F::linear(x, W.narrow(0, 2, 4)) - F::linear(x, W).narrow(1, 2, 4); }
  };
  // tol: against eager's zeros, of outputs near 1 (SharedConv's are near 12,
  // and a window at an offset takes the direct convolution while W takes
  // Winograd: 1e-5 of 12 apart; a wrong window would be 10 apart).
  auto check = [](auto& m, const T& x, const jit::FreezeOptions& opt = {}, double tol = 1e-4) {
    CAPTURE(m->type_name());
    T eager;
    {
      InferenceMode im;
      eager = m(x);
    }
    auto plan = jit::freeze(m, opt, x);
    CHECK(close(plan.run(x), eager, tol));
    CHECK(close(saved_and_loaded(plan).run(x), eager, tol));
    return plan;
  };
  {
    auto m = nn::make<LinearScale>();
    check(m, T::randn({2, 6}));
  }
  {
    auto m = nn::make<ConvNorm>();
    warm_batch_norm(m, Shape{2, 3, 6, 6});
    CHECK(reported(check(m, T::randn({2, 3, 6, 6})), "batch norm folding: 1 folded"));
  }
  for (bool narrow_first : {false, true})
    for (std::int64_t first : {0, 16}) {
      CAPTURE(narrow_first);
      CAPTURE(first);
      auto conv = nn::make<SharedConv>();
      conv->narrow_first = narrow_first;
      conv->first = first;
      check(conv, T::randn({1, 16, 12, 12}), {}, 2e-3);
      auto lin = nn::make<SharedLinear>();
      lin->narrow_first = narrow_first;
      lin->first = first / 4;
      check(lin, T::randn({6, 16}));
    }
  {
    auto m = nn::make<QuantizedWindow>();
    for (std::int64_t batch : {1, 5}) {
      CAPTURE(batch);
      CHECK(reported(check(m, T::randn({batch, 64}), {.quantize_linear = true}), "dynamic int8 quantization: 2 linear"));
    }
  }
}

TEST_CASE("freeze pass: elementwise chains become one fused kernel") {
  auto f = [](const T& a, const T& b) { return ((a * b + 1.0f).tanh() - a).relu(); };
  const auto a = T::randn({3, 70}), b = T::randn({3, 70});
  const auto g = jit::trace(f, a, b);
  auto plan = jit::freeze<float>(g);
  CHECK(count(plan.graph(), jit::StepKind::elementwise) == 1);
  CHECK(plan.graph().steps.size() == 1);
  CHECK(close(plan.run_all({a, b})[0], f(a, b)));
  const auto a2 = T::randn({3, 70}), b2 = T::randn({3, 70});
  CHECK(close(plan.run_all({a2, b2})[0], f(a2, b2)));
}

TEST_CASE("freeze pass: constant subgraphs run once at freeze time, in their own dtype (eager's values)") {
  // (w * w).sum() depends on constants only; x * it does not.
  struct M : nn::Module {
    T w = register_parameter("w", T::full({3}, 0.1f));
    T forward(const T& x) { return x * (w * w).sum().exp(); }
  };
  auto m = nn::make<M>();
  const auto x = T::randn({3});
  auto plan = jit::freeze(m, x);
  CHECK(reported(plan, "constant folding: 3 steps evaluated at freeze time"));
  CHECK(plan.graph().steps.size() == 1);
  CHECK(close(plan.run(x), m(x)));
  // Masks from constants: in double, 3 * 0.1f < 0.3f and v == v * 3 / 3
  // differ from float's answers (a folded mask off by a whole element).
  auto masks = [](const T& x) {
    const T v = T::arange(0, 10) * 0.1f;
    return x * (v < 0.3f) + x * 2.0f * (v == v * 3.0f / 3.0f);
  };
  const auto ones = T::ones({10});
  auto mp = jit::freeze<float>(jit::trace(masks, ones));
  CHECK(mp.graph().steps.size() <= 2);
  CHECK(close(mp.run(ones), masks(ones), 0));
}

TEST_CASE("freeze pass: dead code and dropout go away") {
  manual_seed(14);
  struct M : nn::Module {
    nn::Linear a = register_module("a", nn::Linear(4, 4));
    nn::Dropout d = register_module("d", nn::Dropout(0.5));
    T forward(const T& x) {
      auto unused = a(x).sigmoid();  // computed, never returned
      (void)unused;
      return d(x.tanh());
    }
  };
  auto m = nn::make<M>();
  const auto x = T::randn({2, 4});
  // Traced in training mode the dropout is one node; freeze (evaluation semantics) removes it.
  m->train();
  const auto g = jit::trace(m, x);
  CHECK(count(g, jit::StepKind::dropout) == 1);
  auto plan = jit::freeze<float>(g);
  CHECK(count(plan.graph(), jit::StepKind::dropout) == 0);
  CHECK(count(plan.graph(), jit::StepKind::linear) == 0);
  CHECK(reported(plan, "dropout/identity removal: 1 dropout"));
  CHECK(close(plan.run(x), x.tanh()));
}

TEST_CASE("freeze: the guide's models equal eager, with an arena smaller than eager's peak") {
  manual_seed(15);
  auto rm = nn::make<guide::ResearchModel>();
  rm->eval();
  auto bn = nn::make<guide::ResearchModelBN>();
  warm_batch_norm(bn, {4, 3, 32, 32});
  auto mlp = guide::make_mlp();
  mlp->eval();
  const auto img = T::randn({4, 3, 32, 32});
  auto check_model = [&](auto& model, const T& x) {
    auto plan = jit::freeze(model, x);
    const auto report = plan.check(model, x);
    INFO(report.str());
    CHECK(report.ok);
    CHECK(report.max_abs_diff[0] < 1e-4);
    return plan.arena_bytes();
  };
  check_model(rm, img);
  const auto arena = check_model(bn, img);
  check_model(mlp, T::randn({4, 784}));
  frost::reset_peak_memory_stats();
  const auto before = memory_stats().current_bytes;
  {
    InferenceMode im;
    bn(img);
  }
  CHECK(arena < memory_stats().peak_bytes - before);
}

TEST_CASE("freeze: recurrent and attention layers equal eager") {
  manual_seed(18);
  struct Seq : nn::Module {
    nn::LSTM lstm = register_module("lstm", nn::LSTM(6, 8, {.num_layers = 2, .batch_first = true}));
    nn::GRU gru = register_module("gru", nn::GRU(8, 5, {.batch_first = true, .bidirectional = true}));
    nn::MultiheadAttention mha = register_module("mha", nn::MultiheadAttention(10, 2, {.batch_first = true}));
    T forward(const T& x) {
      auto h = lstm(x).output;
      auto g = gru(h).output;
      return mha(g, g, g).attn_output;
    }
  };
  auto m = nn::make<Seq>();
  m->eval();
  const auto x = T::randn({3, 7, 6});
  auto plan = jit::freeze(m, x);
  const auto report = plan.check(m, {x}, 1e-5);
  INFO(report.str());
  CHECK(report.ok);
  const auto x2 = T::randn({3, 7, 6});
  const T eager = [&] { InferenceMode im; return m(x2); }();
  CHECK(close(plan.run(x2), eager));
}

TEST_CASE("jit::Plan::check: every output of a module returning several, and a wrong plan is reported") {
  struct Two : nn::Module {
    nn::Linear a = register_module("a", nn::Linear(3, 2));
    std::vector<T> forward(const T& x, const T& y) { return {a(x).relu(), (x * y).sum({1})}; }
  };
  manual_seed(8);
  auto m = nn::make<Two>();
  // x > 0: the weights' change below raises every pre-activation by at least 1.5.
  const auto x = T::rand({4, 3}) + 0.5f, y = T::randn({4, 3});
  auto plan = jit::freeze(m, x, y);
  const auto ok = plan.check(m, {x, y});
  CHECK(ok.ok);
  CHECK(ok.max_abs_diff.size() == 2);
  // The module changes after freezing: the check sees the difference.
  {
    NoGradGuard ng;
    m->a->weight.add_(1.0f);
  }
  const auto stale = plan.check(m, {x, y});
  CHECK_FALSE(stale.ok);
  CHECK(stale.max_abs_diff[0] > 0.1);
  CHECK(stale.max_abs_diff[1] < 1e-6);
  CHECK(stale.str().find("DIFFERS") != std::string::npos);
}

TEST_CASE("jit::compile: AdaptiveResNet gives eager's result on inputs taking either branch") {
  manual_seed(16);
  auto model = nn::make<guide::AdaptiveResNet>();
  warm_batch_norm(model, {4, 3, 16, 16});
  auto fast = jit::compile(*model);
  // As in examples/adaptive_resnet.cpp: bright inputs take the shallow branch, dark ones the deep one.
  const auto bright = T::randn({2, 3, 16, 16}) * 0.1f + 3.0f, dark = T::randn({2, 3, 16, 16}) * 0.1f;
  auto eager = [&](const T& x) {
    InferenceMode im;
    return model(x);
  };
  const int deep_before = model->deep_calls;
  CHECK(close(fast(bright), eager(bright)));
  CHECK(close(fast(dark), eager(dark)));
  CHECK(model->deep_calls > deep_before);  // the dark input did take the deep branch
  CHECK(close(fast(bright), eager(bright)));
  CHECK(close(fast(dark), eager(dark)));
  const auto s = fast.stats();
  CHECK(s.traces == 2);  // one plan per branch, then cache hits
  CHECK(s.cached_plans == 2);
  CHECK(s.guard_failures >= 1);
  // Another shape is another specialisation.
  const auto one = T::randn({1, 3, 16, 16}) * 0.1f + 3.0f;
  CHECK(close(fast(one), eager(one)));
  CHECK(fast.stats().traces == 3);
}

TEST_CASE("jit::compile: plans follow the module's weights and layers; reset() after other state") {
  manual_seed(17);
  auto model = nn::make<guide::AdaptiveResNet>();
  warm_batch_norm(model, {4, 3, 16, 16});
  auto fast = jit::compile(*model);
  const auto bright = T::randn({2, 3, 16, 16}) * 0.1f + 3.0f;
  auto eager = [&](const T& x) {
    InferenceMode im;
    return model(x);
  };
  CHECK(close(fast(bright), eager(bright)));
  CHECK(fast.stats().invalidations == 0);
  // Weights written in place (fine-tuning, load_state_dict): traced again.
  {
    NoGradGuard ng;
    model->conv1->bias.add_(T::ones({16}) * 0.5f);
  }
  CHECK(close(fast(bright), eager(bright)));
  CHECK(fast.stats().invalidations == 1);
  CHECK(fast.stats().traces == 2);
  CHECK(close(fast(bright), eager(bright)));  // and cached again
  CHECK(fast.stats().traces == 2);
  // An optimizer step writes the weights too.
  model->train();
  optim::SGD opt(model->parameters(), {.lr = 0.01});
  model(bright).sum().backward();
  opt.step();
  model->eval();
  CHECK(close(fast(bright), eager(bright)));
  CHECK(fast.stats().invalidations == 2);
  // A plain member forward reads is a constant of the trace: reset() after changing it.
  const float threshold = model->threshold;
  model->threshold = 1e9f;  // every input now takes the deep branch in eager
  fast.reset();
  CHECK(close(fast(bright), eager(bright)));
  model->threshold = threshold;
}

TEST_CASE("jit::compile: a layer appended at run time is traced in") {
  manual_seed(18);
  struct Dynamic : nn::Module {
    nn::ModuleList layers = register_module("layers", nn::ModuleList(nn::Linear(4, 4)));
    T forward(T x) {
      for (const auto& l : *layers) x = l(x).relu();
      return x;
    }
  };
  auto m = nn::make<Dynamic>();
  m->eval();
  auto fast = jit::compile(*m);
  const auto x = T::randn({3, 4});
  auto eager = [&] {
    InferenceMode im;
    return m(x);
  };
  CHECK(close(fast(x), eager()));
  m->layers->push_back(nn::Linear(4, 4));
  CHECK(close(fast(x), eager()));
  CHECK(fast.stats().invalidations == 1);
}

TEST_CASE("jit::compile: the cache is bounded") {
  auto mlp = guide::make_mlp();
  mlp->eval();
  auto fast = jit::compile(mlp, {.max_plans = 2});
  for (std::int64_t b = 1; b <= 4; ++b) fast(T::randn({b, 784}));
  const auto s = fast.stats();
  CHECK(s.cached_plans == 2);
  CHECK(s.evictions == 2);
  CHECK(s.traces == 4);
}

TEST_CASE("jit::compile: threads calling with a new input at once trace it once") {
  auto mlp = guide::make_mlp();
  mlp->eval();
  auto fast = jit::compile(mlp);
  const auto x = T::randn({3, 784});
  T want;
  {
    InferenceMode im;
    want = mlp(x);
  }
  // Traces take turns; one that waited finds the plan the other made.
  std::vector<T> outs(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < outs.size(); ++i) threads.emplace_back([&, i] { outs[i] = fast(x); });
  for (auto& t : threads) t.join();
  const auto s = fast.stats();
  CHECK(s.traces == 1);
  CHECK(s.calls == 4);
  CHECK(s.cached_plans == 1);
  for (const auto& y : outs) CHECK(close(y, want));
}

TEST_CASE("freeze for a device (Plan::to(cuda)'s options), run on the CPU: equals eager; at batch 1 the conv + pool "
          "steps run by blocks of filters and the arena stays under 1/2.7 of eager's peak") {
  // What Plan::to(Device::cuda()) freezes: blocks of 16 images one after
  // another, filters as they are. The memory plan is the device's, so its
  // arena is what the device holds.
  jit::FreezeOptions device;
  device.conv_pool_images = 16;
  device.prepare_weights = false;
  manual_seed(33);
  auto rm = nn::make<guide::ResearchModel>();
  rm->eval();
  for (std::int64_t batch : {1, 5}) {
    CAPTURE(batch);
    const T x = T::randn({batch, 3, 32, 32});
    auto plan = jit::freeze<float>(jit::trace(rm, x), device);
    CHECK(count(plan.graph(), jit::StepKind::conv2d_pool) == 2);
    const T eager = [&] { InferenceMode im; return rm(x); }();
    CHECK((plan.run(x) - eager).abs().max().item() < 1e-4f);
    if (batch != 1) continue;
    // 3 -> 64 channels at 32x32: four blocks of 16 filters (64 KiB of scratch), not the 256 KiB conv output.
    for (const auto& s : plan.graph().steps)
      if (s.kind == jit::StepKind::conv2d_pool && s.conv.in_channels == 3) CHECK(s.out[1].shape == Shape{1, 16, 32, 32});
    frost::reset_peak_memory_stats();
    const auto before = memory_stats().current_bytes;
    {
      InferenceMode im;
      rm(x);
    }
    const auto eager_peak = memory_stats().peak_bytes - before;
    CHECK(2.7 * double(plan.arena_bytes()) <= double(eager_peak));
  }
}

TEST_CASE("jit: an index the plan computes out of range is the index op's error, and the plan runs on after it") {
  manual_seed(41);
  auto router = nn::make<test::Router>();
  const T in_range = test::Router::in_range();
  auto plan = jit::freeze(router, in_range);
  CHECK(count(plan.graph(), jit::StepKind::index_select) == 1);
  const T want = [&] { InferenceMode im; return router(in_range); }();
  CHECK(close(plan.run(in_range), want));
  CHECK_THROWS_WITH_AS((void)plan.run(test::Router::out_of_range()),
                       doctest::Contains("index 7 is out of bounds for dim 0 with size 4"), Error);
  CHECK(close(plan.run(in_range), want));
}

TEST_CASE("jit: an embedding looked up at indices the plan computes takes any indices, no guard on their values") {
  manual_seed(43);
  // The Router's lookup through nn::Embedding: its CPU bounds check reads
  // the indices where they lie, which the trace does not take for a host
  // read, so the plan is not specialised to the indices it was traced with.
  struct EmbeddingRouter : nn::Module {
    nn::Embedding table = register_module("table", nn::Embedding(4, 3));
    T forward(const T& x) { return table(x.argmax(1)) + x.narrow(1, 0, 3); }
  };
  auto router = nn::make<EmbeddingRouter>();
  const T traced = test::Router::in_range();  // rows 1 and 0
  auto plan = jit::freeze(router, traced);
  CHECK(count(plan.graph(), jit::StepKind::guard) == 0);
  CHECK(count(plan.graph(), jit::StepKind::index_select) == 1);
  const T other = T::from({0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0}, {2, 10});  // rows 3 and 2
  for (const T& x : {traced, other}) {
    const T want = [&] { InferenceMode im; return router(x); }();
    CHECK(close(plan.run(x), want));
  }
  CHECK_THROWS_WITH_AS((void)plan.run(test::Router::out_of_range()),
                       doctest::Contains("index 7 is out of bounds for dim 0 with size 4"), Error);
  // Eager, the embedding's own message.
  CHECK_THROWS_WITH_AS((void)router(test::Router::out_of_range()),
                       doctest::Contains("embedding: index 7 is out of range for an embedding table of 4 rows"), Error);
}
