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

}  // namespace frost::test
