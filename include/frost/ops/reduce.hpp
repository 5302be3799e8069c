// Reductions. sum/prod/max/min and the softmaxes are kernels with their own
// backward; mean, var, std, norm and logsumexp are written with those ops,
// so their gradients (and second derivatives) follow.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common.hpp"

namespace frost {

namespace detail {

/// Sorted, de-duplicated reduction dims; empty `dims` means all of them.
inline Shape reduction_dims(const Shape& dims, int nd, const char* op) {
  bool mark[kMaxDims] = {};
  if (dims.empty()) {
    for (int i = 0; i < nd; ++i) mark[i] = true;
  } else {
    for (auto d : dims) {
      const int w = wrap_dim(d, nd, op);
      FROST_CHECK(nd == 0 || !mark[w], "frost::", op, ": dim ", w, " appears twice in ", dims.str());
      if (nd > 0) mark[w] = true;
    }
  }
  Shape out;
  for (int i = 0; i < nd; ++i)
    if (mark[i]) out.push_back(i);
  return out;
}

/// Output shape with the reduced dims kept as 1.
inline Shape keepdim_shape(const Shape& in, const Shape& red) {
  Shape s = in;
  for (auto d : red) s[static_cast<int>(d)] = 1;
  return s;
}

inline Shape squeezed_shape(const Shape& in, const Shape& red) {
  Shape s;
  int j = 0;
  for (int i = 0; i < in.ndim(); ++i) {
    if (j < red.ndim() && red[j] == i) {
      ++j;
      continue;
    }
    s.push_back(in[i]);
  }
  return s;
}

/// Runs the backend reduction over `red` (already normalised); returns the
/// result in keepdim shape.
template <class T>
Tensor<T> reduce_raw(ReduceOp op, const Tensor<T>& x, const Shape& red, const char* name) {
  const int nd = x.dim();
  Shape perm;
  bool is_red[kMaxDims] = {};
  for (auto d : red) is_red[d] = true;
  for (int i = 0; i < nd; ++i)
    if (!is_red[i]) perm.push_back(i);
  for (auto d : red) perm.push_back(d);
  if (op == ReduceOp::max || op == ReduceOp::min)
    for (auto d : red)
      FROST_CHECK(x.shape()[static_cast<int>(d)] > 0, "frost::", name, ": cannot reduce over dim ", d,
                  " of size 0 (shape ", x.shape().str(), "); the result would have no value");
  View<const T> xv = x.view_of();
  View<const T> pv(xv.data, Shape(), Shape());
  for (auto p : perm) {
    pv.shape.push_back(xv.shape[static_cast<int>(p)]);
    pv.strides.push_back(xv.strides[static_cast<int>(p)]);
  }
  auto y = Tensor<T>::empty(keepdim_shape(x.shape(), red), x.device());
  Shape kept = squeezed_shape(x.shape(), red);
  backend_for<T>(x.device()).reduce(op, pv, red.ndim(), View<T>(y.data(), kept));
  return y;
}

template <class T>
Tensor<T> finish_keepdim(const Tensor<T>& y, const Shape& in, const Shape& red, bool keepdim) {
  return keepdim ? y : y.view(squeezed_shape(in, red));
}

/// A fresh (history-free, dense) keepdim result reshaped to the squeezed
/// shape without a view node: the reduction op records on it directly.
template <class T>
Tensor<T> squeeze_fresh(const Tensor<T>& y, const Shape& in, const Shape& red, bool keepdim) {
  if (keepdim) return y;
  const Shape s = squeezed_shape(in, red);
  return make_tensor<T>(y.impl()->storage, s, contiguous_strides(s), y.storage_offset());
}

}  // namespace detail

/// y = sum over dims; dx = dy broadcast back
struct SumOp {
  static constexpr const char* name = "sum";
  Shape in, keep;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g) const { g[0] = dy.reshape(keep).expand(in); }
};

