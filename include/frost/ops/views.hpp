// View ops: results share the input's storage (new shape, strides, offset),
// so they cost no copy. Backward maps the gradient back through the inverse
// geometry: a reshape, an inverse permutation, a sum over expanded dims, or
// a zero tensor with the slice filled in.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "common.hpp"

namespace frost {

namespace detail {

/// Same storage, new geometry; the result is a view.
template <class T>
Tensor<T> alias(const Tensor<T>& x, const Shape& shape, const Shape& strides, std::int64_t offset) {
  auto y = make_tensor<T>(x.impl()->storage, shape, strides, offset);
  y.impl()->is_view = true;
  return y;
}

/// Resolves one -1 in `shape` against `numel`; the error names the op.
inline Shape infer_shape(Shape shape, std::int64_t numel, const char* op, const Shape& from) {
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < shape.ndim(); ++i) {
    if (shape[i] == -1) {
      FROST_CHECK(infer < 0, "frost::", op, ": only one dimension can be -1, got ", shape.str());
      infer = i;
    } else {
      FROST_CHECK(shape[i] >= 0, "frost::", op, ": invalid size ", shape[i], " in shape ", shape.str());
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    FROST_CHECK(known != 0 && numel % known == 0, "frost::", op, ": shape ", shape.str(),
                " is invalid for an input of shape ", from.str(), " (", numel, " elements)");
    shape[infer] = numel / known;
  }
  FROST_CHECK(shape.numel() == numel, "frost::", op, ": shape ", shape.str(), " is invalid for an input of shape ",
              from.str(), " (", numel, " elements, expected the same count)");
  return shape;
}

/// Strides for viewing (shape, strides) as `to` without a copy, if possible
/// (each group of merged/split dims must be contiguous in memory).
inline std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& to) {
  Shape out = Shape::filled(to.ndim(), 1);
  if (shape.numel() == 0) return contiguous_strides(to);
  int vi = to.ndim() - 1;
  std::int64_t chunk = 1, base = 1;
  bool have_base = false;
  for (int ti = shape.ndim() - 1; ti >= 0; --ti) {
    if (!have_base) {
      base = strides[ti];
      have_base = true;
    }
    chunk *= shape[ti];
    if (ti == 0 || (shape[ti - 1] != 1 && strides[ti - 1] != chunk * base)) {
      std::int64_t acc = 1;
      while (vi >= 0 && (acc < chunk || to[vi] == 1)) {
        out[vi] = acc * base;
        acc *= to[vi];
        --vi;
      }
      if (acc != chunk) return std::nullopt;
      chunk = 1;
      have_base = false;
    }
  }
  while (vi >= 0) out[vi--] = 1;
  return out;
}

}  // namespace detail

/// Any view whose backward is a reshape back to the input shape.
struct ReshapeAliasOp {
  static constexpr const char* name = "view";
  Shape in;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy.reshape(in); }
};

namespace detail {
template <class T>
Tensor<T> reshape_alias(const Tensor<T>& x, const Shape& shape, const Shape& strides) {
  auto y = alias(x, shape, strides, x.storage_offset());
  if (any_requires_grad<T>({&x})) record(y, ReshapeAliasOp{x.shape()}, {&x});
  return y;
}
}  // namespace detail

template <class T>
Tensor<T> Tensor<T>::view(const Shape& s) const {
  detail::check_defined(*this, "view");
  const Shape to = detail::infer_shape(s, numel(), "view", shape());
  auto st = detail::view_strides(shape(), strides(), to);
  FROST_CHECK(st.has_value(), "frost::view: cannot view a tensor of shape ", shape().str(), " and strides ",
              strides().str(), " as ", to.str(), " without a copy; use reshape() (or contiguous() first)");
  return detail::reshape_alias(*this, to, *st);
}

template <class T>
Tensor<T> Tensor<T>::reshape(const Shape& s) const {
  detail::check_defined(*this, "reshape");
  const Shape to = detail::infer_shape(s, numel(), "reshape", shape());
  if (to == shape()) return *this;
  if (auto st = detail::view_strides(shape(), strides(), to)) return detail::reshape_alias(*this, to, *st);
  return contiguous().view(to);
}

template <class T>
Tensor<T> Tensor<T>::flatten(std::int64_t start, std::int64_t end) const {
  const int nd = dim();
  if (nd == 0) return reshape({1});
  const int s = wrap_dim(start, nd, "flatten"), e = wrap_dim(end, nd, "flatten");
  FROST_CHECK(s <= e, "frost::flatten: start dim ", start, " comes after end dim ", end, " for shape ", shape().str());
  Shape to;
  for (int i = 0; i < s; ++i) to.push_back(shape()[i]);
  std::int64_t m = 1;
  for (int i = s; i <= e; ++i) m *= shape()[i];
  to.push_back(m);
  for (int i = e + 1; i < nd; ++i) to.push_back(shape()[i]);
  return reshape(to);
}

