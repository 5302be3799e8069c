// Backend<T>: the kernel interface. The only layer that touches tensor
// memory. Functions take raw strided views and write into outputs they are
// given: they never allocate tensors and never see autograd, so the eager ops
// and frozen plans call the same kernels.
#pragma once
#include <array>
#include <cstdint>

#include "../core/device.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/functors.hpp"
#include "../core/philox.hpp"
#include "../core/storage.hpp"
#include "view.hpp"

namespace frost {

enum class ReduceOp : std::uint8_t { sum, prod, max, min };

/// Kernels for element type T on one device kind.
template <class T>
struct Backend {
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  /// Memory for storages on this device.
  virtual DeviceAllocator* allocator() = 0;

  /// y = f(x; p0, p1); x and y have the same shape (x may be broadcast by strides).
  virtual void unary(UnaryOp op, const View<const T>& x, const View<T>& y, T p0, T p1) = 0;
  /// y = f(a, b; p); all three share y's shape (inputs broadcast by 0 strides).
  virtual void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, T p) = 0;
  /// y = cond != 0 ? a : b
  virtual void where(const View<const T>& cond, const View<const T>& a, const View<const T>& b, const View<T>& y) = 0;
  /// y = x elementwise (any strides; also the broadcast copy of expand + contiguous).
  virtual void copy(const View<const T>& x, const View<T>& y) = 0;
  virtual void fill(const View<T>& y, T value) = 0;
  /// Draws element i of y from philox::sample(dist, seed, offset, i, lo, hi).
  virtual void random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset, double lo,
                      double hi) = 0;

  /// Reduces the trailing `n_reduced` dims of x into y (shape = x's leading dims).
  virtual void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) = 0;
  /// Over the last dim of x (any leading shape): the max (or min) value and its first index.
  virtual void arg_reduce(bool is_max, const View<const T>& x, const View<T>& values, const View<std::int64_t>& indices) = 0;
  /// Softmax (or log-softmax) over the last dim; x's last dim is contiguous.
  virtual void softmax(const View<const T>& x, const View<T>& y, bool log) = 0;

  /// C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] for b < batch, row-major
  /// matrices with leading dims lda/ldb/ldc and batch strides sa/sb/sc.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                    const T* a, std::int64_t lda, std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb,
                    T beta, T* c, std::int64_t ldc, std::int64_t sc, std::int64_t batch) = 0;

  /// y = x with dim `dim` replaced by x[..., index[k], ...].
  virtual void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) = 0;
  /// y[i] = x[i with dim -> index[i]]; y has index's shape.
  virtual void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) = 0;
  /// y[i with dim -> index[i]] += src[i], in place on y.
  virtual void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index, const View<const T>& src) = 0;
};

namespace detail {
template <class T>
struct BackendRegistry {
  std::array<Backend<T>*, 2> slots{};
};
template <class T>
inline BackendRegistry<T>& backend_registry() {
  static BackendRegistry<T> r;
  return r;
}
}  // namespace detail

/// Installs the backend for a device kind (the CUDA target does this at start-up).
template <class T>
void register_backend(DeviceKind kind, Backend<T>* b) {
  detail::backend_registry<T>().slots[static_cast<int>(kind)] = b;
}

template <class T>
Backend<T>& cpu_backend();

/// The backend for `d`; a clear error when that device's backend was not linked in.
template <class T>
inline Backend<T>& backend_for(Device d) {
  if (FROST_LIKELY(d.is_cpu())) return cpu_backend<T>();
  Backend<T>* b = detail::backend_registry<T>().slots[static_cast<int>(d.kind)];
  FROST_CHECK(b != nullptr, "frost: a ", dtype_name<T>(), " tensor on ", d.str(),
              " needs the CUDA backend, which this program did not link: add "
              "target_link_libraries(<your target> PRIVATE frost::cuda)");
  return *b;
}

}  // namespace frost
