// WidenedCpuBackend<H>: the CPU's float16 and bfloat16 math. Each math
// kernel widens its 16-bit operands to float, runs the float kernel and
// rounds its results back once (but the bfloat16 GEMM on AVX-512 BF16,
// which multiplies the 16-bit values as they are: gemm_bf16.hpp). That is
// PyTorch's opmath rule (a 16-bit op computes in float; sums, products and
// GEMMs accumulate in float), so results match PyTorch's CPU to the order of
// float sums, at the cost of one pass over memory each way. Copies, casts,
// fills, indexing and random draws stay CpuBackend<H>'s own 16-bit loops.
//
// Only cpu_backend<float>() is called, through the Backend interface, so a
// translation unit compiling the 16-bit kernels does not compile the float
// ones again (they are extern there: src/cpu_kernels_half.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "gemm_bf16.hpp"
#include "parallel.hpp"

namespace frost {

#ifdef FROST_CPU_BACKEND_KERNELS
extern template Backend<float>& cpu_backend<float>();
#endif

namespace cpu {

/// A float copy of a 16-bit operand laid out as the operand is: the same
/// strides reach the same elements, so the float kernel takes the operand's
/// own geometry (broadcast and transposed views, GEMM leading dimensions).
/// The copy spans the offsets the view reaches, so a broadcast operand
/// stays small.
template <class H>
class Wide {
 public:
  /// A strided operand; `read` widens its current values (inputs, and the
  /// outputs a kernel accumulates into or leaves partly untouched).
  Wide(const H* data, const Shape& shape, const Shape& strides, bool read) : shape_(shape), strides_(strides) {
    if (!data) return;
    std::int64_t lo = 0, hi = 1;
    if (shape.numel() == 0) hi = 0;
    else
      for (int d = 0; d < shape.ndim(); ++d) {
        const std::int64_t ext = (shape[d] - 1) * strides[d];
        (ext < 0 ? lo : hi) += ext;
      }
    // Uninitialized: an output the kernel writes whole is not zeroed first.
    buf_ = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(hi - lo));
    base_ = buf_.get() - lo;
    if (read) {
      const H* src = data + lo;
      float* dst = buf_.get();
      parallel_for(hi - lo, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) dst[i] = static_cast<float>(src[i]);
      });
    }
  }
  template <class V>
  Wide(const View<V>& v, bool read) : Wide(v.data, v.shape, v.strides, read) {}
  /// n dense elements at p; a null p (an absent bias or statistic) stays null.
  Wide(const H* p, std::int64_t n, bool read) : Wide(p, Shape{n}, Shape{1}, read) {}

  float* data() const { return base_; }
  View<float> view() const { return {base_, shape_, strides_}; }
  /// Rounds the float results into `dst`'s elements: those the view reaches, no others.
  void narrow(H* dst) const {
    if (base_) cast(View<const float>(view()), View<H>(dst, shape_, strides_));
  }

 private:
  Shape shape_, strides_;
  std::unique_ptr<float[]> buf_;
  float* base_ = nullptr;
};

}  // namespace cpu

template <HalfScalar H>
struct WidenedCpuBackend final : CpuBackend<H> {
  using W = cpu::Wide<H>;
  static Backend<float>& f() { return cpu_backend<float>(); }

