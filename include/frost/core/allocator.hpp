// Host memory: a size-class caching allocator with per-thread free lists, so
// the eager per-op path reuses blocks instead of calling malloc, plus the
// public memory_stats() counters.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "error.hpp"

namespace frost {

/// Tensor data accounting: bytes currently held by tensor storages, the peak,
/// and how many storages were ever allocated. Counts all threads.
struct MemoryStats {
  std::int64_t current_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t allocations = 0;
};

namespace detail {

struct StatCounters {
  std::atomic<std::int64_t> current{0}, peak{0}, count{0};
};
// Process-wide statistics (relaxed atomics: a counter, not a lock).
inline StatCounters& stat_counters() {
  static StatCounters c;
  return c;
}

inline void note_alloc(std::int64_t bytes) {
  auto& c = stat_counters();
  c.count.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t now = c.current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::int64_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
inline void note_free(std::int64_t bytes) { stat_counters().current.fetch_sub(bytes, std::memory_order_relaxed); }

// Size classes: 64 B .. 1 MiB in powers of two; bigger blocks go to the system.
inline constexpr int kMinClassLog = 6, kMaxClassLog = 20, kClasses = kMaxClassLog - kMinClassLog + 1;
inline constexpr std::size_t kAlign = 64;
inline constexpr int kMaxCachedPerClass = 64;

inline int size_class(std::size_t n) {
  if (n <= (std::size_t{1} << kMinClassLog)) return 0;
  const int lg = 64 - __builtin_clzll(static_cast<unsigned long long>(n - 1));
  return lg <= kMaxClassLog ? lg - kMinClassLog : -1;
}

struct FreeBlock {
  FreeBlock* next;
};

// One thread's cache. Blocks freed on another thread land in that thread's
// cache; memory is process memory, so that is safe.
struct ThreadCache {
  FreeBlock* head[kClasses] = {};
  int count[kClasses] = {};
  ~ThreadCache() {
    for (int c = 0; c < kClasses; ++c)
      while (head[c]) {
        FreeBlock* b = head[c];
        head[c] = b->next;
        std::free(b);
      }
  }
};

inline ThreadCache& thread_cache() {
  thread_local ThreadCache cache;
  return cache;
}

inline void* system_alloc(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded ? rounded : kAlign);
  if (!p) throw std::bad_alloc();
  return p;
}

/// Allocates `bytes` (64-byte aligned) from the calling thread's cache.
inline void* pool_alloc(std::size_t bytes) {
  const int c = size_class(bytes);
  if (c < 0) return system_alloc(bytes);
  auto& tc = thread_cache();
  if (FreeBlock* b = tc.head[c]) {
    tc.head[c] = b->next;
    --tc.count[c];
    return b;
  }
  return system_alloc(std::size_t{1} << (c + kMinClassLog));
}

/// Returns a block of `bytes` obtained from pool_alloc.
inline void pool_free(void* p, std::size_t bytes) noexcept {
  const int c = size_class(bytes);
  if (c >= 0) {
    auto& tc = thread_cache();
    if (tc.count[c] < kMaxCachedPerClass) {
      auto* b = static_cast<FreeBlock*>(p);
      b->next = tc.head[c];
      tc.head[c] = b;
      ++tc.count[c];
      return;
    }
  }
  std::free(p);
}

/// Mix-in giving a class pooled operator new/delete (tensor impls, autograd nodes).
struct Pooled {
  static void* operator new(std::size_t n) { return pool_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { pool_free(p, n); }
};

}  // namespace detail

/// Tensor memory statistics for all threads: current and peak bytes held by
/// tensor storages and the number of storage allocations so far.
inline MemoryStats memory_stats() {
  auto& c = detail::stat_counters();
  return {c.current.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed),
          c.count.load(std::memory_order_relaxed)};
}

/// Resets the peak to the current value (like torch.cuda.reset_peak_memory_stats).
inline void reset_peak_memory_stats() {
  auto& c = detail::stat_counters();
  c.peak.store(c.current.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace frost
