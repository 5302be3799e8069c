// CUDA against CPU: every op-table row (forward and backward, double and
// float), the nn layers, optimizer steps, a few training steps of the
// ResearchModel, and the device plumbing (moves, host reads, errors, memory
// counters). Built into frost_tests when frost::cuda is; each case reports
// "skipped: no CUDA device" where no GPU is visible. tests/gpu/check.sh runs
// them on a GPU.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "../../examples/research_model.hpp"
#include "../op_table.hpp"
#include "../support.hpp"
#include "gpu_support.hpp"

namespace frost::test::optable {

TEST_SUITE("cuda") {

TEST_CASE("cuda: every op-table row matches the CPU, forward and backward, in double") {
  if (no_gpu()) return;
  for_rows(every_row(), [](const Row& r) {
    const std::string problems = row_parity<double>(r, kCuda, 1e-10, 1e-9);
    CHECK_MESSAGE(problems.empty(), problems);
  });
}

TEST_CASE("cuda: every op-table row matches the CPU, forward and backward, in float") {
  if (no_gpu()) return;
  for_rows(every_row(), [](const Row& r) {
    const std::string problems = row_parity<float>(r, kCuda, 1e-5, 1e-4);
    CHECK_MESSAGE(problems.empty(), problems);
  });
}

}  // TEST_SUITE
}  // namespace frost::test::optable

namespace {

using namespace frost;
namespace nn = frost::nn;
namespace F = frost::nn::functional;
/// The module's eager result on CUDA under InferenceMode (what a plan must equal).
template <class M>
Tensor<float> eager_on_cuda(M& model, const Tensor<float>& x) {
  InferenceMode im;
  return model(x.to(kCuda));
}

/// Two copies of one model, one on the CPU and one moved to CUDA: `steps`
/// training steps with `opt_of` give the same losses (to `tol`) and
/// parameters (to `param_atol`).
template <class Model, class MakeOpt>
void check_training(Model cpu_model, Model gpu_model, MakeOpt opt_of, const Tensor<float>& x, const IndexTensor& y,
                    int steps, double tol, double param_atol) {
  gpu_model->load_state_dict(cpu_model->state_dict());
  gpu_model->to(kCuda);
  auto opt_c = opt_of(cpu_model->parameters());
  auto opt_g = opt_of(gpu_model->parameters());
  const Tensor<float> xg = x.to(kCuda);
  const IndexTensor yg = y.to(kCuda);
  for (int s = 0; s < steps; ++s) {
    manual_seed(100 + s);  // the same dropout masks and branch draws on both devices
    opt_c.zero_grad();
    auto lc = F::cross_entropy(cpu_model(x), y);
    lc.backward();
    opt_c.step();
    manual_seed(100 + s);
    opt_g.zero_grad();
    auto lg = F::cross_entropy(gpu_model(xg), yg);
    lg.backward();
    opt_g.step();
    CHECK_MESSAGE(std::abs(lc.item() - lg.item()) <= tol * (1 + std::abs(lc.item())), "step ", s, ": loss ",
                  lc.item(), " on the CPU, ", lg.item(), " on CUDA");
  }
  const auto pc = cpu_model->named_parameters();
  const auto pg = gpu_model->named_parameters();
  REQUIRE(pc.size() == pg.size());
  for (std::size_t i = 0; i < pc.size(); ++i) {
    CHECK(pg[i].second.device() == kCuda);
    const std::string problems = differ(pg[i].second.cpu(), pc[i].second, param_atol, tol, pc[i].first);
    CHECK_MESSAGE(problems.empty(), problems);
  }
}

}  // namespace

