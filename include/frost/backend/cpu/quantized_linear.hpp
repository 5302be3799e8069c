// Dynamically quantized linear layers on the CPU (PyTorch's quantize_dynamic
// for nn.Linear), what a plan frozen with quantize_linear runs:
//  - the weight W [N, K], once: int8 per output channel, symmetric,
//    sw[n] = max|W[n, :]| / 127 and qw = round(W / sw) in [-127, 127];
//  - each row of the input x [M, K], every run: int8 with its own scale,
//    sx[m] = max|x[m, :]| / 127, q = round(x / sx) in [-127, 127], stored
//    as q + 128 in a uint8 (the unsigned-by-signed byte products that VNNI's
//    vpdpbusd, and GCC's vectoriser for it, multiply four at a time);
//  - y[m, n] = sx[m] sw[n] (sum_k (q + 128) qw - 128 sum_k qw) + b[n], the
//    sums exact in int32 (K at most kMaxQuantizedDepth), then the activation.
// Both byte arrays are zero-padded to a multiple of kQuantizedAlign along K,
// so the dot products have no tails. A row of x holding inf or NaN has no
// scale: its outputs are NaN. The weight is a quarter of the float bytes,
// which is what a matrix-vector product (batch 1) is bound by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../../core/error.hpp"
#include "../../core/functors.hpp"
#include "parallel.hpp"

namespace frost::cpu {

inline constexpr std::int64_t kQuantizedAlign = 64;
/// Largest K whose int32 sums cannot overflow: 255 * 127 * K < 2^31.
inline constexpr std::int64_t kMaxQuantizedDepth = 65536;

namespace quant {
inline std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }
/// Nearest integer, halves away from zero (the same on every path).
inline int nearest(float v) { return static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f)); }
}  // namespace quant

/// Where the parts of a quantized weight lie in its blob: N scales (float),
/// N int32 sums of the row's bytes, then N rows of padded K int8 bytes.
struct QuantizedWeightLayout {
  std::int64_t n = 0, k = 0, kp = 0, sums = 0, bytes = 0, total = 0;
  QuantizedWeightLayout(std::int64_t n_, std::int64_t k_) : n(n_), k(k_), kp(quant::round_up(k_, kQuantizedAlign)) {
    sums = n * 4;
    bytes = quant::round_up(sums + n * 4, kQuantizedAlign);
    total = bytes + n * kp;
  }
};
/// Where the parts of one run's quantized input lie in its scratch: M
/// scales (float), then M rows of padded K uint8 bytes.
struct QuantizedInputLayout {
  std::int64_t m = 0, kp = 0, bytes = 0, total = 0;
  QuantizedInputLayout(std::int64_t m_, std::int64_t k_) : m(m_), kp(quant::round_up(k_, kQuantizedAlign)) {
    bytes = quant::round_up(m * 4, kQuantizedAlign);
    total = bytes + m * kp;
  }
};

/// Elements of `elem_size` bytes that hold `bytes` bytes (a plan's
/// buffers are typed; the blobs live in its float or double buffers).
constexpr std::int64_t elements_holding(std::int64_t bytes, std::int64_t elem_size) {
  return (bytes + elem_size - 1) / elem_size;
}

/// W [n, k] (row stride ldw) quantized into `blob` (QuantizedWeightLayout(n, k).total bytes).
template <class T>
void quantize_weight(const T* w, std::int64_t n, std::int64_t k, std::int64_t ldw, void* blob) {
  const QuantizedWeightLayout L(n, k);
  auto* base = static_cast<unsigned char*>(blob);
  auto* scale = reinterpret_cast<float*>(base);
  auto* sum = reinterpret_cast<std::int32_t*>(base + L.sums);
  auto* q = reinterpret_cast<std::int8_t*>(base + L.bytes);
  std::memset(q, 0, static_cast<std::size_t>(n * L.kp));
  for (std::int64_t r = 0; r < n; ++r) {
    const T* row = w + r * ldw;
    double amax = 0;
    for (std::int64_t j = 0; j < k; ++j) amax = std::max(amax, std::abs(double(row[j])));
    // A zero row keeps scale 1 (its bytes are 0); weights are finite, checked when frozen.
    const double s = amax > 0 ? amax / 127.0 : 1.0;
    std::int32_t total = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const double v = std::nearbyint(double(row[j]) / s);
      const auto b = static_cast<std::int8_t>(std::clamp(v, -127.0, 127.0));
      q[r * L.kp + j] = b;
      total += b;
    }
    scale[r] = static_cast<float>(s);
    sum[r] = total;
  }
}

