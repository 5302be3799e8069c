// CUDA against CPU for the device-specific paths the op table does not
// reach: batch norm through cuDNN (training, running statistics, gradients,
// evaluation, second derivatives), the dense elementwise kernels' vectorised
// loads at every size and alignment, cuBLASLt's GELU epilogue in a plan,
// host threads sharing the device (a cuDNN handle each; a plan capturing its
// CUDA Graph while another thread runs eager work), plans frozen with
// allow_tf32 or quantize_linear, Plan::profile's event timing, and batch
// norm's counter and clip_grad_norm_ kept on the device, modules on the
// device frozen and compiled (traced on the host), every dtype's casts.
// Each case reports "skipped: no CUDA device" where no GPU is visible.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "../../examples/research_model.hpp"
#include "../dtype_parity.hpp"
#include "../plan_dtypes.hpp"
#include "gpu_support.hpp"

namespace {

using namespace frost;
namespace nn = frost::nn;
namespace F = frost::nn::functional;
using TD = Tensor<double>;
using TF = Tensor<float>;

/// A CPU tensor and a device copy, both leaves that need gradients.
struct Pair2 {
  TD cpu, dev;
  explicit Pair2(const TD& v) : cpu(v.detach().clone().requires_grad_()), dev(v.to(kCuda).requires_grad_()) {}
};

}  // namespace

