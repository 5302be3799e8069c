// frost::cuda: the device-level switches and counters a user reaches for
// (torch.cuda.is_available, memory_stats, set_per_process_memory_fraction,
// allow_tf32, cudnn.benchmark). The functions are plain C++; the CUDA target
// installs the runtime behind them, so a program without frost::cuda still
// compiles, reports no device, and says which target to link when asked for more.
#pragma once
#include <cstdint>
#include <string>

#include "error.hpp"

namespace frost {

/// Device memory counters of one device: bytes frost holds there (tensor
/// storages and plan arenas through its pool, the cuBLAS and convolution
/// workspaces, and what plans' CUDA Graphs keep for their own allocations).
struct DeviceMemoryStats {
  std::int64_t current_bytes = 0;   ///< held now
  std::int64_t peak_bytes = 0;      ///< most held at once since the last reset_peak_memory_stats
  std::int64_t allocations = 0;     ///< allocations made
  std::int64_t limit_bytes = 0;     ///< the cap set by set_per_process_memory_fraction (0: none)
  std::int64_t total_bytes = 0;     ///< the device's memory
  std::int64_t graph_bytes = 0;     ///< of current_bytes: reserved by CUDA Graphs' memory nodes
  /// What the stream-ordered pool holds from the driver: the blocks of live
  /// tensors and plan arenas, and freed ones cached for reuse, which
  /// empty_cache() gives back (torch.cuda.memory_reserved's counterpart).
  std::int64_t reserved_bytes = 0;
};

namespace detail {
/// What frost::cuda's functions call; installed by the frost::cuda target.
struct DeviceRuntime {
  virtual ~DeviceRuntime() = default;
  virtual int device_count() = 0;
  virtual std::string device_name(int device) = 0;
  virtual DeviceMemoryStats memory_stats(int device) = 0;
  virtual void reset_peak_memory_stats(int device) = 0;
  virtual void empty_cache(int device) = 0;
  virtual void set_memory_fraction(double fraction, int device) = 0;
  virtual void synchronize(int device) = 0;
  virtual void set_allow_tf32(bool on) = 0;
  virtual bool allow_tf32() = 0;
  virtual void set_benchmark(bool on) = 0;
  virtual bool benchmark() = 0;
  /// Timed convolution algorithms for the calling thread alone (a frozen
  /// plan's runs), beside the process-wide switch; returns the previous value.
  virtual bool set_thread_timed(bool on) = 0;
  /// TF32 for the calling thread alone (a plan frozen with allow_tf32),
  /// beside the process-wide switch; returns the previous value.
  virtual bool set_thread_tf32(bool on) = 0;
  // CUDA Graphs for frozen plans: capture the work this thread queues on
  // the device between begin and end (on a capture stream of its own, so
  // other threads' work stays out), then replay it with one launch on the
  // device's stream.
  virtual void capture_begin(int device) = 0;
  virtual void* capture_end(int device) = 0;  ///< the executable graph
  virtual void capture_abort(int device) noexcept = 0;
  virtual void graph_launch(void* graph, int device) = 0;
  virtual void graph_destroy(void* graph) noexcept = 0;
  /// Index checks inside a plan's CUDA Graph. An index kernel reads its
  /// bad-index flag back after each launch, a sync no capture can hold;
  /// while `slot` (device memory, two uint64 cleared by the caller) is set
  /// for the calling thread on `device`, the index kernels it queues there
  /// record into it instead (1 and the first bad index), and the plan reads
  /// the slots back after the graph runs. Null restores the usual checks.
  virtual void set_thread_index_slot(int device, void* slot) = 0;
  // Timing a plan's steps (Plan::profile): events recorded on the calling
  // thread's stream on the device; the milliseconds between two recorded
  // events, once the later one has passed (it waits for it).
  virtual void* event_create(int device) = 0;
  virtual void event_record(void* event, int device) = 0;
  virtual double event_elapsed_ms(void* start, void* end) = 0;
  virtual void event_destroy(void* event) noexcept = 0;
};
inline DeviceRuntime*& cuda_runtime_slot() {
  static DeviceRuntime* r = nullptr;
  return r;
}
inline DeviceRuntime& cuda_runtime(const char* what) {
  DeviceRuntime* r = cuda_runtime_slot();
  FROST_CHECK(r != nullptr, "frost::cuda::", what,
              ": this program did not link the CUDA backend: add "
              "target_link_libraries(<your target> PRIVATE frost::cuda)");
  return *r;
}
}  // namespace detail

namespace cuda {

/// True when the program links frost::cuda and a CUDA device is present.
inline bool is_available() {
  detail::DeviceRuntime* r = detail::cuda_runtime_slot();
  return r != nullptr && r->device_count() > 0;
}
/// CUDA devices visible to this program (0 without frost::cuda).
inline int device_count() {
  detail::DeviceRuntime* r = detail::cuda_runtime_slot();
  return r ? r->device_count() : 0;
}
inline std::string device_name(int device = 0) { return detail::cuda_runtime("device_name").device_name(device); }
inline DeviceMemoryStats memory_stats(int device = 0) { return detail::cuda_runtime("memory_stats").memory_stats(device); }
inline void reset_peak_memory_stats(int device = 0) {
  detail::cuda_runtime("reset_peak_memory_stats").reset_peak_memory_stats(device);
}
/// Gives the device memory frost's pool caches for reuse back to the driver
/// (torch.cuda.empty_cache), after waiting for the work queued there, and the
/// memory CUDA Graphs cached when no plan's graph lives on the device; live
/// tensors and plans keep theirs.
inline void empty_cache(int device = 0) { detail::cuda_runtime("empty_cache").empty_cache(device); }
/// Caps frost's device memory at `fraction` of the device's total (like
/// torch.cuda.set_per_process_memory_fraction); an allocation past the cap is
/// a frost::Error naming the sizes.
inline void set_per_process_memory_fraction(double fraction, int device = 0) {
  detail::cuda_runtime("set_per_process_memory_fraction").set_memory_fraction(fraction, device);
}
/// Waits for the work queued on the device.
inline void synchronize(int device = 0) { detail::cuda_runtime("synchronize").synchronize(device); }
/// TF32 tensor cores for float matmul and convolution (PyTorch's allow_tf32);
/// off by default, so float results match the CPU to float rounding.
inline void set_allow_tf32(bool on) { detail::cuda_runtime("set_allow_tf32").set_allow_tf32(on); }
inline bool allow_tf32() { return detail::cuda_runtime("allow_tf32").allow_tf32(); }
/// cudnn.benchmark: time the convolution algorithms once per shape and keep
/// the fastest (off: cuDNN's heuristics choose).
inline void set_benchmark(bool on) { detail::cuda_runtime("set_benchmark").set_benchmark(on); }
inline bool benchmark() { return detail::cuda_runtime("benchmark").benchmark(); }

}  // namespace cuda
}  // namespace frost
