// The CPU kernels whose code differs by instruction set, against plain
// references: the int8 linear (AVX-512 VNNI, AVX-VNNI, AVX2 or a plain
// loop), the Winograd convolutions (AVX-512 packs the F(4x4) input tiles)
// the batch-1 linear that skips zero inputs (AVX-512 packs their
// indices), and the kernels whose register blocks are sized by the ISA's
// vector width and register count (vec.hpp: the linear's GEMM panels,
// gemm_direct, the few-channel direct convolution). This file is in the suite, built for this machine, and CMake
// also builds it alone for AVX2, for AVX2 with AVX-VNNI and for plain
// x86-64 (frost_isa_*), so the paths of machines without AVX-512 are tested
// here too. It includes only the backend's headers: each extra build takes
// seconds.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <frost/backend/cpu/conv.hpp>
#include <frost/backend/cpu/gemm_direct.hpp>
#include <frost/backend/cpu/gemv_rows.hpp>
#include <frost/backend/cpu/quantized_linear.hpp>

#include "quantized_reference.hpp"

using namespace frost;

namespace {

// The instruction set this build was made for that this CPU lacks (nullptr
// when it has them all): the frost_isa_* builds run wherever the suite does,
// and a CPU without AVX-VNNI (AMD before Zen 5, for one) skips that build's
// cases instead of dying of SIGILL in them.
const char* missing_isa() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
#define FROST_TEST_NEEDS(feature) \
  if (!__builtin_cpu_supports(feature)) return feature;
#if defined(__AVX512F__)
  FROST_TEST_NEEDS("avx512f")
#endif
#if defined(__AVX512BW__)
  FROST_TEST_NEEDS("avx512bw")
#endif
#if defined(__AVX512VNNI__)
  FROST_TEST_NEEDS("avx512vnni")
#endif
#if defined(__AVXVNNI__)
  FROST_TEST_NEEDS("avxvnni")
#endif
#if defined(__AVX2__)
  FROST_TEST_NEEDS("avx2")
#endif
#if defined(__FMA__)
  FROST_TEST_NEEDS("fma")
#endif
#undef FROST_TEST_NEEDS
#endif
  return nullptr;
}

}  // namespace

// Opens each case: the rest of it runs only where the CPU has this build's ISA.
#define SKIP_WITHOUT_BUILD_ISA()                                                                  \
  if (const char* isa = missing_isa()) {                                                          \
    MESSAGE("skipped: this CPU lacks ", std::string(isa), ", which this build's kernels use");                 \
    return;                                                                                       \
  }

using frost_test::quantized_kernel;
using frost_test::quantized_reference;
using frost_test::same;
using frost_test::sz;

namespace {

template <class U>
std::vector<U> normal(std::size_t n, std::mt19937& gen, double scale = 1) {
  std::normal_distribution<double> d(0, scale);
  std::vector<U> v(n);
  for (auto& e : v) e = static_cast<U>(d(gen));
  return v;
}

// ---- convolution -----------------------------------------------------------------

/// y = act(conv(x, w) + b) in double, and beside it sum |x w| at each output
/// (the scale of its rounding error).
struct ConvReference {
  std::vector<double> y, scale;
};

ConvReference conv_reference(const Conv2dParams& p, const float* x, const float* w, const float* b, UnaryOp act) {
  const std::int64_t Cg = p.in_channels / p.groups, Og = p.out_channels / p.groups;
  ConvReference r;
  r.y.resize(sz(p.batch * p.out_channels * p.out_h * p.out_w));
  r.scale.resize(r.y.size());
  for (std::int64_t n = 0; n < p.batch; ++n)
    for (std::int64_t o = 0; o < p.out_channels; ++o)
      for (std::int64_t i = 0; i < p.out_h; ++i)
        for (std::int64_t j = 0; j < p.out_w; ++j) {
          double s = b ? b[o] : 0, a = b ? std::abs(b[o]) : 0;
          const std::int64_t g = o / Og;
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t di = 0; di < 3; ++di)
              for (std::int64_t dj = 0; dj < 3; ++dj) {
                const std::int64_t r0 = i + di - p.pad_h, c0 = j + dj - p.pad_w;
                if (r0 < 0 || r0 >= p.in_h || c0 < 0 || c0 >= p.in_w) continue;
                const double v = double(x[((n * p.in_channels + g * Cg + c) * p.in_h + r0) * p.in_w + c0]) *
                                 w[((o * Cg + c) * 3 + di) * 3 + dj];
                s += v;
                a += std::abs(v);
              }
          const std::size_t at = sz(((n * p.out_channels + o) * p.out_h + i) * p.out_w + j);
          r.y[at] = act == UnaryOp::relu ? std::max(s, 0.0) : s;
          r.scale[at] = a;
        }
  return r;
}