TEST_SUITE("cuda") {

TEST_CASE("cuda: tensors move to the device and back, item and to_vector read through") {
  if (no_gpu()) return;
  auto x = Tensor<float>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  auto d = x.to(kCuda);
  CHECK(d.device() == kCuda);
  CHECK(d.to_vector() == x.to_vector());
  CHECK(d.t().contiguous().cpu().to_vector() == x.t().contiguous().to_vector());
  CHECK(d.sum().item() == 21.0f);
  CHECK(static_cast<bool>(d.max() > 5.5f));
  CHECK(d.to<double>().device() == kCuda);
  CHECK(d.to<double>().to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  // Casts convert on the device, as the CPU does (NaN and out-of-range values included).
  const auto odd = Tensor<float>::from({-1.7f, std::nanf(""), 1e30f, -1e30f, 2.9f, 0.0f}, {2, 3});
  const auto cast = odd.to(kCuda).t().to<std::int64_t>();
  CHECK(cast.device() == kCuda);
  CHECK(cast.to_vector() == odd.t().to<std::int64_t>().to_vector());
  CHECK(cast.to<double>().device() == kCuda);
  CHECK(cast.to<double>().to_vector() == odd.t().to<std::int64_t>().to<double>().to_vector());
  // Gradients flow back across the move.
  auto leaf = x.clone().requires_grad_();
  (leaf.to(kCuda) * 2.0f).sum().backward();
  CHECK(leaf.grad().device() == Device::cpu());
  CHECK(leaf.grad().to_vector() == std::vector<float>(6, 2.0f));
  // copy_ across devices.
  auto back = Tensor<float>::zeros({2, 3});
  back.copy_(d * 3.0f);
  CHECK(back.to_vector() == std::vector<float>{3, 6, 9, 12, 15, 18});
}

TEST_CASE("cuda: mixing devices in one op is a clear error") {
  if (no_gpu()) return;
  auto a = Tensor<float>::ones({2});
  auto b = a.to(kCuda);
  try {
    (void)(a + b);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("different devices") != std::string::npos);
    CHECK(m.find("cuda:0") != std::string::npos);
  }
  CHECK_THROWS_AS((void)a.matmul(b.view({2, 1})), Error);
}

TEST_CASE("cuda: Philox draws on the device equal the CPU's for the same seed") {
  if (no_gpu()) return;
  Generator g1(7), g2(7);
  auto c = Tensor<float>::randn({1000}, &g1);
  auto d = Tensor<float>::empty({1000}, kCuda);
  frost::nn::init::normal_(d, 0.0, 1.0, &g2);
  CHECK(differ(d.cpu(), c, 1e-6, 1e-5, "randn").empty());
  manual_seed(3);
  auto mc = F::dropout(Tensor<float>::ones({64, 33}), 0.3, true);
  manual_seed(3);
  auto md = F::dropout(Tensor<float>::ones({64, 33}, kCuda), 0.3, true);
  CHECK(md.cpu().to_vector() == mc.to_vector());
}

TEST_CASE("cuda: long reductions split across blocks (sum, max, min, mean over few rows) match the CPU") {
  if (no_gpu()) return;
  Generator g(13);
  for (const Shape& s : {Shape{1 << 20}, Shape{3, 100003}, Shape{2, 5, 70001}}) {
    const auto x = Tensor<double>::randn(s, &g);
    const auto d = x.to(kCuda);
    CHECK(differ(d.sum().cpu(), x.sum(), 1e-9, 1e-12, "sum " + s.str()).empty());
    CHECK(differ(d.max().cpu(), x.max(), 0, 0, "max " + s.str()).empty());
    CHECK(differ(d.min().cpu(), x.min(), 0, 0, "min " + s.str()).empty());
    CHECK(differ(d.sum({-1}).cpu(), x.sum({-1}), 1e-9, 1e-12, "row sums " + s.str()).empty());
    CHECK(differ(d.mean({0}).cpu(), x.mean({0}), 1e-12, 1e-12, "column means " + s.str()).empty());
  }
  // NaN wins in a split max as it does on the CPU.
  auto x = Tensor<float>::zeros({1 << 18});
  x.narrow(0, 200000, 1).fill_(NAN);
  CHECK(std::isnan(x.to(kCuda).max().item()));
}

TEST_CASE("cuda: empty extents (no rows, an empty inner dimension) match the CPU") {
  if (no_gpu()) return;
  // Reductions with no output rows but long input rows (the split-reduction
  // heuristic must not divide by the zero rows).
  for (const Shape& s : {Shape{0, 20000}, Shape{0, 128, 128}}) {
    const auto x = Tensor<float>::zeros(s);
    const auto d = x.to(kCuda);
    CHECK(differ(d.sum({-1}).cpu(), x.sum({-1}), 0, 0, "sum " + s.str()).empty());
    CHECK(differ(d.mean({-1}).cpu(), x.mean({-1}), 0, 0, "mean " + s.str()).empty());
  }
  // matmul with an empty inner dimension: zeros, not whatever the fresh memory held.
  Generator g(5);
  const auto a = Tensor<double>::randn({3, 0}, &g), b = Tensor<double>::randn({0, 4}, &g);
  CHECK(differ(a.to(kCuda).matmul(b.to(kCuda)).cpu(), Tensor<double>::zeros({3, 4}), 0, 0, "mm, k = 0").empty());
  const auto ba = Tensor<double>::randn({2, 3, 0}, &g), bb = Tensor<double>::randn({2, 0, 4}, &g);
  CHECK(differ(ba.to(kCuda).matmul(bb.to(kCuda)).cpu(), Tensor<double>::zeros({2, 3, 4}), 0, 0, "bmm, k = 0").empty());
  // index_select into an empty result still checks its indices, as the CPU does.
  const auto idx = IndexTensor::from({0, 5});
  std::string cpu_error, cuda_error;
  try {
    (void)Tensor<float>::zeros({3, 0}).index_select(0, idx);
  } catch (const Error& e) {
    cpu_error = e.what();
  }
  try {
    (void)Tensor<float>::zeros({3, 0}, kCuda).index_select(0, idx.to(kCuda));
  } catch (const Error& e) {
    cuda_error = e.what();
  }
  CHECK(cpu_error.find("index 5 is out of bounds for dim 0 with size 3") != std::string::npos);
  CHECK(cuda_error.find("index 5 is out of bounds for dim 0 with size 3") != std::string::npos);
}

TEST_CASE("cuda: an out-of-range index on the device is the CPU's error") {
  if (no_gpu()) return;
  auto x = Tensor<float>::ones({3, 4}, kCuda);
  auto idx = IndexTensor::from({0, 5}).to(kCuda);
  try {
    (void)x.index_select(0, idx);
    FAIL("no error");
  } catch (const IndexError& e) {
    CHECK(std::string(e.what()).find("index 5 is out of bounds for dim 0 with size 3") != std::string::npos);
  }
  // The device is still usable afterwards.
  CHECK(x.sum().item() == 12.0f);
}

TEST_CASE("cuda: the memory counters follow allocations and the cap is a clear error") {
  if (no_gpu()) return;
  cuda::synchronize();
  const auto before = cuda::memory_stats();
  CHECK(before.total_bytes > 0);
  CHECK(before.current_bytes >= (32 << 20));  // the cuBLAS workspace counts as held
  CHECK(before.graph_bytes <= before.current_bytes);
  {
    auto big = Tensor<float>::empty({1 << 20}, kCuda);
    CHECK(cuda::memory_stats().current_bytes >= before.current_bytes + (4 << 20));
  }
  CHECK(cuda::memory_stats().current_bytes - cuda::memory_stats().graph_bytes ==
        before.current_bytes - before.graph_bytes);
  struct Restore {  // however the case ends, later cases get the whole device
    ~Restore() { cuda::set_per_process_memory_fraction(1.0); }
  } restore;
  cuda::set_per_process_memory_fraction(0.5);
  try {
    (void)Tensor<float>::empty({before.total_bytes / 4 + 1}, kCuda);  // more than half the device
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("memory cap") != std::string::npos);
  }
  cuda::set_per_process_memory_fraction(1.0);
  CHECK(cuda::memory_stats().limit_bytes == before.total_bytes);

  // A freed block stays in the pool for reuse (reserved, not held) until
  // empty_cache gives it back to the driver. A block as large as 256 MiB
  // gets chunks of its own, so the trim can return all of it.
  cuda::empty_cache();
  const auto baseline = cuda::memory_stats();
  {
    auto big = Tensor<float>::empty({64 << 20}, kCuda);
    CHECK(cuda::memory_stats().reserved_bytes >= baseline.reserved_bytes + (256 << 20));
  }
  cuda::synchronize();
  const auto cached = cuda::memory_stats();
  CHECK(cached.reserved_bytes >= baseline.reserved_bytes + (256 << 20));
  CHECK(cached.current_bytes - cached.graph_bytes == baseline.current_bytes - baseline.graph_bytes);
  cuda::empty_cache();
  const auto trimmed = cuda::memory_stats();
  CHECK(trimmed.reserved_bytes <= cached.reserved_bytes - (256 << 20));
  (void)Tensor<float>::ones({1 << 20}, kCuda).sum().item();  // the pool serves again after the trim
}

