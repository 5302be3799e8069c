// Dynamically quantized linear layers on the CPU (PyTorch's quantize_dynamic
// for nn.Linear), what a plan frozen with quantize_linear runs:
//  - the weight W [N, K], once: int8 per output channel, symmetric,
//    sw[n] = max|W[n, :]| / 127 and qw = round(W / sw) in [-127, 127];
//  - each row of the input x [M, K], every run: int8 with its own scale,
//    sx[m] = max|x[m, :]| / 127, q = round(x / sx) in [-127, 127], stored
//    as q + 128 in a uint8 (VNNI's vpdpbusd multiplies unsigned by signed
//    bytes, four pairs into each int32 lane);
//  - y[m, n] = sx[m] sw[n] (sum_k (q + 128) qw - 128 sum_k qw) + b[n], the
//    sums exact in int32 (K at most kMaxQuantizedDepth), then the activation.
// The weight's bytes are packed for vpdpbusd: blocks of 16 output channels,
// within a block four consecutive k of channel 0, then of channel 1, ... so
// one 64-byte load feeds 16 channels' sums and no sum is ever reduced across
// lanes. Both byte arrays are zero-padded along K to a multiple of
// kQuantizedAlign, so the loops have no tails. A row of x holding inf or NaN
// has no scale: its outputs are NaN (so does a double beyond float's range);
// a row below kQuantizedTiny is zeros. The weights must be finite. The weight is a quarter of the float
// bytes, which is what a matrix-vector product (batch 1) is bound by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../../core/error.hpp"
#include "../../core/functors.hpp"
#include "parallel.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace frost::cpu {

inline constexpr std::int64_t kQuantizedAlign = 64;
/// Largest K whose int32 sums cannot overflow: 255 * 127 * K < 2^31.
inline constexpr std::int64_t kMaxQuantizedDepth = 65536;
/// An input row whose largest magnitude is below this is quantized as zeros.
inline constexpr float kQuantizedTiny = 1e-30f;

namespace quant {
inline std::int64_t round_up(std::int64_t v, std::int64_t to) { return ceil_div(v, to) * to; }
/// Nearest integer, halves away from zero (the same on every path).
/// copysign, not a `v >= 0 ?` branch: GCC then vectorises quantize_rows'
/// loop for AVX2 too (with the branch it ran scalar there, 6x slower).
inline int nearest(float v) { return static_cast<int>(v + std::copysign(0.5f, v)); }
}  // namespace quant