/// Within float's rounding of the sums: a few ulp of sum |x w| (Winograd's
/// transforms scale by up to 8 on the way).
void check_conv(const std::vector<float>& y, const ConvReference& r) {
  REQUIRE(y.size() == r.y.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < y.size(); ++i) bad += !(std::abs(y[i] - r.y[i]) <= 5e-6 * (r.scale[i] + 1e-3));
  CHECK(bad == 0);
}

Conv2dParams conv3x3(std::int64_t batch, std::int64_t cin, std::int64_t cout, std::int64_t h, std::int64_t w,
                     std::int64_t groups = 1) {
  Conv2dParams p;
  p.batch = batch, p.in_channels = cin, p.in_h = h, p.in_w = w, p.out_channels = cout;
  p.kernel_h = p.kernel_w = 3, p.pad_h = p.pad_w = 1, p.out_h = h, p.out_w = w, p.groups = groups;
  return p;
}

}  // namespace

TEST_CASE("isa kernels: int8 linear, exactly the documented formulas (shapes, strides, bias, relu, edge rows)") {
  SKIP_WITHOUT_BUILD_ISA();
  std::mt19937 gen(61);
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {1, 5, 63}, {3, 4, 64}, {4, 7, 65}, {5, 8, 200}, {9, 10, 130},
                         {17, 3, 784}, {6, 40, 300}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const std::int64_t ldx = k + 3;  // rows with a gap between them
    const auto x = normal<float>(sz(m * ldx), gen, 3), w = normal<float>(sz(n * k), gen, 0.2), b = normal<float>(sz(n), gen);
    for (UnaryOp act : {UnaryOp::copy, UnaryOp::relu})
      for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
        CAPTURE(static_cast<int>(act));
        CAPTURE(bias != nullptr);
        CHECK(same(quantized_kernel(x.data(), m, k, ldx, w.data(), n, bias, act),
                   quantized_reference(x.data(), m, k, ldx, w.data(), n, bias, act)));
      }
  }
  // Double operands, and rows the scales must handle: all zeros (y = bias),
  // inf or NaN (no scale: NaN), a zero weight row (its outputs: the bias),
  // a row of subnormal size (127 / max would overflow: zeros).
  const std::int64_t m = 5, n = 3, k = 70;
  auto x = normal<double>(sz(m * k), gen), w = normal<double>(sz(n * k), gen), b = normal<double>(sz(n), gen);
  for (std::int64_t j = 0; j < k; ++j) {
    x[sz(j)] = 0;          // row 0
    w[sz(2 * k + j)] = 0;  // weight row 2
  }
  x[sz(1 * k + 5)] = INFINITY;  // row 1
  x[sz(2 * k + 9)] = NAN;       // row 2
  for (std::int64_t j = 0; j < k; ++j) x[sz(4 * k + j)] = 1e-40 * double(j % 3);  // row 4
  const auto got = quantized_kernel(x.data(), m, k, k, w.data(), n, b.data(), UnaryOp::copy);
  CHECK(same(got, quantized_reference(x.data(), m, k, k, w.data(), n, b.data(), UnaryOp::copy)));
  for (std::int64_t c = 0; c < n; ++c) {
    CHECK(got[sz(c)] == b[sz(c)]);
    CHECK(std::isnan(got[sz(n + c)]));
    CHECK(std::isnan(got[sz(2 * n + c)]));
    CHECK(got[sz(4 * n + c)] == b[sz(c)]);
  }
  CHECK(got[sz(3 * n + 2)] == b[2]);
  // Within a percent or two of float, as int8 should be.
  const std::int64_t M = 8, N = 64, K = 512;
  const auto xf = normal<float>(sz(M * K), gen), wf = normal<float>(sz(N * K), gen, 0.05);
  const auto y = quantized_kernel(xf.data(), M, K, K, wf.data(), N, static_cast<const float*>(nullptr), UnaryOp::copy);
  double err = 0, top = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t c = 0; c < N; ++c) {
      double s = 0;
      for (std::int64_t j = 0; j < K; ++j) s += double(xf[sz(i * K + j)]) * wf[sz(c * K + j)];
      err = std::max(err, std::abs(y[sz(i * N + c)] - s));
      top = std::max(top, std::abs(s));
    }
  CHECK(err < 0.03 * top);
}

