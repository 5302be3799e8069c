// batch_norm's two paths: the backend's kernels (the CPU's few-pass loops,
// one cuDNN call each way on CUDA) and the composite of ops (traces, and
// what a backend without the kernels gets). A backend passing every other
// kernel to the CPU's either runs batch_norm_* as plain loops or answers
// batch_norm_runs with false; installed for the thread through the hook
// every kernel call goes through, it drives each path on the CPU. All three
// (loops, the CPU's kernels, the composite) must agree: outputs, running
// statistics, gradients of x, weight and bias, second derivatives (which
// take the composite rule), and a finite-difference gradcheck. The GPU
// suite checks cuDNN against the CPU.
#include <cmath>

#include "support.hpp"

#include <frost/nn/functional/normalization.hpp>
#include <frost/nn/layers/normalization.hpp>

using namespace frost;
using namespace frost::test;
namespace F = frost::nn::functional;

namespace {

/// The CPU backend's kernels, with batch_norm_* as loops over [n, c, inner] in double.
template <class T>
struct LoopBatchNorm final : Backend<T> {
  Backend<T>& cpu = cpu_backend<T>();
  bool runs = true;  // false: the composite path
  int training = 0, inference = 0, backward = 0;

  Device device() const override { return Device::cpu(); }
  DeviceAllocator* allocator() override { return cpu.allocator(); }
  void unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) override { cpu.unary(op, x, y, p0, p1); }
  void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) override {
    cpu.binary(op, a, b, y, p);
  }
  void where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) override {
    cpu.where(c, a, b, y);
  }
  void copy(const View<const T>& x, const View<T>& y) override { cpu.copy(x, y); }
  void fill(const View<T>& y, T value) override { cpu.fill(y, value); }
  void random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset, double lo,
              double hi) override {
    cpu.random(y, dist, seed, offset, lo, hi);
  }
  void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) override {
    cpu.reduce(op, x, n_reduced, y);
  }
  void arg_reduce(bool is_max, const View<const T>& x, const View<T>& values,
                  const View<std::int64_t>& indices) override {
    cpu.arg_reduce(is_max, x, values, indices);
  }
  void softmax(const View<const T>& x, const View<T>& y, bool log) override { cpu.softmax(x, y, log); }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
            std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta, T* c, std::int64_t ldc,
            std::int64_t sc, std::int64_t batch) override {
    cpu.gemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
  }
  void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index,
                    const View<T>& y) override {
    cpu.index_select(x, dim, index, y);
  }
  void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) override {
    cpu.gather(x, dim, index, y);
  }
  void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index,
                   const View<const T>& src) override {
    cpu.scatter_add(y, dim, index, src);
  }
  void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                         std::int64_t n) override {
    cpu.fused_elementwise(prog, n_instrs, inputs, n_inputs, y, n);
  }
  void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) override {
    cpu.bias_act(y, n, bias, channels, inner, act);
  }
  void optimizer_step(const OptimStep<T>& o, T* p, const T* g, T* s0, T* s1, T* s2, std::int64_t n) override {
    cpu.optimizer_step(o, p, g, s0, s1, s2, n);
  }
  void copy_from_host(const T* host, T* dev, std::int64_t n) override { cpu.copy_from_host(host, dev, n); }
  void copy_to_host(const T* dev, T* host, std::int64_t n) override { cpu.copy_to_host(dev, host, n); }

  bool batch_norm_runs(std::int64_t, std::int64_t, std::int64_t, double, bool) override { return runs; }

  void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b,
                           T* y, T* save_mean, T* save_invstd, T* running_mean, T* running_var, double momentum,
                           double eps) override {
    ++training;
    const double count = double(n * inner);
    for (std::int64_t ch = 0; ch < c; ++ch) {
      double s = 0, ss = 0;
      each(n, c, inner, ch, [&](std::int64_t k) { s += double(x[k]); });
      const double mean = s / count;
      each(n, c, inner, ch, [&](std::int64_t k) { ss += (double(x[k]) - mean) * (double(x[k]) - mean); });
      const double var = ss / count, invstd = 1 / std::sqrt(var + eps);
      each(n, c, inner, ch, [&](std::int64_t k) { y[k] = T((double(x[k]) - mean) * invstd * w[ch] + b[ch]); });
      save_mean[ch] = T(mean);
      save_invstd[ch] = T(invstd);
      if (running_mean) {
        running_mean[ch] = T((1 - momentum) * running_mean[ch] + momentum * mean);
        running_var[ch] = T((1 - momentum) * running_var[ch] + momentum * var * count / (count - 1));
      }
    }
  }
  void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b,
                            const T* mean, const T* var, T* y, double eps) override {
    ++inference;
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const double invstd = 1 / std::sqrt(double(var[ch]) + eps);
      each(n, c, inner, ch, [&](std::int64_t k) { y[k] = T((double(x[k]) - mean[ch]) * invstd * w[ch] + b[ch]); });
    }
  }
  void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy, const T* w,
                           const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db, double) override {
    ++backward;
    const double count = double(n * inner);
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const double mean = save_mean[ch], invstd = save_invstd[ch];
      double sdy = 0, sdy_xhat = 0;
      each(n, c, inner, ch, [&](std::int64_t k) {
        sdy += double(dy[k]);
        sdy_xhat += double(dy[k]) * (double(x[k]) - mean) * invstd;
      });
      each(n, c, inner, ch, [&](std::int64_t k) {
        const double xhat = (double(x[k]) - mean) * invstd;
        dx[k] = T(w[ch] * invstd * (double(dy[k]) - sdy / count - xhat * sdy_xhat / count));
      });
      db[ch] = T(sdy);
      dw[ch] = T(sdy_xhat);
    }
  }

 private:
  template <class F>
  static void each(std::int64_t n, std::int64_t c, std::int64_t inner, std::int64_t ch, F&& f) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < inner; ++j) f((i * c + ch) * inner + j);
  }
};

