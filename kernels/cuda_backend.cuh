// CudaBackend<T>: Backend<T> on one device's memory (one instance per
// device). Elementwise, reductions, indexing, pooling and optimizer steps are
// frost's kernels (kernels/*.cuh); matmul is cuBLAS (a plan's linear
// cuBLASLt); convolution and batch norm are cuDNN. Everything runs on the
// device's one stream (a capturing thread's goes to its capture stream), so
// the eager path only synchronises to read values back: item(), to(cpu), and
// the bad-index flag of the indexing kernels (a plan's CUDA Graph reads its
// index steps' flags once, after the graph).
#pragma once
#include <climits>
#include <cstdint>

#include <frost/backend/backend.hpp>

#include "batch_norm.cuh"
#include "context.cuh"
#include "elementwise.cuh"
#include "fused.cuh"
#include "index.cuh"
#include "optim.cuh"
#include "pool.cuh"
#include "reduce.cuh"

namespace frost::cuda_detail {

template <class T>
class CudaBackend final : public Backend<T> {
 public:
  using Backend<T>::math_unsupported;
  explicit CudaBackend(int device) : device_(device), alloc_(device) {}
  Device device() const override { return Device::cuda(device_); }
  DeviceAllocator* allocator() override { return &alloc_; }

  // Integer and bool tensors run the same functors (fn::unary / fn::binary
  // switch to their integer forms), for the ops fn::int_*_supported list.
  void unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) override {
    if constexpr (std::is_integral_v<T>) Backend<T>::check_int_kernel(op);
    if constexpr (FloatScalar<T> || std::is_integral_v<T>) {
      const View<const T>* in[1] = {&x};
      launch_map<T, 1>(ctx("unary"), y, in, UnaryFn<T>{op, p0, p1}, op_name(op));
    } else {
      math_unsupported(op_name(op));
    }
  }
  void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) override {
    if constexpr (std::is_integral_v<T>) Backend<T>::check_int_kernel(op);
    if constexpr (FloatScalar<T> || std::is_integral_v<T>) {
      const View<const T>* in[2] = {&a, &b};
      launch_map<T, 2>(ctx("binary"), y, in, BinaryFn<T>{op, p}, op_name(op));
    } else {
      math_unsupported(op_name(op));
    }
  }
  void where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) override {
    const View<const T>* in[3] = {&c, &a, &b};
    launch_map<T, 3>(ctx("where"), y, in, WhereFn<T>{}, "where");
  }
  void copy(const View<const T>& x, const View<T>& y) override {
    if (x.is_contiguous() && y.is_contiguous() && x.shape == y.shape) {
      if (x.numel() > 0 && x.data != y.data)
        FROST_CUDA(cudaMemcpyAsync(y.data, x.data, static_cast<std::size_t>(x.numel()) * sizeof(T),
                                   cudaMemcpyDeviceToDevice, ctx("copy").current()),
                   "copy");
      return;
    }
    const View<const T>* in[1] = {&x};
    launch_map<T, 1>(ctx("copy"), y, in, CopyFn<T>{}, "copy");
  }
#define FROST_CUDA_CAST(S, e, name, st) \
  void cast(const View<const S>& x, const View<T>& y) override { launch_cast(ctx("cast"), x, y); }
  FROST_FOR_EACH_DTYPE(FROST_CUDA_CAST)
