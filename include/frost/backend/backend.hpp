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
#include "../core/optim_step.hpp"
#include "../core/philox.hpp"
#include "../core/storage.hpp"
#include "../core/trace_hooks.hpp"
#include "view.hpp"

namespace frost {

enum class ReduceOp : std::uint8_t { sum, prod, max, min };

/// Geometry of a 2-D convolution over dense NCHW tensors. Every extent is
/// explicit, so one struct serves the forward, both gradients and
/// conv_transpose2d (whose output is conv2d_grad_input's dx), and maps onto
/// cuDNN's tensor, filter and convolution descriptors.
struct Conv2dParams {
  std::int64_t batch = 0, in_channels = 0, in_h = 0, in_w = 0;  // x: [batch, in_channels, in_h, in_w]
  std::int64_t out_channels = 0, kernel_h = 1, kernel_w = 1;    // w: [out_channels, in_channels / groups, kernel_h, kernel_w]
  std::int64_t out_h = 0, out_w = 0;                            // y: [batch, out_channels, out_h, out_w]
  std::int64_t stride_h = 1, stride_w = 1;
  /// Zeros before row 0 and column 0. The far side holds as many zeros as
  /// out_h / out_w reach for: more than pad_h for PyTorch's padding="same"
  /// with an even kernel (cuDNN, symmetric only, pads the input in a workspace
  /// for that case).
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;
};

/// Geometry of 2-D max or average pooling over dense NCHW tensors; y is
/// [batch, channels, out_h, out_w].
struct Pool2dParams {
  std::int64_t batch = 0, channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;  // max pooling only
  bool ceil_mode = false;                       // how out_h / out_w were chosen; kernels take them as given
  bool count_include_pad = true;                // average pooling: padding zeros count in the divisor
  std::int64_t divisor_override = 0;            // average pooling: > 0 replaces the divisor
};

/// One instruction of a fused elementwise chain (frozen plans build these):
/// registers 0..7 are the chain's inputs, 8..15 its intermediate results.
struct FusedInstr {
  bool binary = false;
  std::uint8_t op = 0;  // UnaryOp or BinaryOp
  std::uint8_t a = 0, b = 0, dst = 0;
  double p0 = 0, p1 = 0;
};
/// The longest chain a fused kernel runs.
inline constexpr int kMaxFusedInstrs = 16;

/// Kernels for element type T on one device kind.
template <class T>
struct Backend {
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  /// Memory for storages on this device.
  virtual DeviceAllocator* allocator() = 0;