template <class T>
Tensor<T> Tensor<T>::unflatten(std::int64_t dim, const Shape& sizes) const {
  const int d = wrap_dim(dim, this->dim(), "unflatten");
  Shape inner = detail::infer_shape(sizes, shape()[d], "unflatten", shape());
  Shape to;
  for (int i = 0; i < d; ++i) to.push_back(shape()[i]);
  for (auto v : inner) to.push_back(v);
  for (int i = d + 1; i < this->dim(); ++i) to.push_back(shape()[i]);
  return view(to);
}

template <class T>
Tensor<T> Tensor<T>::unsqueeze(std::int64_t dim) const {
  detail::check_defined(*this, "unsqueeze");
  // wrap_dim would describe the result's dim count; name the input instead.
  FROST_CHECK(dim >= -(this->dim() + 1) && dim <= this->dim(), "frost::unsqueeze: dim ", dim,
              " is out of range for a tensor of shape ", shape().str(), " (expected a dim in [", -(this->dim() + 1),
              ", ", this->dim(), "])");
  const int d = wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Shape s = shape(), st = strides();
  const std::int64_t inner_stride = d < this->dim() ? st[d] * s[d] : 1;
  s.insert(d, 1);
  st.insert(d, inner_stride);
  return detail::reshape_alias(*this, s, st);
}

template <class T>
Tensor<T> Tensor<T>::squeeze() const {
  Shape s, st;
  for (int i = 0; i < dim(); ++i)
    if (shape()[i] != 1) {
      s.push_back(shape()[i]);
      st.push_back(strides()[i]);
    }
  return detail::reshape_alias(*this, s, st);
}

template <class T>
Tensor<T> Tensor<T>::squeeze(std::int64_t dim) const {
  detail::check_defined(*this, "squeeze");
  if (this->dim() == 0) return *this;
  const int d = wrap_dim(dim, this->dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape(), st = strides();
  s.erase(d);
  st.erase(d);
  return detail::reshape_alias(*this, s, st);
}

/// y = x with dims permuted; dx = dy with the inverse permutation
struct PermuteOp {
  static constexpr const char* name = "permute";
  Shape inverse;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy.permute(inverse); }
};

template <class T>
Tensor<T> Tensor<T>::permute(const Shape& dims) const {
  detail::check_defined(*this, "permute");
  const int nd = dim();
  FROST_CHECK(dims.ndim() == nd, "frost::permute: got ", dims.ndim(), " dims ", dims.str(), " for a tensor of shape ",
              shape().str(), " (expected ", nd, ")");
  Shape s = shape(), st = strides(), inv = Shape::filled(nd, -1);
  for (int i = 0; i < nd; ++i) {
    const int d = wrap_dim(dims[i], nd, "permute");
    FROST_CHECK(inv[d] < 0, "frost::permute: dim ", d, " repeats in ", dims.str());
    inv[d] = i;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  auto y = detail::alias(*this, s, st, storage_offset());
  if (detail::any_requires_grad<T>({this})) detail::record(y, PermuteOp{inv}, {this});
  return y;
}

template <class T>
Tensor<T> Tensor<T>::transpose(std::int64_t d0, std::int64_t d1) const {
  detail::check_defined(*this, "transpose");
  const int nd = dim();
  if (nd == 0) return *this;
  Shape p = Shape::filled(nd, 0);
  for (int i = 0; i < nd; ++i) p[i] = i;
  std::swap(p[wrap_dim(d0, nd, "transpose")], p[wrap_dim(d1, nd, "transpose")]);
  return permute(p);
}

template <class T>
Tensor<T> Tensor<T>::t() const {
  FROST_CHECK(dim() <= 2, "frost::t: expects a tensor with <= 2 dims, got shape ", shape().str());
  return dim() < 2 ? *this : transpose(0, 1);
}

/// y = x broadcast to a larger shape; dx = dy summed over the expanded dims
struct ExpandOp {
  static constexpr const char* name = "expand";
  Shape in;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = sum_to(dy, in); }
};

template <class T>
Tensor<T> Tensor<T>::expand(const Shape& to_in) const {
  detail::check_defined(*this, "expand");
  FROST_CHECK(to_in.ndim() >= dim(), "frost::expand: cannot expand shape ", shape().str(), " to ", to_in.str(),
              " (fewer dims)");
  Shape to = to_in, st = Shape::filled(to.ndim(), 0);
  const int off = to.ndim() - dim();
  for (int i = 0; i < to.ndim(); ++i) {
    const int j = i - off;
    if (to[i] == -1) {
      FROST_CHECK(j >= 0, "frost::expand: -1 is not allowed for new leading dim ", i, " in ", to_in.str());
      to[i] = shape()[j];
    }
    if (j < 0) continue;
    FROST_CHECK(shape()[j] == to[i] || shape()[j] == 1, "frost::expand: cannot expand shape ", shape().str(), " to ",
                to_in.str(), " (dim ", j, " has size ", shape()[j], ", expected 1 or ", to[i], ")");
    st[i] = shape()[j] == to[i] ? strides()[j] : 0;
  }
  if (to == shape()) return *this;
  auto y = detail::alias(*this, to, st, storage_offset());
  if constexpr (FloatingScalar<T>)  // ExpandOp's backward sums: float only (int64 index tensors expand too)
    if (detail::any_requires_grad<T>({this})) detail::record(y, ExpandOp{shape()}, {this});
  return y;
}

