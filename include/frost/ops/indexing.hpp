// Joining and indexing: cat / stack / split / chunk, index_select, gather,
// scatter_add, one_hot. gather and scatter_add are each other's gradient, so
// everything built on them (max along a dim, index_select) has second
// derivatives.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace frost {

/// y = cat(xs, dim); dx_i = the matching slice of dy
struct CatOp {
  static constexpr const char* name = "cat";
  int dim;
  std::vector<std::int64_t> sizes;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (g.needs(i)) g[i] = dy.narrow(dim, off, sizes[i]);
      off += sizes[i];
    }
  }
};

template <class T>
Tensor<T> cat(const std::vector<Tensor<T>>& xs, std::int64_t dim = 0) {
  FROST_CHECK(!xs.empty(), "frost::cat: expects a non-empty list of tensors");
  for (auto& x : xs) detail::check_same_device(xs[0], x, "cat");
  const Shape& s0 = xs[0].shape();
  FROST_CHECK(s0.ndim() > 0, "frost::cat: zero-dimensional tensors cannot be concatenated; unsqueeze or use stack()");
  const int d = wrap_dim(dim, s0.ndim(), "cat");
  Shape out = s0;
  out[d] = 0;
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = xs[i].shape();
    bool ok = s.ndim() == s0.ndim();
    for (int k = 0; ok && k < s.ndim(); ++k) ok = k == d || s[k] == s0[k];
    FROST_CHECK(ok, "frost::cat: tensor ", i, " has shape ", s.str(), " but tensor 0 has shape ", s0.str(),
                " (all dims but dim ", d, " must match)");
    sizes.push_back(s[d]);
    out[d] += s[d];
  }
  auto y = Tensor<T>::empty(out, xs[0].device());
  std::int64_t off = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    Shape st = y.strides();
    View<T> dst(y.data() + off * st[d], xs[i].shape(), st);
    backend_for<T>(y.device()).copy(xs[i].view_of(), dst);
    off += sizes[i];
  }
  if constexpr (FloatingScalar<T>) {
    bool any = false;
    for (auto& x : xs) any = any || x.requires_grad();
    if (any && is_grad_enabled()) detail::record_n(y, CatOp{d, sizes}, xs);
  }
  return y;
}

template <class T>
Tensor<T> stack(const std::vector<Tensor<T>>& xs, std::int64_t dim = 0) {
  FROST_CHECK(!xs.empty(), "frost::stack: expects a non-empty list of tensors");
  const int nd = xs[0].dim();
  FROST_CHECK(dim >= -(nd + 1) && dim <= nd, "frost::stack: dim ", dim, " is out of range for tensors of shape ",
              xs[0].shape().str(), " (expected a dim in [", -(nd + 1), ", ", nd, "])");
  const int d = wrap_dim(dim, nd + 1, "stack");
  std::vector<Tensor<T>> u;
  u.reserve(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    FROST_CHECK(xs[i].shape() == xs[0].shape(), "frost::stack: tensor ", i, " has shape ", xs[i].shape().str(),
                " but tensor 0 has shape ", xs[0].shape().str(), " (all must match)");
    u.push_back(xs[i].unsqueeze(d));
  }
  return cat(u, d);
}

template <class T>
std::vector<Tensor<T>> Tensor<T>::split(std::int64_t size, std::int64_t dim) const {
  detail::check_defined(*this, "split");
  const int d = wrap_dim(dim, this->dim(), "split");
  FROST_CHECK(size > 0, "frost::split: split size must be positive, got ", size);
  std::vector<Tensor<T>> out;
  const std::int64_t n = shape()[d];
  for (std::int64_t off = 0; off < n; off += size) out.push_back(narrow(d, off, std::min(size, n - off)));
  if (n == 0) out.push_back(*this);
  return out;
}

template <class T>
std::vector<Tensor<T>> Tensor<T>::chunk(std::int64_t chunks, std::int64_t dim) const {
  detail::check_defined(*this, "chunk");
  FROST_CHECK(chunks > 0, "frost::chunk: number of chunks must be positive, got ", chunks);
  const int d = wrap_dim(dim, this->dim(), "chunk");
  const std::int64_t n = shape()[d];
  return split(std::max<std::int64_t>(1, (n + chunks - 1) / chunks), d);
}

namespace detail {
template <class T>
void check_gather_shapes(const Shape& x, int dim, const Shape& idx, const char* op) {
  FROST_CHECK(idx.ndim() == x.ndim(), "frost::", op, ": index has ", idx.ndim(), " dims (shape ", idx.str(),
              ") but the input has ", x.ndim(), " (shape ", x.str(), "); they must match");
  for (int d = 0; d < x.ndim(); ++d)
    FROST_CHECK(d == dim || idx[d] <= x[d], "frost::", op, ": index shape ", idx.str(), " exceeds input shape ",
                x.str(), " at dim ", d);
}
}  // namespace detail

/// y = self with src added at index along dim; dself = dy, dsrc = dy gathered
/// at index (zero where src extends past the index)
struct ScatterAddOp {
  static constexpr const char* name = "scatter_add";
  int dim;
  Shape src;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<std::int64_t>& index) const {
    if (g.needs(0)) g[0] = dy;
    if (!g.needs(1)) return;
    auto ds = dy.gather(dim, index);  // index's shape, which may be smaller than src's
    for (int k = 0; k < src.ndim(); ++k) {
      if (ds.shape()[k] == src[k]) continue;
      Shape s = ds.shape();
      s[k] = src[k];
      ds = detail::slice_backward(ds, s, k, 0, 1);
    }
    g[1] = ds;
  }
};

