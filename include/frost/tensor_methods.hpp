// Tensor<T> member functions that forward to the free ops, plus element
// access, in-place updates and backward.
#pragma once
#include <memory>
#include <optional>
#include <vector>


namespace frost {

namespace detail {
template <class T>
RawView raw_view(const Tensor<T>& x) {
  return {x.data(), x.shape(), x.strides(), dtype_of<T>()};
}
}  // namespace detail

template <class T>
T Tensor<T>::item(frost::detail::SourceLocation loc) const {
  detail::check_defined(*this, "item");
  FROST_CHECK(numel() == 1, "frost::item: a tensor with ", numel(), " elements (shape ", shape().str(),
              ") cannot be converted to a scalar; expected exactly one element");
  if (detail::tracing()) detail::trace_hooks->on_host_read(detail::raw_view(*this), detail::HostRead::item, &loc);
  if (device().is_cpu()) return *data();
  T v{};
  detail::read_to_host(*this, &v);  // waits for the device
  return v;
}

template <class T>
std::vector<T> Tensor<T>::to_vector(frost::detail::SourceLocation loc) const {
  detail::check_defined(*this, "to_vector");
  if (detail::tracing()) detail::trace_hooks->on_host_read(detail::raw_view(*this), detail::HostRead::to_vector, &loc);
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    // std::vector<bool> packs bits: read into bools, then copy.
    std::unique_ptr<bool[]> tmp(new bool[out.size()]);
    detail::read_to_host(*this, tmp.get());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = tmp[i];
  } else {
    detail::read_to_host(*this, out.data());
  }
  return out;
}

template <class T>
Tensor<T>::operator bool() const {
  detail::check_defined(*this, "operator bool");
  FROST_CHECK(numel() == 1, "frost::operator bool: a tensor with ", numel(), " elements (shape ", shape().str(),
              ") is ambiguous as a condition; reduce it to one element first (e.g. .sum() > 0)");
  if (detail::tracing()) detail::trace_hooks->on_host_read(detail::raw_view(*this), detail::HostRead::condition, nullptr);
  if (device().is_cpu()) return *data() != T(0);
  T v{};
  detail::read_to_host(*this, &v);
  return v != T(0);
}

template <class T>
Tensor<T>& Tensor<T>::requires_grad_(bool on) {
  detail::check_defined(*this, "requires_grad_");
  FROST_CHECK(FloatingScalar<T> || !on, "frost::requires_grad_: a tensor of dtype ", dtype_name<T>(), " (shape ",
              shape().str(), ") cannot require grad: only floating-point tensors (float16, bfloat16, float32, ",
              "float64) can");
  FROST_CHECK(is_leaf() || on, "frost::requires_grad_: cannot turn off requires_grad on a non-leaf tensor; use detach()");
  impl_->requires_grad = on;
  return *this;
}

template <class T>
const char* Tensor<T>::grad_fn_name() const {
  return impl_ && impl_->grad_fn ? impl_->grad_fn->name() : "";
}

template <class T>
void Tensor<T>::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  detail::check_defined(*this, "backward");
  // As in PyTorch (and autograd::grad), create_graph retains the graph: the
  // gradient's history runs through it.
  if constexpr (FloatingScalar<T>) autograd::run_backward<T>({*this}, {grad}, retain_graph || create_graph, create_graph);
  else detail::fail("frost::backward: ", dtype_name<T>(), " tensors have no gradient");
}

