// CpuBackend<T>: the always-present backend, Backend<T> on host memory.
//
// Header-only by default. With FROST_CPU_BACKEND_EXTERN defined (the
// frost::compiled CMake target does this) a program sees only the
// declaration of cpu_backend<T>() and links the kernels from one compiled
// translation unit, so Eigen and the kernels are not parsed and
// instantiated in every file: the fast-compile mode. The kernels are
// compiled there by src/cpu_kernels_*.cpp (FROST_CPU_BACKEND_KERNELS), a few
// dtypes per file so the two cores of a build share them; the file with the
// Tensor members and the I/O code (FROST_CPU_BACKEND_IMPLEMENTATION) sees
// only the declaration too.
#pragma once
#include <cstdint>
#include <cstring>

#include "../backend.hpp"

#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_KERNELS)
#include "batch_norm.hpp"
#include "conv.hpp"
#include "elementwise.hpp"
#include "fused.hpp"
#include "gemm.hpp"
#include "gemv_panels.hpp"
#include "gemv_rows.hpp"
#include "index.hpp"
#include "pool.hpp"
#include "reduce.hpp"

namespace frost {

template <class T>
struct CpuBackend : Backend<T> {
  using Backend<T>::math_unsupported;
  using Backend<T>::check_int_kernel;
  Device device() const override { return Device::cpu(); }
  DeviceAllocator* allocator() override { return nullptr; }  // CPU storages use the pooled host allocator

  void unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) override {
    if constexpr (std::is_integral_v<T>) check_int_kernel(op);
    if constexpr (FloatScalar<T> || std::is_integral_v<T>) cpu::unary(op, x, y, p0, p1);
    else math_unsupported(op_name(op));
  }
  void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) override {
    if constexpr (std::is_integral_v<T>) check_int_kernel(op);
    if constexpr (FloatScalar<T> || std::is_integral_v<T>) cpu::binary(op, a, b, y, p);
    else math_unsupported(op_name(op));
  }
  void where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) override { cpu::where(c, a, b, y); }
  void copy(const View<const T>& x, const View<T>& y) override { cpu::copy(x, y); }
  void fill(const View<T>& y, T v) override { cpu::fill(y, v); }
#define FROST_CPU_CAST(S, e, name, st) \
  void cast(const View<const S>& x, const View<T>& y) override { cpu::cast(x, y); }
  FROST_FOR_EACH_DTYPE(FROST_CPU_CAST)
