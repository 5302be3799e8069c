// Batch normalization through cuDNN's spatial mode: x [n, c, inner] is
// described as NCHW [n, c, inner, 1], whose per-channel statistics over N, H
// and W are batch norm's over every dim but the channels (an [N, C] input is
// inner = 1). One call each for training, inference and the backward.
#pragma once
#include <climits>
#include <cstdint>

#include "check.cuh"
#include "conv.cuh"
#include "descriptor.cuh"

namespace frost::cuda_detail {

/// Whether cuDNN takes these extents: its descriptors hold int dims and
/// strides, eps must not be below its minimum, and its batch-norm kernels
/// refuse (CUDNN_STATUS_NOT_SUPPORTED) batches past 65535 images in
/// inference and 880801 in training: the limits PyTorch applies before
/// choosing cuDNN (pytorch#19911). Past them the ops compose batch norm.
inline bool batch_norm_fits(std::int64_t n, std::int64_t c, std::int64_t inner, double eps, bool training) {
  return n > 0 && c > 0 && inner > 0 && n <= INT_MAX / c && n * c <= INT_MAX / inner &&
         eps >= CUDNN_BN_MIN_EPSILON && n <= (training ? 880801 : 65535);
}

/// The data descriptor (x, y, dx, dy share it) and the per-channel one cuDNN derives from it.
template <class T>
struct BatchNormDescriptors {
  static constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;
  TensorDescriptor x, stats;

  BatchNormDescriptors(std::int64_t n, std::int64_t c, std::int64_t inner, const char* op) : x(op), stats(op) {
    FROST_CUDA(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, cudnn_type<T>(), int(n), int(c), int(inner), 1), op);
    FROST_CUDA(cudnnDeriveBNTensorDescriptor(stats, x, kMode), op);
  }
};

// cuDNN reads alpha and beta as double for double data, float otherwise: T's own.

template <class T>
void batch_norm_training(cudnnHandle_t h, std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w,
                         const T* b, T* y, T* save_mean, T* save_invstd, T* running_mean, T* running_var,
                         double momentum, double eps) {
  const char* op = "batch_norm";
  BatchNormDescriptors<T> d(n, c, inner, op);
  const T one = 1, zero = 0;
  // Null running statistics (both) skip cuDNN's update; it takes the
  // unbiased variance into running_var, as PyTorch's running statistics.
  FROST_CUDA(cudnnBatchNormalizationForwardTraining(h, d.kMode, &one, &zero, d.x, x, d.x, y, d.stats, w, b, momentum,
                                                    running_mean, running_var, eps, save_mean, save_invstd),
             op);
}

template <class T>
void batch_norm_inference(cudnnHandle_t h, std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w,
                          const T* b, const T* mean, const T* var, T* y, double eps) {
  const char* op = "batch_norm";
  BatchNormDescriptors<T> d(n, c, inner, op);
  const T one = 1, zero = 0;
  FROST_CUDA(cudnnBatchNormalizationForwardInference(h, d.kMode, &one, &zero, d.x, x, d.x, y, d.stats, w, b, mean, var,
                                                     eps),
             op);
}

template <class T>
void batch_norm_backward(cudnnHandle_t h, std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy,
                         const T* w, const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db, double eps) {
  const char* op = "batch_norm_backward";
  BatchNormDescriptors<T> d(n, c, inner, op);
  const T one = 1, zero = 0;
  // beta 0 for both: dx, dw and db are overwritten, not accumulated.
  FROST_CUDA(cudnnBatchNormalizationBackward(h, d.kMode, &one, &zero, &one, &zero, d.x, x, d.x, dy, d.x, dx, d.stats, w,
                                             dw, db, eps, save_mean, save_invstd),
             op);
}

}  // namespace frost::cuda_detail