TEST_CASE("isa kernels: Winograd convolutions (F(2x2) and F(4x4), tiles packed or not, prepared, pooled) against direct sums") {
  SKIP_WITHOUT_BUILD_ISA();
  std::mt19937 gen(7);
  // F(4x4) with 4x4 tiles packed 16 at a time (16x16 and 13x70 outputs) and
  // unpacked (70x70: more tiles than the packer holds); F(2x2) (9x11, one
  // image); groups; batch 1 with its output channels split over threads.
  for (const Conv2dParams& p : {conv3x3(4, 16, 16, 16, 16), conv3x3(2, 16, 32, 13, 70), conv3x3(1, 16, 16, 70, 70),
                                conv3x3(1, 32, 16, 9, 11), conv3x3(4, 32, 32, 16, 16, 2), conv3x3(1, 64, 64, 32, 32)}) {
    CAPTURE(p.batch);
    CAPTURE(p.in_channels);
    CAPTURE(p.out_channels);
    CAPTURE(p.in_h);
    CAPTURE(p.in_w);
    CAPTURE(p.groups);
    REQUIRE(cpu::conv_detail::winograd_variant(p) != 0);
    const std::int64_t Cg = p.in_channels / p.groups;
    const auto x = normal<float>(sz(p.batch * p.in_channels * p.in_h * p.in_w), gen);
    const auto w = normal<float>(sz(p.out_channels * Cg * 9), gen, 0.2), b = normal<float>(sz(p.out_channels), gen);
    const Shape xs{p.batch, p.in_channels, p.in_h, p.in_w}, ws{p.out_channels, Cg, 3, 3};
    const Shape ys{p.batch, p.out_channels, p.out_h, p.out_w};
    for (UnaryOp act : {UnaryOp::copy, UnaryOp::relu}) {
      const ConvReference ref = conv_reference(p, x.data(), w.data(), b.data(), act);
      std::vector<float> y(ref.y.size(), NAN);
      cpu::conv2d<float>(p, View<const float>(x.data(), xs), View<const float>(w.data(), ws), b.data(), View<float>(y.data(), ys), act);
      check_conv(y, ref);
      // The filters transformed once, as a frozen plan keeps them.
      const Shape us = cpu::conv2d_prepared_shape(p);
      REQUIRE(us.ndim() == 3);
      std::vector<float> u(sz(us.numel()));
      cpu::conv2d_prepare<float>(p, View<const float>(w.data(), ws), View<float>(u.data(), us));
      std::fill(y.begin(), y.end(), NAN);
      cpu::conv2d_prepared<float>(p, View<const float>(x.data(), xs), View<const float>(u.data(), us), b.data(),
                                  View<float>(y.data(), ys), act);
      check_conv(y, ref);
      // Pooled 2x2 in the output transform (F(4x4)'s even outputs).
      Pool2dParams q;
      q.batch = p.batch, q.channels = p.out_channels, q.in_h = p.out_h, q.in_w = p.out_w;
      q.out_h = p.out_h / 2, q.out_w = p.out_w / 2, q.kernel_h = q.kernel_w = q.stride_h = q.stride_w = 2;
      std::vector<float> pooled(sz(p.batch * p.out_channels * q.out_h * q.out_w), NAN);
      if (cpu::conv2d_prepared_max_pool<float>(p, q, View<const float>(x.data(), xs), View<const float>(u.data(), us),
                                               b.data(), View<float>(pooled.data(), Shape{p.batch, p.out_channels, q.out_h, q.out_w}),
                                               act)) {
        ConvReference pr;
        for (std::int64_t plane = 0; plane < p.batch * p.out_channels; ++plane)
          for (std::int64_t i = 0; i < q.out_h; ++i)
            for (std::int64_t j = 0; j < q.out_w; ++j) {
              std::size_t best = sz((plane * p.out_h + 2 * i) * p.out_w + 2 * j);
              for (std::int64_t di = 0; di < 2; ++di)
                for (std::int64_t dj = 0; dj < 2; ++dj) {
                  const std::size_t at = sz((plane * p.out_h + 2 * i + di) * p.out_w + 2 * j + dj);
                  if (ref.y[at] > ref.y[best]) best = at;
                }
              pr.y.push_back(ref.y[best]);
              pr.scale.push_back(ref.scale[best]);
            }
        check_conv(pooled, pr);
      }
    }
  }
}

