// Tensor<T>: a cheap handle to a shared TensorImpl (storage + shape + strides
// + offset + autograd meta). Copying a Tensor shares it, as in LibTorch; the
// ops live in ops/ and the methods here forward to them.
#pragma once
#include <cstdint>
#include <initializer_list>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "core/promote.hpp"
#include "core/ref.hpp"
#include "core/shape.hpp"
#include "core/storage.hpp"

namespace frost {

template <class T>
struct Node;
template <class T>
class Tensor;
class AnyTensor;

/// What a Tensor handle points to. Views share `storage`.
template <class T>
struct TensorImpl : RefCounted, detail::Pooled {
  Ref<StorageImpl> storage;
  Shape shape, strides;
  std::int64_t offset = 0;
  Ref<Node<T>> grad_fn;        // set on results of recorded ops
  Ref<TensorImpl<T>> grad;     // accumulated gradient of a leaf
  bool requires_grad = false;  // leaves: set by requires_grad_(); results: true when recorded
  bool is_view = false;        // shares storage with another tensor

  TensorImpl(Ref<StorageImpl> st, const Shape& sh, const Shape& str, std::int64_t off)
      : storage(std::move(st)), shape(sh), strides(str), offset(off) {}

  T* data() const { return static_cast<T*>(storage->data) + offset; }
};

/// Values and indices of max/min along a dim.
template <class T>
struct ValuesIndices;

/// An n-dimensional array of T on a device, recorded on the autograd tape when
/// it requires grad.
/// \code
/// auto w = frost::Tensor<float>::randn({3, 2}).requires_grad_();
/// auto loss = (x.matmul(w)).relu().sum();
/// loss.backward();            // w.grad() now holds dloss/dw
/// \endcode
template <class T>
class Tensor {
  static_assert(Scalar<T>, "frost::Tensor<T>: T must be bool, std::uint8_t, std::int8_t, std::int16_t, std::int32_t, "
                           "std::int64_t, frost::half, frost::bfloat16, float or double");

 public:
  using value_type = T;
  Tensor() = default;
  explicit Tensor(Ref<TensorImpl<T>> impl) : impl_(std::move(impl)) {}

  // ---- factories ------------------------------------------------------
  /// Uninitialised tensor of `shape`.
  static Tensor empty(const Shape& shape, Device d = Device::cpu());
  static Tensor zeros(const Shape& shape, Device d = Device::cpu()) { return full(shape, T(0), d); }
  static Tensor ones(const Shape& shape, Device d = Device::cpu()) { return full(shape, T(1), d); }
  static Tensor full(const Shape& shape, T value, Device d = Device::cpu());
  /// A 0-dim tensor holding `value`.
  static Tensor scalar(T value, Device d = Device::cpu()) { return full(Shape{}, value, d); }
  /// Values from a flat vector in row-major order; `shape` defaults to 1-D.
  static Tensor from(const std::vector<T>& values, const Shape& shape);
  static Tensor from(const std::vector<T>& values) { return from(values, Shape{std::int64_t(values.size())}); }
  static Tensor from(std::initializer_list<T> values, const Shape& shape) { return from(std::vector<T>(values), shape); }
  static Tensor arange(double end) { return arange(0, end, 1); }
  static Tensor arange(double start, double end, double step = 1);
  static Tensor linspace(double start, double end, std::int64_t steps);
  static Tensor eye(std::int64_t n, std::int64_t m = -1);
  /// Uniform in [0, 1) from `gen` (default: this thread's generator).
  static Tensor rand(const Shape& shape, Generator* gen = nullptr);
  /// Standard normal.
  static Tensor randn(const Shape& shape, Generator* gen = nullptr);
  /// Integers in [low, high).
  static Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator* gen = nullptr);