#undef FROST_CPU_CAST
  void random(const View<T>& y, philox::Dist d, std::uint64_t seed, std::uint64_t off, double lo, double hi) override {
    cpu::random(y, d, seed, off, lo, hi);
  }
  void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) override {
    if constexpr (FloatScalar<T> || std::is_integral_v<T>) cpu::reduce(op, x, n_reduced, y);
    else math_unsupported("reduce");
  }
  void arg_reduce(bool is_max, const View<const T>& x, const View<T>& v, const View<std::int64_t>& i) override {
    cpu::arg_reduce(is_max, x, v, i);
  }
  void softmax(const View<const T>& x, const View<T>& y, bool log) override {
    if constexpr (FloatScalar<T>) cpu::softmax(x, y, log);
    else math_unsupported("softmax");
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
            std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta, T* c, std::int64_t ldc,
            std::int64_t sc, std::int64_t batch) override {
    if constexpr (FloatScalar<T>) cpu::gemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    else math_unsupported("gemm");
  }
  // W^T in panels of 16 outputs (gemv_panels.hpp), for any number of rows:
  // up to 8, matrix-vector products (bound by reading W; parts split over
  // threads); whole products of 8+, a GEMM with its sums in registers. For
  // one row, W^T in kilobyte rows instead (gemv_rows.hpp): inputs that are
  // zero are skipped, their weights never read.
  std::int64_t gemm_prepared_size(std::int64_t m, std::int64_t n, std::int64_t k) override {
    if constexpr (FloatScalar<T>) return m == 1 ? cpu::gemv_rows_size<T>(n, k) : m > 1 ? cpu::gemv_panels_size<T>(n, k) : 0;
    else return 0;
  }
  void gemm_prepare(std::int64_t m, const T* w, std::int64_t n, std::int64_t k, T* prepared) override {
    if constexpr (FloatScalar<T>) m == 1 ? cpu::gemv_rows_pack(w, n, k, prepared) : cpu::gemv_pack(w, n, k, prepared);
    else math_unsupported("gemm_prepare");
  }
  std::int64_t gemm_prepared_part(std::int64_t m) override { return m <= cpu::kGemvRows ? cpu::kGemvPanel : 0; }
  void gemm_prepared(std::int64_t m, std::int64_t rows, std::int64_t n, std::int64_t k, const T* x, std::int64_t ldx,
                     const T* prepared, T* y, std::int64_t ldy, std::int64_t n0, std::int64_t n1, std::int64_t k0,
                     std::int64_t k1) override {
    if constexpr (FloatScalar<T>) {
      FROST_CHECK(1 <= m && m <= rows, "frost::cpu::gemm_prepared: ", m, " rows of input for a [", n, ", ", k,
                  "] weight prepared for ", rows, " rows (expected 1 to ", rows, ")");
      // Whole products of 8 rows (a linear chain's row blocks) take the GEMM's
      // 8 x 3-panel blocks: W read once, not once per 4 rows.
      const bool whole = n0 == 0 && n1 == n && k0 == 0 && k1 == k;
      if (m < cpu::kGemvRows || (m == cpu::kGemvRows && !whole)) {
        FROST_CHECK(n0 % cpu::kGemvPanel == 0 && 0 <= n0 && n0 <= n1 && n1 <= n && 0 <= k0 && k0 <= k1 && k1 <= k,
                    "frost::cpu::gemm_prepared: outputs [", n0, ", ", n1, ") and inputs [", k0, ", ", k1,
                    ") are not a part of the matrix-vector panels of a [", n, ", ", k, "] weight");
        if (rows == 1) cpu::gemv_rows(n, k, x, prepared, y, n0, n1, k0, k1);
        else cpu::gemv_panels(m, n, k, x, ldx, prepared, y, ldy, n0, n1, k0, k1);
      } else {
        FROST_CHECK(n0 == 0 && n1 == n && k0 == 0 && k1 == k, "frost::cpu::gemm_prepared: the panels of a [", n, ", ", k,
                    "] weight take whole products only for ", m, " rows, not outputs [", n0, ", ", n1, ") and inputs [",
                    k0, ", ", k1, ")");
        cpu::gemm_panels(m, n, k, x, ldx, prepared, y, ldy);
      }
    } else {
      math_unsupported("gemm_prepared");
    }
  }
  void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& idx, const View<T>& y) override {
    cpu::index_select(x, dim, idx, y);
  }
  void gather(const View<const T>& x, int dim, const View<const std::int64_t>& idx, const View<T>& y) override {
    cpu::gather(x, dim, idx, y);
  }
  void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& idx, const View<const T>& src) override {
    cpu::scatter_add(y, dim, idx, src);
  }
  void conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias, const View<T>& y,
              UnaryOp act) override {
    if constexpr (FloatScalar<T>) cpu::conv2d(p, x, w, bias, y, act);
    else math_unsupported("conv2d");
  }
  Shape conv2d_prepared_shape(const Conv2dParams& p) override {
    if constexpr (FloatScalar<T>) return cpu::conv2d_prepared_shape(p);
    else return {};
  }
  void conv2d_prepare(const Conv2dParams& p, const View<const T>& w, const View<T>& prepared) override {
    if constexpr (FloatScalar<T>) cpu::conv2d_prepare(p, w, prepared);
    else math_unsupported("conv2d_prepare");
  }
  void conv2d_prepared(const Conv2dParams& p, const View<const T>& x, const View<const T>& prepared, const T* bias,
                       const View<T>& y, UnaryOp act) override {
    if constexpr (FloatScalar<T>) cpu::conv2d_prepared(p, x, prepared, bias, y, act);
    else math_unsupported("conv2d_prepared");
  }
  bool conv2d_prepared_max_pool(const Conv2dParams& p, const Pool2dParams& q, const View<const T>& x,
                                const View<const T>& prepared, const T* bias, const View<T>& y, UnaryOp act) override {
    if constexpr (FloatScalar<T>) return cpu::conv2d_prepared_max_pool(p, q, x, prepared, bias, y, act);
    else return false;
  }
  bool conv2d_pools_in_pass(const Conv2dParams& p, const Pool2dParams& q, std::int64_t positions) override {
    if constexpr (FloatScalar<T>) return cpu::conv2d_pools_in_pass<T>(p, q, positions);
    else return false;
  }
  bool conv2d_max_pool(const Conv2dParams& p, const Pool2dParams& q, const View<const T>& x, const View<const T>& w,
                       const T* bias, const View<T>& y, UnaryOp act) override {
    if constexpr (FloatScalar<T>) return cpu::conv2d_max_pool(p, q, x, w, bias, y, act);
    else return false;
  }
  void conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                         const View<T>& dx) override {
    if constexpr (FloatScalar<T>) cpu::conv2d_grad_input(p, dy, w, dx);
    else math_unsupported("conv2d_grad_input");
  }
  void conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                          const View<T>& dw) override {
    if constexpr (FloatScalar<T>) cpu::conv2d_grad_weight(p, x, dy, dw);
    else math_unsupported("conv2d_grad_weight");
  }
  void max_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y,
                  const View<std::int64_t>& indices) override {
    if constexpr (FloatScalar<T>) cpu::max_pool2d(p, x, y, indices);
    else math_unsupported("max_pool2d");
  }
  void max_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<const std::int64_t>& indices,
                           const View<T>& dx) override {
    if constexpr (FloatScalar<T>) cpu::max_pool2d_backward(p, dy, indices, dx);
    else math_unsupported("max_pool2d_backward");
  }
  void avg_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y) override {
    if constexpr (FloatScalar<T>) cpu::avg_pool2d(p, x, y);
    else math_unsupported("avg_pool2d");
  }
  void avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<T>& dx) override {
    if constexpr (FloatScalar<T>) cpu::avg_pool2d_backward(p, dy, dx);
    else math_unsupported("avg_pool2d_backward");
  }

  bool batch_norm_runs(std::int64_t, std::int64_t, std::int64_t, double, bool) override { return FloatScalar<T>; }
  void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b, T* y,
                           T* save_mean, T* save_invstd, T* running_mean, T* running_var, double momentum,
                           double eps) override {
    if constexpr (FloatScalar<T>)
      cpu::batch_norm_training(n, c, inner, x, w, b, y, save_mean, save_invstd, running_mean, running_var, momentum,
                               eps);
    else math_unsupported("batch_norm");
  }
  void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b,
                            const T* mean, const T* var, T* y, double eps) override {
    if constexpr (FloatScalar<T>) cpu::batch_norm_inference(n, c, inner, x, w, b, mean, var, y, eps);
    else math_unsupported("batch_norm");
  }
  void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy, const T* w,
                           const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db, double) override {
    if constexpr (FloatScalar<T>) cpu::batch_norm_backward(n, c, inner, x, dy, w, save_mean, save_invstd, dx, dw, db);
    else math_unsupported("batch_norm_backward");
  }

  void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                         std::int64_t n) override {
    if constexpr (FloatScalar<T>) cpu::fused_elementwise(prog, n_instrs, inputs, n_inputs, y, n);
    else math_unsupported("fused_elementwise");
  }
  void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) override {
    if constexpr (FloatScalar<T>) cpu::bias_act(y, n, bias, channels, inner, act);
    else math_unsupported("bias_act");
  }
  void optimizer_step(const OptimStep<T>& o, T* p, const T* g, T* s0, T* s1, T* s2, std::int64_t n) override {
    if constexpr (FloatScalar<T>) {
      cpu::parallel_for(n, cpu::kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) optim_step::apply(o, i, p, g, s0, s1, s2);
      });
    } else {
      math_unsupported("optimizer_step");
    }
  }
  void copy_from_host(const T* host, T* dev, std::int64_t n) override { copy_bytes(host, dev, n); }
  void copy_to_host(const T* dev, T* host, std::int64_t n) override { copy_bytes(dev, host, n); }

 private:
  static void copy_bytes(const T* src, T* dst, std::int64_t n) {
    if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  }
};

}  // namespace frost

#include "widened.hpp"

namespace frost {

template <class T>
Backend<T>& cpu_backend() {
  if constexpr (HalfScalar<T>) {
    static WidenedCpuBackend<T> b;
    return b;
  } else {
    static CpuBackend<T> b;
    return b;
  }
}

}  // namespace frost
#endif  // FROST_CPU_BACKEND_EXTERN