#undef FROST_CUDA_CAST
  void fill(const View<T>& y, T value) override {
    const View<const T>* in[1] = {nullptr};
    launch_map<T, 0>(ctx("fill"), y, in, FillFn<T>{value}, "fill");
  }
  void random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset, double lo,
              double hi) override {
    launch_random(ctx("random"), y, dist, seed, offset, lo, hi);
  }

  void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) override {
    if constexpr (FloatScalar<T> || std::is_integral_v<T>) {
      Context& cx = ctx("reduce");
      const int nk = x.ndim() - n_reduced;
      Shape kept;
      std::int64_t inner = 1;
      for (int d = 0; d < x.ndim(); ++d) {
        if (d < nk) kept.push_back(x.shape[d]);
        else inner *= x.shape[d];
      }
      const std::int64_t rows = kept.numel(), chunks = reduce_chunks_for(rows, inner, cx.sm_count);
      if (rows == 0 || chunks == 1) {
        launch_reduce(cx, op, x, n_reduced, y);
        return;
      }
      // Two passes: chunks of each row into partials, then the partials.
      TempBuffer partial(cx, static_cast<std::size_t>(rows * chunks) * sizeof(T), "reduce");
      launch_reduce_chunks(cx, op, x, n_reduced, y, chunks, partial.as<T>());
      Shape ps = kept;
      ps.push_back(chunks);
      launch_reduce(cx, op, View<const T>(partial.as<T>(), ps), 1, y);
    } else {
      math_unsupported("reduce");
    }
  }
  void arg_reduce(bool is_max, const View<const T>& x, const View<T>& values,
                  const View<std::int64_t>& indices) override {
    launch_arg_reduce(ctx("arg_reduce"), is_max, x, values, indices);
  }
  void softmax(const View<const T>& x, const View<T>& y, bool log) override {
    if constexpr (FloatScalar<T>) launch_softmax(ctx("softmax"), x, y, log);
    else math_unsupported("softmax");
  }

  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
            std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta, T* c, std::int64_t ldc,
            std::int64_t sc, std::int64_t batch) override {
    if constexpr (FloatScalar<T>) {
      Context& cx = ctx("matmul");
      if (m == 0 || n == 0 || batch == 0) return;
      if (k == 0) {
        // C = beta C, done here: cuBLAS has returned stale output for an
        // empty inner dimension (pytorch#31421), and C may be fresh memory.
        const View<T> cv(c, Shape{batch, m, n}, Shape{sc, ldc, 1});
        if (beta == T(0)) fill(cv, T(0));
        else unary(UnaryOp::mul_scalar, cv, cv, beta, T(0));
        return;
      }
      for (std::int64_t v : {m, n, k, lda, ldb, ldc, batch})
        FROST_CHECK(v <= INT_MAX, "frost::matmul (cuBLAS): extent ", v, " (m=", m, ", n=", n, ", k=", k,
                    ", batch=", batch, ") does not fit cuBLAS's 32-bit arguments");
      FROST_CUDA(cublasSetMathMode(cx.cublas("matmul"), tf32_allowed() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                 "matmul");
      // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
      // swap the operands, keep each one's transpose flag.
      const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
      const int M = int(n), N = int(m), K = int(k);
      if constexpr (sizeof(T) == 4)
        FROST_CUDA(cublasSgemmStridedBatched(cx.cublas("matmul"), opb, opa, M, N, K, &alpha, b, int(ldb), sb, a, int(lda), sa,
                                             &beta, c, int(ldc), sc, int(batch)),
                   "matmul");
      else
        FROST_CUDA(cublasDgemmStridedBatched(cx.cublas("matmul"), opb, opa, M, N, K, &alpha, b, int(ldb), sb, a, int(lda), sa,
                                             &beta, c, int(ldc), sc, int(batch)),
                   "matmul");
    } else {
      math_unsupported("gemm");
    }
  }

  void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index,
                    const View<T>& y) override {
    const char* op = "index_select";
    Context& cx = ctx(op);
    const std::int64_t n = y.numel(), n_index = index.numel();
    if (n_index == 0) return;
    unsigned long long* flag = index_flag(cx, op);
    if (n == 0) {
      index_check_kernel<<<grid_for(n_index, cx.sm_count), kThreads, 0, cx.current()>>>(
          n_index, x.shape[dim], index.strides[0], index.data, flag);
      check_index(cx, op, flag, dim, x.shape[dim]);
      return;
    }
    const IndexGeom g = index_geom(y.shape, dim, y.strides, Shape{}, x.strides);
    index_select_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(
        n, g, x.shape[dim], index.strides[0], x.data, index.data, y.data, flag);
    check_index(cx, op, flag, dim, x.shape[dim]);
  }
  void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) override {
    const char* op = "gather";
    Context& cx = ctx(op);
    const std::int64_t n = y.numel();
    if (n == 0) return;
    const IndexGeom g = index_geom(y.shape, dim, y.strides, index.strides, x.strides);
    unsigned long long* flag = index_flag(cx, op);
    gather_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(n, g, x.shape[dim], x.data, index.data,
                                                                            y.data, flag);
    check_index(cx, op, flag, dim, x.shape[dim]);
  }
  void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index,
                   const View<const T>& src) override {
    const char* op = "scatter_add";
    if constexpr (!has_atomic_add<T>) this->unsupported(op);  // no atomic add of 1- or 2-byte values or bool
    Context& cx = ctx(op);
    const std::int64_t n = index.numel();
    if (n == 0) return;
    const IndexGeom g = index_geom(index.shape, dim, src.strides, index.strides, y.strides);
    unsigned long long* flag = index_flag(cx, op);
    if constexpr (has_atomic_add<T>)
      scatter_add_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(n, g, y.shape[dim], src.data,
                                                                                   index.data, y.data, flag);
    check_index(cx, op, flag, dim, y.shape[dim]);
  }

  void conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias, const View<T>& y,
              UnaryOp act) override;
  void conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                         const View<T>& dx) override;
  void conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                          const View<T>& dw) override;

  void max_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y,
                  const View<std::int64_t>& indices) override {
    if constexpr (FloatScalar<T>) {
      Context& cx = ctx("max_pool2d");
      const std::int64_t n = y.numel();
      if (n == 0) return;
      max_pool_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(p, x.data, y.data, indices.data);
      check_launch("max_pool2d");
    } else {
      math_unsupported("max_pool2d");
    }
  }
  void max_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<const std::int64_t>& indices,
                           const View<T>& dx) override {
    if constexpr (FloatScalar<T>) {
      Context& cx = ctx("max_pool2d_backward");
      if (dx.numel() == 0) return;
      FROST_CUDA(cudaMemsetAsync(dx.data, 0, static_cast<std::size_t>(dx.numel()) * sizeof(T), cx.current()),
                 "max_pool2d_backward");
      if (dy.numel() == 0) return;
      max_pool_backward_kernel<T><<<grid_for(dy.numel(), cx.sm_count), kThreads, 0, cx.current()>>>(p, dy.data,
                                                                                                  indices.data, dx.data);
      check_launch("max_pool2d_backward");
    } else {
      math_unsupported("max_pool2d_backward");
    }
  }
  void avg_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y) override {
    if constexpr (FloatScalar<T>) {
      Context& cx = ctx("avg_pool2d");
      if (y.numel() == 0) return;
      avg_pool_kernel<T><<<grid_for(y.numel(), cx.sm_count), kThreads, 0, cx.current()>>>(p, x.data, y.data);
      check_launch("avg_pool2d");
    } else {
      math_unsupported("avg_pool2d");
    }
  }
  void avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<T>& dx) override {
    if constexpr (FloatScalar<T>) {
      Context& cx = ctx("avg_pool2d_backward");
      if (dx.numel() == 0) return;
      avg_pool_backward_kernel<T><<<grid_for(dx.numel(), cx.sm_count), kThreads, 0, cx.current()>>>(p, dy.data, dx.data);
      check_launch("avg_pool2d_backward");
    } else {
      math_unsupported("avg_pool2d_backward");
    }
  }

  bool batch_norm_runs(std::int64_t n, std::int64_t c, std::int64_t inner, double eps, bool training) override {
    return FloatScalar<T> && batch_norm_fits(n, c, inner, eps, training);
  }
  void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b, T* y,
                           T* save_mean, T* save_invstd, T* running_mean, T* running_var, double momentum,
                           double eps) override {
    if constexpr (FloatScalar<T>)
      cuda_detail::batch_norm_training(ctx("batch_norm").cudnn("batch_norm"), n, c, inner, x, w, b, y, save_mean, save_invstd,
                                       running_mean, running_var, momentum, eps);
    else math_unsupported("batch_norm");
  }
  void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b,
                            const T* mean, const T* var, T* y, double eps) override {
    if constexpr (FloatScalar<T>)
      cuda_detail::batch_norm_inference(ctx("batch_norm").cudnn("batch_norm"), n, c, inner, x, w, b, mean, var, y, eps);
    else math_unsupported("batch_norm");
  }
  void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy, const T* w,
                           const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db, double eps) override {
    if constexpr (FloatScalar<T>)
      cuda_detail::batch_norm_backward(ctx("batch_norm_backward").cudnn("batch_norm_backward"), n, c, inner, x, dy, w, save_mean, save_invstd,
                                       dx, dw, db, eps);
    else math_unsupported("batch_norm_backward");
  }

  void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                         std::int64_t n) override {
    if constexpr (FloatScalar<T>) launch_fused(ctx("fused_elementwise"), prog, n_instrs, inputs, n_inputs, y, n);
    else math_unsupported("fused_elementwise");
  }
  void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) override {
    if constexpr (FloatScalar<T>) launch_bias_act(ctx("bias_act"), y, n, bias, channels, inner, act, "bias_act");
    else math_unsupported("bias_act");
  }
  void linear(std::int64_t m, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx, bool trans_x, const T* w,
              std::int64_t ldw, bool packed, const T* bias, T* y, UnaryOp act) override {
    if constexpr (std::is_same_v<T, float>) {
      Context& cx = ctx("linear");
      if (m > 0 && n > 0 && k > 0 && !trans_x && bias && lt_epilogue_takes(act) &&
          lt_linear(cx.lt("linear"), cx.lt_algos, cx.current(), cx.cublas_workspace, Context::kCublasWorkspace,
                    tf32_allowed(), m, n, k, x, ldx, w, ldw, packed, bias, y, act))
        return;
    }
    Backend<T>::linear(m, n, k, x, ldx, trans_x, w, ldw, packed, bias, y, act);
  }
  void optimizer_step(const OptimStep<T>& o, T* p, const T* g, T* s0, T* s1, T* s2, std::int64_t n) override {
    if constexpr (FloatScalar<T>) {
      Context& cx = ctx("optimizer_step");
      if (n == 0) return;
      optimizer_step_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(o, p, g, s0, s1, s2, n);
      check_launch("optimizer_step");
    } else {
      math_unsupported("optimizer_step");
    }
  }

  void copy_from_host(const T* host, T* dev, std::int64_t n) override {
    Context& cx = ctx("to(cuda)");
    if (n == 0) return;
    FROST_CUDA(cudaMemcpyAsync(dev, host, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyHostToDevice, cx.current()),
               "to(cuda)");
    cx.sync("to(cuda)");  // the host buffer may be freed as soon as this returns
  }
  void copy_to_host(const T* dev, T* host, std::int64_t n) override {
    Context& cx = ctx("to(cpu)");
    if (n == 0) return;
    FROST_CUDA(cudaMemcpyAsync(host, dev, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost, cx.current()),
               "to(cpu)");
    cx.sync("to(cpu)");
  }
  void synchronize() override { ctx("synchronize").sync("synchronize"); }

 private:
  /// The device's context, with the device made current for this thread.
  Context& ctx(const char* op) { return context(op, device_); }
  /// Where an index kernel records a bad index: the slot of the plan step
  /// being captured (the plan clears it and reads it after the graph runs),
  /// else this thread's flag, cleared on its stream first.
  static unsigned long long* index_flag(Context& cx, const char* op) {
    if (unsigned long long* slot = cx.index_slot()) return slot;
    FROST_CUDA(cudaMemsetAsync(cx.flag(op), 0, 2 * sizeof(unsigned long long), cx.current()), op);
    return cx.flag(op);
  }
  /// After an index kernel: its launch checked, and unless it recorded into
  /// a plan's slot, its flag read back (one sync) and a bad index reported
  /// as the CPU kernels do.
  static void check_index(Context& cx, const char* op, const unsigned long long* flag, int dim, std::int64_t size) {
    check_launch(op);
    if (flag == cx.index_slot()) return;
    unsigned long long f[2] = {0, 0};
    FROST_CUDA(cudaMemcpyAsync(f, flag, sizeof f, cudaMemcpyDeviceToHost, cx.current()), op);
    cx.sync(op);
    const auto bad = static_cast<std::int64_t>(f[1]);
    if (f[0] != 0) frost::detail::fail_index(op, bad, dim, size);
  }

  /// One convolution pass through cuDNN: `run(algo, workspace)` makes the
  /// call and returns its status. The algorithm cached for these shapes runs
  /// if there is one; otherwise cuDNN's candidates are tried best first (one
  /// whose workspace cannot be had, or that cuDNN refuses or fails to run,
  /// gives way to the next) and the first that ran is cached.
  template <class Perf, class Get, class Find, class Run>
  void run_conv(const Conv2dParams& p, ConvPass pass, ConvDescriptors<T>& d, Get&& get, Find&& find, Run&& run,
                const char* call, const char* op) {
    Context& cx = ctx(op);
    const bool timed = timed_algorithms();
    const ConvKey key(p, dtype_of<T>(), pass, tf32_allowed(), timed);
    ConvAlgo cached;
    bool hit = false;
    {
      std::lock_guard<std::mutex> g(cx.algo_mutex);
      auto it = cx.algos.find(key);
      if ((hit = it != cx.algos.end())) cached = it->second;
    }
    if (hit) {
      void* ws = cx.workspace_for(cached.workspace, op);
      d.use_math(cached.math, op);
      check(run(cached, ws), call, op);
      return;
    }
    // A capture cannot time (it synchronises) nor ask cuDNN's heuristics
    // afresh: the plan runs step by step once instead, which fills the cache.
    FROST_CHECK(!cx.capturing(), "frost::", op, ": no convolution algorithm chosen yet for these shapes (",
                p.in_channels, " -> ", p.out_channels, " channels, TF32 ", tf32_allowed() ? "on" : "off",
                ") inside a CUDA Graph capture");
    const std::vector<ConvAlgo> candidates = conv_candidates<Perf>(timed, kMaxWorkspace, get, find, op);
    const ConvAlgo chosen = first_that_runs(
        candidates,
        [&](const ConvAlgo& a) {
          void* ws = nullptr;
          try {
            ws = cx.workspace_for(a.workspace, op);
          } catch (const Error& e) {
            return ConvAttempt::unavailable(e.what());
          }
          d.use_math(a.math, op);
          const cudnnStatus_t s = run(a, ws);
          const int category = CUDNN_STATUS_CATEGORY(s);
          if (category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_EXECUTION_FAILED) {
            (void)cudaGetLastError();  // a failed launch inside cuDNN must not be blamed on the next kernel
            return ConvAttempt::unavailable(cudnnGetErrorString(s));
          }
          check(s, call, op);
          return ConvAttempt::ok();
        },
        op);
    std::lock_guard<std::mutex> g(cx.algo_mutex);
    cx.algos.emplace(key, chosen);
  }

  /// x copied into a zero-padded buffer of the geometry's extents.
  void pad_input(Context& cx, const ConvGeometry& g, const Conv2dParams& p, const T* x, T* xp) {
    const std::int64_t planes = p.batch * p.in_channels, n = planes * g.x[2] * g.x[3];
    pad_copy_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(planes, p.in_h, p.in_w, g.x[2], g.x[3],
                                                                              g.pad_top, g.pad_left, x, xp);
    check_launch("conv2d (padding)");
  }

  /// y = relu(conv(x) + bias) in one cuDNN call; false when cuDNN does not
  /// support it for this algorithm (the caller runs the unfused path).
  static bool fused_bias_relu(Context& cx, const ConvDescriptors<T>& d, const ConvGeometry& g,
                              cudnnConvolutionFwdAlgo_t algo, void* ws, std::size_t ws_bytes, const T* x, const T* w,
                              const T* bias, T* y) {
    const char* op = "conv2d (fused bias + relu)";
    TensorDescriptor bd(op);
    ActivationDescriptor ad(op);
    FROST_CUDA(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, cudnn_type<T>(), 1, g.y[1], 1, 1), op);
    FROST_CUDA(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0), op);
    const T one = 1, zero = 0;
    // z = y with alpha2 = 0: cuDNN reads no residual.
    const cudnnStatus_t s = cudnnConvolutionBiasActivationForward(cx.cudnn(op), &one, d.x, x, d.w, w, d.conv, algo, ws,
                                                                  ws_bytes, &zero, d.y, y, bd, bias, ad, d.y, y);
    // cuDNN 9 refines these into sub-codes (NOT_SUPPORTED_SHAPE, BAD_PARAM_*, ...):
    // any of them means this fused form is unavailable here, so take the unfused path.
    const int category = CUDNN_STATUS_CATEGORY(s);
    if (category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM) return false;
    check(s, "cudnnConvolutionBiasActivationForward", op);
    return true;
  }

  int device_;
  CudaAllocator alloc_;
};