  /// y = f(x; p0, p1); x and y have the same shape (x may be broadcast by strides).
  virtual void unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) = 0;
  /// y = f(a, b; p); all three share y's shape (inputs broadcast by 0 strides).
  virtual void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) = 0;
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

  /// y [m, n] (row stride ldy) = x [m, k] (row stride ldx) W^T with the
  /// weights W [n, k] in a form of the backend's own, made once for
  /// products of m rows (a frozen plan's constant linear weights; the CPU's:
  /// panels of W^T, for matrix-vector products up to 8 rows, a GEMM above):
  /// that form's element count (0: none), making it, and the product.
  /// gemm_prepared_part says whether that form also takes parts of the
  /// product: y[:, n0:n1] = x[:, k0:k1] W[n0:n1, k0:k1]^T (y and x still at
  /// column 0), with n0 a multiple of the value returned (0: whole only).
  /// gemm_prepared's `rows` is the m the form was made for; m may be fewer
  /// (a linear chain's last block of rows).
  virtual std::int64_t gemm_prepared_size(std::int64_t m, std::int64_t n, std::int64_t k) {
    (void)m, (void)n, (void)k;
    return 0;
  }
  virtual void gemm_prepare(std::int64_t m, const T* w, std::int64_t n, std::int64_t k, T* prepared) {
    (void)m, (void)w, (void)n, (void)k, (void)prepared;
    unsupported("gemm_prepare");
  }
  virtual std::int64_t gemm_prepared_part(std::int64_t m) {
    (void)m;
    return 0;
  }
  virtual void gemm_prepared(std::int64_t m, std::int64_t rows, std::int64_t n, std::int64_t k, const T* x,
                             std::int64_t ldx, const T* prepared, T* y, std::int64_t ldy, std::int64_t n0,
                             std::int64_t n1, std::int64_t k0, std::int64_t k1) {
    (void)m, (void)rows, (void)n, (void)k, (void)x, (void)ldx, (void)prepared, (void)y, (void)ldy, (void)n0, (void)n1, (void)k0, (void)k1;
    unsupported("gemm_prepared");
  }

  /// y = x with dim `dim` replaced by x[..., index[k], ...].
  virtual void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) = 0;
  /// y[i] = x[i with dim -> index[i]]; y has index's shape.
  virtual void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) = 0;
  /// y[i with dim -> index[i]] += src[i], in place on y.
  virtual void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index, const View<const T>& src) = 0;

  // Convolution and pooling on dense NCHW views (the ops make inputs
  // contiguous). Each maps onto one cuDNN call: ConvolutionBiasActivationForward,
  // ConvolutionBackwardData, ConvolutionBackwardFilter, and the pooling
  // kernels. A backend that lacks one reports it instead of computing.

  /// y = act(conv2d(x, w) + bias). w is [out_channels, in_channels / groups,
  /// kh, kw]; bias (out_channels values) may be null; act is the fused
  /// epilogue: UnaryOp::copy for none, UnaryOp::relu (the CPU takes any
  /// parameterless UnaryOp).
  virtual void conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias,
                      const View<T>& y, UnaryOp act) {
    (void)p, (void)x, (void)w, (void)bias, (void)y, (void)act;
    unsupported("conv2d");
  }
  /// Filters in a form of the backend's own, made once for many calls (a
  /// frozen plan's constant filters; the CPU's: Winograd-transformed): its
  /// shape for calls like p (empty: conv2d reads the filters as they are),
  /// making it, and conv2d with it (a view whose dim-0 stride may span a
  /// larger bank's filters: a block of them).
  virtual Shape conv2d_prepared_shape(const Conv2dParams& p) {
    (void)p;
    return {};
  }
  virtual void conv2d_prepare(const Conv2dParams& p, const View<const T>& w, const View<T>& prepared) {
    (void)p, (void)w, (void)prepared;
    unsupported("conv2d_prepare");
  }
  virtual void conv2d_prepared(const Conv2dParams& p, const View<const T>& x, const View<const T>& prepared,
                               const T* bias, const View<T>& y, UnaryOp act) {
    (void)p, (void)x, (void)prepared, (void)bias, (void)y, (void)act;
    unsupported("conv2d_prepared");
  }
  /// conv2d_prepared, then max pooling q of its output, in one pass where
  /// the backend can for these shapes: true when it ran, false (having done
  /// nothing) when the caller should run the two.
  virtual bool conv2d_prepared_max_pool(const Conv2dParams& p, const Pool2dParams& q, const View<const T>& x,
                                        const View<const T>& prepared, const T* bias, const View<T>& y, UnaryOp act) {
    (void)p, (void)q, (void)x, (void)prepared, (void)bias, (void)y, (void)act;
    return false;
  }
  /// Whether conv2d_max_pool (positions 0) or conv2d_prepared_max_pool (a
  /// prepared bank of that many positions) pools these shapes in one pass:
  /// frozen plans then keep no scratch for the conv output.
  virtual bool conv2d_pools_in_pass(const Conv2dParams& p, const Pool2dParams& q, std::int64_t positions) {
    (void)p, (void)q, (void)positions;
    return false;
  }
  /// conv2d, then max pooling q of its output, in one pass where the backend
  /// can for these shapes: true when it ran, false (having done nothing)
  /// when the caller should run the two.
  virtual bool conv2d_max_pool(const Conv2dParams& p, const Pool2dParams& q, const View<const T>& x, const View<const T>& w,
                               const T* bias, const View<T>& y, UnaryOp act) {
    (void)p, (void)q, (void)x, (void)w, (void)bias, (void)y, (void)act;
    return false;
  }
  /// dx = the gradient of conv2d w.r.t. x given dy (x's extents from p);
  /// also conv_transpose2d's forward with dy as its input. Overwrites dx.
  virtual void conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                                 const View<T>& dx) {
    (void)p, (void)dy, (void)w, (void)dx;
    unsupported("conv2d_grad_input");
  }
  /// dw = the gradient of conv2d w.r.t. w given x and dy. Overwrites dw.
  virtual void conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                                  const View<T>& dw) {
    (void)p, (void)x, (void)dy, (void)dw;
    unsupported("conv2d_grad_weight");
  }
  /// y = the max over each window (padding never wins), indices = its flat
  /// position in the input plane (ih * in_w + iw), as PyTorch; NaN propagates.
  /// indices.data may be null when only the values are wanted.
  virtual void max_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y,
                          const View<std::int64_t>& indices) {
    (void)p, (void)x, (void)y, (void)indices;
    unsupported("max_pool2d");
  }
  /// dx = zeros with dy added at indices (plane by plane). Overwrites dx.
  virtual void max_pool2d_backward(const Pool2dParams& p, const View<const T>& dy,
                                   const View<const std::int64_t>& indices, const View<T>& dx) {
    (void)p, (void)dy, (void)indices, (void)dx;
    unsupported("max_pool2d_backward");
  }
  /// y = the window sums over PyTorch's divisor (count_include_pad, divisor_override).
  virtual void avg_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y) {
    (void)p, (void)x, (void)y;
    unsupported("avg_pool2d");
  }
  /// dx = avg_pool2d's adjoint applied to dy. Overwrites dx.
  virtual void avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<T>& dx) {
    (void)p, (void)dy, (void)dx;
    unsupported("avg_pool2d_backward");
  }

  // Batch normalization as one kernel call each way where the backend has
  // one (cuDNN on CUDA), over dense x seen as [n, c, inner]: statistics per
  // channel over n and inner. Where batch_norm_runs is false the ops compose
  // batch norm from the kernels above instead.

  /// Whether the batch_norm_* calls below run for these extents and eps
  /// (batch_norm_training and _backward when `training`, else _inference).
  virtual bool batch_norm_runs(std::int64_t n, std::int64_t c, std::int64_t inner, double eps, bool training) {
    (void)n, (void)c, (void)inner, (void)eps, (void)training;
    return false;
  }
  /// Training: y = (x - mean) invstd w + b with the batch's mean and invstd =
  /// 1 / sqrt(var + eps) (biased variance), both written to save_mean /
  /// save_invstd (c values). running_mean / running_var, both null or both
  /// not, become (1 - momentum) running + momentum batch, with the unbiased
  /// variance. w and b hold c values (the caller passes ones and zeros for none).
  virtual void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w,
                                   const T* b, T* y, T* save_mean, T* save_invstd, T* running_mean, T* running_var,
                                   double momentum, double eps) {
    (void)n, (void)c, (void)inner, (void)x, (void)w, (void)b, (void)y, (void)save_mean, (void)save_invstd,
        (void)running_mean, (void)running_var, (void)momentum, (void)eps;
    unsupported("batch_norm");
  }
  /// Inference: y = (x - mean) / sqrt(var + eps) w + b with given statistics.
  virtual void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w,
                                    const T* b, const T* mean, const T* var, T* y, double eps) {
    (void)n, (void)c, (void)inner, (void)x, (void)w, (void)b, (void)mean, (void)var, (void)y, (void)eps;
    unsupported("batch_norm");
  }
  /// batch_norm_training's gradients from its saved statistics, all three
  /// overwritten: dx, dw = sum(dy xhat), db = sum(dy) per channel.
  virtual void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy,
                                   const T* w, const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db,
                                   double eps) {
    (void)n, (void)c, (void)inner, (void)x, (void)dy, (void)w, (void)save_mean, (void)save_invstd, (void)dx, (void)dw,
        (void)db, (void)eps;
    unsupported("batch_norm_backward");
  }

  // Frozen plans' fused kernels.

  /// A fused elementwise chain over n dense elements: each instruction reads
  /// registers (inputs[0..n_inputs) as 0.., results as 8..) and the last one
  /// writes y. At most kMaxFusedInstrs instructions.
  virtual void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                                 std::int64_t n) = 0;
  /// y = act(y + bias[(i / inner) % channels]) in place over y's n dense
  /// elements: a linear (inner 1) or convolution (inner H*W) epilogue; bias
  /// may be null, act is any parameterless UnaryOp (copy for none).
  virtual void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) = 0;

  /// y[m, n] = act(x op(w) + bias[n]): a frozen plan's linear step on a
  /// device. x is [m, k] row-major with leading dim ldx (trans_x: stored
  /// [k, m]); w is [n, k] with leading dim ldw or, packed, [k, n]; bias may be
  /// null. A backend may run it as one fused GEMM; by default it is a GEMM
  /// then bias_act.
  virtual void linear(std::int64_t m, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx, bool trans_x,
                      const T* w, std::int64_t ldw, bool packed, const T* bias, T* y, UnaryOp act) {
    gemm(trans_x, !packed, m, n, k, T(1), x, ldx, 0, w, ldw, 0, T(0), y, n, 0, 1);
    if (bias || act != UnaryOp::copy) bias_act(y, m * n, bias, n, 1, act);
  }

  /// One optimizer step over n contiguous elements: optim_step::apply for
  /// each i, fused into one pass (state buffers per OptimStep, null if unused).
  virtual void optimizer_step(const OptimStep<T>& o, T* p, const T* g, T* s0, T* s1, T* s2, std::int64_t n) = 0;

  /// y = x converted to T elementwise (fn::cast: Tensor::to<T>), from each
  /// of frost's dtypes; x has y's shape and any strides, on this device.
  /// (Traced, a plan's cast step: jit/tracer.hpp.)
  /// One overload per source dtype (FROST_FOR_EACH_DTYPE).