TEST_CASE("cuda: TF32 and benchmark mode are switches; off by default, results stay close") {
  if (no_gpu()) return;
  CHECK_FALSE(cuda::allow_tf32());
  CHECK_FALSE(cuda::benchmark());
  Generator g(5);
  auto a = Tensor<float>::randn({256, 512}, &g), b = Tensor<float>::randn({512, 128}, &g);
  auto w = Tensor<float>::randn({32, 16, 3, 3}, &g), x = Tensor<float>::randn({4, 16, 20, 20}, &g);
  const auto ref = a.matmul(b);
  // The convolution's reference in double: the CPU's own float conv of these
  // shapes (Winograd) is itself 2e-4 off, and cuDNN's timed pick may be
  // Winograd or FFT too (outputs' spread about 12).
  const auto cref = frost::conv2d(x.to<double>(), w.to<double>(), {}, {.padding = 1}).to<float>();
  CHECK(differ(a.to(kCuda).matmul(b.to(kCuda)).cpu(), ref, 1e-3, 1e-4, "fp32 matmul").empty());
  struct Restore {  // the process-wide switches off again, however the case ends
    ~Restore() {
      cuda::set_allow_tf32(false);
      cuda::set_benchmark(false);
    }
  } restore;
  cuda::set_allow_tf32(true);
  cuda::set_benchmark(true);
  CHECK(differ(a.to(kCuda).matmul(b.to(kCuda)).cpu(), ref, 0.5, 0.02, "tf32 matmul").empty());
  CHECK(differ(frost::conv2d(x.to(kCuda), w.to(kCuda), {}, {.padding = 1}).cpu(), cref, 0.5, 0.02, "tf32 conv")
            .empty());
  cuda::set_allow_tf32(false);
  CHECK(differ(frost::conv2d(x.to(kCuda), w.to(kCuda), {}, {.padding = 1}).cpu(), cref, 1e-3, 1e-4,
               "benchmarked conv")
            .empty());
  cuda::set_benchmark(false);
}

