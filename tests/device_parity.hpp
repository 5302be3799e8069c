// A device against the CPU from the same values: what the CUDA tests
// (tests/gpu) and the fake device's (tests/fake_device) compare with, the
// op-table rows included.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <frost/frost.hpp>

#include "op_table.hpp"

namespace {

/// "" when a (moved back from the device) and b agree to atol + rtol |b|, NaN matching NaN.
template <class T>
std::string differ(const frost::Tensor<T>& got, const frost::Tensor<T>& want, double atol, double rtol,
                   const std::string& what) {
  if (got.shape() != want.shape()) return what + ": shape " + got.shape().str() + " vs CPU " + want.shape().str() + "\n";
  const auto g = got.to_vector(), w = want.to_vector();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double a = double(g[i]), b = double(w[i]);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;  // equal infinities
    const double excess = std::isnan(a) || std::isnan(b) ? INFINITY : std::abs(a - b) / (atol + rtol * std::abs(b));
    if (excess > worst) {
      worst = excess;
      at = i;
    }
  }
  if (worst <= 1) return "";
  return what + ": element " + std::to_string(at) + " is " + std::to_string(double(g[at])) + " on the device, " +
         std::to_string(double(w[at])) + " on the CPU\n";
}

}  // namespace

namespace frost::test::optable {

/// A row on the CPU and on `device` from the same values: the outputs, then
/// the gradients of sum(w * y) for a fixed random w. Returns what differs,
/// and what `after_device_work` (called once both devices' forward and
/// backward ran, before any result is read back) says.
template <class T>
std::string row_parity(const Row& r, Device device, double atol, double rtol,
                       const std::function<std::string()>& after_device_work = {}) {
  const Prepared p = prepare(r);
  const auto& f = [&]() -> const OpFn<T>& {
    if constexpr (std::is_same_v<T, double>) return r.fd;
    else return r.ff;
  }();
  auto cpu = bases<T>(p);
  std::vector<Tensor<T>> dev;
  for (auto& b : cpu) {
    dev.push_back(b.to(device));
    if (r.grad) {
      b.requires_grad_();
      dev.back().requires_grad_();
    }
  }
  const Tensor<T> y = f(views(r, cpu));
  Generator gen(99);
  const Tensor<T> w = Tensor<T>::rand(y.shape(), &gen) + T(0.5), w_dev = w.to(device);
  const Tensor<T> yd = f(views(r, dev));
  const bool backward = r.grad && y.requires_grad() && y.numel() > 0;
  if (backward) {
    (y * w).sum().backward();
    (yd * w_dev).sum().backward();
  }
  std::string out = after_device_work ? after_device_work() : "";
  if (yd.device() != device) out += "the result is on " + yd.device().str() + "\n";
  out += differ(yd.cpu(), y, atol, rtol, "forward");
  if (!backward) return out;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const std::string what = "gradient of input " + std::to_string(i);
    if (cpu[i].grad().defined() != dev[i].grad().defined()) out += what + ": defined on one device only\n";
    else if (cpu[i].grad().defined()) {
      if (dev[i].grad().device() != device) out += what + ": on " + dev[i].grad().device().str() + "\n";
      out += differ(dev[i].grad().cpu(), cpu[i].grad(), atol, rtol, what);
    }
  }
  return out;
}

/// A program whose frozen plan has cast steps and no guard (a float bucketed
/// into an index, argmax as a number): the CUDA and fake-device plan tests.
inline Tensor<float> cast_program(const Tensor<float>& a) {
  const auto table = Tensor<float>::arange(8).reshape({4, 2});
  const auto idx = (a.clamp(0.0f, 0.999f) * 4.0f).to<std::int64_t>();
  const auto classes = (one_hot(idx, 4).to<float>() * Tensor<float>::arange(4)).sum({1});  // idx again, via a scatter
  return table.index_select(0, idx).sum({1}) + a.argmax(0).to<double>().to<float>() + classes;
}
/// A plan of casts and no index step (so it is captured when moved), one of
/// them reading a transposed input: the casts walk strides.
inline Tensor<float> cast_only_program(const Tensor<float>& a) {
  const auto m = a.reshape({2, 2});
  return (m.t().to<double>() * 1.5 + m.to<double>()).to<float>().sum({1});
}
/// Two inputs of cast_program that bucket differently.
inline std::array<Tensor<float>, 2> cast_program_inputs() {
  return {Tensor<float>::from({0.1f, 0.8f, 0.3f, 0.6f}), Tensor<float>::from({0.9f, 0.2f, 0.5f, 0.05f})};
}