TEST_SUITE("cuda") {

TEST_CASE("cuda: every dtype's factories and casts between every pair (cast_kernel) equal the CPU's, bit for bit") {
  if (no_gpu()) return;
  frost::test::every_dtype_on(kCuda);
}

TEST_CASE("cuda: integer and bool math (the integer functors, reductions) equals the CPU's, bit for bit") {
  if (no_gpu()) return;
  frost::test::int_math_on_every_dtype(kCuda);
}

TEST_CASE("cuda: a plan holding bool and integer values runs on the GPU as eager does on the CPU, bit for bit") {
  if (no_gpu()) return;
  frost::test::plan_every_dtype_on(kCuda);
}

TEST_CASE("cuda: a plan with int64, float and bool inputs runs on the GPU, inputs on the host or there") {
  if (no_gpu()) return;
  frost::test::plan_mixed_inputs_on(kCuda);
}

TEST_CASE("cuda: batch norm through cuDNN matches the CPU in double (training, running stats, gradients, eval)") {
  if (no_gpu()) return;
  Generator g(41);
  for (const Shape& s : {Shape{8, 3}, Shape{4, 3, 7}, Shape{2, 3, 5, 6}}) {
    CAPTURE(s.str());
    Pair2 x(TD::randn(s, &g) * 2.0 + 0.5), w(TD::randn({3}, &g)), b(TD::randn({3}, &g));
    auto rm = TD::from({0.2, -0.1, 0.0}), rv = TD::from({1.5, 0.8, 1.0});
    auto rm_d = rm.to(kCuda), rv_d = rv.to(kCuda);
    const auto y = F::batch_norm(x.cpu, rm, rv, w.cpu, b.cpu, true, 0.2, 1e-5);
    const auto yd = F::batch_norm(x.dev, rm_d, rv_d, w.dev, b.dev, true, 0.2, 1e-5);
    CHECK(yd.grad_fn_name() == std::string("batch_norm"));
    CHECK(differ(yd.cpu(), y, 1e-10, 1e-9, "training forward").empty());
    CHECK(differ(rm_d.cpu(), rm, 1e-12, 1e-10, "running_mean").empty());
    CHECK(differ(rv_d.cpu(), rv, 1e-12, 1e-10, "running_var (unbiased)").empty());
    const auto up = TD::rand(y.shape(), &g) + 0.5;
    (y * up).sum().backward();
    (yd * up.to(kCuda)).sum().backward();
    CHECK(differ(x.dev.grad().cpu(), x.cpu.grad(), 1e-10, 1e-8, "dx").empty());
    CHECK(differ(w.dev.grad().cpu(), w.cpu.grad(), 1e-10, 1e-8, "dweight").empty());
    CHECK(differ(b.dev.grad().cpu(), b.cpu.grad(), 1e-10, 1e-8, "dbias").empty());
    // Evaluation with those statistics (cuDNN's inference call), another eps.
    {
      NoGradGuard ng;
      CHECK(differ(F::batch_norm(x.dev, rm_d, rv_d, w.dev, b.dev, false, 0.2, 1e-3).cpu(),
                   F::batch_norm(x.cpu, rm, rv, w.cpu, b.cpu, false, 0.2, 1e-3), 1e-12, 1e-10, "eval")
                .empty());
    }
    // No affine parameters and no running statistics.
    CHECK(differ(F::batch_norm(x.dev.detach(), TD(), TD(), TD(), TD(), true).cpu(),
                 F::batch_norm(x.cpu.detach(), TD(), TD(), TD(), TD(), true), 1e-10, 1e-9, "no affine")
              .empty());
  }
  // Past cuDNN's batch limit (65535 images in inference) the ops compose
  // batch norm instead: same values, no cuDNN error.
  {
    NoGradGuard ng;
    const auto big = TD::randn({70000, 3}, &g), m = TD::from({0.1, 0.2, 0.3}), v = TD::from({1.0, 2.0, 0.5});
    CHECK(differ(F::batch_norm(big.to(kCuda), m.to(kCuda), v.to(kCuda)).cpu(), F::batch_norm(big, m, v), 1e-12, 1e-10,
                 "eval past cuDNN's batch limit")
              .empty());
  }
  // Second derivatives: the create_graph backward takes the composite rule on the device too.
  Pair2 x(TD::randn({4, 3, 2}, &g) + 0.2), w(TD::randn({3}, &g));
  auto second = [](const TD& xi, const TD& wi) {
    auto y = F::batch_norm(xi, TD(), TD(), wi, TD(), true);
    auto c = (TD::arange(static_cast<double>(y.numel())) * 0.7).sin().reshape(y.shape()).to(y.device());
    auto gx = autograd::grad({(y * y * y * c).sum()}, {xi}, {}, true, true)[0];
    (gx * gx).sum().backward();
  };
  second(x.cpu, w.cpu);
  second(x.dev, w.dev);
  CHECK(differ(x.dev.grad().cpu(), x.cpu.grad(), 1e-9, 1e-8, "second derivative, x").empty());
  CHECK(differ(w.dev.grad().cpu(), w.cpu.grad(), 1e-9, 1e-8, "second derivative, weight").empty());
}

TEST_CASE("cuda: batch norm's counter and clip_grad_norm_ stay on the device and match the CPU") {
  if (no_gpu()) return;
  nn::BatchNorm2dT<double> bn_cpu(3), bn_dev(3);
  bn_dev->to(kCuda);
  Generator g(9);
  TD w = TD::randn({3, 3}, &g).requires_grad_(), wd = w.detach().to(kCuda).requires_grad_();
  for (int k = 0; k < 3; ++k) {
    const auto x = TD::randn({4, 3, 5, 5}, &g);
    for (auto* m : {&bn_cpu, &bn_dev}) {
      const bool dev = m == &bn_dev;
      auto y = (*m)(dev ? x.to(kCuda) : x).mean({0, 2, 3}).unsqueeze(0);
      ((y.matmul(dev ? wd : w)) * (y.matmul(dev ? wd : w))).sum().backward();
    }
  }
  CHECK(bn_dev->num_batches_tracked.item() == 3);  // an int64 add_ kernel each step
  CHECK(differ(bn_dev->running_mean.cpu(), bn_cpu->running_mean, 1e-12, 1e-10, "running_mean").empty());
  CHECK(differ(bn_dev->running_var.cpu(), bn_cpu->running_var, 1e-12, 1e-10, "running_var").empty());
  std::vector<TD> pc = bn_cpu->parameters(), pd = bn_dev->parameters();
  pc.push_back(w);
  pd.push_back(wd);
  for (double norm_type : {2.0, 1.0, double(INFINITY)}) {
    CAPTURE(norm_type);
    const auto tc = nn::utils::clip_grad_norm_(pc, 1e-3, norm_type), td = nn::utils::clip_grad_norm_(pd, 1e-3, norm_type);
    CHECK(td.device() == kCuda);
    CHECK(td.item() == doctest::Approx(tc.item()).epsilon(1e-10));
    for (std::size_t i = 0; i < pc.size(); ++i)
      CHECK(differ(pd[i].grad().cpu(), pc[i].grad(), 1e-12, 1e-10, "clipped gradient").empty());
  }
}

TEST_CASE("cuda: dense elementwise kernels agree with the CPU at every size and alignment (vector and scalar paths)") {
  if (no_gpu()) return;
  Generator g(42);
  for (std::int64_t n : {1, 3, 4, 5, 7, 1023, 4097, 100003}) {
    for (std::int64_t off : {0, 1, 2, 3}) {  // offsets 1-3 leave the data off a 4-element boundary
      CAPTURE(n);
      CAPTURE(off);
      const auto base = TF::randn({n + 4}, &g), other = TF::randn({n}, &g);
      const auto xc = base.narrow(0, off, n), xd = base.to(kCuda).narrow(0, off, n);
      const auto od = other.to(kCuda);
      CHECK(differ(xd.exp().cpu(), xc.exp(), 1e-6, 1e-6, "exp").empty());
      CHECK(differ((xd * od).cpu(), xc * other, 1e-6, 1e-6, "mul").empty());
      CHECK(differ(frost::where(od > 0.0f, xd, od).cpu(), frost::where(other > 0.0f, xc, other), 0, 0, "where")
                .empty());
      auto yd = od.clone();
      yd.add_(xd);  // in place: y is read and written through the same packs
      CHECK(differ(yd.cpu(), other + xc, 1e-6, 1e-6, "add_").empty());
      CHECK(differ(TF::full({n}, 2.5f, kCuda).cpu(), TF::full({n}, 2.5f), 0, 0, "full").empty());
    }
  }
  // Double, whose packs are two 16-byte halves.
  const auto xd64 = TD::randn({1027}, &g);
  CHECK(differ(xd64.to(kCuda).narrow(0, 1, 1025).tanh().cpu(), xd64.narrow(0, 1, 1025).tanh(), 1e-14, 1e-13, "tanh")
            .empty());
}

TEST_CASE("cuda: a plan's linear + tanh-approximate GELU (cuBLASLt's GELU epilogue) matches eager and the CPU") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(46);
  nn::Sequential m(nn::Linear(96, 128), nn::GELU("tanh"), nn::Linear(128, 64), nn::GELU(), nn::Linear(64, 10));
  m->eval();
  for (std::int64_t batch : {1, 33}) {
    CAPTURE(batch);
    const auto x = TF::randn({batch, 96});
    auto plan = jit::freeze(m, x);
    const auto cpu = plan.run(x);
    m->to(kCuda);
    plan.to(kCuda);
    for (int run = 0; run < 3; ++run) {
      const auto y = plan.run(x).cpu();
      CHECK(differ(y, [&] { InferenceMode im; return m(x.to(kCuda)).cpu(); }(), 1e-4, 1e-3, "plan vs eager").empty());
      CHECK(differ(y, cpu, 1e-4, 1e-3, "CUDA plan vs CPU plan").empty());
    }
    m->to(Device::cpu());
  }
}