namespace {
/// gemv_rows in T over W [n, k] and x with every third input zero, split in
/// halves of outputs and of inputs, against the dense sum in double.
template <class T>
void check_gemv_rows(std::int64_t n, std::int64_t k, bool finite, std::mt19937& gen) {
  auto x = normal<T>(sz(k), gen);
  for (std::int64_t i = 0; i < k; i += 3) x[sz(i)] = 0;  // a third of the inputs zero, as after a ReLU
  auto w = normal<T>(sz(n * k), gen, 0.1);
  if (!finite) w[sz(k - 1)] = INFINITY;  // input k - 1 is zero: 0 * inf makes y[0] NaN, as eager
  if (!finite) x[sz(k - 1)] = 0;
  std::vector<T> rows(sz(cpu::gemv_rows_size<T>(n, k)));
  cpu::gemv_rows_pack(w.data(), n, k, rows.data());
  std::vector<T> y(sz(n), -1);
  // Two halves of the outputs (the first a whole number of panels), two halves of the inputs.
  const std::int64_t n0 = n / 2 / cpu::kGemvPanel * cpu::kGemvPanel, k0 = k / 2;
  std::vector<T> part(sz(n), 0);
  cpu::gemv_rows(n, k, x.data(), rows.data(), y.data(), 0, n0, 0, k0);
  cpu::gemv_rows(n, k, x.data(), rows.data(), y.data(), n0, n, 0, k0);
  cpu::gemv_rows(n, k, x.data(), rows.data(), part.data(), 0, n, k0, k);
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (std::int64_t o = 0; o < n; ++o) {
    double s = 0, a = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      s += double(x[sz(i)]) * w[sz(o * k + i)];
      a += std::abs(double(x[sz(i)]) * w[sz(o * k + i)]);
    }
    const double got = double(y[sz(o)]) + part[sz(o)];
    if (std::isnan(s)) CHECK(std::isnan(got));
    else CHECK(std::abs(got - s) <= tol * (a + 1e-6));
  }
}
}  // namespace

TEST_CASE("isa kernels: the batch-1 linear that skips zero inputs, against the dense sum; a non-finite weight reads them") {
  SKIP_WITHOUT_BUILD_ISA();
  std::mt19937 gen(3);
  // Input counts around the 16-input masks and the 1024-input chunks; output
  // counts that end inside a vector, a group of 256 floats (128 doubles).
  for (auto [n, k] : {std::pair{1, 1}, {17, 40}, {96, 64}, {97, 1025}, {300, 1000}, {512, 2100}})
    for (bool finite : {true, false}) {
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(finite);
      check_gemv_rows<float>(n, k, finite, gen);
      check_gemv_rows<double>(n, k, finite, gen);
    }
}

namespace {
/// |got - sum| within T's rounding of sum |terms|, for m x n sums over k.
template <class T>
void check_products(const std::vector<T>& got, std::int64_t ldg, const std::vector<double>& sum,
                    const std::vector<double>& mag, std::int64_t m, std::int64_t n) {
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  std::int64_t bad = 0;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < n; ++c)
      bad += !(std::abs(double(got[sz(r * ldg + c)]) - sum[sz(r * n + c)]) <= tol * (mag[sz(r * n + c)] + 1e-6));
  CHECK(bad == 0);
}