/// Where the parts of a quantized weight lie in its blob: the scales
/// (float) and the int32 sums of the bytes of the N channels rounded up to a
/// block of 16, then the packed bytes: block b's k-quad j at
/// bytes + (b kp / 4 + j) 64, channel c of the block at 4 c within it.
struct QuantizedWeightLayout {
  static constexpr std::int64_t kBlock = 16;
  std::int64_t n = 0, k = 0, kp = 0, blocks = 0, sums = 0, bytes = 0, total = 0;
  QuantizedWeightLayout(std::int64_t n_, std::int64_t k_)
      : n(n_), k(k_), kp(quant::round_up(k_, kQuantizedAlign)), blocks((n_ + kBlock - 1) / kBlock) {
    sums = blocks * kBlock * 4;
    bytes = quant::round_up(2 * sums, kQuantizedAlign);
    total = bytes + blocks * kBlock * kp;
  }
  /// Byte offset of channel c's k-th byte.
  std::int64_t at(std::int64_t c, std::int64_t j) const {
    return bytes + ((c / kBlock * (kp / 4) + j / 4) * kBlock + c % kBlock) * 4 + j % 4;
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

/// W [n, k] (row stride ldw) quantized into `blob` (QuantizedWeightLayout(n, k).total bytes).
template <class T>
void quantize_weight(const T* w, std::int64_t n, std::int64_t k, std::int64_t ldw, void* blob) {
  const QuantizedWeightLayout L(n, k);
  auto* base = static_cast<unsigned char*>(blob);
  std::memset(base, 0, static_cast<std::size_t>(L.total));  // padding channels: scale 0, sum 0, bytes 0
  auto* scale = reinterpret_cast<float*>(base);
  auto* sum = reinterpret_cast<std::int32_t*>(base + L.sums);
  for (std::int64_t r = 0; r < n; ++r) {
    const T* row = w + r * ldw;
    double amax = 0;
    for (std::int64_t j = 0; j < k; ++j) amax = std::max(amax, std::abs(double(row[j])));
    // A zero row keeps scale 1 (its bytes are 0); the caller checks the weights are finite.
    const double s = amax > 0 ? amax / 127.0 : 1.0;
    std::int32_t total = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const auto b = static_cast<std::int8_t>(std::clamp(std::nearbyint(double(row[j]) / s), -127.0, 127.0));
      base[L.at(r, j)] = static_cast<unsigned char>(b);
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
      // A row below kQuantizedTiny counts as zeros: 127 / amax would overflow.
      const bool zero = amax < kQuantizedTiny;
      const float inv = zero ? 0.0f : 127.0f / amax;
      scale[r] = zero ? 1.0f : amax / 127.0f;
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
/// Sums of R input rows (row stride kp) against `blocks` blocks of 16
/// packed channels (block stride kp / 4 quads of 64 bytes): out[r][16 b + c].
template <int R, int B>
void dot_blocks(const unsigned char* u, std::int64_t kp, const unsigned char* w, std::int32_t (&out)[R][16 * B]) {
  const std::int64_t quads = kp / 4, block_stride = quads * 64;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  __m512i acc[R][B];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_si512();
  for (std::int64_t j = 0; j < quads; ++j) {
    __m512i wv[B];
    for (int b = 0; b < B; ++b) wv[b] = _mm512_loadu_si512(w + b * block_stride + j * 64);
    for (int r = 0; r < R; ++r) {
      std::int32_t four;
      std::memcpy(&four, u + r * kp + 4 * j, 4);
      const __m512i a = _mm512_set1_epi32(four);
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], a, wv[b]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) _mm512_storeu_si512(out[r] + 16 * b, acc[r][b]);
#elif defined(__AVXVNNI__)
  // AVX-VNNI (vpdpbusd on 256 bits, without AVX-512): a quad's 64 bytes as
  // two halves, channels 0-7 and 8-15. One block at a time: R rows' two
  // accumulators and the block's two weight vectors stay in the 16 registers.
  for (int b = 0; b < B; ++b) {
    __m256i acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (std::int64_t j = 0; j < quads; ++j) {
      const unsigned char* wq = w + b * block_stride + j * 64;
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + 32));
      for (int r = 0; r < R; ++r) {
        std::int32_t four;
        std::memcpy(&four, u + r * kp + 4 * j, 4);
        const __m256i a = _mm256_set1_epi32(four);
        acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], a, w0);
        acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], a, w1);
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[r] + 16 * b), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[r] + 16 * b + 8), acc[r][1]);
    }
  }
