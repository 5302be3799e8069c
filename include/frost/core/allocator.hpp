// Host memory: a size-class caching allocator with per-thread free lists, so
// the eager per-op path reuses blocks instead of calling malloc, plus the
// public memory_stats() counters.
#pragma once
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>
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

// Statistics are kept per thread with plain (relaxed load/store) updates, so
// the per-op path pays no locked instruction; memory_stats() sums them.
struct ThreadStats {
  std::atomic<std::int64_t> current{0}, peak{0}, count{0};
};

struct StatsRegistry {
  std::mutex m;
  std::vector<ThreadStats*> live;
  std::int64_t retired_current = 0, retired_peak = 0, retired_count = 0;
};
inline StatsRegistry& stats_registry() {
  static StatsRegistry r;
  return r;
}

struct ThreadStatsSlot {
  ThreadStats s;
  ThreadStatsSlot() {
    auto& r = stats_registry();
    std::lock_guard<std::mutex> g(r.m);
    r.live.push_back(&s);
  }
  ~ThreadStatsSlot() {
    auto& r = stats_registry();
    std::lock_guard<std::mutex> g(r.m);
    r.retired_current += s.current.load(std::memory_order_relaxed);
    r.retired_peak = std::max(r.retired_peak, s.peak.load(std::memory_order_relaxed));
    r.retired_count += s.count.load(std::memory_order_relaxed);
    r.live.erase(std::find(r.live.begin(), r.live.end(), &s));
  }
};

inline ThreadStats& thread_stats() {
  thread_local ThreadStatsSlot slot;
  return slot.s;
}

inline void bump(std::atomic<std::int64_t>& a, std::int64_t d) {
  a.store(a.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

inline void note_alloc(std::int64_t bytes) {
  ThreadStats& t = thread_stats();
  bump(t.count, 1);
  bump(t.current, bytes);
  const std::int64_t now = t.current.load(std::memory_order_relaxed);
  if (now > t.peak.load(std::memory_order_relaxed)) t.peak.store(now, std::memory_order_relaxed);
}
inline void note_free(std::int64_t bytes) { bump(thread_stats().current, -bytes); }

// Size classes: 64 B .. 1 MiB in powers of two; bigger blocks go to the system.
inline constexpr int kMinClassLog = 6, kMaxClassLog = 20, kClasses = kMaxClassLog - kMinClassLog + 1;
inline constexpr std::size_t kAlign = 64;
// A thread keeps up to 8 MiB of free blocks per size class: enough that a
// recorded graph of thousands of small tensors recycles its blocks instead of
// going back to malloc.
inline constexpr std::size_t kMaxCachedBytesPerClass = std::size_t{8} << 20;
inline int max_cached(int c) {
  const std::size_t n = kMaxCachedBytesPerClass >> (c + kMinClassLog);
  return n < 8 ? 8 : static_cast<int>(n);
}

inline int size_class(std::size_t n) {
  if (n <= (std::size_t{1} << kMinClassLog)) return 0;
  const int lg = 64 - __builtin_clzll(static_cast<unsigned long long>(n - 1));
  return lg <= kMaxClassLog ? lg - kMinClassLog : -1;
}

struct FreeBlock {
  FreeBlock* next;
};

// Blocks over 1 MiB (activations of a conv net: 16 MiB at batch 64) are
// cached too, by exact size rounded up to 64 KiB: glibc would hand them back
// to the OS on free, and every forward would page-fault its outputs afresh
// (about half the eager time of a small CNN). An eager loop allocates the
// same sizes every iteration, so exact-size reuse is what matters; the cache
// is capped per thread.
inline constexpr std::size_t kLargeGranule = std::size_t{64} << 10;
inline constexpr std::size_t kMaxCachedLargeBytes = std::size_t{512} << 20;
inline std::size_t large_size(std::size_t n) { return (n + kLargeGranule - 1) / kLargeGranule * kLargeGranule; }

struct LargeList {
  std::size_t size;
  FreeBlock* head;
};

// One thread's cache. Blocks freed on another thread land in that thread's
// cache; memory is process memory, so that is safe.
struct ThreadCache {
  FreeBlock* head[kClasses] = {};
  int count[kClasses] = {};
  std::vector<LargeList> large;  // one list per block size seen
  std::size_t large_bytes = 0;   // bytes held in `large`

  static void free_all(FreeBlock*& h) {
    while (h) {
      FreeBlock* b = h;
      h = b->next;
      std::free(b);
    }
  }
  ~ThreadCache() {
    for (auto& h : head) free_all(h);
    for (auto& l : large) free_all(l.head);
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
  if (c < 0) {
    const std::size_t size = large_size(bytes);
    auto& tc = thread_cache();
    for (auto& l : tc.large)
      if (l.size == size && l.head) {
        FreeBlock* b = l.head;
        l.head = b->next;
        tc.large_bytes -= size;
        return b;
      }
    return system_alloc(size);
  }
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
  if (c < 0) {
    const std::size_t size = large_size(bytes);
    auto& tc = thread_cache();
    if (tc.large_bytes + size <= kMaxCachedLargeBytes) {
      auto it = std::find_if(tc.large.begin(), tc.large.end(), [&](const LargeList& l) { return l.size == size; });
      try {
        if (it == tc.large.end()) {
          // Forget sizes with nothing cached before the list grows long.
          if (tc.large.size() >= 64)
            std::erase_if(tc.large, [](const LargeList& l) { return l.head == nullptr; });
          it = tc.large.insert(tc.large.end(), LargeList{size, nullptr});
        }
        auto* b = static_cast<FreeBlock*>(p);
        b->next = it->head;
        it->head = b;
        tc.large_bytes += size;
        return;
      } catch (...) {  // no memory for the list entry: give the block back instead
      }
    }
    std::free(p);
    return;
  }
  {
    auto& tc = thread_cache();
    if (tc.count[c] < max_cached(c)) {
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

/// Tensor memory statistics summed over all threads: bytes held by tensor
/// storages now, the peak, and the number of storage allocations so far.
/// The peak is exact for a single thread; with several it is the sum of
/// each thread's peak (an upper bound).
inline MemoryStats memory_stats() {
  auto& r = detail::stats_registry();
  std::lock_guard<std::mutex> g(r.m);
  MemoryStats m{r.retired_current, r.retired_peak, r.retired_count};
  for (auto* t : r.live) {
    m.current_bytes += t->current.load(std::memory_order_relaxed);
    m.peak_bytes += t->peak.load(std::memory_order_relaxed);
    m.allocations += t->count.load(std::memory_order_relaxed);
  }
  m.peak_bytes = std::max(m.peak_bytes, m.current_bytes);
  return m;
}

/// Resets the peak to the bytes held now (like
/// torch.cuda.reset_peak_memory_stats): every thread's peak starts again at
/// its own current bytes, so the summed peak equals the current total.
/// Resetting only the calling thread left another live thread's old peak in
/// the sum (a worker that once held a temporary kept it there for good).
inline void reset_peak_memory_stats() {
  auto& r = detail::stats_registry();
  std::lock_guard<std::mutex> g(r.m);
  // Another thread's concurrent note_alloc may overwrite this store with its
  // own newer peak; either value is a correct peak from the reset on.
  for (auto* t : r.live) t->peak.store(t->current.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // Exited threads' bytes still held (a storage outliving the thread that
  // made it) are part of the current total, so they start the new peak too.
  r.retired_peak = r.retired_current;
}

}  // namespace frost