// ---- forwarding ---------------------------------------------------------
template <class T> Tensor<T> Tensor<T>::neg() const { return frost::neg(*this); }
template <class T> Tensor<T> Tensor<T>::abs() const { return frost::abs(*this); }
template <class T> Tensor<T> Tensor<T>::sign() const { return frost::sign(*this); }
template <class T> Tensor<T> Tensor<T>::floor() const { return frost::floor(*this); }
template <class T> Tensor<T> Tensor<T>::ceil() const { return frost::ceil(*this); }
template <class T> Tensor<T> Tensor<T>::round() const { return frost::round(*this); }
template <class T> Tensor<T> Tensor<T>::trunc() const { return frost::trunc(*this); }
template <class T> Tensor<T> Tensor<T>::exp() const { return frost::exp(*this); }
template <class T> Tensor<T> Tensor<T>::log() const { return frost::log(*this); }
template <class T> Tensor<T> Tensor<T>::sqrt() const { return frost::sqrt(*this); }
template <class T> Tensor<T> Tensor<T>::rsqrt() const { return frost::rsqrt(*this); }
template <class T> Tensor<T> Tensor<T>::sin() const { return frost::sin(*this); }
template <class T> Tensor<T> Tensor<T>::cos() const { return frost::cos(*this); }
template <class T> Tensor<T> Tensor<T>::tanh() const { return frost::tanh(*this); }
template <class T> Tensor<T> Tensor<T>::sigmoid() const { return frost::sigmoid(*this); }
template <class T> Tensor<T> Tensor<T>::relu() const { return frost::relu(*this); }
template <class T> Tensor<T> Tensor<T>::gelu(std::string_view approximate) const { return frost::gelu(*this, approximate); }
template <class T> Tensor<T> Tensor<T>::silu() const { return frost::silu(*this); }
template <class T> Tensor<T> Tensor<T>::pow(T e) const { return frost::pow(*this, e); }
template <class T> Tensor<T> Tensor<T>::pow(const Tensor& e) const { return frost::pow(*this, e); }
template <class T> Tensor<T> Tensor<T>::clamp(T lo, T hi) const { return frost::clamp(*this, lo, hi); }
template <class T> Tensor<T> Tensor<T>::maximum(const Tensor& o) const { return frost::maximum(*this, o); }
template <class T> Tensor<T> Tensor<T>::minimum(const Tensor& o) const { return frost::minimum(*this, o); }
template <class T> Tensor<sum_result_t<T>> Tensor<T>::sum() const { return frost::sum(*this); }
template <class T> Tensor<sum_result_t<T>> Tensor<T>::sum(const Shape& d, bool k) const { return frost::sum(*this, d, k); }
template <class T> Tensor<T> Tensor<T>::mean() const { return frost::mean(*this); }
template <class T> Tensor<T> Tensor<T>::mean(const Shape& d, bool k) const { return frost::mean(*this, d, k); }
template <class T> Tensor<T> Tensor<T>::var() const { return frost::var(*this, Shape{}); }
template <class T> template <std::same_as<bool> B> Tensor<T> Tensor<T>::var(B u) const { return frost::var(*this, Shape{}, u); }
template <class T> Tensor<T> Tensor<T>::var(const Shape& d, bool u, bool k) const { return frost::var(*this, d, u, k); }
template <class T> Tensor<T> Tensor<T>::std() const { return frost::std(*this, Shape{}); }
template <class T> template <std::same_as<bool> B> Tensor<T> Tensor<T>::std(B u) const { return frost::std(*this, Shape{}, u); }
template <class T> Tensor<T> Tensor<T>::std(const Shape& d, bool u, bool k) const { return frost::std(*this, d, u, k); }
template <class T> Tensor<sum_result_t<T>> Tensor<T>::prod() const { return frost::prod(*this, Shape{}); }
template <class T> Tensor<sum_result_t<T>> Tensor<T>::prod(std::int64_t d, bool k) const { return frost::prod(*this, Shape{d}, k); }
template <class T> Tensor<T> Tensor<T>::max() const { return frost::max(*this); }
template <class T> Tensor<T> Tensor<T>::min() const { return frost::min(*this); }
template <class T> ValuesIndices<T> Tensor<T>::max(std::int64_t d, bool k) const { return max_min_dim(*this, d, k, true); }
template <class T> ValuesIndices<T> Tensor<T>::min(std::int64_t d, bool k) const { return max_min_dim(*this, d, k, false); }
template <class T> IndexTensor Tensor<T>::argmax() const { return arg_extremum(*this, std::nullopt, false, true); }
template <class T> IndexTensor Tensor<T>::argmax(std::int64_t d, bool k) const { return arg_extremum(*this, std::optional<std::int64_t>(d), k, true); }
template <class T> IndexTensor Tensor<T>::argmin() const { return arg_extremum(*this, std::nullopt, false, false); }
template <class T> IndexTensor Tensor<T>::argmin(std::int64_t d, bool k) const { return arg_extremum(*this, std::optional<std::int64_t>(d), k, false); }
template <class T> Tensor<T> Tensor<T>::norm(double p) const { return frost::norm(*this, p, Shape{}); }
template <class T> Tensor<T> Tensor<T>::norm(double p, const Shape& d, bool k) const { return frost::norm(*this, p, d, k); }
template <class T> Tensor<T> Tensor<T>::logsumexp(const Shape& d, bool k) const { return frost::logsumexp(*this, d, k); }
template <class T> Tensor<T> Tensor<T>::softmax(std::int64_t d) const { return frost::softmax(*this, d); }
template <class T> Tensor<T> Tensor<T>::log_softmax(std::int64_t d) const { return frost::log_softmax(*this, d); }
template <class T> Tensor<T> Tensor<T>::matmul(const Tensor& o) const { return frost::matmul(*this, o); }
template <class T> Tensor<T> Tensor<T>::mm(const Tensor& o) const { return frost::mm(*this, o); }
template <class T> Tensor<T> Tensor<T>::bmm(const Tensor& o) const { return frost::bmm(*this, o); }
template <class T> Tensor<T> Tensor<T>::masked_fill(const Tensor& m, T v) const { return frost::masked_fill(*this, m, v); }
template <class T> Tensor<T> Tensor<T>::index(const Tensor<bool>& m) const { return frost::index(*this, m); }
template <class T>
template <class B>
  requires(std::is_same_v<B, bool> && !std::is_same_v<T, bool>)