TEST_CASE("cuda: padding='same' with an even kernel (cuDNN's explicit-padding path) matches the CPU") {
  if (no_gpu()) return;
  Generator g(11);
  auto x = Tensor<double>::randn({2, 3, 9, 8}, &g).requires_grad_();
  auto w = Tensor<double>::randn({4, 3, 4, 2}, &g).requires_grad_();
  auto xd = x.detach().to(kCuda).requires_grad_(), wd = w.detach().to(kCuda).requires_grad_();
  const auto y = frost::conv2d(x, w, {}, {.padding = "same"});
  const auto yd = frost::conv2d(xd, wd, {}, {.padding = "same"});
  CHECK(differ(yd.cpu(), y, 1e-10, 1e-9, "forward").empty());
  y.sum().backward();
  yd.sum().backward();
  CHECK(differ(xd.grad().cpu(), x.grad(), 1e-10, 1e-9, "dx").empty());
  CHECK(differ(wd.grad().cpu(), w.grad(), 1e-10, 1e-9, "dw").empty());
}

TEST_CASE("cuda: optimizer steps (SGD, Adam, AdamW, RMSprop) match the CPU") {
  if (no_gpu()) return;
  auto run = [](auto make_opt, const char* name) {
    Generator g(21);
    auto pc = Tensor<float>::randn({1000}, &g).requires_grad_();
    auto pd = pc.detach().to(kCuda).requires_grad_();
    auto oc = make_opt(std::vector<Tensor<float>>{pc});
    auto od = make_opt(std::vector<Tensor<float>>{pd});
    for (int s = 0; s < 4; ++s) {
      oc.zero_grad();
      od.zero_grad();
      (pc * pc * float(s + 1)).sum().backward();
      (pd * pd * float(s + 1)).sum().backward();
      oc.step();
      od.step();
    }
    const std::string problems = differ(pd.detach().cpu(), pc.detach(), 1e-6, 1e-5, name);
    CHECK_MESSAGE(problems.empty(), problems);
  };
  run([](auto p) { return optim::SGD(p, {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}); },
      "SGD");
  run([](auto p) { return optim::Adam(p, {.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true}); }, "Adam");
  run([](auto p) { return optim::AdamW(p, {.lr = 1e-2}); }, "AdamW");
  run([](auto p) { return optim::RMSprop(p, {.lr = 1e-2, .momentum = 0.5, .centered = true}); }, "RMSprop");
}