/// The class losses on `device` against the CPU, the value and the logits'
/// gradient: class weights, each reduction, an ignore_index inside [0, C),
/// label smoothing with an ignored target, an all-ignored batch (mean: NaN,
/// PyTorch's 0/0), nll_loss itself; then an out-of-range target, which must
/// be an IndexError. Returns what differs, and what `after_device_work`
/// (called once the device's losses and gradients ran, before any result is
/// read back) says.
inline std::string class_loss_parity(Device device, const std::function<std::string()>& after_device_work = {}) {
  namespace F = nn::functional;
  using TD = Tensor<double>;
  Generator g(41);
  const TD logits = TD::randn({5, 4}, &g), w = TD::from({0.5, 1.0, 2.0, 0.25});
  struct Case {
    std::string name;
    std::vector<std::int64_t> target;
    F::ClassLossOptions<double> o;
    bool nll = false;
  };
  const std::vector<Case> cases = {
      {"weighted mean", {3, 0, 1, 1, 2}, {.weight = w}},
      {"none", {3, 0, 1, 1, 2}, {.reduction = F::Reduction::none}},
      {"sum, ignore_index 2", {0, 2, 2, 3, 1}, {.ignore_index = 2, .reduction = F::Reduction::sum}},
      {"weighted, smoothed, one ignored", {3, -100, 1, 0, 2}, {.weight = w, .label_smoothing = 0.2}},
      {"all ignored, sum", {-100, -100, -100, -100, -100}, {.reduction = F::Reduction::sum}},
      {"all ignored, mean", {-100, -100, -100, -100, -100}, {}},
      {"nll_loss, weighted, none", {1, 3, -100, 0, 0}, {.weight = w, .reduction = F::Reduction::none}, true},
  };
  auto loss = [](const Case& c, const TD& x, const IndexTensor& t, const F::ClassLossOptions<double>& o) {
    return c.nll ? F::nll_loss(x.log_softmax(1), t, o) : F::cross_entropy(x, t, o);
  };
  std::vector<TD> want, got, want_grad, got_grad;
  for (const auto& c : cases) {
    const auto t = IndexTensor::from(c.target);
    TD xc = logits.clone().requires_grad_();
    want.push_back(loss(c, xc, t, c.o));
    want.back().sum().backward();
    want_grad.push_back(xc.grad());
    auto od = c.o;
    if (od.weight.defined()) od.weight = od.weight.to(device);
    TD xd = logits.to(device).requires_grad_();
    got.push_back(loss(c, xd, t.to(device), od));
    got.back().sum().backward();
    got_grad.push_back(xd.grad());
  }
  std::string out = after_device_work ? after_device_work() : "";
  for (std::size_t k = 0; k < cases.size(); ++k) {
    if (got[k].device() != device) out += cases[k].name + ": the loss is on " + got[k].device().str() + "\n";
    out += differ(got[k].cpu(), want[k], 1e-12, 1e-10, cases[k].name);
    out += differ(got_grad[k].cpu(), want_grad[k], 1e-12, 1e-10, cases[k].name + ", gradient");
  }
  try {
    (void)F::cross_entropy(logits.to(device), IndexTensor::from({0, 4, 1, 1, 2}).to(device));
    out += "target 4 of 4 classes: no error\n";
  } catch (const IndexError& e) {
    if (std::string(e.what()).find("a target is out of bounds for 4 classes") == std::string::npos)
      out += std::string("target 4 of 4 classes: ") + e.what() + "\n";
  }
  return out;
}

/// Every table's rows.
inline std::vector<Row> every_row() {
  std::vector<Row> all;
  for (auto rows : {elementwise_rows(), reduce_linalg_rows(), views_index_rows(), conv_pool_rows()})
    all.insert(all.end(), rows.begin(), rows.end());
  return all;
}

}  // namespace frost::test::optable
