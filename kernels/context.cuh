// The CUDA device context frost keeps per process: one stream, the cuBLAS and
// cuDNN handles bound to it, the stream-ordered memory pool with its
// bookkeeping and cap, the convolution workspace and algorithm cache, and the
// user's switches. Created on first use, so a program that links frost::cuda
// starts (and runs on the CPU) where no GPU is present.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <frost/core/device.hpp>
#include <frost/core/device_runtime.hpp>
#include <frost/core/storage.hpp>

#include "check.cuh"
#include "conv.cuh"
#include "lt_linear.cuh"
#include "memory_book.hpp"

namespace frost::cuda_detail {

/// Most workspace a convolution algorithm may ask for.
constexpr std::size_t kMaxWorkspace = std::size_t(1) << 30;

struct Context {
  int device = 0, sm_count = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t cudnn = nullptr;
  MemoryBook book;
  unsigned long long* flag = nullptr;  // index checks: [bad?, first bad index]
  void* cublas_workspace = nullptr;
  static constexpr std::size_t kCublasWorkspace = std::size_t(32) << 20;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::vector<void*> retired_workspaces;
  std::mutex algo_mutex;
  std::unordered_map<ConvKey, ConvAlgo, ConvKeyHash> algos;

  explicit Context(int dev) : device(dev) {
    const char* op = "cuda (device start-up)";
    FROST_CUDA(cudaSetDevice(dev), op);
    cudaDeviceProp prop{};
    FROST_CUDA(cudaGetDeviceProperties(&prop, dev), op);
    sm_count = prop.multiProcessorCount;
    name = prop.name;
    book.set_device(static_cast<std::int64_t>(prop.totalGlobalMem), "cuda:" + std::to_string(dev));
    FROST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), op);
    // Freed blocks stay in the pool for reuse (as PyTorch's caching allocator
    // keeps them) instead of going back to the driver at every sync.
    cudaMemPool_t pool;
    FROST_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev), op);
    std::uint64_t keep = UINT64_MAX;
    FROST_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), op);
    FROST_CUDA(cublasCreate(&cublas), op);
    FROST_CUDA(cublasSetStream(cublas, stream), op);
    // A fixed cuBLAS workspace: GEMMs captured into CUDA Graphs must not allocate.
    FROST_CUDA(cudaMalloc(&cublas_workspace, kCublasWorkspace), op);
    FROST_CUDA(cublasSetWorkspace(cublas, cublas_workspace, kCublasWorkspace), op);
    FROST_CUDA(cublasLtCreate(&lt), op);
    FROST_CUDA(cudnnCreate(&cudnn), op);
    FROST_CUDA(cudnnSetStream(cudnn, stream), op);
    FROST_CUDA(cudaMalloc(&flag, 2 * sizeof(unsigned long long)), op);
  }

  void* allocate(std::size_t bytes, const char* op) {
    if (bytes == 0) return nullptr;
    book.reserve(bytes);
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, bytes, stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      book.release(bytes);
      const DeviceMemoryStats s = book.stats();
      detail::fail("frost::", op, ": out of memory on cuda:", device, ": cudaMallocAsync of ", bytes, " bytes failed (",
                   cudaGetErrorName(e), "); frost holds ", s.current_bytes, " of ", s.total_bytes, " bytes");
    }
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    (void)cudaFreeAsync(p, stream);  // at exit the runtime may be gone already: nothing left to free then
    book.release(bytes);
  }

  /// A workspace of at least `bytes`, reused across calls (stream order keeps
  /// it safe). A grown-out block is kept, not freed: a captured CUDA Graph
  /// may still point at it.
  void* workspace_for(std::size_t bytes, const char* op) {
    if (bytes <= workspace_bytes) return workspace;
    void* grown = allocate(bytes, op);
    if (workspace) retired_workspaces.push_back(workspace);
    workspace = grown;
    workspace_bytes = bytes;
    return workspace;
  }

  void sync(const char* op) { FROST_CUDA(cudaStreamSynchronize(stream), op); }
  operator Launch() const { return {stream, sm_count}; }
};