template <FloatingScalar T> Tensor<T> sum(const Tensor<T>& x, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "sum");
  const Shape red = detail::reduction_dims(dims, x.dim(), "sum");
  // Squeeze before recording, so the result's grad_fn is sum itself.
  auto y = detail::squeeze_fresh(detail::reduce_raw(ReduceOp::sum, x, red, "sum"), x.shape(), red, keepdim);
  if (detail::any_requires_grad<T>({&x}))
    detail::record(y, SumOp{x.shape(), detail::keepdim_shape(x.shape(), red)}, {&x});
  return y;
}
template <FloatingScalar T> Tensor<T> sum(const Tensor<T>& x) { return sum(x, Shape{}, false); }

/// `x` summed down to `shape` (the inverse of broadcasting), used by backward rules.
template <class T>
Tensor<T> sum_to(const Tensor<T>& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int lead = x.dim() - shape.ndim();
  Shape dims;
  for (int i = 0; i < x.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

template <FloatingScalar T> Tensor<T> mean(const Tensor<T>& x, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "mean");
  const Shape red = detail::reduction_dims(dims, x.dim(), "mean");
  std::int64_t n = 1;
  for (auto d : red) n *= x.shape()[static_cast<int>(d)];
  return sum(x, red, keepdim) * (T(1) / T(n));
}
template <FloatingScalar T> Tensor<T> mean(const Tensor<T>& x) { return mean(x, Shape{}, false); }

template <FloatingScalar T> Tensor<T> var(const Tensor<T>& x, const Shape& dims, bool unbiased = true, bool keepdim = false) {
  detail::check_defined(x, "var");
  const Shape red = detail::reduction_dims(dims, x.dim(), "var");
  std::int64_t n = 1;
  for (auto d : red) n *= x.shape()[static_cast<int>(d)];
  auto d = x - mean(x, red, true);
  // PyTorch's divisor max(0, n - correction): NaN (0/0) for one element
  // unbiased or for none, never a negative divisor.
  return sum(d * d, red, keepdim) * (T(1) / T(std::max<std::int64_t>(0, n - (unbiased ? 1 : 0))));
}

/// y = sqrt(v) for std; dv = dy / (2 y), and 0 where y = 0 (PyTorch's
/// subgradient: constant inputs have std 0, and 1/0 would make them NaN)
struct StdOp {
  static constexpr const char* name = "std";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    auto zero = detail::m01(y) == T(0);
    auto safe = where(zero, Tensor<T>::ones({}, y.device()), y);  // no 0/0 even in second derivatives
    g[0] = where(zero, Tensor<T>::zeros({}, y.device()), dy / (safe * T(2)));
  }
};
template <FloatingScalar T> Tensor<T> std(const Tensor<T>& x, const Shape& dims, bool unbiased = true, bool keepdim = false) {
  const auto v = var(x, dims, unbiased, keepdim);
  auto y = detail::unary_raw(UnaryOp::sqrt, v);
  if (detail::any_requires_grad<T>({&v})) detail::record(y, StdOp{}, {&v}, SavedTensor<T>::output(y));
  return y;
}

