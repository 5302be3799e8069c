// Compiler glue shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define FROST_HOST_DEVICE __host__ __device__
#else
/// Marks a function usable from both host code and CUDA kernels.
#define FROST_HOST_DEVICE
#endif

#if defined(__GNUC__)
#define FROST_LIKELY(x) __builtin_expect(!!(x), 1)
#define FROST_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define FROST_LIKELY(x) (x)
#define FROST_UNLIKELY(x) (x)
#endif
