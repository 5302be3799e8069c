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
inline Tensor<T> unary_raw(UnaryOp op, const Tensor<T>& x, opmath_t<T> p0 = 0, opmath_t<T> p1 = 0) {
  check_defined(x, op_name(op));
  auto y = Tensor<T>::empty(x.shape(), x.device());
  backend_for<T>(x.device()).unary(op, x.view_of(), y.view_of(), p0, p1);
  return y;
}

template <class T>
inline Tensor<T> binary_raw(BinaryOp op, const Tensor<T>& a, const Tensor<T>& b, opmath_t<T> p = 0) {
  check_same_device(a, b, op_name(op));
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op_name(op));
  auto y = Tensor<T>::empty(s, a.device());
  backend_for<T>(a.device()).binary(op, broadcast_view(a, s), broadcast_view(b, s), y.view_of(), p);
  return y;
}

/// m01(x) > c, m01(a) == b, ...: a comparison as 0 / 1 in x's float type,
/// the kernel's own output with no bool round trip. What backward formulas
/// multiply by and select with; the operators < > == ... give Tensor<bool>.
template <class T>
struct Mask01 {
  const Tensor<T>& x;  // a full-expression's operand: m01(x.abs()) == y is fine
};
template <class T>
Mask01<T> m01(const Tensor<T>& x) {
  return {x};
}
#define FROST_MASK01(OPER, NAME)                                                               \
  template <class T>                                                                           \
  Tensor<T> operator OPER(Mask01<T> m, std::type_identity_t<opmath_t<T>> c) {                            \
    return unary_raw(UnaryOp::NAME##_scalar, m.x, c);                                          \
  }                                                                                            \
  template <class T>                                                                           \
  Tensor<T> operator OPER(Mask01<T> m, const Tensor<T>& b) {                                   \
    return binary_raw(BinaryOp::NAME, m.x, b);                                                 \
  }
FROST_MASK01(==, eq)
FROST_MASK01(!=, ne)
FROST_MASK01(<, lt)
FROST_MASK01(<=, le)
FROST_MASK01(>, gt)
FROST_MASK01(>=, ge)
#undef FROST_MASK01

/// An in-place write into `t` must not reach one memory location from two
/// elements (an expanded tensor: a dim of size > 1 with stride 0), or an
/// element would be updated twice. PyTorch's internal-overlap rule.
template <class T>
inline void check_no_internal_overlap(const Tensor<T>& t, const char* op) {
  for (int d = 0; d < t.dim(); ++d)
    FROST_CHECK(t.shape()[d] <= 1 || t.strides()[d] != 0, "frost::", op, ": unsupported operation: more than one element ",
                "of the written-to tensor (shape ", t.shape().str(), ", strides ", t.strides().str(),
                ") refers to a single memory location; clone() it before writing in place");
}

/// An in-place write into `dst` that reads `src` must not read elements it
/// has already overwritten: on the same memory, src must be dst's very view
/// or lie apart from it. Decided, as in PyTorch, for dense (contiguous) views;
/// other layouts are not checked.
template <class T>
inline void check_no_partial_overlap(const Tensor<T>& dst, const Tensor<T>& src, const char* op) {
  if (dst.numel() == 0 || src.numel() == 0 || dst.impl()->storage.get() != src.impl()->storage.get()) return;
  if (!dst.is_contiguous() || !src.is_contiguous()) return;
  const std::int64_t a = dst.storage_offset(), b = src.storage_offset();
  if (a == b && dst.numel() == src.numel()) return;  // the same elements: each is read before it is written
  FROST_CHECK(a + dst.numel() <= b || b + src.numel() <= a, "frost::", op, ": unsupported operation: some elements of ",
              "the input tensor (shape ", src.shape().str(), ") and the written-to tensor (shape ", dst.shape().str(),
              ") refer to a single memory location; clone() the input first");
}

/// Marks an in-place write: autograd's saved-tensor check sees the new version.
template <class T>
inline void bump_version(const Tensor<T>& x) {
  if (!is_inference_mode()) ++x.impl()->storage->version;
}

}  // namespace frost::detail