#define FROST_BACKEND_CAST(S, e, name, st)                    \
  virtual void cast(const View<const S>& x, const View<T>& y) { \
    (void)x, (void)y;                                         \
    unsupported("cast");                                      \
  }
  FROST_FOR_EACH_DTYPE(FROST_BACKEND_CAST)
#undef FROST_BACKEND_CAST

  // Moving bytes between the host and this device. The CPU backend's are
  // plain copies; a device backend's are synchronous with its stream.

  /// n elements from host memory into this device's memory.
  virtual void copy_from_host(const T* host, T* dev, std::int64_t n) = 0;
  /// n elements from this device's memory into host memory (waits for the device).
  virtual void copy_to_host(const T* dev, T* host, std::int64_t n) = 0;
  /// Waits until the work queued on this device has finished.
  virtual void synchronize() {}

 protected:
  [[noreturn]] void unsupported(const char* op) const {
    detail::fail("frost::", op, ": the ", device().str(), " backend has no ", dtype_name<T>(), " kernel for it");
  }
  /// Math a dtype has no kernel for (every backend refuses it the same way).
  [[noreturn]] static void math_unsupported(const char* op) {
    if constexpr (std::is_integral_v<T>)
      detail::fail("frost::", op, ": not defined for ", dtype_name<T>(), " tensors (integer and bool tensors have ",
                   "arithmetic, bitwise ops, comparisons and reductions; convert with to<float>() for the rest)");
    else
      detail::fail("frost::", op, ": not defined for ", dtype_name<T>(), " tensors on this device yet (there ",
                   dtype_name<T>(), " tensors support creation, views, copies, casts and indexing; convert with ",
                   "to<float>(), or compute on the CPU)");
  }
  /// Integer and bool tensors reach only the kernels fn::int_*_supported list
  /// (the ops offer no others; a direct backend call is refused here).
  static void check_int_kernel(UnaryOp op) {
    if (!fn::int_unary_supported(op, std::is_same_v<T, bool>)) math_unsupported(op_name(op));
  }
  static void check_int_kernel(BinaryOp op) {
    if (!fn::int_binary_supported(op, std::is_same_v<T, bool>)) math_unsupported(op_name(op));
  }
};