/// Zeros of `shape` with `src` written at x.slice(dim, start, ..., step): the
/// gradient of slicing. Its own gradient slices again.
struct SliceBackwardOp {
  static constexpr const char* name = "slice_backward";
  int dim;
  std::int64_t start, step;
  template <class T> void backward(const Tensor<T>& gg, Grads<T> g, std::int64_t len) const {
    g[0] = gg.slice(dim, start, start + len * step, step);
  }
};

namespace detail {
template <class T>
Tensor<T> slice_backward(const Tensor<T>& src, const Shape& shape, int dim, std::int64_t start, std::int64_t step) {
  auto out = Tensor<T>::zeros(shape, src.device());
  const std::int64_t len = src.shape()[dim];
  Shape st = out.strides();
  st[dim] *= step;
  View<T> dst(out.data() + start * out.strides()[dim], src.shape(), st);
  backend_for<T>(src.device()).copy(src.view_of(), dst);
  if (any_requires_grad<T>({&src})) record(out, SliceBackwardOp{dim, start, step}, {&src}, len);
  return out;
}
}  // namespace detail

/// y = x[start:end:step] along dim; dx = zeros with dy placed back
struct SliceOp {
  static constexpr const char* name = "slice";
  Shape in;
  int dim;
  std::int64_t start, step;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const {
    g[0] = detail::slice_backward(dy, in, dim, start, step);
  }
};

template <class T>
Tensor<T> Tensor<T>::slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) const {
  detail::check_defined(*this, "slice");
  const int d = wrap_dim(dim, this->dim(), "slice");
  FROST_CHECK(this->dim() > 0, "frost::slice: cannot slice a 0-dim tensor");
  FROST_CHECK(step > 0, "frost::slice: step must be positive, got ", step);
  const std::int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  auto y = detail::alias(*this, s, st, storage_offset() + start * strides()[d]);
  if (detail::any_requires_grad<T>({this})) detail::record(y, SliceOp{shape(), d, start, step}, {this});
  return y;
}

template <class T>
Tensor<T> Tensor<T>::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  detail::check_defined(*this, "narrow");
  const int d = wrap_dim(dim, this->dim(), "narrow");
  const std::int64_t n = shape()[d];
  // As PyTorch: a start outside [-n, n] is an IndexError, a length that runs
  // past the end a plain Error (compared as n - start: no overflow).
  if (FROST_UNLIKELY(start < -n || start > n))
    detail::fail_as<IndexError>("frost::narrow: start ", start, " is out of range for dim ", d, " of size ", n,
                                " (expected -", n, " <= start <= ", n, "; shape ", shape().str(), ")");
  if (start < 0) start += n;
  FROST_CHECK(length >= 0 && length <= n - start, "frost::narrow: start ", start, " + length ", length,
              " exceeds dim ", d, " of size ", n, " (shape ", shape().str(), ")");
  return slice(d, start, start + length);
}

template <class T>
Tensor<T> Tensor<T>::select(std::int64_t dim, std::int64_t index) const {
  detail::check_defined(*this, "select");
  const int d = wrap_dim(dim, this->dim(), "select");
  const std::int64_t n = shape()[d];
  if (FROST_UNLIKELY(index < -n || index >= n))
    detail::fail_as<IndexError>("frost::select: index ", index, " is out of range for dim ", d, " of size ", n, " (shape ",
                                shape().str(), ")");
  return narrow(d, index < 0 ? index + n : index, 1).squeeze(d);
}

/// y = x copied into fresh memory; dx = dy
struct CopyOp {
  static constexpr const char* name = "clone";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy; }
};

template <class T>
Tensor<T> Tensor<T>::clone() const {
  detail::check_defined(*this, "clone");
  auto y = Tensor<T>::empty(shape(), device());
  backend_for<T>(device()).copy(view_of(), y.view_of());
  if constexpr (FloatingScalar<T>)
    if (detail::any_requires_grad<T>({this})) detail::record(y, CopyOp{}, {this});
  return y;
}

template <class T>
Tensor<T> Tensor<T>::contiguous() const {
  detail::check_defined(*this, "contiguous");
  return is_contiguous() ? *this : clone();
}

template <class T>
Tensor<T> Tensor<T>::detach() const {
  detail::check_defined(*this, "detach");
  return detail::make_tensor<T>(impl_->storage, shape(), strides(), storage_offset());
}

}  // namespace frost
