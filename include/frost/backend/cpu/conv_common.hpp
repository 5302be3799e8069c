// Pieces the CPU convolutions share: per-thread scratch memory kept between
// calls, array maps, and the split of a batch's images over the threads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <Eigen/Core>

#include "../../core/allocator.hpp"
#include "../backend.hpp"
#include "gemm.hpp"
#include "parallel.hpp"

namespace frost::cpu::conv_detail {

/// Scratch blocks a thread keeps between calls, so the im2col and Winograd
/// buffers (often a few MiB: too large for the pooled allocator's classes)
/// are not mapped and page-faulted afresh on every call. Blocks above
/// kKeepBytes go back to the system after use.
struct ScratchCache {
  static constexpr std::size_t kKeepBytes = std::size_t{32} << 20;
  struct Slot {
    void* p = nullptr;
    std::size_t cap = 0;
    bool busy = false;
  };
  Slot slots[2];
  ~ScratchCache() {
    for (auto& s : slots) std::free(s.p);
  }
};
inline ScratchCache& scratch_cache() {
  thread_local ScratchCache cache;
  return cache;
}

/// Uninitialised scratch memory (64-byte aligned) for one kernel call, from
/// the calling thread's cache when a slot is free.
template <class T>
class Scratch {
 public:
  explicit Scratch(std::int64_t n) {
    const std::size_t bytes = (static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T) + 63) / 64 * 64;
    for (auto& s : scratch_cache().slots) {
      if (s.busy) continue;
      if (s.cap < bytes) {
        std::free(s.p);
        s.p = nullptr;
        s.cap = 0;
        s.p = frost::detail::system_alloc(bytes);
        s.cap = bytes;
      }
      s.busy = true;
      slot_ = &s;
      p_ = static_cast<T*>(s.p);
      return;
    }
    p_ = static_cast<T*>(frost::detail::system_alloc(bytes));
  }
  ~Scratch() {
    if (!slot_) {
      std::free(p_);
      return;
    }
    slot_->busy = false;
    if (slot_->cap > ScratchCache::kKeepBytes) {
      std::free(slot_->p);
      slot_->p = nullptr;
      slot_->cap = 0;
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return p_; }

 private:
  ScratchCache::Slot* slot_ = nullptr;
  T* p_ = nullptr;
};


// Eigen array maps: vectorised at any optimisation level.
template <class T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

/// Threads to spread the images of a batch over: 1 (Eigen then threads each
/// GEMM) when there is one image, little work, or we are already inside a
/// parallel region.
inline int image_threads(std::int64_t batch, std::int64_t flops_per_image) {
#if defined(_OPENMP)
  if (batch < 2 || omp_in_parallel() || batch * flops_per_image < (std::int64_t{1} << 20)) return 1;
  return static_cast<int>(std::min<std::int64_t>(batch, omp_get_max_threads()));
#else
  (void)batch, (void)flops_per_image;
  return 1;
#endif
}

/// Images per Winograd GEMM: at most about `target` tiles, and when it can,
/// a multiple of the GEMM kernel's row block (Eigen's mr: 48 floats with
/// AVX-512), which short blocks run at a fraction of its speed (F(4x4) on
/// 16x16 outputs: 96 tiles a GEMM run 5% faster than 128); 0 when none fits.
template <class T>
std::int64_t whole_block_images(std::int64_t tiles, std::int64_t target) {
  const std::int64_t mr = Eigen::internal::gebp_traits<T, T>::mr;
  for (std::int64_t c = std::max<std::int64_t>(target / tiles, 1); c >= 1; --c)
    if (c * tiles % mr == 0) return c;
  return 0;
}

/// Runs fn(thread, first_image, end_image) over the batch on `threads` threads.
template <class Fn>
void over_images(int threads, std::int64_t batch, Fn&& fn) {
#if defined(_OPENMP)
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      const std::int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const std::int64_t chunk = ceil_div(batch, nt);
      const std::int64_t b = std::min(batch, t * chunk), e = std::min(batch, b + chunk);
      if (b < e) fn(static_cast<int>(t), b, e);
    }
    return;
  }
#endif
  (void)threads;
  fn(0, std::int64_t{0}, batch);
}

/// Tiles of a Winograd F(m x m, 3x3) convolution's output planes.
struct WinogradShape {
  std::int64_t th, tw, row, tiles;  // tile rows, tile columns, tiles per row with the spare one, tiles per plane
};
inline WinogradShape winograd_shape(const Conv2dParams& p, std::int64_t m = 2) {
  const std::int64_t th = ceil_div(p.out_h, m), tw = ceil_div(p.out_w, m);
  return {th, tw, tw + 1, th * (tw + 1)};
}

/// The channel sums of a Winograd convolution: M[k] = U[k] V[k] for each of
/// the `positions` tile positions k and each group, [Og, Cg] x [Cg, used]
/// (U's rows Cg apart and its positions u_ks; V's and M's rows P apart).
template <class T>
void winograd_gemms(int positions, const T* U, std::int64_t u_ks, const T* V, T* M, std::int64_t C, std::int64_t O,
                    std::int64_t groups, std::int64_t P, std::int64_t used) {
  const std::int64_t Cg = C / groups, Og = O / groups;
  for (int k = 0; k < positions; ++k)
    for (std::int64_t g = 0; g < groups; ++g) {
      Eigen::Map<const RowMat<T>, 0, Stride> A(U + k * u_ks + g * Og * Cg, Og, Cg, Stride(Cg));
      Eigen::Map<const RowMat<T>, 0, Stride> B(V + (k * C + g * Cg) * P, Cg, used, Stride(P));
      Eigen::Map<RowMat<T>, 0, Stride>(M + (k * O + g * Og) * P, Og, used, Stride(P)).noalias() = A * B;
    }
}

}  // namespace frost::cpu::conv_detail
