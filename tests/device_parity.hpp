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
  return table.index_select(0, idx).sum({1}) + a.argmax(0).to<double>().to<float>();
}
/// Two inputs of cast_program that bucket differently.
inline std::array<Tensor<float>, 2> cast_program_inputs() {
  return {Tensor<float>::from({0.1f, 0.8f, 0.3f, 0.6f}), Tensor<float>::from({0.9f, 0.2f, 0.5f, 0.05f})};
}

/// Every table's rows.
inline std::vector<Row> every_row() {
  std::vector<Row> all;
  for (auto rows : {elementwise_rows(), reduce_linalg_rows(), views_index_rows(), conv_pool_rows()})
    all.insert(all.end(), rows.begin(), rows.end());
  return all;
}

}  // namespace frost::test::optable
