// A team of helper threads for parallel regions of a few microseconds (a
// frozen MLP at batch 1: 5 us of matrix-vector products). An OpenMP region
// costs about 1.1 us here to open and close (libgomp's team set-up on the
// caller, its closing barrier); the helpers below wait for work by spinning
// on one counter, so a region costs two cache-line handoffs. While they
// wait they yield the core to any other runnable thread, and after
// kSpinIdle without work they sleep until the next region. Next to other
// busy threads (OpenMP's) they still cost those threads time: frozen plans
// use the team only when a matrix-vector chain is all they run.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include <sched.h>

namespace frost::cpu {

class SpinTeam {
 public:
  /// How long an idle helper keeps checking for work before it sleeps.
  static constexpr std::chrono::microseconds kSpinIdle{50};

  explicit SpinTeam(int threads) {
    threads = std::clamp(threads, 1, 255);
    for (int t = 1; t < threads; ++t) helpers_.emplace_back([this, t] { serve(t); });
  }
  ~SpinTeam() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& h : helpers_) h.join();
  }
  SpinTeam(const SpinTeam&) = delete;
  SpinTeam& operator=(const SpinTeam&) = delete;

  /// Threads in the team, the caller included.
  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  /// Runs fn(t) for t in [0, n) (n at most size(); the caller is t = 0) and
  /// returns when all are done, rethrowing the first exception. False, with
  /// nothing run, when another thread holds the team: the caller then
  /// parallelises some other way.
  template <class F>
  bool run(int n, F&& fn) {
    if (busy_.test_and_set(std::memory_order_acquire)) return false;
    n = std::clamp(n, 1, size());
    n_ = n;
    arrived_.store(0, std::memory_order_relaxed);  // a failed run may have left some
    if (n == 1) {  // the helpers need not wake
      try {
        fn(0);
      } catch (...) {
        busy_.clear(std::memory_order_release);
        throw;
      }
      busy_.clear(std::memory_order_release);
      return true;
    }
    job_ = [](void* f, int t) { (*static_cast<std::remove_reference_t<F>*>(f))(t); };
    ctx_ = &fn;
    error_ = nullptr;
    aborted_.store(false, std::memory_order_relaxed);
    remaining_.store(n - 1, std::memory_order_relaxed);
    // Publishes the job: a new count, and n in the low byte, read with it in one load.
    job_word_.store((job_word_.load(std::memory_order_relaxed) & ~std::uint64_t{0xff}) + 256 + static_cast<std::uint64_t>(n),
                    std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(m_);
      cv_.notify_all();
    }
    call(0);
    wait_until([&] { return remaining_.load(std::memory_order_acquire) == 0; });
    const std::exception_ptr error = std::move(error_);  // before another thread may take the team
    busy_.clear(std::memory_order_release);
    if (error) std::rethrow_exception(error);
    return true;
  }

  /// Waits until all n threads of the current run have called it. After an
  /// exception in any of them it returns at once (the run's results are
  /// discarded by the rethrow).
  void barrier() {
    const std::uint64_t gen = barrier_gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      barrier_gen_.fetch_add(1, std::memory_order_release);
      return;
    }
    wait_until([&] { return barrier_gen_.load(std::memory_order_acquire) != gen || aborted_.load(std::memory_order_acquire); });
  }

  /// The process's team: as many threads as OpenMP would use, made on first use.
  static SpinTeam& instance(int threads) {
    static SpinTeam team(threads);
    return team;
  }

 private:
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  /// Spins until done(), yielding the core every 64 checks: a helper that
  /// shares this core (more threads than cores) then gets to run.
  template <class P>
  static void wait_until(P&& done) {
    for (int spins = 1; !done(); ++spins) {
      if (spins % 64) pause();
      else sched_yield();
    }
  }

  void call(int t) {
    try {
      job_(ctx_, t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_);
      if (!error_) error_ = std::current_exception();
      aborted_.store(true, std::memory_order_release);
    }
  }

  void serve(int t) {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin (yielding the core) until a new job or kSpinIdle without one; then sleep.
      auto idle_since = std::chrono::steady_clock::now();
      for (int spins = 0; job_word_.load(std::memory_order_acquire) == seen; ++spins) {
        if (spins % 64 != 63) {
          pause();
          continue;
        }
        sched_yield();
        if (std::chrono::steady_clock::now() - idle_since < kSpinIdle) continue;
        std::unique_lock<std::mutex> lock(m_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lock, [&] { return stop_ || job_word_.load(std::memory_order_seq_cst) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        if (stop_) return;
        idle_since = std::chrono::steady_clock::now();
      }
      // Helpers past this job's n skip it; the caller waits for the others only.
      seen = job_word_.load(std::memory_order_acquire);
      if (t < static_cast<int>(seen & 0xff)) {
        call(t);
        remaining_.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
  }

  std::vector<std::thread> helpers_;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  void (*job_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  int n_ = 1;  // the current job's threads (its helpers read it after the job word)
  std::exception_ptr error_;
  std::atomic<bool> aborted_{false};
  alignas(64) std::atomic<std::uint64_t> job_word_{0};  // jobs so far << 8 | the last job's n
  alignas(64) std::atomic<int> remaining_{0};
  alignas(64) std::atomic<int> arrived_{0};
  std::atomic<std::uint64_t> barrier_gen_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace frost::cpu