/// The user's switches (allow_tf32, benchmark); process-wide like PyTorch's.
struct Switches {
  std::atomic<bool> tf32{false}, benchmark{false};
};
inline Switches& switches() {
  static Switches s;
  return s;
}
/// Set on a thread while a frozen plan runs there: its convolutions use
/// timed algorithms whatever the process-wide benchmark switch says, and
/// other threads' eager convolutions keep reading that switch.
inline bool& thread_timed() {
  static thread_local bool on = false;
  return on;
}
/// Whether a convolution chosen now on this thread times its algorithms.
inline bool timed_algorithms() { return switches().benchmark || thread_timed(); }

inline int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// The context of cuda:0, created on first use. frost drives one GPU per
/// process for now (several GPUs arrive with NCCL); other indices are errors.
inline Context& context(const char* op, int device = 0) {
  // Never destroyed: storages may be freed during static destruction. Every
  // device allocation comes here, so no lock once the device has started.
  static std::atomic<Context*> ctx{nullptr};
  static std::mutex m;
  FROST_CHECK(device == 0, "frost::", op, ": cuda:", device, " requested; frost runs on cuda:0 for now");
  if (Context* c = ctx.load(std::memory_order_acquire)) return *c;
  std::lock_guard<std::mutex> g(m);
  if (!ctx.load(std::memory_order_relaxed)) {
    FROST_CHECK(visible_devices() > 0, "frost::", op,
                ": no CUDA device is visible to this program (cudaGetDeviceCount found none); "
                "check frost::cuda::is_available() before moving tensors to cuda");
    ctx.store(new Context(device), std::memory_order_release);
  }
  return *ctx.load(std::memory_order_relaxed);
}

/// Device memory for storages on cuda:N.
struct CudaAllocator final : DeviceAllocator {
  void* allocate(std::size_t bytes, Device d) override { return context("empty", d.index).allocate(bytes, "empty"); }
  void deallocate(void* p, std::size_t bytes) noexcept override { context("free").deallocate(p, bytes); }
};

/// A temporary device buffer released (stream-ordered) at scope exit.
struct TempBuffer {
  Context& ctx;
  void* p = nullptr;
  std::size_t bytes = 0;
  TempBuffer(Context& c, std::size_t n, const char* op) : ctx(c), p(c.allocate(n, op)), bytes(n) {}
  ~TempBuffer() { ctx.deallocate(p, bytes); }
  TempBuffer(const TempBuffer&) = delete;
  TempBuffer& operator=(const TempBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

/// What frost::cuda's free functions reach.
struct CudaRuntime final : detail::DeviceRuntime {
  int device_count() override { return visible_devices(); }
  std::string device_name(int device) override { return context("device_name", device).name; }
  DeviceMemoryStats memory_stats(int device) override { return context("memory_stats", device).book.stats(); }
  void reset_peak_memory_stats(int device) override { context("reset_peak_memory_stats", device).book.reset_peak(); }
  void set_memory_fraction(double fraction, int device) override {
    context("set_per_process_memory_fraction", device).book.set_fraction(fraction);
  }
  void synchronize(int device) override { context("synchronize", device).sync("synchronize"); }
  void set_allow_tf32(bool on) override { switches().tf32 = on; }
  bool allow_tf32() override { return switches().tf32; }
  void set_benchmark(bool on) override { switches().benchmark = on; }
  bool benchmark() override { return switches().benchmark; }
  bool set_thread_timed(bool on) override { return std::exchange(thread_timed(), on); }

  void capture_begin(int device) override {
    Context& cx = context("jit::Plan (CUDA Graph capture)", device);
    FROST_CUDA(cudaStreamBeginCapture(cx.stream, cudaStreamCaptureModeThreadLocal), "jit::Plan (CUDA Graph capture)");
  }
  void* capture_end(int device) override {
    const char* op = "jit::Plan (CUDA Graph capture)";
    Context& cx = context(op, device);
    cudaGraph_t graph = nullptr;
    FROST_CUDA(cudaStreamEndCapture(cx.stream, &graph), op);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiate", op);
    return exec;
  }
  void capture_abort(int device) noexcept override {
    Context& cx = context("jit::Plan (CUDA Graph capture)", device);
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(cx.stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
  void graph_launch(void* graph, int device) override {
    Context& cx = context("jit::Plan::run", device);
    FROST_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), cx.stream), "jit::Plan::run (CUDA Graph replay)");
  }
  void graph_destroy(void* graph) noexcept override {
    if (graph) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }
};

}  // namespace frost::cuda_detail
