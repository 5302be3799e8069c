// Plans holding values of every dtype: a traced forward whose intermediates
// and constants are bool, uint8, int8, int16, int32 and int64 (casts,
// comparisons into bool, wrapping integer math, integer remainders, bool
// sums into int64, promotion between integer dtypes, where with a bool
// condition) frozen and run against eager, bit for bit. Shared by the CPU
// suite (test_jit_dtypes.cpp) and the fake device's, which runs the plan on
// the device.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <frost/frost.hpp>

namespace frost::test {

/// x [2, 4] of small floats -> float [2, 4], through every integer dtype and bool.
inline Tensor<float> every_dtype_forward(const Tensor<float>& x) {
  const auto i = x.to<std::int32_t>();  // truncation toward zero
  const auto big = i > 1;               // int32 -> bool
  const auto w = where(big, x, x * 2.0f);
  const auto u = (x.abs().to<std::uint8_t>() + std::uint8_t{250}).to<float>();  // wraps past 255
  const auto r = remainder(i.to<std::int64_t>(), 3).to<float>();               // floor remainder, sign of 3
  // A constant made in the trace (an int16 snapshot), promoted against int8.
  const auto k = Tensor<std::int16_t>::from({1, -2, 300, -4}, {4}).to(x.device());
  const auto p = (k * x.to<std::int8_t>()).to<float>();  // int16 x int8 -> int16
  const auto n = sum(big).to<float>();                   // bool -> int64 count
  const auto any_neg = any(x < 0.0f).to<float>();         // float comparison, any -> bool
  return w + u + r + p + n + any_neg;
}

/// every_dtype_forward traced at `x`, frozen, and run on `dev` for two other
/// inputs, against eager on the CPU, bit for bit.
inline void plan_every_dtype_on(Device dev) {
  const auto x = Tensor<float>::from({0.5f, -1.5f, 2.25f, 3.0f, -4.75f, 1.0f, 7.5f, -0.25f}, {2, 4});
  auto f = [](const Tensor<float>& t) { return every_dtype_forward(t); };
  auto plan = jit::freeze(f, x);
  plan.to(dev);
  for (const auto& in : {x, x * -1.0f, x + 0.5f}) {
    const auto want = every_dtype_forward(in);
    const auto got = plan.run(in.to(dev));
    CHECK(got.device() == dev);
    CHECK(got.cpu().to_vector() == want.to_vector());
  }
}

/// A tagger over int64 token ids, a float bias and a bool mask of kept
/// positions: a plan with inputs of three dtypes.
struct Tagger : nn::Module {
  nn::Embedding emb = register_module("emb", nn::Embedding(10, 4));
  nn::Linear proj = register_module("proj", nn::Linear(4, 3));
  Tensor<float> forward(const Tensor<std::int64_t>& tokens, const Tensor<float>& bias, const Tensor<bool>& keep) {
    const auto h = proj(emb(tokens)) + bias;  // [L, 3]
    return where(keep.unsqueeze(1), h, Tensor<float>::zeros({}, h.device()));
  }
};

/// The Tagger frozen at one input, moved to `dev` and run on others (CPU
/// inputs copied there, and inputs already on `dev`), against eager.
inline void plan_mixed_inputs_on(Device dev) {
  manual_seed(11);
  auto m = nn::make<Tagger>();
  m->eval();
  const auto tokens = Tensor<std::int64_t>::from({1, 4, 9, 0, 2});
  const auto bias = Tensor<float>::randn({5, 3});
  const auto keep = Tensor<bool>::from({true, true, false, true, false});
  auto plan = jit::freeze(m, tokens, bias, keep);
  static_assert(std::is_same_v<decltype(plan), jit::Plan<float>>);
  plan.to(dev);
  const auto t2 = Tensor<std::int64_t>::from({7, 7, 3, 5, 8});
  const auto k2 = Tensor<bool>::from({false, true, true, true, true});
  const auto want = [&] {
    InferenceMode im;
    return m->forward(t2, bias, k2);
  }();
  for (bool on_dev : {false, true}) {
    CAPTURE(on_dev);
    const auto y = on_dev ? plan.run(t2.to(dev), bias.to(dev), k2.to(dev)) : plan.run(t2, bias, k2);
    CHECK(y.device() == dev);
    CHECK((y.cpu() - want).abs().max().item() <= 1e-6f);
  }
}

}  // namespace frost::test