TEST_CASE("cuda: nn layers on the device match the CPU, outputs and gradients") {
  if (no_gpu()) return;
  manual_seed(1);
  nn::Sequential net(nn::Conv2d(3, 8, 3, {.padding = 1}), nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),
                     nn::Conv2d(8, 8, 3, {.stride = 2, .groups = 2}), nn::AvgPool2d(2, {.ceil_mode = true}),
                     nn::Flatten(), nn::Linear(32, 5), nn::GELU(), nn::LayerNorm(Shape{5}));
  nn::Sequential dev(nn::Conv2d(3, 8, 3, {.padding = 1}), nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),
                     nn::Conv2d(8, 8, 3, {.stride = 2, .groups = 2}), nn::AvgPool2d(2, {.ceil_mode = true}),
                     nn::Flatten(), nn::Linear(32, 5), nn::GELU(), nn::LayerNorm(Shape{5}));
  dev->load_state_dict(net->state_dict());
  dev->to(kCuda);
  Generator g(2);
  auto x = Tensor<float>::randn({4, 3, 16, 16}, &g);
  for (bool training : {true, false}) {
    net->train(training);
    dev->train(training);
    const auto y = net(x), yd = dev(x.to(kCuda));
    CHECK(differ(yd.cpu(), y, 1e-4, 1e-3, training ? "train forward" : "eval forward").empty());
    if (training) {
      y.pow(2.0f).sum().backward();
      yd.pow(2.0f).sum().backward();
      const auto pc = net->named_parameters(), pd = dev->named_parameters();
      for (std::size_t i = 0; i < pc.size(); ++i) {
        const std::string problems = differ(pd[i].second.grad().cpu(), pc[i].second.grad(), 1e-3, 1e-3, pc[i].first);
        CHECK_MESSAGE(problems.empty(), problems);
      }
    }
  }
  // Running statistics moved and updated on the device.
  const auto sc = net->state_dict(), sd = dev->state_dict();
  CHECK(differ(sd.at("1.running_mean").cpu(), sc.at("1.running_mean"), 1e-5, 1e-4, "running_mean").empty());
}

/// A layer on the CPU and a copy on CUDA: `fwd(layer, inputs)` and the
/// gradients of sum(w * y) for the inputs and every parameter agree.
template <class Layer, class Fwd>
void check_layer(const std::string& name, Layer cpu, Layer dev, Fwd fwd, const std::vector<Tensor<float>>& inputs,
                 double tol) {
  INFO(name);
  dev->load_state_dict(cpu->state_dict());
  dev->to(kCuda);
  std::vector<Tensor<float>> xc, xd;
  for (const auto& x : inputs) {
    xc.push_back(x.clone().requires_grad_());
    xd.push_back(x.to(kCuda).requires_grad_());
  }
  const Tensor<float> y = fwd(cpu, xc), yd = fwd(dev, xd);
  CHECK(differ(yd.cpu(), y, tol, tol, name + " forward").empty());
  Generator g(17);
  const auto w = Tensor<float>::rand(y.shape(), &g);
  (y * w).sum().backward();
  (yd * w.to(kCuda)).sum().backward();
  for (std::size_t i = 0; i < xc.size(); ++i)
    CHECK(differ(xd[i].grad().cpu(), xc[i].grad(), tol, tol, name + " input gradient").empty());
  const auto pc = cpu->named_parameters(), pd = dev->named_parameters();
  for (std::size_t i = 0; i < pc.size(); ++i) {
    if (!pc[i].second.grad().defined()) continue;
    const std::string problems = differ(pd[i].second.grad().cpu(), pc[i].second.grad(), tol, tol, name + " " + pc[i].first);
    CHECK_MESSAGE(problems.empty(), problems);
  }
}