template <class T>
void CudaBackend<T>::conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias,
                            const View<T>& y, UnaryOp act) {
  if constexpr (FloatScalar<T>) {
    const char* op = "conv2d";
    Context& cx = ctx(op);
    if (y.numel() == 0) return;
    const ConvGeometry g = conv_geometry(p);
    const bool tf32 = tf32_allowed();
    ConvDescriptors<T> d(g, tf32, op);
    const T* xin = x.data;
    TempBuffer padded(cx, g.explicit_pad ? std::size_t(g.x[0]) * g.x[1] * g.x[2] * g.x[3] * sizeof(T) : 0, op);
    if (g.explicit_pad) {
      pad_input(cx, g, p, x.data, padded.as<T>());
      xin = padded.as<T>();
    }
    const T one = 1, zero = 0;
    bool fused = false;
    run_conv<cudnnConvolutionFwdAlgoPerf_t>(
        p, ConvPass::forward, d,
        [&](int req, int* n, cudnnConvolutionFwdAlgoPerf_t* perf) {
          FROST_CUDA(cudnnGetConvolutionForwardAlgorithm_v7(cx.cudnn(op), d.x, d.w, d.conv, d.y, req, n, perf), op);
        },
        [&](int req, int* n, cudnnConvolutionFwdAlgoPerf_t* perf) {
          FindWorkspace ws(cx, op);
          FROST_CUDA(cudnnFindConvolutionForwardAlgorithmEx(cx.cudnn(op), d.x, xin, d.w, w.data, d.conv, d.y, y.data, req,
                                                            n, perf, ws.p, ws.bytes),
                     op);
        },
        [&](const ConvAlgo& a, void* ws) {
          const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a.algo);
          // Bias + ReLU (a plan's fused epilogue) inside cuDNN's convolution when it takes them.
          fused = bias && act == UnaryOp::relu && fused_bias_relu(cx, d, g, algo, ws, a.workspace, xin, w.data, bias, y.data);
          if (fused) return CUDNN_STATUS_SUCCESS;
          return cudnnConvolutionForward(cx.cudnn(op), &one, d.x, xin, d.w, w.data, d.conv, algo, ws, a.workspace, &zero,
                                         d.y, y.data);
        },
        "cudnnConvolutionForward", op);
    if (fused) return;
    if (bias || act != UnaryOp::copy) launch_bias_act(cx, y.data, y.numel(), bias, p.out_channels, p.out_h * p.out_w, act, op);
  } else {
    math_unsupported("conv2d");
  }
}