/// y = prod over dims; dx_i = dy * (the product of the others), which is
/// y / x_i only where no factor is 0. A slice with one zero: the zero gets
/// the product of the rest, the others (that zero) * (the rest but
/// themselves), kept as a product so second derivatives see the zero. With
/// two zeros each zero gets (the other zero) * (the rest), 0 whose
/// derivative in the other zero is the rest's product, as PyTorch's Hessian;
/// with three or more, every product of others is 0 to second order.
struct ProdOp {
  static constexpr const char* name = "prod";
  Shape keep, dims;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x) const {
    const auto is_zero = detail::m01(x) == T(0);
    const auto zeros = sum(is_zero, dims, true);
    // The product of the non-zero factors; dividing by them never divides by 0.
    const auto nonzero = where(is_zero, Tensor<T>::ones({}, x.device()), x);
    const auto p = prod(nonzero, dims, true);
    const auto others = p / nonzero;                             // the product of the other non-zero factors
    const auto the_zero = sum(x * is_zero, dims, true);          // 0, with its derivative
    const auto one_zero = is_zero * p + (T(1) - is_zero) * the_zero * others;
    const auto two_zeros = is_zero * (the_zero - x) * p;         // the other zero times the rest
    using detail::m01;
    g[0] = dy.reshape(keep) * ((m01(zeros) == T(0)) * others + (m01(zeros) == T(1)) * one_zero + (m01(zeros) == T(2)) * two_zeros);
  }
};
template <FloatingScalar T> Tensor<T> prod(const Tensor<T>& x, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "prod");
  const Shape red = detail::reduction_dims(dims, x.dim(), "prod");
  auto y = detail::squeeze_fresh(detail::reduce_raw(ReduceOp::prod, x, red, "prod"), x.shape(), red, keepdim);
  if (detail::any_requires_grad<T>({&x}))
    detail::record(y, ProdOp{detail::keepdim_shape(x.shape(), red), red}, {&x}, SavedTensor<T>::input(x));
  return y;
}

/// max/min over all elements; the gradient is shared among the tied maxima,
/// or among the NaNs when the result is NaN (it is, if any input is)
struct ExtremumOp {
  static constexpr const char* name = "max";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& y) const {
    using detail::m01;
    auto mask = (m01(x) == y) + (m01(x) != x) * (m01(y) != y);  // disjoint: a NaN equals nothing
    g[0] = mask * (dy / sum(mask));
  }
};
namespace detail {
template <class T>
Tensor<T> extremum_all(const Tensor<T>& x, ReduceOp op, const char* name) {
  check_defined(x, name);
  FROST_CHECK(x.numel() > 0, "frost::", name, ": the input has no elements (shape ", x.shape().str(),
              "); the result would have no value");
  const Shape red = reduction_dims(Shape{}, x.dim(), name);
  auto y = squeeze_fresh(reduce_raw(op, x, red, name), x.shape(), red, false);
  if constexpr (FloatingScalar<T>)
    if (any_requires_grad<T>({&x})) record(y, ExtremumOp{}, {&x}, SavedTensor<T>::input(x), SavedTensor<T>::output(y));
  return y;
}
}  // namespace detail
template <FloatingScalar T> Tensor<T> max(const Tensor<T>& x) { return detail::extremum_all(x, ReduceOp::max, "max"); }
template <FloatingScalar T> Tensor<T> min(const Tensor<T>& x) { return detail::extremum_all(x, ReduceOp::min, "min"); }

/// Values and indices along one dim; values get the gradient at the indices.
template <class T>
ValuesIndices<T> max_min_dim(const Tensor<T>& x, std::int64_t dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "max" : "min";
  detail::check_defined(x, name);
  const int d = wrap_dim(dim, x.dim(), name);
  const Shape xs = x.dim() == 0 ? Shape{1} : x.shape();
  const Tensor<T> xx = x.dim() == 0 ? x.reshape({1}) : x;
  FROST_CHECK(xs[d] > 0, "frost::", name, ": cannot reduce over dim ", d, " of size 0 (shape ", x.shape().str(),
              "); the result would have no value");
  Shape keep = xs;
  keep[d] = 1;
  auto values = Tensor<T>::empty(keep, x.device());
  auto indices = Tensor<std::int64_t>::empty(keep, x.device());
  auto moved = xx.transpose(d, -1);  // geometry only: reduce along the last dim
  backend_for<T>(x.device()).arg_reduce(is_max, moved.view_of(), values.transpose(d, -1).view_of(),
                                        indices.transpose(d, -1).view_of());
  Tensor<T> v = values;
  if (detail::any_requires_grad<T>({&x})) v = xx.gather(d, indices);  // differentiable path: gather's backward
  if (!keepdim && x.dim() > 0) {
    v = v.squeeze(d);
    indices = indices.squeeze(d);
  } else if (x.dim() == 0) {
    v = v.reshape(Shape{});
    indices = indices.reshape(Shape{});
  }
  return {v, indices};
}