TEST_CASE("cuda: recurrent, attention, embedding, transposed and 1-d conv, group norm layers and losses match the CPU") {
  if (no_gpu()) return;
  using TF = Tensor<float>;
  auto make = [](auto f) {
    manual_seed(31);
    return f();
  };
  Generator g(23);
  const auto seq = TF::randn({3, 5, 8}, &g);  // [N, L, E]
  auto lstm = [] { return nn::LSTM(8, 6, {.num_layers = 2, .batch_first = true, .bidirectional = true}); };
  check_layer("LSTM", make(lstm), make(lstm), [](auto& m, const std::vector<TF>& x) {
    auto o = m(x[0]);
    return frost::cat(std::vector<TF>{o.output.flatten(), o.h_n.flatten(), o.c_n.flatten()});
  }, {seq}, 1e-4);
  auto gru = [] { return nn::GRU(8, 6, {.batch_first = true}); };
  check_layer("GRU", make(gru), make(gru), [](auto& m, const std::vector<TF>& x) {
    auto o = m(x[0]);
    return frost::cat(std::vector<TF>{o.output.flatten(), o.h_n.flatten()});
  }, {seq}, 1e-4);
  auto mha = [] { return nn::MultiheadAttention(8, 2, {.batch_first = true}); };
  check_layer("MultiheadAttention", make(mha), make(mha), [](auto& m, const std::vector<TF>& x) {
    auto o = m(x[0], x[1], x[1]);
    return frost::cat(std::vector<TF>{o.attn_output.flatten(), o.attn_weights.flatten()});
  }, {seq, TF::randn({3, 7, 8}, &g)}, 1e-4);
  auto convt = [] { return nn::ConvTranspose2d(4, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1}); };
  check_layer("ConvTranspose2d", make(convt), make(convt), [](auto& m, const std::vector<TF>& x) { return m(x[0]); },
              {TF::randn({2, 4, 5, 6}, &g)}, 1e-4);
  auto conv1 = [] { return nn::Conv1d(4, 6, 4, {.padding = "same", .dilation = 2}); };
  check_layer("Conv1d", make(conv1), make(conv1), [](auto& m, const std::vector<TF>& x) { return m(x[0]); },
              {TF::randn({2, 4, 11}, &g)}, 1e-4);
  auto gn = [] { return nn::GroupNorm(2, 6); };
  check_layer("GroupNorm", make(gn), make(gn), [](auto& m, const std::vector<TF>& x) { return m(x[0]); },
              {TF::randn({3, 6, 4, 4}, &g)}, 1e-4);

  // Embedding (integer input, padding row) and the class losses.
  manual_seed(32);
  nn::Embedding ec(20, 4, {.padding_idx = 0});
  nn::Embedding ed(20, 4, {.padding_idx = 0});
  ed->load_state_dict(ec->state_dict());
  ed->to(kCuda);
  const auto idx = IndexTensor::from({3, 0, 7, 7, 19, 1}, {2, 3});
  ec(idx).pow(2.0f).sum().backward();
  ed(idx.to(kCuda)).pow(2.0f).sum().backward();
  CHECK(differ(ed->weight.grad().cpu(), ec->weight.grad(), 1e-5, 1e-5, "Embedding gradient").empty());
  const auto logits = TF::randn({6, 5}, &g);
  const auto target = IndexTensor::from({0, 4, -100, 2, 2, 1});
  const F::ClassLossOptions<float> o{.ignore_index = -100, .label_smoothing = 0.1};
  const auto lc = F::cross_entropy(logits, target, o);
  const auto ld = F::cross_entropy(logits.to(kCuda), target.to(kCuda), o);
  CHECK(differ(ld.cpu(), lc, 1e-6, 1e-5, "cross_entropy").empty());
  const auto bc = F::binary_cross_entropy_with_logits(logits, logits.sigmoid());
  const auto bd = F::binary_cross_entropy_with_logits(logits.to(kCuda), logits.to(kCuda).sigmoid());
  CHECK(differ(bd.cpu(), bc, 1e-6, 1e-5, "binary_cross_entropy_with_logits").empty());
}

