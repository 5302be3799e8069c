// Fused optimizer steps: one kernel per parameter runs optim_step::apply (the
// host+device update the CPU backend loops over) on every element.
#pragma once
#include <cstdint>

#include <frost/core/optim_step.hpp>

#include "check.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

template <class T>
__global__ void optimizer_step_kernel(OptimStep<T> o, T* p, const T* g, T* s0, T* s1, T* s2, std::int64_t n) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    optim_step::apply(o, i, p, g, s0, s1, s2);
}

}  // namespace frost::cuda_detail
