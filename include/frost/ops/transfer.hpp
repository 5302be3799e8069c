// Moving tensors between devices: Tensor::to(Device), cpu(), cuda(), and the
// host reads (item, to_vector) of tensors that live on a device.
#pragma once
#include <cstdint>
#include <vector>

namespace frost {

namespace detail {
/// Copies x's elements, row-major, into host memory at `out` (numel() values).
template <class T>
void read_to_host(const Tensor<T>& x, T* out) {
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) {
    cpu_backend<T>().copy(x.view_of(), View<T>(out, x.shape()));
    return;
  }
  const Tensor<T> c = x.contiguous();
  backend_for<T>(c.device()).copy_to_host(c.data(), out, c.numel());
}
}  // namespace detail

/// y = x on another device; dx = dy moved back.
struct ToDeviceOp {
  static constexpr const char* name = "to_device";
  Device from;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy.to(from); }
};

template <class T>
Tensor<T> Tensor<T>::to(Device d) const {
  detail::check_defined(*this, "to");
  const Device from = device();
  if (from == d) return *this;
  Tensor<T> y;
  if (!d.is_cpu() && !from.is_cpu()) {
    // Between two devices: through the host (one device per program is the
    // common case). The hops untracked: the one record below is the move.
    NoGradGuard no_grad;
    y = to(Device::cpu()).to(d);
  } else if (d.is_cpu()) {
    y = Tensor<T>::empty(shape(), d);
    detail::read_to_host(*this, y.data());
  } else {
    y = Tensor<T>::empty(shape(), d);
    const Tensor<T> c = contiguous();
    backend_for<T>(d).copy_from_host(c.data(), y.data(), c.numel());
  }
  if constexpr (FloatingScalar<T>)
    if (detail::any_requires_grad<T>({this})) detail::record(y, ToDeviceOp{from}, {this});
  return y;
}

}  // namespace frost