namespace detail {
/// The device backends, one per CUDA device index (the CPU's is cpu_backend()).
template <class T>
struct BackendRegistry {
  std::array<Backend<T>*, kMaxCudaDevices> cuda{};
};
template <class T>
inline BackendRegistry<T>& backend_registry() {
  static BackendRegistry<T> r;
  return r;
}
/// Set while a jit trace runs on this thread: every kernel call goes through
/// it, is recorded, and runs on the real backend.
template <class T>
inline thread_local Backend<T>* tracing_backend = nullptr;
}  // namespace detail

/// Installs the backend for a CUDA device (the CUDA target does this at
/// start-up for every index; a backend touches its device on first use).
template <class T>
void register_backend(Device d, Backend<T>* b) {
  FROST_CHECK(d.is_cuda() && d.index >= 0 && d.index < kMaxCudaDevices, "frost::register_backend: ", d.str(),
              " is not a device a backend can be registered for (cuda:0 to cuda:", kMaxCudaDevices - 1, ")");
  detail::backend_registry<T>().cuda[static_cast<std::size_t>(d.index)] = b;
}

template <class T>
Backend<T>& cpu_backend();

/// The backend for `d`; a clear error when that device's backend was not linked in.
template <class T>
inline Backend<T>& backend_for(Device d) {
  if (FROST_UNLIKELY(detail::tracing_backend<T> != nullptr)) {
    // The tracer records CPU kernels only (jit::trace brings device work to the host first).
    FROST_CHECK(d.is_cpu(), "frost::jit::trace: the traced code made or used a ", dtype_name<T>(), " tensor on ",
                d.str(), "; a trace runs on the CPU, so make tensors where the inputs are (e.g. zeros(shape, "
                "x.device()))");
    return *detail::tracing_backend<T>;
  }
  if (FROST_LIKELY(d.is_cpu())) return cpu_backend<T>();
  FROST_CHECK(d.index >= 0 && d.index < kMaxCudaDevices, "frost: ", d.str(),
              " is not a device index frost takes (cuda:0 to cuda:", kMaxCudaDevices - 1, ")");
  Backend<T>* b = detail::backend_registry<T>().cuda[static_cast<std::size_t>(d.index)];
  FROST_CHECK(b != nullptr, "frost: a ", dtype_name<T>(), " tensor on ", d.str(),
              " needs the CUDA backend, which this program did not link: add "
              "target_link_libraries(<your target> PRIVATE frost::cuda)");
  return *b;
}

}  // namespace frost
