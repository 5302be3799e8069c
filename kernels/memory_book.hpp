// The device-memory bookkeeping of one device: bytes held (the pool's
// blocks, the workspaces, the CUDA Graphs' own memory), the peak, the
// user's cap. Plain C++ (no CUDA), so the CPU tests cover it; the CUDA
// allocator asks it before every cudaMallocAsync.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include <frost/core/device_runtime.hpp>
#include <frost/core/error.hpp>

namespace frost::cuda_detail {

class MemoryBook {
 public:
  explicit MemoryBook(std::int64_t total_bytes = 0, std::string device = "cuda:0")
      : device_(std::move(device)), total_(total_bytes) {}
  void set_device(std::int64_t total_bytes, std::string device) {
    std::lock_guard<std::mutex> g(m_);
    total_ = total_bytes;
    device_ = std::move(device);
  }

  /// Records `bytes` about to be allocated; a frost::Error when that would
  /// pass the cap (nothing is recorded then).
  /// (The device's name is kept, not passed: this runs for every tensor.)
  void reserve(std::size_t bytes) {
    std::lock_guard<std::mutex> g(m_);
    const auto b = static_cast<std::int64_t>(bytes);
    FROST_CHECK(limit_ == 0 || current_ + b <= limit_, "frost: allocating ", b, " bytes on ", device_,
                " would pass the memory cap of ", limit_, " bytes set by set_per_process_memory_fraction (",
                current_, " bytes in use); lower the batch size or raise the fraction");
    current_ += b;
    ++allocations_;
    if (current_ > peak_) peak_ = current_;
  }
  /// Records a failed allocation's or a freed block's bytes as no longer held.
  void release(std::size_t bytes) {
    std::lock_guard<std::mutex> g(m_);
    current_ -= static_cast<std::int64_t>(bytes);
  }
  /// The cap as a fraction of the device's memory (0 < fraction <= 1).
  void set_fraction(double fraction) {
    std::lock_guard<std::mutex> g(m_);
    FROST_CHECK(fraction > 0 && fraction <= 1, "frost::cuda::set_per_process_memory_fraction: fraction ", fraction,
                " for ", device_, " is out of range (expected 0 < fraction <= 1)");
    limit_ = static_cast<std::int64_t>(fraction * static_cast<double>(total_));
  }
  /// The memory CUDA Graphs hold for their own allocations now (the
  /// driver's figure for the device): counted as held, beside the pool's.
  /// The cap does not refuse it (the driver reserves it at a graph's launch),
  /// but later allocations see it.
  void set_graph_bytes(std::int64_t bytes) {
    std::lock_guard<std::mutex> g(m_);
    current_ += bytes - graph_;
    graph_ = bytes;
    if (current_ > peak_) peak_ = current_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> g(m_);
    peak_ = current_;
  }
  DeviceMemoryStats stats() const {
    std::lock_guard<std::mutex> g(m_);
    return {current_, peak_, allocations_, limit_, total_, graph_};
  }

 private:
  mutable std::mutex m_;
  std::string device_;
  std::int64_t total_ = 0, current_ = 0, peak_ = 0, allocations_ = 0, limit_ = 0, graph_ = 0;
};

}  // namespace frost::cuda_detail