TEST_CASE("cuda: eager convolutions and batch norm from several threads at once match the CPU") {
  if (no_gpu()) return;
  constexpr int kThreadsUsed = 4;
  std::vector<TF> xs, ws, want;
  Generator g(43);
  for (int t = 0; t < kThreadsUsed; ++t) {
    xs.push_back(TF::randn({4, 3, 16, 16}, &g));
    ws.push_back(TF::randn({8, 3, 3, 3}, &g));
    const auto conv = frost::conv2d(xs.back(), ws.back(), TF(), {.padding = 1});
    want.push_back(F::batch_norm(conv, TF(), TF(), TF(), TF(), true));
  }
  std::vector<std::string> problems(kThreadsUsed);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadsUsed; ++t)
    threads.emplace_back([&, t] {
      try {
        const auto xd = xs[t].to(kCuda), wd = ws[t].to(kCuda);
        for (int rep = 0; rep < 20; ++rep) {
          const auto y = F::batch_norm(frost::conv2d(xd, wd, TF(), {.padding = 1}), TF(), TF(), TF(), TF(), true);
          problems[t] += differ(y.cpu(), want[t], 1e-4, 1e-3, "thread " + std::to_string(t));
        }
      } catch (const std::exception& e) {
        problems[t] += e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& p : problems) CHECK_MESSAGE(p.empty(), p);
}

TEST_CASE("cuda: a plan captures its CUDA Graph while another thread runs eager work on the device") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(44);
  auto model = nn::make<guide::ResearchModelBN>();
  model->eval();
  Generator g(45);
  const auto x = TF::randn({4, 3, 32, 32}, &g);
  auto plan = jit::freeze(model, x);
  const auto want = plan.run(x);  // on the CPU
  plan.to(kCuda);  // its step-by-step first run happens here: the next run is the capture
  // The other thread's kernels go to the device's stream meanwhile; before
  // captures had a stream of their own they could land in the graph.
  const auto a = TF::randn({64, 64}, &g), k = TF::randn({6, 3, 3, 3}, &g);
  const auto a_want = (a.matmul(a) + 1.0f).relu().sum(), k_want = frost::conv2d(x, k).sum();
  std::atomic<bool> stop{false};
  std::atomic<int> iterations{0};
  std::atomic<bool> eager_ended{false};  // an eager error must not leave the wait below spinning
  std::string other;
  std::thread eager([&] {
    try {
      const auto ad = a.to(kCuda), kd = k.to(kCuda), xd = x.to(kCuda);
      while (!stop) {
        other += differ((ad.matmul(ad) + 1.0f).relu().sum().cpu(), a_want, 1e-3, 1e-4, "eager matmul");
        other += differ(frost::conv2d(xd, kd).sum().cpu(), k_want, 1e-3, 1e-4, "eager conv");
        ++iterations;
      }
    } catch (const std::exception& e) {
      other += e.what();
    }
    eager_ended = true;
  });
  while (iterations == 0 && !eager_ended) std::this_thread::yield();
  std::string mine;
  try {
    for (int run = 0; run < 6; ++run)  // run 0 captures, the rest replay
      mine += differ(plan.run(x).cpu(), want, 1e-4, 1e-3, "plan run " + std::to_string(run));
  } catch (const std::exception& e) {
    mine += e.what();
  }
  stop = true;
  eager.join();
  CHECK_MESSAGE(mine.empty(), mine);
  CHECK_MESSAGE(other.empty(), other);
  CHECK(iterations > 0);
}

}  // TEST_SUITE