Tensor<T> Tensor<T>::masked_fill(const Tensor<B>& m, T v) const {
  return frost::masked_fill(*this, m, v);
}

// ---- in place -------------------------------------------------------------

namespace detail {

/// Applies `out_of_place(self)` in place. Without autograd the kernel writes
/// straight into self's memory. With autograd, self takes the result's
/// history (as PyTorch rebases a tensor on its in-place op), which is only
/// sound for a non-leaf that is not a view.
template <class T, class Raw, class Recorded>
Tensor<T>& inplace(Tensor<T>& self, bool other_requires_grad, const char* op, Raw&& raw, Recorded&& recorded) {
  check_defined(self, op);
  check_no_internal_overlap(self, op);
  if (is_grad_enabled() && (self.requires_grad() || other_requires_grad)) {
    FROST_CHECK(!(self.is_leaf() && self.requires_grad()), "frost::", op,
                ": a leaf tensor that requires grad (shape ", self.shape().str(),
                ") cannot be modified in place; wrap the update in NoGradGuard or use an out-of-place op");
    FROST_CHECK(!self.impl()->is_view, "frost::", op, ": in-place update of a view (shape ", self.shape().str(),
                ") under autograd is not supported; use the out-of-place op");
    // Other tensors on this memory (views, or this tensor saved for backward)
    // would keep their old history while their values change: refuse rather
    // than give a silently wrong gradient.
    FROST_CHECK(self.impl()->storage->use_count() == 1, "frost::", op, ": in-place update under autograd of a tensor (shape ",
                self.shape().str(), ") whose memory is shared with views or with a tensor saved for backward; "
                "use the out-of-place op");
    Tensor<T> r = recorded();
    FROST_CHECK(r.shape() == self.shape(), "frost::", op, ": result shape ", r.shape().str(),
                " does not match the tensor's shape ", self.shape().str());
    backend_for<T>(self.device()).copy(r.view_of(), self.view_of());
    bump_version(self);
    self.impl()->grad_fn = r.impl()->grad_fn;
    self.impl()->requires_grad = true;
    return self;
  }
  raw();
  bump_version(self);
  return self;
}

template <class T>
Tensor<T>& inplace_binary(Tensor<T>& self, const Tensor<T>& o, BinaryOp k, const char* op) {
  check_same_device(self, o, op);
  FROST_CHECK(broadcast_shapes(self.shape(), o.shape(), op) == self.shape(), "frost::", op, ": operand of shape ",
              o.shape().str(), " does not broadcast to the tensor's shape ", self.shape().str());
  check_no_partial_overlap(self, o, op);
  return inplace(
      self, o.requires_grad(), op,
      [&] { backend_for<T>(self.device()).binary(k, self.view_of(), broadcast_view(o, self.shape()), self.view_of(), T(0)); },
      [&] {
        switch (k) {
          case BinaryOp::add: return self + o;
          case BinaryOp::sub: return self - o;
          // mul and div save self for backward: save a copy of the old value,
          // as PyTorch does, not the memory the result is written over.
          case BinaryOp::mul: return self.clone() * o;
          default: return self.clone() / o;
        }
      });
}

}  // namespace detail