/// Routes this thread's kernel calls for T through `b` while in scope.
template <class T>
struct Routed {
  explicit Routed(Backend<T>& b) { frost::detail::tracing_backend<T> = &b; }
  ~Routed() { frost::detail::tracing_backend<T> = nullptr; }
  Routed(const Routed&) = delete;
  Routed& operator=(const Routed&) = delete;
};

/// A backend that composes batch norm from the other kernels.
template <class T>
LoopBatchNorm<T>& composite() {
  static thread_local LoopBatchNorm<T> b = [] {
    LoopBatchNorm<T> c;
    c.runs = false;
    return c;
  }();
  return b;
}

/// y, then the gradients of sum(y * cos(0.3 i)) for each input.
std::vector<TD> value_and_grads(const std::function<TD(const std::vector<TD>&)>& f, std::vector<TD> xs) {
  for (auto& x : xs) x = x.detach().clone().requires_grad_();
  auto y = f(xs);
  (y * (TD::arange(static_cast<double>(y.numel())) * 0.3).cos().reshape(y.shape())).sum().backward();
  std::vector<TD> out{y};
  for (auto& x : xs) out.push_back(x.grad().defined() ? x.grad() : TD());
  return out;
}

}  // namespace

TEST_CASE("batch_norm: the loops, the CPU's kernels and the composite agree in training (outputs, running stats, "
          "gradients)") {
  LoopBatchNorm<double> kernels;
  for (const Shape& s : {Shape{5, 3}, Shape{4, 3, 7}, Shape{2, 3, 4, 5}, Shape{3, 3, 40, 50}}) {
    CAPTURE(s.str());
    // A large mean beside a small spread: the kernels subtract the mean first, as the composite does.
    const auto x = TD::randn(s) * 2.0 + 100.5, w = TD::from({1.5, -0.5, 0.75}), b = TD::from({0.1, 0.2, -0.3});
    auto rm = TD::from({0.2, -0.1, 0.0}), rv = TD::from({1.5, 0.8, 1.0});
    auto rm_k = rm.clone(), rv_k = rv.clone(), rm_c = rm.clone(), rv_c = rv.clone();
    auto run = [&](TD& m, TD& v) {
      return value_and_grads(
          [&](const std::vector<TD>& in) { return F::batch_norm(in[0], m, v, in[1], in[2], true, 0.2, 1e-5); },
          {x, w, b});
    };
    std::vector<TD> want, got;
    {
      Routed<double> r(composite<double>());
      want = run(rm, rv);
    }
    const int before = kernels.training;
    {
      Routed<double> r(kernels);
      got = run(rm_k, rv_k);
    }
    const auto cpu = run(rm_c, rv_c);  // the CPU backend's own kernels
    CHECK(kernels.training == before + 1);
    CHECK(got[0].grad_fn_name() == std::string("batch_norm"));
    for (std::size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      check_close(got[k], want[k], 1e-10, 1e-9);
      check_close(cpu[k], want[k], 1e-10, 1e-9);
    }
    check_close(rm_k, rm, 1e-12, 1e-12);
    check_close(rv_k, rv, 1e-12, 1e-10);
    check_close(rm_c, rm, 1e-12, 1e-12);
    check_close(rv_c, rv, 1e-12, 1e-10);
  }
}