template <class T>
Tensor<T> Tensor<T>::scatter_add(std::int64_t dim, const Tensor<std::int64_t>& index, const Tensor<T>& src) const {
  detail::check_same_device(*this, index, "scatter_add");
  detail::check_same_device(*this, src, "scatter_add");
  const int d = wrap_dim(dim, this->dim(), "scatter_add");
  detail::check_gather_shapes<T>(shape(), d, index.shape(), "scatter_add");
  for (int k = 0; k < src.dim() && k < index.dim(); ++k)
    FROST_CHECK(index.shape()[k] <= src.shape()[k], "frost::scatter_add: index shape ", index.shape().str(),
                " exceeds src shape ", src.shape().str(), " at dim ", k);
  FROST_CHECK(src.dim() == index.dim(), "frost::scatter_add: src has shape ", src.shape().str(), " but index has ",
              index.shape().str(), " (same number of dims expected)");
  Tensor<T> y;
  {
    NoGradGuard ng;
    y = clone();
  }
  backend_for<T>(device()).scatter_add(y.view_of(), d, index.view_of(), src.view_of());
  if constexpr (FloatingScalar<T>)
    if (detail::any_requires_grad<T>({this, &src})) detail::record(y, ScatterAddOp{d, src.shape()}, {this, &src}, index);
  return y;
}

/// y = x gathered along dim at index; dx = zeros with dy scatter-added back
struct GatherOp {
  static constexpr const char* name = "gather";
  int dim;
  Shape in;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<std::int64_t>& index) const {
    g[0] = Tensor<T>::zeros(in, dy.device()).scatter_add(dim, index, dy);
  }
};

template <class T>
Tensor<T> Tensor<T>::gather(std::int64_t dim, const Tensor<std::int64_t>& index) const {
  detail::check_same_device(*this, index, "gather");
  const int d = wrap_dim(dim, this->dim(), "gather");
  detail::check_gather_shapes<T>(shape(), d, index.shape(), "gather");
  auto y = Tensor<T>::empty(index.shape(), device());
  backend_for<T>(device()).gather(view_of(), d, index.view_of(), y.view_of());
  if constexpr (FloatingScalar<T>)
    if (detail::any_requires_grad<T>({this})) detail::record(y, GatherOp{d, shape()}, {this}, index);
  return y;
}

/// y = x rows (along dim) picked by a 1-D index; dx scatter-adds dy back
struct IndexSelectOp {
  static constexpr const char* name = "index_select";
  int dim;
  Shape in;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<std::int64_t>& index) const {
    Shape s = Shape::filled(in.ndim(), 1);
    s[dim] = index.numel();
    g[0] = Tensor<T>::zeros(in, dy.device()).scatter_add(dim, index.view(s).expand(dy.shape()), dy);
  }
};

template <class T>
Tensor<T> Tensor<T>::index_select(std::int64_t dim, const Tensor<std::int64_t>& index) const {
  detail::check_same_device(*this, index, "index_select");
  FROST_CHECK(index.dim() <= 1, "frost::index_select: index must be 0-D or 1-D, got shape ", index.shape().str());
  const int d = wrap_dim(dim, this->dim(), "index_select");
  FROST_CHECK(this->dim() > 0, "frost::index_select: cannot index a 0-dim tensor");
  const auto idx = index.reshape({-1});
  Shape s = shape();
  s[d] = idx.numel();
  auto y = Tensor<T>::empty(s, device());
  backend_for<T>(device()).index_select(view_of(), d, idx.view_of(), y.view_of());
  if constexpr (FloatingScalar<T>)
    if (detail::any_requires_grad<T>({this})) detail::record(y, IndexSelectOp{d, shape()}, {this}, idx);
  return y;
}

/// One-hot encoding of class indices: shape index.shape + [num_classes]
/// (num_classes = max + 1 when -1), as int64 like PyTorch. Made where the
/// index lies, by a scatter of ones, so a given num_classes reads nothing
/// back (and a trace records steps, not a guard on the indices); inferring
/// it reads the indices to the host, as PyTorch's does.
inline Tensor<std::int64_t> one_hot(const Tensor<std::int64_t>& index, std::int64_t num_classes = -1) {
  detail::check_defined(index, "one_hot");
  if (num_classes < 0) {
    const auto v = index.to_vector();
    FROST_CHECK(!v.empty(), "frost::one_hot: cannot infer num_classes from an empty index; pass it explicitly");
    num_classes = *std::max_element(v.begin(), v.end()) + 1;
  }
  Shape s = index.shape();
  s.push_back(num_classes);
  auto y = Tensor<std::int64_t>::zeros(s, index.device());
  Shape one = index.shape();
  one.push_back(1);
  const auto at = index.reshape(one);
  const auto ones = Tensor<std::int64_t>::ones(one, index.device());
  try {  // the kernel checks every index, on the device too
    backend_for<std::int64_t>(index.device()).scatter_add(y.view_of(), s.ndim() - 1, at.view_of(), ones.view_of());
  } catch (const IndexError& e) {
    detail::fail_as<IndexError>("frost::one_hot: a class index of ", index.shape().str(), " is out of range [0, ", num_classes,
                 ") (", e.what(), ")");
  }
  return y;
}

}  // namespace frost