template <class T> Tensor<T>& Tensor<T>::add_(const Tensor& o) { return detail::inplace_binary(*this, o, BinaryOp::add, "add_"); }
template <class T> Tensor<T>& Tensor<T>::sub_(const Tensor& o) { return detail::inplace_binary(*this, o, BinaryOp::sub, "sub_"); }
template <class T> Tensor<T>& Tensor<T>::mul_(const Tensor& o) { return detail::inplace_binary(*this, o, BinaryOp::mul, "mul_"); }
template <class T> Tensor<T>& Tensor<T>::div_(const Tensor& o) { return detail::inplace_binary(*this, o, BinaryOp::div, "div_"); }

template <class T>
Tensor<T>& Tensor<T>::add_(T c) {
  auto kernel = [&] { backend_for<T>(device()).unary(UnaryOp::add_scalar, view_of(), view_of(), c, T(0)); };
  if constexpr (FloatingScalar<T>) {
    return detail::inplace(*this, false, "add_", kernel, [&] { return *this + c; });
  } else {
    // Index tensors count (BatchNorm's num_batches_tracked, on its device
    // without a read back); like fill_, outside autograd.
    detail::check_defined(*this, "add_");
    kernel();
    detail::bump_version(*this);
    return *this;
  }
}
template <class T>
Tensor<T>& Tensor<T>::mul_(T c) {
  return detail::inplace(
      *this, false, "mul_",
      [&] { backend_for<T>(device()).unary(UnaryOp::mul_scalar, view_of(), view_of(), c, T(0)); },
      [&] { return *this * c; });
}

template <class T>
Tensor<T>& Tensor<T>::fill_(T value) {
  detail::check_defined(*this, "fill_");
  FROST_CHECK(!(is_grad_enabled() && requires_grad()), "frost::fill_: tensor of shape ", shape().str(),
              " requires grad; fill it under NoGradGuard (as nn::init does)");
  backend_for<T>(device()).fill(view_of(), value);
  detail::bump_version(*this);
  return *this;
}

template <class T>
Tensor<T>& Tensor<T>::copy_(const Tensor& src) {
  detail::check_defined(*this, "copy_");
  detail::check_defined(src, "copy_");
  FROST_CHECK(broadcast_shapes(shape(), src.shape(), "copy_") == shape(), "frost::copy_: source of shape ",
              src.shape().str(), " does not broadcast to the destination's shape ", shape().str());
  FROST_CHECK(!(is_grad_enabled() && (requires_grad() || src.requires_grad())), "frost::copy_: tensors that require grad (",
              shape().str(), " <- ", src.shape().str(), ") cannot be copied in place under autograd; use NoGradGuard");
  // Across devices (as PyTorch's dst.copy_(src)): move the source first.
  if (src.device() != device()) return copy_(src.detach().to(device()));
  detail::check_no_internal_overlap(*this, "copy_");
  detail::check_no_partial_overlap(*this, src, "copy_");
  backend_for<T>(device()).copy(detail::broadcast_view(src, shape()), view_of());
  detail::bump_version(*this);
  return *this;
}

template <class T>
template <class U>
Tensor<U> Tensor<T>::to() const {
  detail::check_defined(*this, "to");
  if constexpr (std::is_same_v<T, U>) {
    return *this;
  } else {
    // x's device converts, with no read back (traced: a plan's cast step).
    auto y = Tensor<U>::empty(shape(), device());
    backend_for<U>(device()).cast(View<const T>(view_of()), y.view_of());
    // Among the floating types the gradient flows back (as in PyTorch);
    // an integer or bool side has none.
    if constexpr (FloatingScalar<T> && FloatingScalar<U>) autograd::detail::record_cast(y, *this);
    return y;
  }
}

// frost::compiled: the member functions of the floating tensors (and the
// ops they reach) are instantiated once in src/, not in every file that
// uses them (the autograd engine reaches all four in any file that calls
// backward).
#if defined(FROST_CPU_BACKEND_EXTERN) && !defined(FROST_CPU_BACKEND_IMPLEMENTATION)
extern template class Tensor<float>;
extern template class Tensor<double>;
extern template class Tensor<half>;
extern template class Tensor<bfloat16>;
#endif

}  // namespace frost
