// The CUDA device context frost keeps per device: the device's stream, the
// stream-ordered memory pool with its bookkeeping and cap, the cuBLAS and
// convolution workspaces, the algorithm caches and the user's switches; and
// per host thread, its own cuBLAS / cuBLASLt / cuDNN handles and, while it
// captures a plan, its capture stream. Created on first use, so a program
// that links frost::cuda starts (and runs on the CPU) where no GPU is present.
#pragma once
#include <algorithm>
#include <array>
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

/// Makes `device` the calling thread's current CUDA device (kernels launch
/// there, handles and streams belong to it); a no-op when it already is.
inline void activate(int device, const char* op) {
  int cur = -1;
  FROST_CUDA(cudaGetDevice(&cur), op);
  if (cur != device) FROST_CUDA(cudaSetDevice(device), op);
}

/// One host thread's library handles on one device. cuDNN's handles must not
/// be used by two threads at once, and a handle's stream and math mode are
/// its own settings, so every thread gets its own set (taken from the
/// context's pool and given back when the thread ends, as PyTorch does).
/// The index kernels' bad-index flag is per thread for the same reason.
struct Handles {
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t cudnn = nullptr;
  unsigned long long* flag = nullptr;  // index checks: [bad?, first bad index]
  cudaStream_t bound = nullptr;        // the stream cublas and cudnn are set to
};

struct Context;

/// What a host thread holds on one device: its handles (once it has used
/// the device) and, while it captures a plan, the stream it captures on,
/// the blocks allocated inside the capture (the graph's own allocations)
/// and the plan's slot for the index step being captured.
struct ThreadState {
  Context* owner = nullptr;
  Handles handles;
  cudaStream_t capture = nullptr;
  std::vector<void*> captured;
  unsigned long long* index_slot = nullptr;  // set by a capturing plan: where index kernels record
  ~ThreadState();
};
/// Set when the thread's states are destroyed at its exit; a storage freed
/// later (static destruction) then goes to the device's stream.
inline thread_local bool thread_states_gone = false;
struct ThreadStates {
  std::array<ThreadState, kMaxCudaDevices> of;
  ~ThreadStates() { thread_states_gone = true; }
};
/// This thread's state on `device`; null once the thread is ending.
inline ThreadState* thread_state(int device) {
  if (thread_states_gone) return nullptr;
  static thread_local ThreadStates states;
  return &states.of[static_cast<std::size_t>(device)];
}

struct Context {
  int device = 0, sm_count = 0;
  std::string name;
  /// The device's stream: every thread's work runs on it in order, and plans'
  /// CUDA Graphs replay on it.
  cudaStream_t stream = nullptr;
  MemoryBook book;
  /// One cuBLAS workspace for every handle: all work executes on `stream`,
  /// in order, so no two GEMMs use it at once (captures only record).
  void* cublas_workspace = nullptr;
  static constexpr std::size_t kCublasWorkspace = std::size_t(32) << 20;
  std::mutex workspace_mutex;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::vector<void*> retired_workspaces;
  std::mutex algo_mutex;
  std::unordered_map<ConvKey, ConvAlgo, ConvKeyHash> algos;
  LtCache lt_algos;  // the plans' cuBLASLt linears
  std::mutex pool_mutex;
  std::vector<Handles> pool;  // handles of threads that have ended