template <class T>
Tensor<std::int64_t> arg_extremum(const Tensor<T>& x, std::optional<std::int64_t> dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  detail::check_defined(x, name);
  if (!dim) {
    FROST_CHECK(x.numel() > 0, "frost::", name, ": the input has no elements (shape ", x.shape().str(),
                "); the result would have no value");
    NoGradGuard ng;
    return max_min_dim(x.reshape({-1}), 0, false, is_max).indices;
  }
  // Checked here so the errors name argmax/argmin rather than max/min.
  const int d = wrap_dim(*dim, x.dim(), name);
  FROST_CHECK(x.dim() == 0 || x.shape()[d] > 0, "frost::", name, ": cannot reduce over dim ", d, " of size 0 (shape ",
              x.shape().str(), "); the result would have no value");
  NoGradGuard ng;
  return max_min_dim(x, d, keepdim, is_max).indices;
}

/// y = sqrt(sum x^2) over dims; dx = dy x / y, and 0 where y = 0 (the
/// subgradient PyTorch uses, where the composite rule would give NaN)
struct Norm2Op {
  static constexpr const char* name = "norm";
  Shape keep;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& y) const {
    auto yk = y.reshape(keep);
    auto zero = detail::m01(yk) == T(0);
    auto safe = where(zero, Tensor<T>::ones({}, yk.device()), yk);  // no 0/0 even in second derivatives
    g[0] = x * where(zero, Tensor<T>::zeros({}, yk.device()), dy.reshape(keep) / safe);
  }
};

/// y = (sum |x|^p)^(1/p) over dims for p other than 1 and 2, or max |x|
/// (min |x|) for p = inf (-inf). As PyTorch: dx = sign(x) |x|^(p-1) dy /
/// y^(p-1), 0 where y = 0 (and |x|^(p-1) taken as 0 at x = 0 for p < 1);
/// for +-inf the gradient is shared among the |x| equal to y.
struct NormPOp {
  static constexpr const char* name = "norm";
  double p;
  Shape keep, dims;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& x, const Tensor<T>& y) const {
    const auto yk = y.reshape(keep), dyk = dy.reshape(keep);
    const auto zero = Tensor<T>::zeros({}, x.device()), one = Tensor<T>::ones({}, x.device());
    if (std::isinf(p)) {
      const auto hit = detail::m01(x.abs()) == yk;
      g[0] = x.sign() * hit * (dyk / sum(hit, dims, true));
      return;
    }
    const auto at_zero = detail::m01(x) == T(0);
    const auto scaled = x.sign() * where(at_zero, zero, where(at_zero, one, x.abs()).pow(T(p - 1)));
    const auto y_zero = detail::m01(yk) == T(0);
    g[0] = scaled * where(y_zero, zero, dyk / where(y_zero, one, yk).pow(T(p - 1)));
  }
};

template <FloatingScalar T> Tensor<T> norm(const Tensor<T>& x, double p, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "norm");
  if (p == 2) {
    const Shape red = detail::reduction_dims(dims, x.dim(), "norm");
    Tensor<T> y;
    {
      NoGradGuard ng;
      y = sqrt(sum(x * x, red, keepdim));
    }
    if (detail::any_requires_grad<T>({&x}))
      detail::record(y, Norm2Op{detail::keepdim_shape(x.shape(), red)}, {&x}, SavedTensor<T>::input(x),
                     SavedTensor<T>::output(y));
    return y;
  }
  if (p == 1) return sum(abs(x), dims, keepdim);
  if (p == 0) return sum(sign(abs(x)), dims, keepdim);  // the count of non-zeros; its gradient is 0
  FROST_CHECK(p > 0 || std::isinf(p), "frost::norm: p must be positive, 0 or -inf, got ", p);
  const Shape red = detail::reduction_dims(dims, x.dim(), "norm");
  Tensor<T> y;
  {
    NoGradGuard ng;
    const auto a = abs(x);
    y = std::isinf(p) ? detail::reduce_raw(p > 0 ? ReduceOp::max : ReduceOp::min, a, red, "norm")
                      : pow(sum(pow(a, T(p)), red, true), T(1.0 / p));
    y = detail::squeeze_fresh(y, x.shape(), red, keepdim);
  }
  if (detail::any_requires_grad<T>({&x}))
    detail::record(y, NormPOp{p, detail::keepdim_shape(x.shape(), red), red}, {&x}, SavedTensor<T>::input(x),
                   SavedTensor<T>::output(y));
  return y;
}

