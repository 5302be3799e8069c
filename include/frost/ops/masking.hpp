// Selecting by a bool mask: nonzero, masked_select and x.index(mask)
// (PyTorch's x[mask]). Their result's size is the mask's count of true
// values, so each reads the mask back to the host (as PyTorch's do, a sync
// on a GPU; traced, a plan guard on the mask's values). The selection
// itself is index_select, so float inputs keep their gradients.
#pragma once
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace frost {

namespace detail {
/// The flat positions (row-major) of the non-zero elements of x.
template <Scalar T>
std::vector<std::int64_t> true_positions(const Tensor<T>& x) {
  const auto flags = x.template to<bool>().to_vector();
  std::vector<std::int64_t> pos;
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (flags[i]) pos.push_back(static_cast<std::int64_t>(i));
  return pos;
}
inline Tensor<std::int64_t> index_tensor(const std::vector<std::int64_t>& v, Device d) {
  return Tensor<std::int64_t>::from(v, {static_cast<std::int64_t>(v.size())}).to(d);
}
}  // namespace detail

/// The indices of x's non-zero elements, [count, x.dim()] int64 in row-major
/// order (NaN counts as non-zero), as torch.nonzero.
template <Scalar T> Tensor<std::int64_t> nonzero(const Tensor<T>& x) {
  detail::check_defined(x, "nonzero");
  const auto pos = detail::true_positions(x);
  const int nd = x.dim();
  std::vector<std::int64_t> out(pos.size() * static_cast<std::size_t>(nd));
  for (std::size_t k = 0; k < pos.size(); ++k) {
    std::int64_t rest = pos[k];
    for (int d = nd - 1; d >= 0; --d) {
      out[k * static_cast<std::size_t>(nd) + static_cast<std::size_t>(d)] = rest % x.shape()[d];
      rest /= x.shape()[d];
    }
  }
  return Tensor<std::int64_t>::from(out, {static_cast<std::int64_t>(pos.size()), nd}).to(x.device());
}

/// The elements of x where mask (broadcast to x's shape) is true, as a 1-D
/// tensor in row-major order, as torch.masked_select.
template <Scalar T> Tensor<T> masked_select(const Tensor<T>& x, const Tensor<bool>& mask) {
  detail::check_same_device(x, mask, "masked_select");
  const Shape s = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  const auto pos = detail::true_positions(mask.expand(s));
  return x.expand(s).reshape({-1}).index_select(0, detail::index_tensor(pos, x.device()));
}

/// x[mask] as PyTorch indexes: mask has the shape of x's leading mask.dim()
/// dims, and the result is [count, x's other dims...].
template <Scalar T> Tensor<T> index(const Tensor<T>& x, const Tensor<bool>& mask) {
  detail::check_same_device(x, mask, "index");
  const int k = mask.dim();
  bool ok = k <= x.dim();
  for (int d = 0; ok && d < k; ++d) ok = mask.shape()[d] == x.shape()[d];
  FROST_CHECK(ok, "frost::index: a bool mask of shape ", mask.shape().str(), " does not match the leading dims of ",
              "the indexed tensor's shape ", x.shape().str(), " (x[mask] takes a mask of x's first dims' shape)");
  Shape flat{mask.numel()};
  for (int d = k; d < x.dim(); ++d) flat.push_back(x.shape()[d]);
  const auto pos = detail::true_positions(mask);
  return x.reshape(flat).index_select(0, detail::index_tensor(pos, x.device()));
}

}  // namespace frost