  explicit Context(int dev) : device(dev) {
    const char* op = "cuda (device start-up)";
    activate(dev, op);
    cudaDeviceProp prop{};
    FROST_CUDA(cudaGetDeviceProperties(&prop, dev), op);
    sm_count = prop.multiProcessorCount;
    name = prop.name;
    book.set_device(static_cast<std::int64_t>(prop.totalGlobalMem), "cuda:" + std::to_string(dev));
    FROST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), op);
    // Freed blocks stay in the pool for reuse (as PyTorch's caching allocator
    // keeps them) instead of going back to the driver at every sync.
    cudaMemPool_t pool_handle;
    FROST_CUDA(cudaDeviceGetMemPool(&pool_handle, dev), op);
    std::uint64_t keep = UINT64_MAX;
    FROST_CUDA(cudaMemPoolSetAttribute(pool_handle, cudaMemPoolAttrReleaseThreshold, &keep), op);
    // A fixed cuBLAS workspace: GEMMs captured into CUDA Graphs must not
    // allocate. Counted as held, as PyTorch's allocator counts its own.
    cublas_workspace = counted_malloc(kCublasWorkspace, "cudaMalloc (cuBLAS workspace)", op);
  }

  /// cudaMalloc'd memory the context keeps for good, counted as held.
  void* counted_malloc(std::size_t bytes, const char* call, const char* op) {
    book.reserve(bytes);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      if (trim_pool()) e = cudaMalloc(&p, bytes);
    }
    if (e != cudaSuccess) book.release(bytes);
    check(e, call, op);
    return p;
  }

  /// Gives the pool's cached free blocks back to the driver, once the
  /// stream's queued frees are done: for memory wanted outside the pool (a
  /// cudaMalloc, a graph's memory nodes at their first launch) that the
  /// pool's cache, kept for reuse, left the device short of. False when it
  /// could not (this thread is capturing: a sync would end the capture).
  bool trim_pool() noexcept {
    if (capturing()) return false;
    cudaMemPool_t pool_handle;
    if (cudaStreamSynchronize(stream) != cudaSuccess || cudaDeviceGetMemPool(&pool_handle, device) != cudaSuccess ||
        cudaMemPoolTrimTo(pool_handle, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return true;
  }

  /// empty_cache: once the stream's work is done, the pool's cached free
  /// blocks go back to the driver. Live tensors and plan arenas keep theirs.
  void empty_cache(const char* op) {
    FROST_CHECK(!capturing(), "frost::cuda::", op, ": cannot release memory on cuda:", device,
                " while this thread captures a plan (a sync would end the capture)");
    sync(op);
    cudaMemPool_t pool_handle;
    FROST_CUDA(cudaDeviceGetMemPool(&pool_handle, device), op);
    FROST_CUDA(cudaMemPoolTrimTo(pool_handle, 0), op);
  }
  /// The bytes the pool cudaMallocAsync draws from holds from the driver: its
  /// live blocks and the freed ones it keeps for reuse.
  std::int64_t pool_reserved(const char* op) const {
    cudaMemPool_t pool_handle;
    FROST_CUDA(cudaDeviceGetMemPool(&pool_handle, device), op);
    std::uint64_t bytes = 0;
    FROST_CUDA(cudaMemPoolGetAttribute(pool_handle, cudaMemPoolAttrReservedMemCurrent, &bytes), op);
    return static_cast<std::int64_t>(bytes);
  }

  /// Reads the driver's figure for the memory CUDA Graphs hold on the device
  /// into the book (nothing changes when the driver cannot say).
  void refresh_graph_memory() noexcept {
    std::uint64_t bytes = 0;
    if (cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &bytes) == cudaSuccess)
      book.set_graph_bytes(static_cast<std::int64_t>(bytes));
    else
      (void)cudaGetLastError();
  }

  /// The stream this thread's work goes to: its capture stream while it
  /// captures a plan, the device's stream otherwise.
  cudaStream_t current() const {
    const ThreadState* t = thread_state(device);
    return t && t->capture ? t->capture : stream;
  }
  /// Whether this thread is capturing a plan on the device.
  bool capturing() const {
    const ThreadState* t = thread_state(device);
    return t && t->capture;
  }
  /// This thread's handles, set to its current stream.
  Handles& handles(const char* op) {
    ThreadState* state = thread_state(device);
    FROST_CHECK(state != nullptr, "frost::", op, ": a CUDA library call on cuda:", device,
                " after this thread's CUDA state was destroyed (during its exit)");
    ThreadState& t = *state;
    if (!t.owner) {
      t.handles = acquire(op);
      t.owner = this;
    }
    const cudaStream_t s = current();
    if (t.handles.bound != s) {
      FROST_CUDA(cublasSetStream(t.handles.cublas, s), op);
      // cublasSetStream drops the handle's workspace back to cuBLAS's own pool.
      FROST_CUDA(cublasSetWorkspace(t.handles.cublas, cublas_workspace, kCublasWorkspace), op);
      FROST_CUDA(cudnnSetStream(t.handles.cudnn, s), op);
      t.handles.bound = s;
    }
    return t.handles;
  }
  /// The slot a capturing plan set for this thread's index kernels (null: none).
  unsigned long long* index_slot() const {
    const ThreadState* t = thread_state(device);
    return t ? t->index_slot : nullptr;
  }
  cublasHandle_t cublas(const char* op) { return handles(op).cublas; }
  cublasLtHandle_t lt(const char* op) { return handles(op).lt; }
  cudnnHandle_t cudnn(const char* op) { return handles(op).cudnn; }
  unsigned long long* flag(const char* op) { return handles(op).flag; }

  Handles acquire(const char* op) {
    {
      std::lock_guard<std::mutex> g(pool_mutex);
      if (!pool.empty()) {
        Handles h = pool.back();
        pool.pop_back();
        return h;
      }
    }
    activate(device, op);
    Handles h;
    FROST_CUDA(cublasCreate(&h.cublas), op);
    FROST_CUDA(cublasLtCreate(&h.lt), op);
    FROST_CUDA(cudnnCreate(&h.cudnn), op);
    h.flag = static_cast<unsigned long long*>(
        counted_malloc(2 * sizeof(unsigned long long), "cudaMalloc (index check flag)", op));
    return h;
  }
  void release(const Handles& h) noexcept {
    std::lock_guard<std::mutex> g(pool_mutex);
    pool.push_back(h);
  }

  /// A block from the device's pool, in stream order. Inside a capture it
  /// is a memory node of the graph: no memory is mapped then, so the book
  /// does not count it (the graph's memory is counted as graph_bytes once
  /// it is launched), and the cap does not refuse it.
  void* allocate(std::size_t bytes, const char* op) {
    if (bytes == 0) return nullptr;
    ThreadState* t = thread_state(device);
    const bool in_capture = t && t->capture;
    if (!in_capture) book.reserve(bytes);
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, bytes, in_capture ? t->capture : stream);
    if (e == cudaSuccess) {
      if (in_capture) t->captured.push_back(p);
      return p;
    }
    (void)cudaGetLastError();
    if (!in_capture) book.release(bytes);
    const DeviceMemoryStats s = book.stats();
    detail::fail("frost::", op, ": ", e == cudaErrorMemoryAllocation ? "out of memory on cuda:" : "allocation failed on cuda:",
                 device, ": cudaMallocAsync of ", bytes, " bytes", in_capture ? " (in a CUDA Graph capture)" : "",
                 " failed (", cudaGetErrorName(e), ": ", cudaGetErrorString(e), "); frost holds ", s.current_bytes,
                 " of ", s.total_bytes, " bytes");
  }
  /// Frees in stream order: a block the capturing thread allocated inside
  /// its capture is the graph's, freed in the graph; any other block goes
  /// back on the device's stream (a capture may free only its own blocks).
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    cudaStream_t s = stream;
    bool graphs_own = false;
    if (ThreadState* t = thread_state(device); t && t->capture) {
      const auto it = std::find(t->captured.begin(), t->captured.end(), p);
      if (it != t->captured.end()) {
        t->captured.erase(it);
        s = t->capture;
        graphs_own = true;
      }
    }
    // At exit the runtime may be gone already (nothing left to free then);
    // a failure must not stay behind for the next launch check to report.
    if (cudaFreeAsync(p, s) != cudaSuccess) (void)cudaGetLastError();
    if (!graphs_own) book.release(bytes);
  }

  /// A workspace of at least `bytes`, reused across calls (stream order keeps
  /// it safe). A grown-out block is kept, not freed: a captured CUDA Graph
  /// may still point at it. It grows to at least twice its size, so the
  /// blocks kept that way add up to less than the one in use.
  void* workspace_for(std::size_t bytes, const char* op) {
    std::lock_guard<std::mutex> g(workspace_mutex);
    if (bytes <= workspace_bytes) return workspace;
    // A block allocated in a capture belongs to the graph: eager work could
    // not use it. The plan runs step by step once instead (that grows it).
    FROST_CHECK(!capturing(), "frost::", op, ": a CUDA Graph capture needs a ", bytes,
                "-byte workspace, larger than the ", workspace_bytes, " bytes reserved");
    std::size_t size = std::max(bytes, 2 * workspace_bytes);
    void* grown = nullptr;
    try {
      grown = allocate(size, op);
    } catch (const Error&) {
      if (size == bytes) throw;
      size = bytes;  // the doubled size did not fit; exactly what is asked may
      grown = allocate(size, op);
    }
    if (workspace) retired_workspaces.push_back(workspace);
    workspace = grown;
    workspace_bytes = size;
    return workspace;
  }

  void sync(const char* op) { FROST_CUDA(cudaStreamSynchronize(current()), op); }
  operator Launch() const { return {current(), sm_count}; }
};