  void unary(UnaryOp op, const View<const H>& x, const View<H>& y, float p0, float p1) override {
    W wx(x, true), wy(y, false);
    f().unary(op, wx.view(), wy.view(), p0, p1);
    wy.narrow(y.data);
  }
  void binary(BinaryOp op, const View<const H>& a, const View<const H>& b, const View<H>& y, float p) override {
    W wa(a, true), wb(b, true), wy(y, false);
    f().binary(op, wa.view(), wb.view(), wy.view(), p);
    wy.narrow(y.data);
  }
  void reduce(ReduceOp op, const View<const H>& x, int n_reduced, const View<H>& y) override {
    W wx(x, true), wy(y, false);
    f().reduce(op, wx.view(), n_reduced, wy.view());
    wy.narrow(y.data);
  }
  void softmax(const View<const H>& x, const View<H>& y, bool log) override {
    W wx(x, true), wy(y, false);
    f().softmax(wx.view(), wy.view(), log);
    wy.narrow(y.data);
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, H alpha, const H* a, std::int64_t lda,
            std::int64_t sa, const H* b, std::int64_t ldb, std::int64_t sb, H beta, H* c, std::int64_t ldc,
            std::int64_t sc, std::int64_t batch) override {
#ifdef FROST_HAVE_BF16_GEMM
    if constexpr (std::is_same_v<H, bfloat16>) {
      // vdpbf16ps: bfloat16 products, float32 sums, no widened copies (gemm_bf16.hpp).
      cpu::gemm_bf16(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
      return;
    }
#endif
    // Each matrix as the [batch, rows, columns] view its pointer and leading dims describe.
    W wa(a, Shape{batch, ta ? k : m, ta ? m : k}, Shape{sa, lda, 1}, true);
    W wb(b, Shape{batch, tb ? n : k, tb ? k : n}, Shape{sb, ldb, 1}, true);
    W wc(c, Shape{batch, m, n}, Shape{sc, ldc, 1}, static_cast<float>(beta) != 0.0f);
    f().gemm(ta, tb, m, n, k, alpha, wa.data(), lda, sa, wb.data(), ldb, sb, beta, wc.data(), ldc, sc, batch);
    wc.narrow(c);
  }
  void conv2d(const Conv2dParams& p, const View<const H>& x, const View<const H>& w, const H* bias, const View<H>& y,
              UnaryOp act) override {
    W wx(x, true), ww(w, true), wbias(bias, p.out_channels, true), wy(y, false);
    f().conv2d(p, wx.view(), ww.view(), wbias.data(), wy.view(), act);
    wy.narrow(y.data);
  }
  void conv2d_grad_input(const Conv2dParams& p, const View<const H>& dy, const View<const H>& w,
                         const View<H>& dx) override {
    W wdy(dy, true), ww(w, true), wdx(dx, true);
    f().conv2d_grad_input(p, wdy.view(), ww.view(), wdx.view());
    wdx.narrow(dx.data);
  }
  void conv2d_grad_weight(const Conv2dParams& p, const View<const H>& x, const View<const H>& dy,
                          const View<H>& dw) override {
    W wx(x, true), wdy(dy, true), wdw(dw, true);
    f().conv2d_grad_weight(p, wx.view(), wdy.view(), wdw.view());
    wdw.narrow(dw.data);
  }
  void max_pool2d(const Pool2dParams& p, const View<const H>& x, const View<H>& y,
                  const View<std::int64_t>& indices) override {
    W wx(x, true), wy(y, false);
    f().max_pool2d(p, wx.view(), wy.view(), indices);
    wy.narrow(y.data);
  }
  void max_pool2d_backward(const Pool2dParams& p, const View<const H>& dy, const View<const std::int64_t>& indices,
                           const View<H>& dx) override {
    W wdy(dy, true), wdx(dx, true);
    f().max_pool2d_backward(p, wdy.view(), indices, wdx.view());
    wdx.narrow(dx.data);
  }
  void avg_pool2d(const Pool2dParams& p, const View<const H>& x, const View<H>& y) override {
    W wx(x, true), wy(y, false);
    f().avg_pool2d(p, wx.view(), wy.view());
    wy.narrow(y.data);
  }
  void avg_pool2d_backward(const Pool2dParams& p, const View<const H>& dy, const View<H>& dx) override {
    W wdy(dy, true), wdx(dx, true);
    f().avg_pool2d_backward(p, wdy.view(), wdx.view());
    wdx.narrow(dx.data);
  }

  bool batch_norm_runs(std::int64_t, std::int64_t, std::int64_t, double, bool) override { return true; }
  void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const H* x, const H* w, const H* b, H* y,
                           H* save_mean, H* save_invstd, H* running_mean, H* running_var, double momentum,
                           double eps) override {
    const std::int64_t len = n * c * inner;
    W wx(x, len, true), ww(w, c, true), wb(b, c, true), wy(y, len, false), wm(save_mean, c, false),
        wi(save_invstd, c, false), wrm(running_mean, c, true), wrv(running_var, c, true);
    f().batch_norm_training(n, c, inner, wx.data(), ww.data(), wb.data(), wy.data(), wm.data(), wi.data(), wrm.data(),
                            wrv.data(), momentum, eps);
    wy.narrow(y), wm.narrow(save_mean), wi.narrow(save_invstd), wrm.narrow(running_mean), wrv.narrow(running_var);
  }
  void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const H* x, const H* w, const H* b,
                            const H* mean, const H* var, H* y, double eps) override {
    const std::int64_t len = n * c * inner;
    W wx(x, len, true), ww(w, c, true), wb(b, c, true), wm(mean, c, true), wv(var, c, true), wy(y, len, false);
    f().batch_norm_inference(n, c, inner, wx.data(), ww.data(), wb.data(), wm.data(), wv.data(), wy.data(), eps);
    wy.narrow(y);
  }
  void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const H* x, const H* dy, const H* w,
                           const H* save_mean, const H* save_invstd, H* dx, H* dw, H* db, double eps) override {
    const std::int64_t len = n * c * inner;
    W wx(x, len, true), wdy(dy, len, true), ww(w, c, true), wm(save_mean, c, true), wi(save_invstd, c, true),
        wdx(dx, len, false), wdw(dw, c, false), wdb(db, c, false);
    f().batch_norm_backward(n, c, inner, wx.data(), wdy.data(), ww.data(), wm.data(), wi.data(), wdx.data(),
                            wdw.data(), wdb.data(), eps);
    wdx.narrow(dx), wdw.narrow(dw), wdb.narrow(db);
  }

  void fused_elementwise(const FusedInstr* prog, int n_instrs, const H* const* inputs, int n_inputs, H* y,
                         std::int64_t n) override {
    std::vector<W> wide;
    wide.reserve(static_cast<std::size_t>(n_inputs));
    std::vector<const float*> in;
    for (int i = 0; i < n_inputs; ++i) in.push_back(wide.emplace_back(inputs[i], n, true).data());
    W wy(y, n, false);
    f().fused_elementwise(prog, n_instrs, in.data(), n_inputs, wy.data(), n);
    wy.narrow(y);
  }
  void bias_act(H* y, std::int64_t n, const H* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) override {
    W wy(y, n, true), wb(bias, channels, true);
    f().bias_act(wy.data(), n, wb.data(), channels, inner, act);
    wy.narrow(y);
  }
};

}  // namespace frost