TEST_CASE("cuda: the class losses (weights, reductions, ignored targets, nll_loss) match the CPU") {
  if (no_gpu()) return;
  const std::string diff = frost::test::optable::class_loss_parity(kCuda);
  CHECK_MESSAGE(diff.empty(), diff);
}

TEST_CASE("cuda: a few training steps of the ResearchModel match the CPU run") {
  if (no_gpu()) return;
  manual_seed(0);
  auto cpu_model = nn::make<guide::ResearchModel>();
  auto gpu_model = nn::make<guide::ResearchModel>();
  Generator g(3);
  const auto x = Tensor<float>::randn({16, 3, 32, 32}, &g) * 0.5f;
  const auto y = IndexTensor::randint(0, 10, {16}, &g);
  // SGD with momentum: the updates are linear in the gradients, so the
  // parameters agree to float rounding.
  check_training(cpu_model, gpu_model, [](auto p) { return optim::SGD(p, {.lr = 0.01, .momentum = 0.9}); }, x, y, 4,
                 2e-4, 1e-5);
  // The guide's Adam: losses agree as tightly, but Adam's normalised steps
  // turn a rounding-level gradient into a full lr-sized step where the
  // gradient is ~0, so a parameter may differ by up to 2 lr per step.
  auto cpu2 = nn::make<guide::ResearchModel>();
  auto gpu2 = nn::make<guide::ResearchModel>();
  check_training(cpu2, gpu2, [](auto p) { return optim::Adam(p, {.lr = 1e-3}); }, x, y, 4, 2e-4, 8e-3);
}

}  // TEST_SUITE

TEST_SUITE("cuda") {

TEST_CASE("cuda: frozen plans on the device equal eager there, and replay as a CUDA Graph") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(4);
  auto model = nn::make<guide::ResearchModelBN>();
  {
    model->train();  // batch-norm statistics that are not the identity
    NoGradGuard ng;
    for (int i = 0; i < 2; ++i) model(Tensor<float>::randn({8, 3, 32, 32}) * 0.5f + 0.1f);
  }
  model->eval();
  Generator g(8);
  const auto x = Tensor<float>::randn({4, 3, 32, 32}, &g);
  auto plan = jit::freeze(model, x);  // traced on the CPU
  const auto cpu_out = plan.run(x);
  model->to(kCuda);
  plan.to(kCuda);
  CHECK(plan.device() == kCuda);
  // The plan times its convolution algorithms on its own thread only: the
  // process-wide switch another thread reads never turns on.
  std::atomic<bool> running{true}, seen_on{false};
  struct Watcher {  // joined however the runs end
    std::atomic<bool>& running;
    std::thread t;
    ~Watcher() {
      running = false;
      if (t.joinable()) t.join();
    }
  } watcher{running, std::thread([&] {
              while (running) seen_on = seen_on || cuda::benchmark();
            })};
  for (int run = 0; run < 4; ++run) {  // to() warmed the plan: run 0 captures, runs 1.. replay the graph
    const auto xi = run == 0 ? x : Tensor<float>::randn({4, 3, 32, 32}, &g);
    const Tensor<float> eager = eager_on_cuda(model, xi);
    const auto frozen = run % 2 ? plan.run(xi.to(kCuda)) : plan.run(xi);  // device or host inputs
    CHECK(frozen.device() == kCuda);
    const std::string problems = differ(frozen.cpu(), eager.cpu(), 1e-4, 1e-3, "run " + std::to_string(run));
    CHECK_MESSAGE(problems.empty(), problems);
    if (run == 0) CHECK(differ(frozen.cpu(), cpu_out, 1e-4, 1e-3, "CUDA plan vs CPU plan").empty());
  }
  running = false;
  watcher.t.join();
  CHECK_FALSE(seen_on);
  CHECK(plan.graph_launches() == 4);  // run 0 captured and launched, runs 1-3 replayed
  const auto report = plan.check(model, x.to(kCuda));
  CHECK_MESSAGE(report.ok, report.str());
}

