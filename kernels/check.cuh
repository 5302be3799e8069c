// Status checks: every CUDA runtime, cuBLAS and cuDNN call goes through one of
// these, and a failure is a frost::Error naming the call and the op.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <frost/core/error.hpp>

namespace frost::cuda_detail {

inline void check(cudaError_t e, const char* call, const char* op) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls are not blamed for this one
    detail::fail("frost::", op, ": ", call, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  }
}
inline void check(cublasStatus_t s, const char* call, const char* op) {
  if (s != CUBLAS_STATUS_SUCCESS)
    detail::fail("frost::", op, ": ", call, " failed: ", cublasGetStatusName(s), " (", cublasGetStatusString(s), ")");
}
inline void check(cudnnStatus_t s, const char* call, const char* op) {
  if (s != CUDNN_STATUS_SUCCESS) detail::fail("frost::", op, ": ", call, " failed: ", cudnnGetErrorString(s));
}
/// A kernel launch: the launch error now (bad configuration), faults later at the next sync.
inline void check_launch(const char* op) { check(cudaGetLastError(), "kernel launch", op); }

}  // namespace frost::cuda_detail

/// FROST_CUDA(call, op): runs `call` and turns a failure into a frost::Error.
#define FROST_CUDA(call, op) ::frost::cuda_detail::check((call), #call, (op))