/// x's rows [m, k] (row stride ldx) quantized into `scratch`
/// (QuantizedInputLayout(m, k).total bytes); a row's scale is NaN when it
/// holds inf or NaN.
template <class T>
void quantize_rows(const T* x, std::int64_t m, std::int64_t k, std::int64_t ldx, void* scratch) {
  const QuantizedInputLayout L(m, k);
  auto* base = static_cast<unsigned char*>(scratch);
  auto* scale = reinterpret_cast<float*>(base);
  parallel_for(m, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(k, 1)), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * ldx;
      unsigned char* u = base + L.bytes + r * L.kp;
      // The largest magnitude, and a probe that is NaN when the row holds inf or NaN (x * 0).
      float amax = 0, probe = 0;
#if defined(_OPENMP)
#pragma omp simd reduction(max : amax) reduction(+ : probe)
#endif
      for (std::int64_t j = 0; j < k; ++j) {
        const float v = static_cast<float>(row[j]);
        amax = std::max(amax, v < 0 ? -v : v);
        probe += v * 0.0f;
      }
      if (probe != 0.0f) {  // NaN: no scale for this row
        scale[r] = std::numeric_limits<float>::quiet_NaN();
        std::memset(u, 128, static_cast<std::size_t>(L.kp));
        continue;
      }
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      scale[r] = amax > 0 ? amax / 127.0f : 1.0f;
      FROST_SIMD
      for (std::int64_t j = 0; j < k; ++j) {
        const float q = std::min(std::max(static_cast<float>(row[j]) * inv, -127.0f), 127.0f);
        u[j] = static_cast<unsigned char>(quant::nearest(q) + 128);
      }
      std::memset(u + k, 128, static_cast<std::size_t>(L.kp - k));  // q = 0 against the weight's zero padding
    }
  });
}

namespace quant {
/// The R x C dot products of R input rows with C weight rows (row stride kp,
/// a multiple of kQuantizedAlign): GCC turns each into VNNI byte products,
/// and the R + C rows are each loaded once for all R C sums.
template <int R, int C>
void dot_block(const unsigned char* u, const std::int8_t* w, std::int64_t kp, std::int32_t (&out)[R][C]) {
  std::int32_t s[R][C] = {};
  for (std::int64_t j = 0; j < kp; ++j) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) s[r][c] += std::int32_t(u[r * kp + j]) * std::int32_t(w[c * kp + j]);
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r][c] = s[r][c];
}
}  // namespace quant

/// y [m, n] (row stride ldy) = act(x W^T + bias) from the quantized input
/// (quantize_rows) and weight (quantize_weight); bias may be null.
template <class T>
void quantized_linear(const void* input, const void* weight, std::int64_t m, std::int64_t n, std::int64_t k,
                      const T* bias, T* y, std::int64_t ldy, UnaryOp act) {
  const QuantizedInputLayout I(m, k);
  const QuantizedWeightLayout W(n, k);
  const auto* ib = static_cast<const unsigned char*>(input);
  const auto* wb = static_cast<const unsigned char*>(weight);
  const auto* sx = reinterpret_cast<const float*>(ib);
  const auto* ux = ib + I.bytes;
  const auto* sw = reinterpret_cast<const float*>(wb);
  const auto* wsum = reinterpret_cast<const std::int32_t*>(wb + W.sums);
  const auto* qw = reinterpret_cast<const std::int8_t*>(wb + W.bytes);
  const std::int64_t kp = I.kp;
  auto emit = [&](std::int64_t r, std::int64_t c, std::int32_t dot) {
    const std::int32_t exact = dot - 128 * wsum[c];  // sum_k q qw
    T v = static_cast<T>(double(exact) * double(sx[r]) * double(sw[c]));
    if (bias) v += bias[c];
    y[r * ldy + c] = fn::unary(act, v, T(0), T(0));
  };
  // Rows [r, r + R) by columns [c, c + C).
  auto block = [&]<int R, int C>(std::int64_t r, std::int64_t c) {
    std::int32_t d[R][C];
    quant::dot_block<R, C>(ux + r * kp, qw + c * kp, kp, d);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) emit(r + i, c + j, d[i][j]);
  };
  // Threads take blocks of four columns (each reads its weight rows once
  // per four input rows); about a million products a share at least.
  constexpr std::int64_t kCols = 4, kRows = 4;
  const std::int64_t blocks = (n + kCols - 1) / kCols;
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(m * kp * kCols, 1));
  parallel_for(blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t c = b * kCols;
      if (c + kCols <= n) {
        std::int64_t r = 0;
        for (; r + kRows <= m; r += kRows) block.template operator()<4, 4>(r, c);
        for (; r < m; ++r) block.template operator()<1, 4>(r, c);
      } else {
        for (std::int64_t cc = c; cc < n; ++cc) {
          std::int64_t r = 0;
          for (; r + kRows <= m; r += kRows) block.template operator()<4, 1>(r, cc);
          for (; r < m; ++r) block.template operator()<1, 1>(r, cc);
        }
      }
    }
  });
}

}  // namespace frost::cpu