TEST_CASE("cuda: a plan with a guard runs step by step on the device and still checks it") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(5);
  auto model = nn::make<guide::AdaptiveResNet>();
  model->eval();
  // As in examples/adaptive_resnet.cpp: bright inputs take the shallow branch, dark ones the deep one.
  const auto easy = Tensor<float>::randn({2, 3, 16, 16}) * 0.1f + 3.0f;
  auto plan = jit::freeze(model, easy);
  REQUIRE_FALSE(plan.graph().guards.empty());
  model->to(kCuda);
  plan.to(kCuda);
  for (int run = 0; run < 3; ++run) {
    CHECK(differ(plan.run(easy).cpu(), eager_on_cuda(model, easy).cpu(), 1e-4, 1e-3, "guarded plan").empty());
  }
  CHECK_THROWS_AS((void)plan.run(Tensor<float>::randn({2, 3, 16, 16}) * 0.1f), jit::GuardFailure);
  CHECK(plan.graph_launches() == 0);  // a guard reads back to the host: never captured
}

TEST_CASE("cuda: a plan with an index step replays as a CUDA Graph and still reports a bad index") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  manual_seed(41);
  auto router = nn::make<test::Router>();
  const auto in_range = test::Router::in_range();
  auto plan = jit::freeze(router, in_range);
  const auto want = [&] { InferenceMode im; return router(in_range); }();
  plan.to(kCuda);
  for (int run = 0; run < 3; ++run)
    CHECK(differ(plan.run(in_range).cpu(), want, 1e-6, 1e-6, "index plan run " + std::to_string(run)).empty());
  CHECK(plan.graph_launches() == 2);  // run 0 step by step (no warm-up on zeros), run 1 captured, run 2 replayed
  try {
    (void)plan.run(test::Router::out_of_range());
    FAIL("no error");
  } catch (const IndexError& e) {
    CHECK(std::string(e.what()).find("index 7 is out of bounds for dim 0 with size 4") != std::string::npos);
    CHECK(std::string(e.what()).find("CUDA Graph") != std::string::npos);
  }
  // The graph clears its checks at its start: the next run is clean.
  CHECK(differ(plan.run(in_range).cpu(), want, 1e-6, 1e-6, "index plan after the error").empty());
  CHECK(plan.graph_launches() == 4);
}

TEST_CASE("cuda: a plan's cast steps (argmax as a number, a float bucketed into an index) replay in its CUDA Graph") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  const auto inputs = frost::test::optable::cast_program_inputs();
  auto plan = jit::freeze<float>(jit::trace(frost::test::optable::cast_program, inputs[0]));
  REQUIRE(plan.graph().guards.empty());
  plan.to(kCuda);
  for (int run = 0; run < 4; ++run) {
    const auto& in = inputs[run % 2];
    CHECK(differ(plan.run(in.to(kCuda)).cpu(), frost::test::optable::cast_program(in), 0, 0,
                 "cast plan run " + std::to_string(run)).empty());
  }
  auto casts = jit::freeze<float>(jit::trace(frost::test::optable::cast_only_program, inputs[0]));
  casts.to(kCuda);
  for (int run = 0; run < 3; ++run) {
    const auto& in = inputs[run % 2];
    CHECK(differ(casts.run(in.to(kCuda)).cpu(), frost::test::optable::cast_only_program(in), 1e-6, 1e-6,
                 "cast-only plan run " + std::to_string(run)).empty());
  }
  CHECK(plan.graph_launches() == 3);  // run 0 step by step (an index step: no warm-up), then captured and replayed
}

TEST_CASE("cuda: an MLP plan (fused linear epilogues) on the device matches eager, batch 1 and 64") {
  if (no_gpu()) return;
  namespace jit = frost::jit;
  for (std::int64_t batch : {1, 64}) {
    manual_seed(6);
    auto mlp = guide::make_mlp();
    mlp->eval();
    const auto x = Tensor<float>::randn({batch, 784});
    auto plan = jit::freeze(mlp, x);
    mlp->to(kCuda);
    plan.to(kCuda);
    for (int run = 0; run < 3; ++run)
      CHECK(differ(plan.run(x).cpu(), eager_on_cuda(mlp, x).cpu(), 1e-4, 1e-3, "mlp plan").empty());
    CHECK(plan.graph_launches() == 3);  // to() ran the warm-up; all three runs were graph launches
  }
}

}  // TEST_SUITE