/// A thread's handles go back to the pool when it ends (contexts live to the
/// end of the process, so the pool is still there).
inline ThreadState::~ThreadState() {
  if (owner) owner->release(handles);
  owner = nullptr;
}

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
/// Set on a thread while a plan frozen with allow_tf32 runs there: its float
/// matmuls and convolutions may use TF32 whatever the process-wide switch says.
inline bool& thread_tf32() {
  static thread_local bool on = false;
  return on;
}
/// Whether float matmuls and convolutions queued now on this thread may use TF32.
inline bool tf32_allowed() { return switches().tf32 || thread_tf32(); }

inline int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// The devices' contexts, each made on first use. Never destroyed: storages
/// may be freed during static destruction.
inline std::array<std::atomic<Context*>, kMaxCudaDevices>& contexts() {
  static std::array<std::atomic<Context*>, kMaxCudaDevices> all{};
  return all;
}
/// cuda:`device`'s context if it has started (null otherwise); the thread's
/// current device is left alone.
inline Context* started_context(int device) noexcept {
  if (device < 0 || device >= kMaxCudaDevices) return nullptr;
  return contexts()[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
}

/// The context of cuda:`device`, created on first use, and made the calling
/// thread's current device.
inline Context& context(const char* op, int device = 0) {
  // Every device allocation comes here, so no lock once the device has started.
  static std::mutex m;
  FROST_CHECK(device >= 0 && device < kMaxCudaDevices, "frost::", op, ": cuda:", device,
              " is not a device index frost takes (0 to ", kMaxCudaDevices - 1, ")");
  std::atomic<Context*>& slot = contexts()[static_cast<std::size_t>(device)];
  if (Context* c = slot.load(std::memory_order_acquire)) {
    activate(device, op);
    return *c;
  }
  std::lock_guard<std::mutex> g(m);
  if (!slot.load(std::memory_order_relaxed)) {
    const int visible = visible_devices();
    FROST_CHECK(visible > 0, "frost::", op,
                ": no CUDA device is visible to this program (cudaGetDeviceCount found none); "
                "check frost::cuda::is_available() before moving tensors to cuda");
    FROST_CHECK(device < visible, "frost::", op, ": cuda:", device, " requested, but this program sees ", visible,
                " CUDA device", visible == 1 ? "" : "s", " (cuda:0 to cuda:", visible - 1, ")");
    slot.store(new Context(device), std::memory_order_release);
  }
  activate(device, op);
  return *slot.load(std::memory_order_relaxed);
}

/// Device memory for storages on one device (each device's backends own one).
struct CudaAllocator final : DeviceAllocator {
  int device = 0;
  explicit CudaAllocator(int d) : device(d) {}
  void* allocate(std::size_t bytes, Device d) override { return context("empty", d.index).allocate(bytes, "empty"); }
  /// Leaves the thread's current device alone: a free needs no device switch.
  void deallocate(void* p, std::size_t bytes) noexcept override {
    if (Context* c = started_context(device)) c->deallocate(p, bytes);
  }
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

/// Scratch for timing convolution algorithms (benchmark mode, a plan's first
/// run): up to kMaxWorkspace, halved while the cap or the device refuses
/// that much, and freed once the timing is done, so the context keeps only
/// the chosen algorithm's workspace.
struct FindWorkspace {
  Context& ctx;
  void* p = nullptr;
  std::size_t bytes = 0;
  // cudaMalloc rather than the stream-ordered pool, which keeps freed
  // blocks cached: cuDNN's and cuBLAS's own allocations could not use them.
  FindWorkspace(Context& c, const char* op) : ctx(c) {
    constexpr std::size_t kLeast = std::size_t(1) << 20;
    for (std::size_t want = kMaxWorkspace;; want /= 2) {
      try {
        c.book.reserve(want);
      } catch (const Error&) {
        if (want <= kLeast) throw;
        continue;
      }
      const cudaError_t e = cudaMalloc(&p, want);
      if (e == cudaSuccess) {
        bytes = want;
        return;
      }
      (void)cudaGetLastError();
      c.book.release(want);
      p = nullptr;
      if (want <= kLeast) check(e, "cudaMalloc (convolution algorithm timing scratch)", op);
    }
  }
  ~FindWorkspace() {
    if (p) (void)cudaFree(p);  // waits for the timing's kernels, which is where they are anyway
    ctx.book.release(bytes);
  }
  FindWorkspace(const FindWorkspace&) = delete;
  FindWorkspace& operator=(const FindWorkspace&) = delete;
};

/// What frost::cuda's free functions reach.
struct CudaRuntime final : detail::DeviceRuntime {
  int device_count() override { return visible_devices(); }
  std::string device_name(int device) override { return context("device_name", device).name; }
  DeviceMemoryStats memory_stats(int device) override {
    Context& cx = context("memory_stats", device);
    cx.refresh_graph_memory();
    DeviceMemoryStats s = cx.book.stats();
    s.reserved_bytes = cx.pool_reserved("memory_stats");
    return s;
  }
  void empty_cache(int device) override {
    Context& cx = context("empty_cache", device);
    cx.empty_cache("empty_cache");
    // The graphs' own memory only once no plan's graph lives on the device:
    // a live one would map its memory again at its next launch, past the
    // book's count (graph_destroy trims after the last one the same way).
    bool live = false;
    {
      std::lock_guard<std::mutex> g(graphs().m);
      for (const auto& entry : graphs().of) live = live || entry.second.device == device;
    }
    if (!live) FROST_CUDA(cudaDeviceGraphMemTrim(device), "empty_cache");
    cx.refresh_graph_memory();
  }
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
  bool set_thread_tf32(bool on) override { return std::exchange(thread_tf32(), on); }

  // A plan's capture records on a stream of its own, set as the capturing
  // thread's current stream: other threads' work, which goes to the
  // device's stream meanwhile, stays out of the graph. The graph then
  // replays on the device's stream, in order with everything else.
  void capture_begin(int device) override {
    const char* op = "jit::Plan (CUDA Graph capture)";
    Context& cx = context(op, device);
    ThreadState& t = *thread_state(device);  // not null: this thread is running
    FROST_CHECK(t.capture == nullptr, "frost::", op, ": this thread is already capturing a plan on cuda:", device);
    cudaStream_t s = nullptr;
    FROST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), op);
    t.capture = s;
    t.captured.clear();
    try {
      // The thread's handles are made (a cudaMalloc, which a capture forbids)
      // and set to the capture stream before the capture begins.
      cx.handles(op);
      FROST_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), op);
    } catch (...) {
      end_capture_stream(t);
      throw;
    }
  }
  void* capture_end(int device) override {
    const char* op = "jit::Plan (CUDA Graph capture)";
    context(op, device);
    ThreadState& t = *thread_state(device);
    FROST_CHECK(t.capture != nullptr, "frost::", op, ": no capture is running on this thread on cuda:", device);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(t.capture, &graph);
    end_capture_stream(t);
    check(ended, "cudaStreamEndCapture", op);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiate", op);
    std::lock_guard<std::mutex> g(graphs().m);
    graphs().of[exec] = {device, false};
    return exec;
  }
  void capture_abort(int device) noexcept override {
    if (device < 0 || device >= kMaxCudaDevices) return;
    ThreadState* t = thread_state(device);
    if (!t || !t->capture) return;
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(t->capture, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    end_capture_stream(*t);
    (void)cudaGetLastError();
  }
  // A graph's memory nodes take their memory from the driver at its first
  // launch and keep it; the book counts it from then, and gives it back
  // once the device's last graph is destroyed.
  void graph_launch(void* graph, int device) override {
    Context& cx = context("jit::Plan::run", device);
    const auto exec = static_cast<cudaGraphExec_t>(graph);
    cudaError_t e = cudaGraphLaunch(exec, cx.current());
    if (e == cudaErrorMemoryAllocation) {
      // The first launch maps the graph's memory; the pool's cached blocks
      // may hold what it needs.
      (void)cudaGetLastError();
      if (cx.trim_pool()) e = cudaGraphLaunch(exec, cx.current());
    }
    check(e, "cudaGraphLaunch", "jit::Plan::run (CUDA Graph replay)");
    bool first = false;
    {
      std::lock_guard<std::mutex> g(graphs().m);
      if (const auto it = graphs().of.find(graph); it != graphs().of.end() && !it->second.launched)
        first = it->second.launched = true;
    }
    if (first) cx.refresh_graph_memory();
  }
  void graph_destroy(void* graph) noexcept override {
    if (!graph) return;
    int device = -1;
    bool last = true;
    {
      // Out of the registry before it is destroyed: a graph instantiated
      // meanwhile may get the same address, and its entry must stay.
      std::lock_guard<std::mutex> g(graphs().m);
      if (const auto it = graphs().of.find(graph); it != graphs().of.end()) {
        device = it->second.device;
        graphs().of.erase(it);
      }
      for (const auto& entry : graphs().of)
        if (entry.second.device == device) last = false;
    }
    if (cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)) != cudaSuccess) (void)cudaGetLastError();
    Context* cx = started_context(device);
    if (!cx) return;
    // Trimming while other graphs live would make their next launch map
    // their memory again; after the last one it returns the memory.
    if (last && cudaDeviceGraphMemTrim(device) != cudaSuccess) (void)cudaGetLastError();
    cx->refresh_graph_memory();
  }
  void set_thread_index_slot(int device, void* slot) override {
    const char* op = "jit::Plan (CUDA Graph capture)";
    FROST_CHECK(device >= 0 && device < kMaxCudaDevices, "frost::", op, ": cuda:", device,
                " is not a device index frost takes");
    ThreadState* t = thread_state(device);
    FROST_CHECK(t != nullptr, "frost::", op, ": this thread's CUDA state was destroyed (during its exit)");
    t->index_slot = static_cast<unsigned long long*>(slot);
  }
  void* event_create(int device) override {
    const char* op = "jit::Plan::profile";
    context(op, device);
    cudaEvent_t e = nullptr;
    FROST_CUDA(cudaEventCreate(&e), op);
    return e;
  }
  void event_record(void* event, int device) override {
    const char* op = "jit::Plan::profile";
    FROST_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(event), context(op, device).current()), op);
  }
  double event_elapsed_ms(void* start, void* end) override {
    const char* op = "jit::Plan::profile";
    FROST_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(end)), op);
    float ms = 0;
    FROST_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)), op);
    return ms;
  }
  void event_destroy(void* event) noexcept override {
    if (event) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }

 private:
  struct GraphState {
    int device = 0;
    bool launched = false;
  };
  /// The live executable graphs. Never destroyed, like the contexts: a plan
  /// may be destroyed during static destruction.
  struct Graphs {
    std::mutex m;
    std::unordered_map<void*, GraphState> of;
  };
  static Graphs& graphs() {
    static Graphs* all = new Graphs;
    return *all;
  }

  /// Back to the device's stream: the capture stream destroyed, the
  /// handles to be set to the device's stream at their next use (a later
  /// stream may reuse the destroyed one's address).
  static void end_capture_stream(ThreadState& t) noexcept {
    cudaStreamDestroy(std::exchange(t.capture, nullptr));
    t.captured.clear();
    t.index_slot = nullptr;
    t.handles.bound = nullptr;
  }
};

}  // namespace frost::cuda_detail