template <class T>
void CudaBackend<T>::conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                                       const View<T>& dx) {
  if constexpr (FloatScalar<T>) {
    const char* op = "conv2d_grad_input";
    Context& cx = ctx(op);
    if (dx.numel() == 0) return;
    const ConvGeometry g = conv_geometry(p);
    ConvDescriptors<T> d(g, tf32_allowed(), op);
    TempBuffer padded(cx, g.explicit_pad ? std::size_t(g.x[0]) * g.x[1] * g.x[2] * g.x[3] * sizeof(T) : 0, op);
    T* out = g.explicit_pad ? padded.as<T>() : dx.data;
    if (dy.numel() == 0) {
      FROST_CUDA(cudaMemsetAsync(dx.data, 0, std::size_t(dx.numel()) * sizeof(T), cx.current()), op);
      return;
    }
    const T one = 1, zero = 0;
    run_conv<cudnnConvolutionBwdDataAlgoPerf_t>(
        p, ConvPass::backward_data, d,
        [&](int req, int* n, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          FROST_CUDA(cudnnGetConvolutionBackwardDataAlgorithm_v7(cx.cudnn(op), d.w, d.y, d.conv, d.x, req, n, perf), op);
        },
        [&](int req, int* n, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          FindWorkspace ws(cx, op);
          FROST_CUDA(cudnnFindConvolutionBackwardDataAlgorithmEx(cx.cudnn(op), d.w, w.data, d.y, dy.data, d.conv, d.x, out,
                                                                 req, n, perf, ws.p, ws.bytes),
                     op);
        },
        [&](const ConvAlgo& a, void* ws) {
          return cudnnConvolutionBackwardData(cx.cudnn(op), &one, d.w, w.data, d.y, dy.data, d.conv,
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), ws, a.workspace, &zero,
                                              d.x, out);
        },
        "cudnnConvolutionBackwardData", op);
    if (g.explicit_pad) {
      const std::int64_t planes = p.batch * p.in_channels, n = planes * p.in_h * p.in_w;
      crop_kernel<T><<<grid_for(n, cx.sm_count), kThreads, 0, cx.current()>>>(planes, p.in_h, p.in_w, g.x[2], g.x[3],
                                                                            g.pad_top, g.pad_left, out, dx.data);
      check_launch(op);
    }
  } else {
    math_unsupported("conv2d_grad_input");
  }
}