  // ---- properties -----------------------------------------------------
  bool defined() const { return static_cast<bool>(impl_); }
  const Shape& shape() const { return impl_->shape; }
  const Shape& sizes() const { return impl_->shape; }
  std::int64_t size(std::int64_t dim) const { return impl_->shape[wrap_dim(dim, dim_(), "size")]; }
  const Shape& strides() const { return impl_->strides; }
  std::int64_t stride(std::int64_t dim) const { return impl_->strides[wrap_dim(dim, dim_(), "stride")]; }
  std::int64_t storage_offset() const { return impl_->offset; }
  int dim() const { return dim_(); }
  std::int64_t numel() const { return impl_->shape.numel(); }
  Device device() const { return impl_->storage->device; }
  static constexpr DType dtype() { return dtype_of<T>(); }
  bool is_contiguous() const;
  /// Pointer to the first element (host memory only for CPU tensors).
  T* data() const { return impl_->data(); }
  /// Strided view for backend kernels.
  View<T> view_of() const { return {impl_->data(), impl_->shape, impl_->strides}; }
  TensorImpl<T>* impl() const { return impl_.get(); }
  const Ref<TensorImpl<T>>& impl_ref() const { return impl_; }
  /// Version counter of the storage (bumped by in-place writes).
  std::uint32_t version() const { return impl_->storage->version; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  /// The one element as a T; frost::Error unless numel() == 1. In a jit
  /// trace this is a host read: the plan guards on the exact value.
  T item(frost::detail::SourceLocation loc = frost::detail::SourceLocation::current()) const;
  /// All elements in row-major order (in a trace: a guard on every value).
  std::vector<T> to_vector(frost::detail::SourceLocation loc = frost::detail::SourceLocation::current()) const;
  /// True when the single element is non-zero: `if (x.mean() > t)`. In a
  /// jit trace the outcome becomes a guard the plan re-checks.
  explicit operator bool() const;

  // ---- autograd -------------------------------------------------------
  bool requires_grad() const { return impl_->requires_grad; }
  /// Marks a leaf as requiring grad; returns *this for chaining.
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return !impl_->grad_fn; }
  /// The accumulated gradient (undefined until a backward reaches this leaf).
  Tensor grad() const { return impl_->grad ? Tensor(impl_->grad) : Tensor(); }
  void set_grad(const Tensor& g) { impl_->grad = g.impl_; }
  /// Name of the op that produced this tensor ("" for leaves).
  const char* grad_fn_name() const;
  /// Backpropagates from this tensor; `grad` defaults to 1 for one-element
  /// tensors. create_graph also retains the graph (PyTorch's default).
  void backward(const Tensor& grad = {}, bool retain_graph = false, bool create_graph = false) const;
  /// Same data, no history.
  Tensor detach() const;

