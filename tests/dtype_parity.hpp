// Every dtype on a device against the CPU, bit for bit: factories, copies to
// and from the host, and the cast kernel between every pair of dtypes with a
// strided input. Shared by the fake-device suite and the CUDA suite.
#pragma once
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <vector>

#include <frost/frost.hpp>

namespace frost::test {

template <class T>
std::vector<std::uint8_t> host_bytes(const Tensor<T>& t) {
  const Tensor<T> c = t.cpu().contiguous();
  std::vector<std::uint8_t> b(static_cast<std::size_t>(c.numel()) * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), static_cast<const void*>(c.data()), b.size());
  return b;
}

/// `host_reads` counts the device's reads back to the host (the fake
/// device's counter; a real one passes none): a cast must not read back.
inline void every_dtype_on(Device dev, const std::function<int()>& host_reads = [] { return 0; }) {
  const auto values = Tensor<double>::from({0, 1, -1.7, 2.5, 300.75, -200, 65520, 1e-6, -0.0, 127.5, 40000, 3}, {3, 4});
  for (int s = 0; s < kDTypeCount; ++s) {
    values.to(static_cast<DType>(s)).visit([&](const auto& x) {
      using S = typename std::decay_t<decltype(x)>::value_type;
      CAPTURE(dtype_name<S>());
      const auto on_dev = x.to(dev);
      CHECK(on_dev.device() == dev);
      CHECK(host_bytes(on_dev) == host_bytes(x));
      CHECK(host_bytes(zeros_like(on_dev)) == host_bytes(zeros_like(x)));
      CHECK(host_bytes(Tensor<S>::full({5}, S(1), dev)) == host_bytes(Tensor<S>::full({5}, S(1))));
      const auto strided = on_dev.t();  // the cast kernel reads any strides
      for (int d = 0; d < kDTypeCount; ++d) {
        visit_dtype(static_cast<DType>(d), [&](auto tag) {
          using D = decltype(tag);
          CAPTURE(dtype_name<D>());
          const int reads = host_reads();
          const auto y = strided.template to<D>();
          CHECK(host_reads() == reads);
          CHECK(y.device() == dev);
          CHECK(host_bytes(y) == host_bytes(x.t().template to<D>()));
        });
      }
    });
  }
}

/// Integer and bool math on a device against the CPU, bit for bit: the
/// elementwise kernels (strided and broadcast operands), division and
/// remainders, shifts, comparisons into bool, where / masked_fill, any /
/// all and the reductions, for every integer dtype. Only the zero-divisor
/// checks read back (one element each).
template <class T>
void int_math_on(Device dev) {
  CAPTURE(dtype_name<T>());
  const auto a = Tensor<std::int64_t>::from({7, -3, 100, 0, -128, 127, 55, -1, 13, 2, -77, 90}, {3, 4}).to<T>();
  const auto b = Tensor<std::int64_t>::from({2, 5, -3, 7}, {4}).to<T>();  // broadcast along rows
  const auto s = Tensor<std::int64_t>::from({0, 1, 3, 9}, {4}).to<T>();
  const auto at = a.t().contiguous().t();  // strided
  const auto da = a.to(dev), db = b.to(dev), ds = s.to(dev), dat = at.to(dev);
  auto same = [&](const auto& on_dev, const auto& on_cpu, const char* what) {
    CAPTURE(what);
    CHECK(on_dev.device() == dev);
    CHECK(host_bytes(on_dev) == host_bytes(on_cpu));
  };
  same(da + db, a + b, "add");
  same(dat - db, at - b, "sub");
  same(da * dat, a * at, "mul");
  same(div(da, db, "floor"), div(a, b, "floor"), "floor");
  same(div(dat, db, "trunc"), div(at, b, "trunc"), "trunc");
  same(remainder(da, db), remainder(a, b), "remainder");
  same(fmod(da, db), fmod(a, b), "fmod");
  same(da / db, a / b, "true division");
  same(da & db, a & b, "and");
  same(da | dat, a | at, "or");
  same(da ^ db, a ^ b, "xor");
  same(~da, ~a, "not");
  same(da << ds, a << s, "shift left");
  same(da >> ds, a >> s, "shift right");
  same(pow(da, ds), pow(a, s), "pow");
  same(-da, -a, "neg");
  same(dat.abs(), at.abs(), "abs");
  same(da.sign(), a.sign(), "sign");
  same(da.clamp(T(0), T(60)), a.clamp(T(0), T(60)), "clamp");
  same(da * 3 + 1, a * 3 + 1, "scalar ops");
  same(da < db, a < b, "lt");
  same(da == 0, a == 0, "eq scalar");
  same(maximum(da, db), maximum(a, b), "maximum");
  same(where(da > db, da, dat), where(a > b, a, at), "where");
  same(masked_fill(da, da < 0, T(9)), masked_fill(a, a < 0, T(9)), "masked_fill");
  same(any(da > 50, {1}), any(a > 50, {1}), "any");
  same(all(da != 0, {0}), all(a != 0, {0}), "all");
  same(da.sum(), a.sum(), "sum");
  same(dat.sum({0}), at.sum({0}), "sum over dim 0");
  same(da.prod(1), a.prod(1), "prod");
  same(da.max(), a.max(), "max");
  same(dat.min(), at.min(), "min");
  same(da.argmax(1), a.argmax(1), "argmax");
  const auto zero = Tensor<T>::zeros({4}, dev);
  CHECK_THROWS_AS((void)remainder(da, zero), Error);
}
inline void int_math_on_every_dtype(Device dev) {
  int_math_on<std::uint8_t>(dev);
  int_math_on<std::int8_t>(dev);
  int_math_on<std::int16_t>(dev);
  int_math_on<std::int32_t>(dev);
  int_math_on<std::int64_t>(dev);
  const auto m = Tensor<std::int64_t>::from({1, 0, 1, 1}).to<bool>(), n = Tensor<std::int64_t>::from({0, 0, 1, 1}).to<bool>();
  const auto dm = m.to(dev), dn = n.to(dev);
  CHECK(host_bytes(dm & dn) == host_bytes(m & n));
  CHECK(host_bytes(dm ^ dn) == host_bytes(m ^ n));
  CHECK(host_bytes(~dm) == host_bytes(~m));
  CHECK(host_bytes(dm.sum()) == host_bytes(m.sum()));
  CHECK(host_bytes(logical_or(dm, dn.to<float>())) == host_bytes(logical_or(m, n.to<float>())));
}

}  // namespace frost::test
