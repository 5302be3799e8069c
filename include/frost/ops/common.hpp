// Helpers every op uses: argument checks, broadcast views, raw kernel calls
// (allocate the output, call the backend) before autograd is involved.
#pragma once
#include <cstdint>

namespace frost::detail {

template <class T>
inline void check_defined(const Tensor<T>& x, const char* op) {
  FROST_CHECK(x.defined(), "frost::", op, ": got an undefined tensor");
}

template <class T, class U>
inline void check_same_device(const Tensor<T>& a, const Tensor<U>& b, const char* op) {
  check_defined(a, op);
  check_defined(b, op);
  FROST_CHECK(a.device() == b.device(), "frost::", op, ": tensors are on different devices (", a.device().str(),
              " and ", b.device().str(), "); move one with .to(device)");
}

/// `x` seen with shape `s` (x broadcastable to s): stride 0 on broadcast dims.
template <class T>
inline View<const T> broadcast_view(const Tensor<T>& x, const Shape& s) {
  const Shape& xs = x.shape();
  if (xs == s) return x.view_of();
  Shape st = Shape::filled(s.ndim(), 0);
  const int off = s.ndim() - xs.ndim();
  for (int i = 0; i < xs.ndim(); ++i) st[off + i] = xs[i] == 1 ? 0 : x.strides()[i];
  return {x.data(), s, st};
}

template <class T>
inline Tensor<T> unary_raw(UnaryOp op, const Tensor<T>& x, T p0 = T(0), T p1 = T(0)) {
  check_defined(x, op_name(op));
  auto y = Tensor<T>::empty(x.shape(), x.device());
  backend_for<T>(x.device()).unary(op, x.view_of(), y.view_of(), p0, p1);
  return y;
}

template <class T>
inline Tensor<T> binary_raw(BinaryOp op, const Tensor<T>& a, const Tensor<T>& b, T p = T(0)) {
  check_same_device(a, b, op_name(op));
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op_name(op));
  auto y = Tensor<T>::empty(s, a.device());
  backend_for<T>(a.device()).binary(op, broadcast_view(a, s), broadcast_view(b, s), y.view_of(), p);
  return y;
}

/// Marks an in-place write: autograd's saved-tensor check sees the new version.
template <class T>
inline void bump_version(const Tensor<T>& x) {
  if (!is_inference_mode()) ++x.impl()->storage->version;
}

}  // namespace frost::detail
