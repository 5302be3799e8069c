// Convolution through cuDNN: descriptors from ConvGeometry, algorithm choice
// (heuristics, or timed once per shape in benchmark mode, cached either way),
// and the explicit-padding copy cuDNN's symmetric padding cannot express (the
// bias + activation epilogue is in fused.cuh, or inside cuDNN's fused call).
#pragma once
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <frost/core/functors.hpp>

#include "check.cuh"
#include "conv_algo.hpp"
#include "conv_geometry.hpp"
#include "descriptor.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

// ---- kernels ------------------------------------------------------------------

/// xp (zeroed) [N, C, ph, pw] receives x [N, C, h, w] at (top, left), clipped.
template <class T>
__global__ void pad_copy_kernel(std::int64_t planes, std::int64_t h, std::int64_t w, std::int64_t ph, std::int64_t pw,
                                std::int64_t top, std::int64_t left, const T* x, T* xp) {
  const std::int64_t n = planes * ph * pw, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const std::int64_t c = i % pw, r = (i / pw) % ph, plane = i / (pw * ph);
    const std::int64_t sr = r - top, sc = c - left;
    xp[i] = sr >= 0 && sr < h && sc >= 0 && sc < w ? x[(plane * h + sr) * w + sc] : T(0);
  }
}

/// dx [N, C, h, w] = the window of dxp [N, C, ph, pw] at (top, left); zero outside it.
template <class T>
__global__ void crop_kernel(std::int64_t planes, std::int64_t h, std::int64_t w, std::int64_t ph, std::int64_t pw,
                            std::int64_t top, std::int64_t left, const T* dxp, T* dx) {
  const std::int64_t n = planes * h * w, step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const std::int64_t c = i % w, r = (i / w) % h, plane = i / (w * h);
    const std::int64_t pr = r + top, pc = c + left;
    dx[i] = pr < ph && pc < pw ? dxp[(plane * ph + pr) * pw + pc] : T(0);
  }
}

// ---- descriptors -----------------------------------------------------------------

template <class T>
constexpr cudnnDataType_t cudnn_type() {
  return sizeof(T) == 4 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

/// The four cuDNN descriptors of one convolution, destroyed with it (also
/// when a later one's set-up throws: each member owns its own).
template <class T>
struct ConvDescriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  bool tf32 = false;

  ConvDescriptors(const ConvGeometry& g, bool tf32_allowed, const char* op)
      : x(op), y(op), w(op), conv(op), tf32(tf32_allowed) {
    FROST_CUDA(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, cudnn_type<T>(), g.x[0], g.x[1], g.x[2], g.x[3]), op);
    FROST_CUDA(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, cudnn_type<T>(), g.y[0], g.y[1], g.y[2], g.y[3]), op);
    FROST_CUDA(cudnnSetFilter4dDescriptor(w, cudnn_type<T>(), CUDNN_TENSOR_NCHW, g.w[0], g.w[1], g.w[2], g.w[3]), op);
    FROST_CUDA(cudnnSetConvolution2dDescriptor(conv, g.pad[0], g.pad[1], g.stride[0], g.stride[1], g.dilation[0],
                                               g.dilation[1], CUDNN_CROSS_CORRELATION, cudnn_type<T>()),
               op);
    FROST_CUDA(cudnnSetConvolutionGroupCount(conv, g.groups), op);
    // FMA math keeps convolutions in full precision unless TF32 was allowed
    // for a float one; then DEFAULT lets cuDNN use TF32 tensor cores (as
    // PyTorch sets it), not ..._ALLOW_CONVERSION, which may also convert the
    // operands to fp16.
    FROST_CUDA(cudnnSetConvolutionMathType(conv, tf32_math() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH), op);
  }
  bool tf32_math() const { return sizeof(T) == 4 && tf32; }
  /// With TF32, the math type the chosen algorithm was ranked or timed with:
  /// cuDNN picks kernels by the (algorithm, math type) pair, and the
  /// workspace it reported is that pair's. Otherwise FMA math stays.
  void use_math(int math, const char* op) {
    if (tf32_math()) FROST_CUDA(cudnnSetConvolutionMathType(conv, static_cast<cudnnMathType_t>(math)), op);
  }
};

/// cuDNN's candidates for one pass, best first (its heuristics, or timed in
/// benchmark mode), that may run here: ranked a success, fitting `max_ws`,
/// and never ALLOW_CONVERSION (fp16 operands; with TF32 allowed the
/// candidate's math type is set on the descriptor, see use_math). Without
/// TF32 the descriptor stays on FMA math whatever a candidate says.
template <class Perf, class Get, class Find>
std::vector<ConvAlgo> conv_candidates(bool benchmark, std::size_t max_ws, Get&& get, Find&& find, const char* op) {
  constexpr int kMax = 16;
  Perf perf[kMax];
  int n = 0;
  if (benchmark) find(kMax, &n, perf);
  else get(kMax, &n, perf);
  std::vector<ConvAlgo> out;
  for (int i = 0; i < n; ++i) {
    const Perf& c = perf[i];
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > max_ws) continue;
    if (c.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    out.push_back({static_cast<int>(c.algo), c.memory, static_cast<int>(c.mathType)});
  }
  FROST_CHECK(!out.empty(), "frost::", op, ": cuDNN offered no convolution algorithm that fits a ", max_ws,
              "-byte workspace (", n, " ranked)");
  return out;
}

}  // namespace frost::cuda_detail
