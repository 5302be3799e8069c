// The whole library on a device whose memory the host cannot touch (see
// fake_device.hpp), on a machine without a GPU: host code that would read or
// write GPU memory directly crashes here, a host pointer given to a device
// kernel is recorded, and each case checks its values against the same work
// on the CPU (the fake's kernels are the CPU's, so they agree to rounding).
// Also the device rules frost enforces: one device per op, gradients on
// their leaf's device, device modules traced on the host into device plans.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/research_model.hpp"
#include "../device_parity.hpp"
#include "../support.hpp"
#include "fake_device.hpp"

using namespace frost;
using frost::test::check_close;
using frost::test::error_of;
using frost::test::temp_path;
using frost::test::TF;
namespace F = frost::nn::functional;
namespace fake = frost::test::fake;
namespace optable = frost::test::optable;

namespace {

const Device kDev = Device::cuda(0);

/// Installs the fake device and clears what earlier work recorded.
struct OnFakeDevice {
  OnFakeDevice() {
    fake::install();
    (void)fake::take_violations();
  }
  /// At the end of a case: no kernel was given a host pointer.
  ~OnFakeDevice() { CHECK_MESSAGE(fake::take_violations().empty(), "a device kernel was given host memory"); }
};

struct Net : nn::Module {
  nn::Linear a = register_module("a", nn::Linear(4, 8));
  nn::Linear b = register_module("b", nn::Linear(8, 3));
  TF forward(const TF& x) { return b(a(x).relu()); }
};

/// A copy of `m`'s weights in a new module of the same type on `d`.
template <class M>
std::shared_ptr<M> copy_on(const M& m, Device d) {
  auto c = std::make_shared<M>();
  c->load_state_dict(m.state_dict());
  c->to(d);
  return c;
}

/// `m` frozen on the CPU at `x` (in evaluation mode), then moved to the
/// device, where it runs as it did on the CPU.
template <class M>
jit::Plan<float> frozen_on_device(M& m, const TF& x) {
  m.eval();
  auto plan = jit::freeze(m, x);
  const auto want = plan.run(x);
  plan.to(kDev);
  const auto y = plan.run(x.to(kDev));
  CHECK(y.device() == kDev);
  check_close(y.cpu(), want, 1e-5, 1e-4);
  return plan;
}

}  // namespace

