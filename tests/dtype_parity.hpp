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

}  // namespace frost::test