template <class T>
void CudaBackend<T>::conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                                        const View<T>& dw) {
  if constexpr (FloatScalar<T>) {
    const char* op = "conv2d_grad_weight";
    Context& cx = ctx(op);
    if (dw.numel() == 0) return;
    if (dy.numel() == 0) {
      FROST_CUDA(cudaMemsetAsync(dw.data, 0, std::size_t(dw.numel()) * sizeof(T), cx.current()), op);
      return;
    }
    const ConvGeometry g = conv_geometry(p);
    ConvDescriptors<T> d(g, tf32_allowed(), op);
    const T* xin = x.data;
    TempBuffer padded(cx, g.explicit_pad ? std::size_t(g.x[0]) * g.x[1] * g.x[2] * g.x[3] * sizeof(T) : 0, op);
    if (g.explicit_pad) {
      pad_input(cx, g, p, x.data, padded.as<T>());
      xin = padded.as<T>();
    }
    const T one = 1, zero = 0;
    run_conv<cudnnConvolutionBwdFilterAlgoPerf_t>(
        p, ConvPass::backward_filter, d,
        [&](int req, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
          FROST_CUDA(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cx.cudnn(op), d.x, d.y, d.conv, d.w, req, n, perf), op);
        },
        [&](int req, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
          FindWorkspace ws(cx, op);
          FROST_CUDA(cudnnFindConvolutionBackwardFilterAlgorithmEx(cx.cudnn(op), d.x, xin, d.y, dy.data, d.conv, d.w,
                                                                   dw.data, req, n, perf, ws.p, ws.bytes),
                     op);
        },
        [&](const ConvAlgo& a, void* ws) {
          return cudnnConvolutionBackwardFilter(cx.cudnn(op), &one, d.x, xin, d.y, dy.data, d.conv,
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), ws, a.workspace,
                                                &zero, d.w, dw.data);
        },
        "cudnnConvolutionBackwardFilter", op);
  } else {
    math_unsupported("conv2d_grad_weight");
  }
}

}  // namespace frost::cuda_detail