TEST_SUITE("fake device") {

TEST_CASE("fake device: host reads of device tensors copy to the host first (item, to_vector, print, if); casts do not") {
  OnFakeDevice on;
  const auto c = TF::from({1.5f, -2.0f, 3.0f, 0.5f}, {2, 2});
  const auto x = c.to(kDev);
  CHECK(x.device() == kDev);
  CHECK((x * 2.0f).sum().item() == doctest::Approx(6.0));
  CHECK(x.t().contiguous().to_vector() == c.t().contiguous().to_vector());
  std::ostringstream printed, want;
  printed << x.cpu();
  want << c;
  std::ostringstream on_device;
  on_device << x;
  CHECK(on_device.str().find("-2") != std::string::npos);
  CHECK(printed.str() == want.str());
  bool branch = false;
  if (x.mean() > 0.0f) branch = true;  // a data-dependent branch reads one value
  CHECK(branch);
  check_close(x.to<double>().cpu(), c.to<double>());
  // Casts convert on the device: no read back.
  const int reads = fake::memory().host_reads;
  const auto as_index = x.t().to<std::int64_t>();
  const auto back = (as_index.to<float>() + 1.0f).to<double>();
  CHECK(fake::memory().host_reads == reads);
  CHECK(as_index.device() == kDev);
  CHECK(back.device() == kDev);
  CHECK(as_index.cpu().to_vector() == c.t().to<std::int64_t>().to_vector());
  check_close(back.cpu(), (c.t().to<std::int64_t>().to<float>() + 1.0f).to<double>());
  check_close(one_hot(IndexTensor::from({0, 2, 1}).to(kDev), 3).cpu(), one_hot(IndexTensor::from({0, 2, 1}), 3));
}

TEST_CASE("fake device: random draws and *_like factories stay on the tensor's device, with the CPU's numbers") {
  OnFakeDevice on;
  const auto x = TF::zeros({3, 5}, kDev);
  Generator g1(7), g2(7);
  const auto r = rand_like(x, &g1), n = randn_like(x, &g1);
  CHECK(r.device() == kDev);
  CHECK(n.device() == kDev);
  check_close(r.cpu(), TF::rand({3, 5}, &g2), 0, 0);
  check_close(n.cpu(), TF::randn({3, 5}, &g2), 0, 0);
  CHECK(zeros_like(x).device() == kDev);
  CHECK(full_like(x, 2.0f).sum().item() == 30.0f);
}

TEST_CASE("fake device: nn.init and Module::apply work on device parameters") {
  OnFakeDevice on;
  nn::Linear l(5, 4);
  l->to(kDev);
  nn::init::normal_(l->weight);
  nn::init::uniform_(l->weight);
  nn::init::kaiming_normal_(l->weight);
  nn::init::kaiming_uniform_(l->weight);
  nn::init::xavier_uniform_(l->weight);
  nn::init::xavier_normal_(l->weight);
  nn::init::trunc_normal_(l->weight);
  nn::init::orthogonal_(l->weight);
  const auto w = l->weight.cpu();
  check_close(w.matmul(w.t()), TF::eye(4), 1e-5, 1e-5);  // orthogonal rows
  nn::init::eye_(l->weight);
  check_close(l->weight.cpu(), TF::eye(4, 5), 0, 0);
  nn::init::constant_(l->bias, 0.5f);
  CHECK(l->bias.sum().item() == 2.0f);
  nn::Sequential m(nn::Linear(3, 3), nn::Conv2d(2, 2, 3));
  m->to(kDev);
  int linears = 0;
  m->apply([&](nn::Module& mm) {
    if (auto* ll = mm.as<nn::Linear>()) {
      nn::init::zeros_(ll->weight);
      ++linears;
    }
  });
  CHECK(linears == 1);
  CHECK(m->parameters()[0].abs().sum().item() == 0.0f);
}

TEST_CASE("fake device: training steps (SGD, Adam, RMSprop, clip_grad_norm_, label smoothing) match the CPU") {
  OnFakeDevice on;
  manual_seed(3);
  auto cpu = std::make_shared<Net>();
  auto dev = copy_on(*cpu, kDev);
  const auto x = TF::randn({6, 4});
  const auto t = IndexTensor::from({0, 1, 2, 0, 1, 2});
  auto train = [&](Net& net, Device d) {
    optim::SGD sgd(net.parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::Adam adam(net.parameters(), {.lr = 1e-2, .amsgrad = true});
    optim::RMSprop rms(net.parameters(), {.lr = 1e-3, .momentum = 0.5, .centered = true});
    std::vector<float> norms;
    for (int k = 0; k < 3; ++k) {
      auto loss = F::cross_entropy(net.forward(x.to(d)), t.to(d), {.label_smoothing = 0.1});
      net.zero_grad();
      loss.backward();
      norms.push_back(nn::utils::clip_grad_norm_(net.parameters(), 0.5).item());
      sgd.step();
      adam.step();
      rms.step();
    }
    return norms;
  };
  const auto cpu_norms = train(*cpu, Device::cpu()), dev_norms = train(*dev, kDev);
  CHECK(test::closeness(dev_norms, cpu_norms, 1e-6, 1e-5) <= 1.0);
  for (std::size_t i = 0; i < cpu->parameters().size(); ++i)
    check_close(dev->parameters()[i].cpu(), cpu->parameters()[i], 1e-6, 1e-5);
}

TEST_CASE("fake device: a training step with batch norm and clip_grad_norm_ reads nothing back to the host") {
  OnFakeDevice on;
  manual_seed(5);
  nn::Sequential cpu(nn::Conv2d(2, 4, 3, {.padding = 1}), nn::BatchNorm2d(4), nn::ReLU());
  nn::Sequential dev(nn::Conv2d(2, 4, 3, {.padding = 1}), nn::BatchNorm2d(4), nn::ReLU());
  dev->load_state_dict(cpu->state_dict());
  dev->to(kDev);
  const auto x = TF::randn({3, 2, 5, 5});
  const auto xd = x.to(kDev);
  auto step = [](nn::Sequential& m, const TF& in) {
    m->zero_grad();
    const TF y = m(in);
    (y * y).mean().backward();
    return nn::utils::clip_grad_norm_(m->parameters(), 0.1);
  };
  for (int k = 0; k < 2; ++k) {
    const TF want = step(cpu, x);
    const int before = fake::memory().host_reads;
    const TF got = step(dev, xd);
    CHECK(fake::memory().host_reads == before);  // no sync: the count, the norms and the scaling stay on the device
    CHECK(got.device() == kDev);
    CHECK(got.item() == doctest::Approx(want.item()).epsilon(1e-5));
  }
  const auto sd_cpu = cpu->state_dict(), sd_dev = dev->state_dict();
  CHECK(sd_dev.index_at("1.num_batches_tracked").item() == 2);
  check_close(sd_dev.at("1.running_mean").cpu(), sd_cpu.at("1.running_mean"), 1e-6, 1e-5);
  check_close(sd_dev.at("1.running_var").cpu(), sd_cpu.at("1.running_var"), 1e-6, 1e-5);
  for (std::size_t i = 0; i < cpu->parameters().size(); ++i)
    check_close(dev->parameters()[i].grad().cpu(), cpu->parameters()[i].grad(), 1e-6, 1e-5);

  // A classification loss reads its targets where they lie: weights, an
  // ignored target and label smoothing, no read back.
  {
    const auto logits = TF::randn({4, 3}), w = TF::from({0.5f, 1.0f, 2.0f});
    const auto target = IndexTensor::from({2, -100, 0, 1});
    const F::ClassLossOptions<float> o{.weight = w, .label_smoothing = 0.1};
    const TF want = F::cross_entropy(logits, target, o);
    const auto ld = logits.to(kDev).requires_grad_();
    const F::ClassLossOptions<float> od{.weight = w.to(kDev), .label_smoothing = 0.1};
    const int before = fake::memory().host_reads;
    const TF got = F::cross_entropy(ld, target.to(kDev), od);
    got.backward();
    CHECK(fake::memory().host_reads == before);
    check_close(got.cpu(), want, 1e-6, 1e-5);
    CHECK_THROWS_WITH_AS(F::cross_entropy(ld, IndexTensor::from({2, 3, 0, 1}).to(kDev), od),
                         doctest::Contains("index 3 is out of bounds"), Error);
  }

  // Gradients on two devices (a model split across GPUs) clip by their joint norm, as on one.
  TF a = TF::zeros({2}).requires_grad_(), b = TF::zeros({2}).requires_grad_();
  a.set_grad(TF::from({3.0f, 0.0f}));
  b.set_grad(TF::from({0.0f, 4.0f}));
  TF a1 = TF::zeros({2}, kDev).requires_grad_(), b1 = TF::zeros({2}, Device::cuda(1)).requires_grad_();
  a1.set_grad(TF::from({3.0f, 0.0f}).to(kDev));
  b1.set_grad(TF::from({0.0f, 4.0f}).to(Device::cuda(1)));
  CHECK(nn::utils::clip_grad_norm_(std::vector<TF>{a, b}, 1.0).item() == doctest::Approx(5.0));
  CHECK(nn::utils::clip_grad_norm_(std::vector<TF>{a1, b1}, 1.0).item() == doctest::Approx(5.0));
  check_close(a1.grad().cpu(), a.grad(), 1e-7, 1e-6);
  check_close(b1.grad().cpu(), b.grad(), 1e-7, 1e-6);
  CHECK(b1.grad().device() == Device::cuda(1));

  // momentum = None (a cumulative average) needs the count: one read per step, as in PyTorch.
  nn::BatchNorm2d cum_cpu(4, {.momentum = std::nullopt}), cum_dev(4, {.momentum = std::nullopt});
  cum_dev->to(kDev);
  const auto y = TF::randn({3, 4, 2, 2});
  for (int k = 0; k < 3; ++k) {
    (void)cum_cpu(y * float(k + 1));
    const int before = fake::memory().host_reads;
    (void)cum_dev(y.to(kDev) * float(k + 1));
    CHECK(fake::memory().host_reads == before + 1);
  }
  CHECK(cum_dev->num_batches_tracked.item() == 3);
  check_close(cum_dev->running_mean.cpu(), cum_cpu->running_mean, 1e-6, 1e-5);
  check_close(cum_dev->running_var.cpu(), cum_cpu->running_var, 1e-6, 1e-5);
}

TEST_CASE("fake device: optimizer state follows its parameters to the device, stepped or loaded") {
  OnFakeDevice on;
  manual_seed(4);
  const auto x = TF::randn({6, 4});
  auto step = [&](Net& net, optim::Optimizer& opt, Device d) {
    net.zero_grad();
    net.forward(x.to(d)).pow(2.0f).sum().backward();
    opt.step();
  };
  // Adam stepped on the CPU, then the module moved: the next step moves the state.
  auto ref = std::make_shared<Net>();
  auto moved = copy_on(*ref, Device::cpu());
  optim::Adam ref_opt(ref->parameters()), moved_opt(moved->parameters());
  step(*ref, ref_opt, Device::cpu());
  step(*moved, moved_opt, Device::cpu());
  moved->to(kDev);
  step(*ref, ref_opt, Device::cpu());
  step(*moved, moved_opt, kDev);
  for (std::size_t i = 0; i < ref->parameters().size(); ++i)
    check_close(moved->parameters()[i].cpu(), ref->parameters()[i], 1e-6, 1e-5);
  // A CPU optimizer state loaded into an optimizer over device parameters.
  auto cpu_net = std::make_shared<Net>();
  auto dev_net = copy_on(*cpu_net, kDev);
  optim::SGD cpu_sgd(cpu_net->parameters(), {.lr = 0.1, .momentum = 0.9});
  step(*cpu_net, cpu_sgd, Device::cpu());
  optim::SGD dev_sgd(dev_net->parameters(), {.lr = 0.1, .momentum = 0.9});
  dev_net->load_state_dict(cpu_net->state_dict());
  dev_sgd.load_state_dict(cpu_sgd.state_dict());
  step(*cpu_net, cpu_sgd, Device::cpu());
  step(*dev_net, dev_sgd, kDev);
  for (std::size_t i = 0; i < cpu_net->parameters().size(); ++i)
    check_close(dev_net->parameters()[i].cpu(), cpu_net->parameters()[i], 1e-6, 1e-5);
}

TEST_CASE("fake device: attention with is_causal and masks, dropout, on the device match the CPU") {
  OnFakeDevice on;
  manual_seed(5);
  const auto q = TF::randn({2, 5, 8});
  check_close(F::scaled_dot_product_attention(q.to(kDev), q.to(kDev), q.to(kDev), {.is_causal = true}).cpu(),
              F::scaled_dot_product_attention(q, q, q, {.is_causal = true}));
  nn::MultiheadAttention mha(8, 2);
  auto mha_dev = nn::MultiheadAttention(8, 2);
  mha_dev->load_state_dict(mha->state_dict());
  mha_dev->to(kDev);
  const auto s = TF::randn({5, 2, 8});
  const auto pad = TF::from({0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 5});
  const auto want = mha(s, s, s, {.key_padding_mask = pad, .is_causal = true}).attn_output;
  const auto got = mha_dev(s.to(kDev), s.to(kDev), s.to(kDev), {.key_padding_mask = pad.to(kDev), .is_causal = true}).attn_output;
  check_close(got.cpu(), want);
  // Dropout draws its mask on the device, the CPU's numbers for the same seed.
  const auto ones = TF::ones({4, 3, 2, 2});
  manual_seed(9);
  const auto d_cpu = F::dropout(ones, 0.3) + F::dropout2d(ones, 0.5);
  manual_seed(9);
  const auto xd = ones.to(kDev).requires_grad_();
  const auto d_dev = F::dropout(xd, 0.3) + F::dropout2d(xd, 0.5);
  check_close(d_dev.cpu(), d_cpu, 0, 0);
  d_dev.sum().backward();
  CHECK(xd.grad().device() == kDev);
}

TEST_CASE("fake device: layers forward and backward on the device match the CPU") {
  OnFakeDevice on;
  manual_seed(6);
  const auto x = TF::randn({2, 3, 7, 7});
  auto run = [&](Device d, nn::Conv2d& c, nn::BatchNorm2d& bn, nn::ConvTranspose2d& ct, nn::GroupNorm& gn) {
    const auto xi = x.to(d).detach().requires_grad_();
    const auto y = adaptive_avg_pool2d(max_pool2d(c(bn(xi)), 2), {2, 2});
    const auto z = avg_pool2d(gn(c(xi)), 2);
    (y.sum() + z.pow(2.0f).sum() + ct(c(xi)).sum()).backward();
    return std::vector<TF>{y.detach().cpu(), z.detach().cpu(), xi.grad().cpu(), c->weight.grad().cpu()};
  };
  nn::Conv2d c(3, 4, 3, {.padding = 1}), c2(3, 4, 3, {.padding = 1});
  nn::BatchNorm2d bn(3), bn2(3);
  nn::ConvTranspose2d ct(4, 2, 3), ct2(4, 2, 3);
  nn::GroupNorm gn(2, 4), gn2(2, 4);
  c2->load_state_dict(c->state_dict());
  ct2->load_state_dict(ct->state_dict());
  c2->to(kDev);
  bn2->to(kDev);
  ct2->to(kDev);
  gn2->to(kDev);
  const auto want = run(Device::cpu(), c, bn, ct, gn), got = run(kDev, c2, bn2, ct2, gn2);
  for (std::size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], 1e-5, 1e-4);
  check_close(bn2->running_mean.cpu(), bn->running_mean);
  check_close(bn2->running_var.cpu(), bn->running_var);
  // Recurrent layers, embeddings, losses.
  nn::LSTM lstm(4, 5);
  lstm->to(kDev);
  const auto seq = TF::randn({3, 2, 4}).to(kDev);
  lstm(seq).output.sum().backward();
  nn::GRU gru(4, 5);
  gru->to(kDev);
  gru(seq).output.sum().backward();
  nn::Embedding e(10, 4, {.padding_idx = 0, .max_norm = 1.0});
  e->to(kDev);
  e(IndexTensor::from({1, 0, 3, 3}).to(kDev)).sum().backward();
  const auto logits = TF::randn({4, 3}).to(kDev).requires_grad_();
  F::cross_entropy(logits, IndexTensor::from({0, 1, 2, 1}).to(kDev), {.ignore_index = 1}).backward();
  CHECK(logits.grad().device() == kDev);
  const auto p = TF::rand({4}).to(kDev);
  CHECK(std::isfinite(F::binary_cross_entropy(p, p).item()));
}

TEST_CASE("fake device: reductions of empty device tensors") {
  OnFakeDevice on;
  const auto x = TF::zeros({0, 3}, kDev);
  const auto y = logsumexp(x, {0});
  CHECK(y.device() == kDev);
  check_close(y.cpu(), logsumexp(TF::zeros({0, 3}), {0}));
  CHECK(x.sum({0}).device() == kDev);
}

TEST_CASE("fake device: a move between two devices is one autograd step back to the first") {
  OnFakeDevice on;
  const auto w = TF::from({1.0f, 2.0f, 3.0f}).to(kDev).requires_grad_();
  const auto y = w.to(Device::cuda(1));
  CHECK(y.device() == Device::cuda(1));
  CHECK(y.grad_fn_name() == std::string("to_device"));
  (y * y).sum().backward();
  CHECK(w.grad().device() == kDev);
  check_close(w.grad().cpu(), std::vector<float>{2, 4, 6});
}

TEST_CASE("fake device: mixing devices is an error naming the op called and both devices") {
  OnFakeDevice on;
  const auto x = TF::randn({2, 3}).to(kDev), w = TF::randn({4, 3}).to(kDev);
  auto says = [](const std::string& m, const std::string& op) {
    CAPTURE(m);
    CHECK(m.find("frost::" + op) != std::string::npos);
    CHECK(m.find("cuda:0") != std::string::npos);
    CHECK(m.find("cpu") != std::string::npos);
  };
  says(error_of([&] { (void)F::linear(x, w, TF::randn({4})); }), "linear (bias)");
  says(error_of([&] { (void)TF::zeros({3}, kDev).masked_fill(TF::ones({3}), 1.0f); }), "masked_fill");
  says(error_of([&] { (void)outer(TF::ones({3}, kDev), TF::ones({2})); }), "outer");
  says(error_of([&] { (void)F::bilinear(x, x, TF::randn({4, 3, 3})); }), "bilinear (weight)");
  says(error_of([&] { (void)F::nll_loss(x, IndexTensor::from({0, 1}).to(kDev), {.weight = TF::ones({3})}); }),
       "nll_loss (weight)");
  says(error_of([&] { (void)F::binary_cross_entropy(x.sigmoid(), x.sigmoid(), F::Reduction::mean, TF::ones({2, 3})); }),
       "binary_cross_entropy (weight)");
  const auto q = TF::randn({2, 5, 8}).to(kDev);
  says(error_of([&] { (void)F::scaled_dot_product_attention(q, q, q, {.attn_mask = TF::zeros({5, 5})}); }),
       "nn::functional::scaled_dot_product_attention");
  nn::MultiheadAttention mha(8, 2);
  mha->to(kDev);
  const auto s = TF::randn({5, 2, 8}).to(kDev);
  says(error_of([&] { (void)mha(s, s, s, {.key_padding_mask = TF::zeros({2, 5})}); }), "nn::MultiheadAttention");
  // A gradient on another device than its output.
  const auto leaf = TF::ones({3}, kDev).requires_grad_();
  says(error_of([&] { (leaf * 2.0f).backward(TF::ones({3})); }), "backward");
  CHECK_FALSE(leaf.grad().defined());
}

TEST_CASE("fake device: module state saves from and loads into device modules (safetensors)") {
  OnFakeDevice on;
  auto net = std::make_shared<Net>();
  net->to(kDev);
  const std::string path = temp_path("fake_device_net.safetensors");
  save_safetensors(*net, path);
  auto back = std::make_shared<Net>();
  back->to(kDev);
  load_safetensors(*back, path);
  for (std::size_t i = 0; i < net->parameters().size(); ++i)
    check_close(back->parameters()[i].cpu(), net->parameters()[i].cpu(), 0, 0);
  CHECK(back->parameters()[0].device() == kDev);
  nn::BatchNorm2d bn(3), bn_back(3);
  bn->to(kDev);
  bn_back->to(kDev);
  (void)bn(TF::randn({4, 3, 2, 2}).to(kDev));
  save_safetensors(*bn, path);
  load_safetensors(*bn_back, path);
  check_close(bn_back->running_mean.cpu(), bn->running_mean.cpu(), 0, 0);
  std::filesystem::remove(path);
}

TEST_CASE("fake device: the guide's models train on the device as on the CPU") {
  OnFakeDevice on;
  manual_seed(8);
  auto cpu = std::make_shared<guide::ResearchModel>();
  auto dev = copy_on(*cpu, kDev);
  const auto x = TF::randn({2, 3, 32, 32});
  const auto t = IndexTensor::from({1, 2});
  optim::AdamW cpu_opt(cpu->parameters()), dev_opt(dev->parameters());
  for (int k = 0; k < 2; ++k) {
    manual_seed(100 + k);  // the same dropout mask and the same branch on both
    const auto lc = F::cross_entropy(cpu->forward(x), t);
    manual_seed(100 + k);
    const auto ld = F::cross_entropy(dev->forward(x.to(kDev)), t.to(kDev));
    CHECK(ld.item() == doctest::Approx(lc.item()).epsilon(1e-4));
    cpu_opt.zero_grad();
    lc.backward();
    cpu_opt.step();
    dev_opt.zero_grad();
    ld.backward();
    dev_opt.step();
  }
  auto adaptive = std::make_shared<guide::AdaptiveResNet>();
  adaptive->to(kDev);
  const auto y = adaptive->forward(TF::randn({2, 3, 8, 8}).to(kDev));
  y.sum().backward();
  CHECK(y.device() == kDev);
}

TEST_CASE("fake device: plans traced on the CPU run on the device, and refit from a device-trained module") {
  OnFakeDevice on;
  manual_seed(10);
  auto m = std::make_shared<guide::ResearchModelBN>();
  const auto x = TF::randn({2, 3, 32, 32});
  auto plan = frozen_on_device(*m, x);
  const auto want = plan.run(x.to(kDev)).cpu();
  const std::string path = temp_path("fake_device.plan");
  plan.save(path);
  auto loaded = jit::Plan<float>::load(path);
  loaded.to(kDev);
  check_close(loaded.run(x.to(kDev)).cpu(), want, 1e-5, 1e-4);
  std::filesystem::remove(path);
  // A plan with a guard (the adaptive model's branch) on the device.
  auto adaptive = std::make_shared<guide::AdaptiveResNet>();
  (void)frozen_on_device(*adaptive, TF::randn({1, 3, 8, 8}));
  // Weights trained on the device refit the CPU-traced plan.
  auto net = std::make_shared<Net>();
  const auto xn = TF::randn({2, 4});
  auto small = jit::freeze(*net, xn);
  net->to(kDev);
  nn::init::normal_(net->a->weight);
  small.refit(*net);
  check_close(small.run(xn), net->forward(xn.to(kDev)).cpu(), 1e-6, 1e-5);
  const std::string weights = temp_path("fake_device_w.safetensors");
  save_safetensors(*net, weights);
  auto from_file = jit::freeze(*std::make_shared<Net>(), xn);
  from_file.to(kDev);
  from_file.refit(weights);
  check_close(from_file.run(xn.to(kDev)).cpu(), net->forward(xn.to(kDev)).cpu(), 1e-6, 1e-5);
  std::filesystem::remove(weights);
}

TEST_CASE("fake device: a plan's cast steps convert on the device, with no read back") {
  OnFakeDevice on;
  // Both casts are steps of the plan, which has no guard and reads nothing to the host.
  const auto inputs = optable::cast_program_inputs();
  auto plan = jit::freeze<float>(jit::trace(optable::cast_program, inputs[0]));
  CHECK(plan.graph().guards.empty());
  plan.to(kDev);
  for (const auto& in : inputs) {
    const auto on_dev = in.to(kDev);
    const int reads = fake::memory().host_reads;
    const auto y = plan.run(on_dev);
    CHECK(fake::memory().host_reads == reads);
    CHECK(y.device() == kDev);
    check_close(y.cpu(), optable::cast_program(in));
  }
  auto casts = jit::freeze<float>(jit::trace(optable::cast_only_program, inputs[0]));
  casts.to(kDev);
  for (const auto& in : inputs) check_close(casts.run(in.to(kDev)).cpu(), optable::cast_only_program(in));
}

TEST_CASE("fake device: the class losses (weights, reductions, ignored targets, nll_loss) match the CPU, with no read back") {
  OnFakeDevice on;
  const int before = fake::memory().host_reads;
  const std::string diff = optable::class_loss_parity(kDev, [&] {
    const int reads = fake::memory().host_reads - before;
    return reads == 0 ? std::string() : std::to_string(reads) + " reads back to the host\n";
  });
  CHECK_MESSAGE(diff.empty(), diff);
}

TEST_CASE("fake device: freezing a module on the device traces it on the host and gives a plan there") {
  OnFakeDevice on;
  manual_seed(12);
  auto m = std::make_shared<guide::ResearchModelBN>();
  m->to(kDev);
  const TF w = m->parameters()[0];
  optim::SGD sgd(m->parameters(), {.lr = 0.1});
  const auto x = TF::randn({2, 3, 32, 32}).to(kDev);
  (m->forward(x) * m->forward(x)).mean().backward();  // gradients on the device, kept through the trace
  const auto grad_before = w.grad().cpu();
  m->eval();
  TF want;
  {
    NoGradGuard ng;
    want = m->forward(x).cpu();
  }
  m->train();
  auto plan = jit::freeze(*m, x);
  CHECK(plan.device() == kDev);
  CHECK(m->is_training());  // freeze's eval() undone
  for (const auto& p : m->parameters()) CHECK(p.device() == kDev);
  for (const auto& b : m->buffers()) CHECK(b.device() == kDev);
  REQUIRE(w.grad().defined());
  CHECK(w.grad().device() == kDev);
  check_close(w.grad().cpu(), grad_before, 0, 0);
  const auto y = plan.run(x);
  CHECK(y.device() == kDev);
  check_close(y.cpu(), want, 1e-5, 1e-4);
  check_close(plan.run(x.cpu()).cpu(), want, 1e-5, 1e-4);  // host inputs are staged, as for any device plan
  // The optimizer built before the freeze still steps the module's parameters.
  const auto w_before = w.detach().cpu();
  sgd.step();
  CHECK(w.device() == kDev);
  check_close(w.detach().cpu(), w_before - grad_before * 0.1f, 1e-6, 1e-6);
  // A graph traced from the device carries it; freezing it puts the plan there.
  const jit::Graph g = jit::trace(*m, x);
  CHECK(g.device == kDev);
  m->eval();
  auto from_graph = jit::freeze<float>(jit::trace(*m, x));
  CHECK(from_graph.device() == kDev);
  check_close(from_graph.run(x).cpu(), m->forward(x).detach().cpu(), 1e-5, 1e-4);
  // Moved back to the CPU, the plan is frozen again for it and agrees.
  plan.to(Device::cpu());
  check_close(plan.run(x.cpu()), want, 1e-5, 1e-4);  // frozen before the step: the old weights
  // A callable over device inputs alone traces too.
  auto double_relu = [](const TF& a) { return (a * 2.0f).relu(); };
  auto twice = jit::freeze<float>(jit::trace(double_relu, x));
  CHECK(twice.device() == kDev);
  check_close(twice.run(x).cpu(), (x.cpu() * 2.0f).relu(), 0, 0);
}

TEST_CASE("fake device: jit::compile of a module on the device keeps a plan per branch, run there") {
  OnFakeDevice on;
  manual_seed(13);
  auto m = std::make_shared<guide::AdaptiveResNet>();
  m->to(kDev);
  m->eval();
  m->threshold = 0.2f;  // above any relu(bias) (|bias| < 1/sqrt(27)): zeros take the deep branch
  const auto easy = (TF::ones({1, 3, 8, 8}) * 30.0f).to(kDev);
  const auto hard = TF::zeros({1, 3, 8, 8}).to(kDev);
  auto fast = jit::compile(*m);
  for (int round = 0; round < 2; ++round) {
    for (const auto& x : {easy, hard}) {
      const auto y = fast(x);
      CHECK(y.device() == kDev);
      NoGradGuard ng;
      check_close(y.cpu(), m->forward(x).cpu(), 1e-5, 1e-4);
    }
  }
  const auto st = fast.stats();
  CHECK(st.traces == 2);  // one per branch, none in the second round
  CHECK(st.cached_plans == 2);
  CHECK(st.calls == 4);
  for (const auto& p : m->parameters()) CHECK(p.device() == kDev);
}

TEST_CASE("fake device: tracing device work: inputs elsewhere, a split module, tensors made on the device") {
  OnFakeDevice on;
  auto net = std::make_shared<Net>();
  net->to(kDev);
  std::string m = error_of([&] { (void)jit::freeze(*net, TF::randn({2, 4})); });
  CHECK(m.find("frost::jit::trace: example input 0 is on cpu") != std::string::npos);
  CHECK(m.find("parameters are on cuda:0") != std::string::npos);
  // Split across two devices: a plan runs on one.
  net->b->to(Device::cuda(1));
  m = error_of([&] { (void)jit::freeze(*net, TF::randn({2, 4}).to(kDev)); });
  CHECK(m.find("'a.weight' is on cuda:0 and 'b.weight' on cuda:1") != std::string::npos);
  CHECK(net->b->weight.device() == Device::cuda(1));
  // Code that makes a tensor on the device itself fails the trace, and the
  // module is back on its device afterwards.
  struct OnDevice : nn::Module {
    nn::Linear a = register_module("a", nn::Linear(4, 3));
    TF forward(const TF& x) { return a(x) + TF::zeros({x.shape()[0], 3}, kDev); }
  };
  auto od = std::make_shared<OnDevice>();
  od->to(kDev);
  m = error_of([&] { (void)jit::freeze(*od, TF::randn({2, 4}).to(kDev)); });
  INFO(m);
  CHECK(m.find("made or used a float32 tensor on cuda:0") != std::string::npos);
  CHECK(m.find("zeros(shape, x.device())") != std::string::npos);
  CHECK(m.find("the trace of work on cuda:0 runs on the CPU") != std::string::npos);
  CHECK(od->a->weight.device() == kDev);
  CHECK(od->a->bias.device() == kDev);
  // A callable holding a device tensor: the trace names what to do.
  const auto held = TF::ones({4}).to(kDev);
  auto times_held = [&](const TF& a) { return a * held; };
  m = error_of([&] { (void)jit::trace(times_held, TF::randn({2, 4}).to(kDev)); });
  CHECK(m.find("cuda:0") != std::string::npos);
  CHECK(m.find("pass it as an input or register it in the module") != std::string::npos);
  // A bad index met while tracing device work stays an IndexError.
  auto bad_index = [](const TF& a) { return a.index_select(0, Tensor<std::int64_t>::from({0, 9})); };
  CHECK_THROWS_WITH_AS((void)jit::trace(bad_index, TF::randn({2, 4}).to(kDev)),
                       doctest::Contains("the trace of work on cuda:0 runs on the CPU"), IndexError);
}

}  // TEST_SUITE