TEST_CASE("batch_norm kernel path: no affine parameters, no running stats, strided input, float") {
  LoopBatchNorm<double> kd;
  LoopBatchNorm<float> kf;
  // Without weight and bias the kernels get ones and zeros; only x has a gradient.
  const auto x = TD::randn({3, 4, 5}) + 1.0;
  const auto want = [&] {
    Routed<double> r(composite<double>());
    return value_and_grads([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD()); }, {x});
  }();
  {
    Routed<double> r(kd);
    const auto got =
        value_and_grads([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD()); }, {x});
    check_close(got[0], want[0], 1e-12, 1e-10);
    check_close(got[1], want[1], 1e-12, 1e-10);
  }
  CHECK(kd.training == 1);
  CHECK(kd.backward == 1);
  // A channels-last input seen as [N, C, H, W]: made dense first, and its
  // gradient flows back through that copy.
  const auto xt = TD::randn({2, 4, 5, 3});
  const auto f = [](const std::vector<TD>& in) {
    return F::batch_norm(in[0].permute({0, 3, 1, 2}), TD(), TD(), TD(), TD(), true);
  };
  const auto want_t = [&] {
    Routed<double> r(composite<double>());
    return value_and_grads(f, {xt});
  }();
  {
    Routed<double> r(kd);
    const auto got = value_and_grads(f, {xt});
    check_close(got[0], want_t[0], 1e-12, 1e-10);
    check_close(got[1], want_t[1], 1e-12, 1e-10);
  }
  CHECK(kd.training == 2);
  // Float through BatchNorm2d in training and evaluation.
  manual_seed(3);
  nn::BatchNorm2d a(4), k(4);
  k->load_state_dict(a->state_dict());
  const auto xf = TF::randn({3, 4, 2, 2}) * 3.0f;
  const auto ya = [&] {
    Routed<float> r(composite<float>());
    return a(xf);
  }();
  TF yk;
  {
    Routed<float> r(kf);
    yk = k(xf);
  }
  check_close(yk, ya, 1e-5, 1e-5);
  check_close(k->running_var, a->running_var, 1e-6, 1e-6);
  CHECK(kf.training == 1);
}

TEST_CASE("batch_norm kernel path: evaluation runs the inference kernel only when nothing needs a gradient") {
  LoopBatchNorm<double> kernels;
  const auto x = TD::randn({4, 3, 2, 2}), w = TD::from({0.5, 2.0, -1.0}), b = TD::from({0.25, -0.5, 1.0});
  const auto rm = TD::from({0.1, 0.2, 0.3}), rv = TD::from({0.9, 1.1, 2.0});
  const auto want = [&] {
    Routed<double> r(composite<double>());
    return F::batch_norm(x, rm, rv, w, b, false, 0.1, 1e-3);
  }();
  check_close(F::batch_norm(x, rm, rv, w, b, false, 0.1, 1e-3), want, 1e-12, 1e-12);  // the CPU's kernel
  {
    Routed<double> r(kernels);
    check_close(F::batch_norm(x, rm, rv, w, b, false, 0.1, 1e-3), want, 1e-12, 1e-12);
    CHECK(kernels.inference == 1);
    // With a weight that needs its gradient, the composite path gives it.
    const auto wg = w.clone().requires_grad_();
    F::batch_norm(x, rm, rv, wg, b, false, 0.1, 1e-3).sum().backward();
    CHECK(kernels.inference == 1);
    CHECK(wg.grad().defined());
    // One value per channel in training is still the clear error.
    CHECK_THROWS_WITH_AS(F::batch_norm(TD::randn({1, 3}), TD::zeros({3}), TD::ones({3}), TD(), TD(), true),
                         doctest::Contains("more than 1 value per channel"), Error);
  }
  CHECK(kernels.training == 0);
}

TEST_CASE("batch_norm kernel path: gradcheck, and second derivatives through the composite rule") {
  LoopBatchNorm<double> kernels;
  Routed<double> r(kernels);
  const auto x = TD::randn({4, 3, 2}) + 0.2;
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD(), in[1], in[2], true); },
                  {x, TD::randn({3}), TD::randn({3})}));
  const int first_order = kernels.backward;
  CHECK(first_order > 0);
  // d/dx sum(c y^3), differentiated again: the create_graph backward rebuilds
  // the statistics from x with ops instead of calling the kernel.
  auto grad_fn = [](const std::vector<TD>& in) {
    AutoGradMode on(true);
    std::vector<TD> xs = in;
    for (auto& t : xs)
      if (!t.requires_grad()) t = t.detach().requires_grad_();
    auto y = F::batch_norm(xs[0], TD(), TD(), xs[1], TD(), true);
    auto c = (TD::arange(static_cast<double>(y.numel())) * 0.7).sin().reshape(y.shape());
    return autograd::grad({(y * y * y * c).sum()}, {xs[0], xs[1]}, {}, true, true)[0];
  };
  const auto w = TD::randn({3});
  (void)grad_fn({x, w});  // the create_graph backward: ops only
  CHECK(kernels.backward == first_order);
  // Differentiating that gradient reaches y's node (the gradient depends on
  // y) with gradients off: the kernel's backward again.
  CHECK(gradcheck(grad_fn, {x, w}));
  CHECK(kernels.backward > first_order);
}