#elif defined(__AVX2__)
  // AVX2: bytes widened to int16, vpmaddwd's pair sums exact in int32 (no
  // vpmaddubsw: its int16 pair sums would saturate). A 16-byte quarter h of a
  // quad holds channels 4h..4h+3; its lanes 2c, 2c + 1 sum channel 4h + c.
  // One block and two rows at a time: the block's four widened weight
  // vectors serve both rows, and the rows' 8 accumulators stay in registers.
  constexpr int P = R < 2 ? R : 2;
  for (int b = 0; b < B; ++b)
    for (int r0 = 0; r0 < R; r0 += P) {
      __m256i acc[P][4];
      for (int r = 0; r < P; ++r)
        for (int h = 0; h < 4; ++h) acc[r][h] = _mm256_setzero_si256();
      for (std::int64_t j = 0; j < quads; ++j) {
        __m256i wv[4];
        for (int h = 0; h < 4; ++h)
          wv[h] = _mm256_cvtepi8_epi16(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + b * block_stride + j * 64 + 16 * h)));
        for (int r = 0; r < P; ++r) {
          std::int32_t four;
          std::memcpy(&four, u + (r0 + r) * kp + 4 * j, 4);
          const __m256i a = _mm256_cvtepu8_epi16(_mm_set1_epi32(four));
          for (int h = 0; h < 4; ++h) acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_madd_epi16(a, wv[h]));
        }
      }
      for (int r = 0; r < P; ++r)
        for (int h = 0; h < 4; ++h) {
          alignas(32) std::int32_t pairs[8];
          _mm256_store_si256(reinterpret_cast<__m256i*>(pairs), acc[r][h]);
          for (int c = 0; c < 4; ++c) out[r0 + r][16 * b + 4 * h + c] = pairs[2 * c] + pairs[2 * c + 1];
        }
    }
#else
  // The same sums, plain.
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 16 * B; ++c) out[r][c] = 0;
  for (std::int64_t j = 0; j < quads; ++j)
    for (int r = 0; r < R; ++r) {
      const unsigned char* a = u + r * kp + 4 * j;
      for (int b = 0; b < B; ++b) {
        const auto* q = reinterpret_cast<const std::int8_t*>(w + b * block_stride + j * 64);
        for (int c = 0; c < 16; ++c)
          out[r][16 * b + c] += a[0] * q[4 * c] + a[1] * q[4 * c + 1] + a[2] * q[4 * c + 2] + a[3] * q[4 * c + 3];
      }
    }
#endif
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
  const std::int64_t kp = I.kp, block_stride = kp / 4 * 64;
  // Rows [r, r + R) by the B blocks of channels from block b0: sums, then
  // the rescale, bias and activation of the channels below n.
  auto run = [&]<int R, int B>(std::int64_t r, std::int64_t b0) {
    std::int32_t d[R][16 * B];
    quant::dot_blocks<R, B>(ux + r * kp, kp, wb + W.bytes + b0 * block_stride, d);
    const std::int64_t c0 = b0 * 16, nc = std::min<std::int64_t>(16 * B, n - c0);
    for (int i = 0; i < R; ++i) {
      T* out = y + (r + i) * ldy + c0;
      const T s = static_cast<T>(sx[r + i]);
      for (std::int64_t c = 0; c < nc; ++c) {
        const std::int32_t exact = d[i][c] - 128 * wsum[c0 + c];  // sum_k q qw
        out[c] = static_cast<T>(exact) * (s * static_cast<T>(sw[c0 + c])) + (bias ? bias[c0 + c] : T(0));
      }
      if (act == UnaryOp::relu) {
        for (std::int64_t c = 0; c < nc; ++c) out[c] = out[c] > T(0) ? out[c] : T(0);
      } else if (act != UnaryOp::copy) {
        for (std::int64_t c = 0; c < nc; ++c) out[c] = fn::unary(act, out[c], T(0), T(0));
      }
    }
  };
  // Threads take pairs of channel blocks (32 channels: their packed weight
  // read once per four input rows); about a million products a share at least.
  auto rows = [&]<int B>(std::int64_t b0) {
    std::int64_t r = 0;
    for (; r + 4 <= m; r += 4) run.template operator()<4, B>(r, b0);
    for (; r < m; ++r) run.template operator()<1, B>(r, b0);
  };
  const std::int64_t pairs = (W.blocks + 1) / 2;
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(m * kp * 32, 1));
  parallel_for(pairs, grain, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      if (2 * p + 1 < W.blocks) rows.template operator()<2>(2 * p);
      else rows.template operator()<1>(2 * p);
    }
  });
}

}  // namespace frost::cpu