TEST_SUITE("cuda") {

TEST_CASE("cuda: a plan whose capture misses its algorithms (TF32 on after to()) runs step by step, then captures") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(47);
  auto model = nn::make<guide::ResearchModel>();
  model->eval();
  const auto x = TF::randn({2, 3, 32, 32});
  auto plan = jit::freeze(model, x);
  const auto want = plan.run(x);
  plan.to(kCuda);  // warmed with TF32 off
  struct Restore {
    ~Restore() { cuda::set_allow_tf32(false); }
  } restore;
  cuda::set_allow_tf32(true);  // the cached algorithms no longer match: the capture falls back
  for (int run = 0; run < 4; ++run)  // run 0: fallback, run 1: capture, then replays
    CHECK(differ(plan.run(x).cpu(), want, 1e-2, 1e-2, "run " + std::to_string(run) + " (TF32)").empty());
  cuda::set_allow_tf32(false);
}

TEST_CASE("cuda: a plan frozen with allow_tf32 uses TF32 on its own runs only; eager work stays float") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(49);
  auto model = nn::make<guide::ResearchModel>();
  model->eval();
  const auto x = TF::randn({16, 3, 32, 32});
  auto plan = jit::freeze(model, {.allow_tf32 = true}, x);
  const auto want = plan.run(x);
  auto fp32 = jit::freeze(model, x);
  plan.to(kCuda);
  fp32.to(kCuda);
  const auto a = TF::randn({64, 512}), b = TF::randn({512, 64});
  const auto ab = a.matmul(b);
  for (int run = 0; run < 3; ++run) {  // warm-up made at to(); then the capture and a replay
    const auto y = plan.run(x).cpu();
    CHECK(differ(y, want, 1e-2, 1e-2, "TF32 plan vs CPU").empty());
    MESSAGE("run " << run << ": TF32 plan vs float plan, max |diff| "
                   << (y - fp32.run(x).cpu()).abs().max().item());
    CHECK_FALSE(cuda::allow_tf32());
    CHECK(differ(a.to(kCuda).matmul(b.to(kCuda)).cpu(), ab, 1e-4, 1e-5, "eager matmul after the plan").empty());
  }
  CHECK(differ(fp32.run(x).cpu(), want, 1e-4, 1e-3, "float plan vs CPU").empty());
}