/// y = x W^T for m rows through W's GEMM panels: gemm_panels whole, and
/// gemv_panels (m <= kGemvRows) in two parts of the outputs and of the
/// inputs added up, against the sums in double.
template <class T>
void check_panels(std::int64_t m, std::int64_t n, std::int64_t k, std::mt19937& gen) {
  const std::int64_t ldx = k + 3, ldy = n + 5;  // row strides past the rows
  const auto x = normal<T>(sz(m * ldx), gen), w = normal<T>(sz(n * k), gen, 0.1);
  std::vector<double> sum(sz(m * n)), mag(sz(m * n));
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t o = 0; o < n; ++o)
      for (std::int64_t i = 0; i < k; ++i) {
        const double v = double(x[sz(r * ldx + i)]) * w[sz(o * k + i)];
        sum[sz(r * n + o)] += v;
        mag[sz(r * n + o)] += std::abs(v);
      }
  std::vector<T> panels(sz(cpu::gemv_panels_size<T>(n, k)));
  cpu::gemv_pack(w.data(), n, k, panels.data());
  std::vector<T> y(sz(m * ldy), T(-7));
  cpu::gemm_panels(m, n, k, x.data(), ldx, panels.data(), y.data(), ldy);
  check_products(y, ldy, sum, mag, m, n);
  for (std::int64_t r = 0; r < m; ++r)  // nothing written past the outputs
    for (std::int64_t c = n; c < ldy; ++c) CHECK(y[sz(r * ldy + c)] == T(-7));
  if (m > cpu::kGemvRows) return;
  const std::int64_t n0 = n / 2 / cpu::kGemvPanel * cpu::kGemvPanel, k0 = k / 2;
  std::vector<T> a(sz(m * ldy), T(0)), b(sz(m * ldy), T(0));
  cpu::gemv_panels(m, n, k, x.data(), ldx, panels.data(), a.data(), ldy, 0, n0, 0, k0);
  cpu::gemv_panels(m, n, k, x.data(), ldx, panels.data(), a.data(), ldy, n0, n, 0, k0);
  cpu::gemv_panels(m, n, k, x.data(), ldx, panels.data(), b.data(), ldy, 0, n, k0, k);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  check_products(a, ldy, sum, mag, m, n);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = n; c < ldy; ++c) CHECK(a[sz(r * ldy + c)] == T(0));
}

/// gemm_direct's M [O, P] = U [O, C] V [C, P] for the columns [0, cols)
/// (rows of V and M hold whole vectors past them), against double.
template <class T>
void check_gemm_direct(std::int64_t O, std::int64_t C, std::int64_t cols, std::mt19937& gen) {
  const std::int64_t L = cpu::kVecLanes<T>, P = (cols + L - 1) / L * L + L;  // a vector to spare
  const auto U = normal<T>(sz(O * C), gen), V = normal<T>(sz(C * P), gen);
  std::vector<double> sum(sz(O * cols)), mag(sz(O * cols));
  for (std::int64_t o = 0; o < O; ++o)
    for (std::int64_t q = 0; q < cols; ++q)
      for (std::int64_t c = 0; c < C; ++c) {
        const double v = double(U[sz(o * C + c)]) * V[sz(c * P + q)];
        sum[sz(o * cols + q)] += v;
        mag[sz(o * cols + q)] += std::abs(v);
      }
  std::vector<T> M(sz(O * P), T(-7));
  cpu::gemm_direct(O, C, cols, U.data(), C, V.data(), P, M.data(), P);
  check_products(M, P, sum, mag, O, cols);
  const std::int64_t whole = (cols + L - 1) / L * L;
  for (std::int64_t o = 0; o < O; ++o)  // the spare vector past the whole vectors is left alone
    for (std::int64_t q = whole; q < P; ++q) CHECK(M[sz(o * P + q)] == T(-7));
}
}  // namespace

TEST_CASE("isa kernels: register-blocked GEMMs (a linear's panels, gemm_direct) against sums in double") {
  SKIP_WITHOUT_BUILD_ISA();
  std::mt19937 gen(5);
  // Rows around every row block (1-8 for the matrix-vector panels; 6 and 8
  // for the GEMM's), outputs ending inside a panel, depths across the
  // GEMM's 128-input blocks.
  for (std::int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 19, 64})
    for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {10, 7}, {16, 128}, {33, 129}, {100, 300}}) {
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      check_panels<float>(m, n, k, gen);
      check_panels<double>(m, n, k, gen);
    }
  for (std::int64_t O : {6, 7, 8, 9, 13, 24})  // from one row block (6 rows with 16 registers, 8 with 32)
    for (std::int64_t C : {1, 5, 64})
      for (std::int64_t cols : {1, 8, 17, 50, 96}) {
        if (!cpu::gemm_direct_fits(O)) continue;
        CAPTURE(O);
        CAPTURE(C);
        CAPTURE(cols);
        check_gemm_direct<float>(O, C, cols, gen);
        check_gemm_direct<double>(O, C, cols, gen);
      }
}

