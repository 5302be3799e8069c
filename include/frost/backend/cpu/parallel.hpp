// parallel_for: splits [0, n) across OpenMP threads when the work is large
// enough to pay for waking them; small tensors stay on the calling thread.
#pragma once
#include <algorithm>
#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

/// Asks for a vectorised loop: short ones (a plane of tiles, a block of
/// Philox counters) that GCC would otherwise leave scalar or to Eigen's
/// scalar heads and tails.
#if defined(_OPENMP)
#define FROST_SIMD _Pragma("omp simd")
#else
#define FROST_SIMD
#endif

namespace frost::cpu {

/// a / b rounded up (a >= 0, b > 0).
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Elements below which elementwise kernels stay single-threaded.
inline constexpr std::int64_t kParallelGrain = 32768;

template <class Fn>
void parallel_for(std::int64_t n, std::int64_t grain, Fn&& fn) {
#if defined(_OPENMP)
  if (n > grain && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      const std::int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const std::int64_t chunk = (n + nt - 1) / nt;
      const std::int64_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      if (b < e) fn(b, e);
    }
    return;
  }
#endif
  (void)grain;
  fn(std::int64_t{0}, n);
}

}  // namespace frost::cpu