template <FloatingScalar T> Tensor<T> logsumexp(const Tensor<T>& x, const Shape& dims, bool keepdim = false) {
  detail::check_defined(x, "logsumexp");
  const Shape red = detail::reduction_dims(dims, x.dim(), "logsumexp");
  // Shift by the (constant) max for stability; the shift cancels in the gradient.
  Tensor<T> m;
  {
    NoGradGuard ng;
    m = x.numel() > 0 ? detail::reduce_raw(ReduceOp::max, x, red, "logsumexp") : Tensor<T>::zeros(detail::keepdim_shape(x.shape(), red), x.device());
    m = where(detail::m01(m.abs()) == T(std::numeric_limits<T>::infinity()), Tensor<T>::zeros({}, x.device()), m);
  }
  auto y = log(sum(exp(x - m), red, true)) + m;
  return detail::finish_keepdim(y, x.shape(), red, keepdim);
}

/// y = softmax(x) along dim; dx = y (dy - sum(dy y))
struct SoftmaxOp {
  static constexpr const char* name = "softmax";
  int dim;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    g[0] = y * (dy - sum(dy * y, {dim}, true));
  }
};
/// y = log_softmax(x) along dim; dx = dy - exp(y) sum(dy)
struct LogSoftmaxOp {
  static constexpr const char* name = "log_softmax";
  int dim;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& y) const {
    g[0] = dy - exp(y) * sum(dy, {dim}, true);
  }
};

namespace detail {
template <class T>
Tensor<T> softmax_raw(const Tensor<T>& x, int d, bool log) {
  // The kernel works on rows along the last dim: move `dim` there.
  const Tensor<T> xt = d == x.dim() - 1 ? x.contiguous() : x.transpose(d, -1).contiguous();
  auto y = Tensor<T>::empty(xt.shape(), x.device());
  backend_for<T>(x.device()).softmax(xt.view_of(), y.view_of(), log);
  return d == x.dim() - 1 ? y : y.transpose(d, -1).contiguous();
}
}  // namespace detail

namespace detail {
template <class Op, class T>
Tensor<T> softmax_op(const Tensor<T>& x, std::int64_t dim, bool log) {
  const char* name = Op::name;
  check_defined(x, name);
  if (x.dim() == 0) return softmax_op<Op>(x.reshape({1}), 0, log).reshape(Shape{});
  const int d = wrap_dim(dim, x.dim(), name);
  Tensor<T> y;
  {
    NoGradGuard ng;
    y = softmax_raw(x, d, log);
  }
  if (any_requires_grad<T>({&x})) record(y, Op{d}, {&x}, SavedTensor<T>::output(y));
  return y;
}
}  // namespace detail

template <FloatingScalar T> Tensor<T> softmax(const Tensor<T>& x, std::int64_t dim) {
  return detail::softmax_op<SoftmaxOp>(x, dim, false);
}
template <FloatingScalar T> Tensor<T> log_softmax(const Tensor<T>& x, std::int64_t dim) {
  return detail::softmax_op<LogSoftmaxOp>(x, dim, true);
}

}  // namespace frost