TEST_CASE("cuda: a plan frozen with quantize_linear runs its linears in float on CUDA, and says so") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(50);
  auto mlp = guide::make_mlp();
  mlp->eval();
  const auto x = TF::randn({4, 784});
  auto plan = jit::freeze(mlp, {.quantize_linear = true}, x);
  const auto float_cpu = jit::freeze(mlp, x).run(x);
  plan.to(kCuda);
  CHECK(plan.summary().find("dynamic int8 quantization: not on cuda:0") != std::string::npos);
  for (const auto& s : plan.graph().steps) CHECK(s.kind != jit::StepKind::quantized_linear);
  CHECK(differ(plan.run(x).cpu(), float_cpu, 1e-4, 1e-3, "float linears on CUDA").empty());
  plan.to(Device::cpu());  // back on the CPU: quantized again
  CHECK(std::any_of(plan.graph().steps.begin(), plan.graph().steps.end(),
                    [](const auto& s) { return s.kind == jit::StepKind::quantized_linear; }));
}

TEST_CASE("cuda: Plan::profile times each step with events (a graphed plan, a guarded one), and the plan still runs") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(48);
  auto bn = nn::make<guide::ResearchModelBN>();
  bn->eval();
  const auto x = TF::randn({8, 3, 32, 32});
  auto plan = jit::freeze(bn, x);
  const auto want = plan.run(x);
  plan.to(kCuda);
  const auto p = plan.profile({x}, 5);
  CHECK(p.device == kCuda);
  REQUIRE(p.steps.size() == plan.graph().steps.size());  // one row a step on a device
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    CHECK(p.steps[i].first == i);
    CHECK(p.steps[i].count == 1);
    CHECK(p.steps[i].min_ms > 0);  // every step queues kernels
    CHECK(p.steps[i].median_ms >= p.steps[i].min_ms);
  }
  CHECK(p.run_ms > 0);
  MESSAGE("ResearchModelBN, batch 8, on " << cuda::device_name() << ":\n" << p.table());
  CHECK(differ(plan.run(x).cpu(), want, 1e-4, 1e-3, "run after profile").empty());

  auto ar = nn::make<guide::AdaptiveResNet>();
  ar->eval();
  const auto easy = TF::randn({2, 3, 16, 16}) * 0.1f + 3.0f;
  auto guarded = jit::freeze(ar, easy);
  guarded.to(kCuda);
  const auto q = guarded.profile({easy}, 2);
  CHECK(std::any_of(q.steps.begin(), q.steps.end(), [](const auto& s) { return s.kind == "guard"; }));
  CHECK_THROWS_AS(guarded.profile({TF::randn({2, 3, 16, 16}) * 0.1f}, 2), jit::GuardFailure);
}

TEST_CASE("cuda: a module on the device freezes and compiles into plans there (traced on the host)") {
  if (no_gpu()) return;
  manual_seed(21);
  auto m = nn::make<guide::ResearchModelBN>();
  m->to(kCuda);
  m->eval();
  const auto x = TF::randn({4, 3, 32, 32}).to(kCuda);
  TF want;
  {
    NoGradGuard ng;
    want = m(x);
  }
  auto plan = jit::freeze(m, x);
  CHECK(plan.device() == kCuda);
  for (const auto& p : m->parameters()) CHECK(p.device() == kCuda);
  for (int run = 0; run < 3; ++run) {  // run 0 captures the CUDA Graph, 1 and 2 replay it
    const auto y = plan.run(x);
    CHECK(y.device() == kCuda);
    CHECK(differ(y.cpu(), want.cpu(), 1e-4, 1e-3, "plan of a device module, run " + std::to_string(run)).empty());
  }
  CHECK(plan.graph_launches() == 3);

  auto ar = nn::make<guide::AdaptiveResNet>();
  ar->to(kCuda);
  ar->eval();
  ar->threshold = 0.2f;  // above any relu(bias) (|bias| < 1/sqrt(27)): zeros take the deep branch
  auto fast = jit::compile(*ar);
  const auto easy = (TF::randn({2, 3, 16, 16}) * 0.1f + 30.0f).to(kCuda), hard = TF::zeros({2, 3, 16, 16}).to(kCuda);
  for (int round = 0; round < 2; ++round)
    for (const auto& xi : {easy, hard}) {
      NoGradGuard ng;
      CHECK(differ(fast(xi).cpu(), ar(xi).cpu(), 1e-4, 1e-3, "compiled device module").empty());
    }
  CHECK(fast.stats().traces == 2);
}

}  // TEST_SUITE