  // ---- views ----------------------------------------------------------
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(std::int64_t start = 0, std::int64_t end = -1) const;
  Tensor unflatten(std::int64_t dim, const Shape& sizes) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  /// Transpose of a 2-D tensor.
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& o) const { return expand(o.shape()); }
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  /// Python's x[start:end:step] along `dim` (negative start/end count from the end).
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor contiguous() const;
  Tensor clone() const;

  // ---- elementwise ----------------------------------------------------
  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;  ///< halves to even, as PyTorch's
  Tensor trunc() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  /// approximate: "none" (exact, erf-based) or "tanh", as PyTorch's gelu.
  Tensor gelu(std::string_view approximate = "none") const;
  Tensor silu() const;
  Tensor pow(T exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(T lo, T hi) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;

  // ---- reductions -----------------------------------------------------
  /// Integers and bools sum (and multiply) into int64, as PyTorch.
  Tensor<sum_result_t<T>> sum() const;
  Tensor<sum_result_t<T>> sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  /// Over all elements; `unbiased` must be a bool, so that `x.var({1})` is
  /// the dims overload (a braced 1 or 0 would also convert to bool, and
  /// silently reduce everything).
  Tensor var() const;
  template <std::same_as<bool> B> Tensor var(B unbiased) const;
  Tensor var(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std() const;
  template <std::same_as<bool> B> Tensor std(B unbiased) const;
  Tensor std(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  Tensor<sum_result_t<T>> prod() const;
  Tensor<sum_result_t<T>> prod(std::int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  ValuesIndices<T> max(std::int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  ValuesIndices<T> min(std::int64_t dim, bool keepdim = false) const;
  Tensor<std::int64_t> argmax() const;
  Tensor<std::int64_t> argmax(std::int64_t dim, bool keepdim = false) const;
  Tensor<std::int64_t> argmin() const;
  Tensor<std::int64_t> argmin(std::int64_t dim, bool keepdim = false) const;
  Tensor norm(double p = 2) const;
  Tensor norm(double p, const Shape& dims, bool keepdim = false) const;
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;
  Tensor softmax(std::int64_t dim) const;
  Tensor log_softmax(std::int64_t dim) const;

  // ---- linear algebra, indexing -------------------------------------
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor bmm(const Tensor& o) const;
  Tensor index_select(std::int64_t dim, const Tensor<std::int64_t>& index) const;
  Tensor gather(std::int64_t dim, const Tensor<std::int64_t>& index) const;
  Tensor scatter_add(std::int64_t dim, const Tensor<std::int64_t>& index, const Tensor& src) const;
  Tensor masked_fill(const Tensor& mask, T value) const;
  /// value where mask is true (PyTorch's bool mask: x.masked_fill(x < 0, 0)).
  template <class B>
    requires(std::is_same_v<B, bool> && !std::is_same_v<T, bool>)
  Tensor masked_fill(const Tensor<B>& mask, T value) const;
  /// x[mask] (PyTorch's boolean indexing): mask has the shape of this tensor's leading dims.
  Tensor index(const Tensor<bool>& mask) const;
  std::vector<Tensor> split(std::int64_t split_size, std::int64_t dim = 0) const;
  std::vector<Tensor> chunk(std::int64_t chunks, std::int64_t dim = 0) const;

  // ---- in place (bump the version counter) ----------------------------
  Tensor& zero_() { return fill_(T(0)); }
  Tensor& fill_(T value);
  /// Copies `src` (broadcast to this shape) into this tensor's memory.
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& o);
  Tensor& sub_(const Tensor& o);
  Tensor& mul_(const Tensor& o);
  Tensor& div_(const Tensor& o);
  Tensor& add_(T c);
  Tensor& mul_(T c);
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator+=(T c) { return add_(c); }
  Tensor& operator-=(T c) { return add_(-c); }
  Tensor& operator*=(T c) { return mul_(c); }
  Tensor& operator/=(T c) { return mul_(T(1) / c); }

  // ---- conversion -----------------------------------------------------
  /// A copy with element type U, converted as PyTorch does (fn::cast: to
  /// integers truncated toward zero, narrower integers wrapped, 16-bit floats
  /// rounded to nearest even). Between float and double the gradient flows
  /// back, cast to this tensor's dtype; to or from other dtypes there is none.
  template <class U>
  Tensor<U> to() const;
  /// A copy with dtype d, as an AnyTensor (any_tensor.hpp).
  AnyTensor to(DType d) const;
  /// This tensor on device `d` (itself when already there); gradients flow
  /// back across the move. CUDA needs the frost::cuda CMake target.
  Tensor to(Device d) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

 private:
  int dim_() const { return impl_->shape.ndim(); }
  Ref<TensorImpl<T>> impl_;
};

template <class T>
struct ValuesIndices {
  Tensor<T> values;
  Tensor<std::int64_t> indices;
};

using IndexTensor = Tensor<std::int64_t>;

namespace detail {

/// A fresh impl over `storage` with the given geometry.
template <class T>
Tensor<T> make_tensor(Ref<StorageImpl> storage, const Shape& shape, const Shape& strides, std::int64_t offset) {
  return Tensor<T>(Ref<TensorImpl<T>>::adopt(new TensorImpl<T>(std::move(storage), shape, strides, offset)));
}

/// Total bytes for `numel` elements, checked against overflow.
template <class T>
std::size_t checked_bytes(const Shape& shape, const char* op) {
  check_extents(shape, op);
  std::int64_t n = 1;
  for (auto d : shape) {
    FROST_CHECK(d == 0 || n <= (std::int64_t{1} << 50) / d, "frost::", op, ": shape ", shape.str(),
                " is too large to allocate");
    n *= d;
  }
  return static_cast<std::size_t>(n) * sizeof(T);
}

}  // namespace detail

template <class T>
Tensor<T> Tensor<T>::empty(const Shape& shape, Device d) {
  const std::size_t bytes = detail::checked_bytes<T>(shape, "empty");
  Ref<StorageImpl> st = d.is_cpu() ? StorageImpl::cpu(bytes) : StorageImpl::on(d, bytes, backend_for<T>(d).allocator());
  return detail::make_tensor<T>(std::move(st), shape, contiguous_strides(shape), 0);
}

template <class T>
bool Tensor<T>::is_contiguous() const {
  return view_of().is_contiguous();
}

}  // namespace frost

#include "autograd/node.hpp"
#include "ops/ops.hpp"
#include "autograd/engine.hpp"
#include "autograd/cast_node.hpp"
#include "tensor_methods.hpp"
#include "amp/autocast_ops.hpp"