TEST_CASE("isa kernels: the few-channel direct convolution (plain and max-pooled in its registers) against direct sums") {
  SKIP_WITHOUT_BUILD_ISA();
  std::mt19937 gen(9);
  // 1-5 input channels; filter counts from one block (6 with 16 registers,
  // 8 with 32) and overlapping the last block; widths of one vector up to
  // several with a remainder.
  for (const Conv2dParams& p : {conv3x3(2, 3, 8, 16, 16), conv3x3(1, 1, 13, 9, 37), conv3x3(3, 5, 64, 12, 70),
                                conv3x3(1, 2, 9, 34, 33), conv3x3(1, 3, 6, 10, 24), conv3x3(2, 4, 7, 8, 19)}) {
    CAPTURE(p.batch);
    CAPTURE(p.in_channels);
    CAPTURE(p.out_channels);
    CAPTURE(p.in_h);
    CAPTURE(p.in_w);
    const bool direct = cpu::conv_detail::use_direct_conv<float>(p);  // fewer filters than this build's block: im2col
    CAPTURE(direct);
    const auto x = normal<float>(sz(p.batch * p.in_channels * p.in_h * p.in_w), gen);
    const auto w = normal<float>(sz(p.out_channels * p.in_channels * 9), gen, 0.3), b = normal<float>(sz(p.out_channels), gen);
    const Shape xs{p.batch, p.in_channels, p.in_h, p.in_w}, ws{p.out_channels, p.in_channels, 3, 3};
    for (UnaryOp act : {UnaryOp::copy, UnaryOp::relu}) {
      const ConvReference ref = conv_reference(p, x.data(), w.data(), b.data(), act);
      std::vector<float> y(ref.y.size(), NAN);
      cpu::conv2d<float>(p, View<const float>(x.data(), xs), View<const float>(w.data(), ws), b.data(),
                         View<float>(y.data(), Shape{p.batch, p.out_channels, p.out_h, p.out_w}), act);
      check_conv(y, ref);
      Pool2dParams q;
      q.batch = p.batch, q.channels = p.out_channels, q.in_h = p.out_h, q.in_w = p.out_w;
      q.out_h = p.out_h / 2, q.out_w = p.out_w / 2, q.kernel_h = q.kernel_w = q.stride_h = q.stride_w = 2;
      std::vector<float> pooled(sz(p.batch * p.out_channels * q.out_h * q.out_w), NAN);
      // conv2d_max_pool pools in the conv's pass where every build can (a
      // frozen plan relies on it); the kernel itself where this build can.
      CHECK(cpu::conv2d_max_pool<float>(p, q, View<const float>(x.data(), xs), View<const float>(w.data(), ws), b.data(),
                                        View<float>(pooled.data(), Shape{p.batch, p.out_channels, q.out_h, q.out_w}), act) ==
            cpu::conv_detail::use_direct_pool_everywhere<float>(p));
      if (!cpu::conv_detail::use_direct_pool<float>(p)) continue;
      std::fill(pooled.begin(), pooled.end(), NAN);
      cpu::conv_detail::direct_over_images(p, cpu::conv_detail::conv2d_direct_max_pool<float>, x.data(), w.data(), b.data(),
                                           pooled.data(), act);
      // The pooled values are the unpooled call's, exactly (the same sums in the same order).
      std::int64_t differ = 0;
      for (std::int64_t plane = 0; plane < p.batch * p.out_channels; ++plane)
        for (std::int64_t i = 0; i < q.out_h; ++i)
          for (std::int64_t j = 0; j < q.out_w; ++j) {
            float best = -INFINITY;
            for (std::int64_t di = 0; di < 2; ++di)
              for (std::int64_t dj = 0; dj < 2; ++dj)
                best = std::max(best, y[sz((plane * p.out_h + 2 * i + di) * p.out_w + 2 * j + dj)]);
            differ += pooled[sz((plane * q.out_h + i) * q.out_w + j)] != best;
          }
      CHECK(differ == 0);
    }
  }
}
