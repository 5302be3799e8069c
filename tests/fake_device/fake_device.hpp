// A stand-in for a GPU, for machines without one: a backend registered as
// cuda:0 and cuda:1 whose memory the host cannot touch. Its blocks are
// mapped PROT_NONE except while one of its own kernels runs (the CPU's,
// underneath), so host code that reads or writes device memory directly, as
// it never may on a real GPU, dies of SIGSEGV here; and each kernel checks
// that the pointers it is given are device memory (a host pointer given to a
// CUDA kernel is an illegal address there), recording any that is not.
// It overrides what frost's CUDA backend overrides, so the op layer takes
// the same paths (batch norm as one kernel, no prepared weights, linear
// through gemm). One host thread at a time: the tests are single-threaded.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

#include <frost/frost.hpp>

namespace frost::test::fake {

/// The mapped blocks (address -> bytes asked for), whether the host may
/// touch them now, and the kernels that were given a host pointer.
struct DeviceMemory {
  std::map<std::uintptr_t, std::size_t> blocks;
  int open_depth = 0;  // > 0 while a kernel runs
  std::string violations;
  int host_reads = 0;  // copies to the host: each a stream sync on a GPU

  static std::size_t rounded(std::size_t n) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return ((n ? n : 1) + page - 1) / page * page;
  }
  void protect(std::uintptr_t a, std::size_t n, bool open) const {
    mprotect(reinterpret_cast<void*>(a), rounded(n), open ? PROT_READ | PROT_WRITE : PROT_NONE);
  }
  void set_all(bool open) const {
    for (const auto& [a, n] : blocks) protect(a, n, open);
  }
  bool holds(const void* p) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return false;
    --it;
    return a < it->first + rounded(it->second);
  }
};
inline DeviceMemory& memory() {
  static DeviceMemory m;
  return m;
}

/// Device memory open to the host for the kernel in this scope.
struct KernelScope {
  KernelScope() {
    if (memory().open_depth++ == 0) memory().set_all(true);
  }
  ~KernelScope() {
    if (--memory().open_depth == 0) memory().set_all(false);
  }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
};

/// Records `kernel` as a violation for each pointer that is not device
/// memory (null is fine: an absent bias or state buffer).
inline void need_device(const char* kernel, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (p && !memory().holds(p)) memory().violations += std::string(kernel) + " got a host pointer; ";
}
/// Takes the violations recorded so far (empty: none).
inline std::string take_violations() {
  std::string v;
  v.swap(memory().violations);
  return v;
}

struct Allocator final : DeviceAllocator {
  void* allocate(std::size_t bytes, Device) override {
    void* p = mmap(nullptr, DeviceMemory::rounded(bytes), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    FROST_CHECK(p != MAP_FAILED, "fake device: mmap of ", bytes, " bytes failed");
    memory().blocks[reinterpret_cast<std::uintptr_t>(p)] = bytes;
    if (memory().open_depth > 0) memory().protect(reinterpret_cast<std::uintptr_t>(p), bytes, true);
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    memory().blocks.erase(reinterpret_cast<std::uintptr_t>(p));
    munmap(p, DeviceMemory::rounded(bytes));
  }
};

template <class T>
class Backend final : public frost::Backend<T> {
 public:
  explicit Backend(int index) : index_(index) {}
  Device device() const override { return Device::cuda(index_); }
  DeviceAllocator* allocator() override { return &alloc_; }

  void unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) override {
    run("unary", {x.data, y.data}, [&] { cpu().unary(op, x, y, p0, p1); });
  }
  void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) override {
    run("binary", {a.data, b.data, y.data}, [&] { cpu().binary(op, a, b, y, p); });
  }
  void where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) override {
    run("where", {c.data, a.data, b.data, y.data}, [&] { cpu().where(c, a, b, y); });
  }
  void copy(const View<const T>& x, const View<T>& y) override {
    run("copy", {x.data, y.data}, [&] { cpu().copy(x, y); });
  }
#define FROST_FAKE_CAST(S, e, name, st) \
  void cast(const View<const S>& x, const View<T>& y) override { cast_from(x, y); }
  FROST_FOR_EACH_DTYPE(FROST_FAKE_CAST)
#undef FROST_FAKE_CAST
  void fill(const View<T>& y, T value) override {
    run("fill", {y.data}, [&] { cpu().fill(y, value); });
  }
  void random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset, double lo,
              double hi) override {
    run("random", {y.data}, [&] { cpu().random(y, dist, seed, offset, lo, hi); });
  }
  void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) override {
    run("reduce", {x.data, y.data}, [&] { cpu().reduce(op, x, n_reduced, y); });
  }
  void arg_reduce(bool is_max, const View<const T>& x, const View<T>& values,
                  const View<std::int64_t>& indices) override {
    run("arg_reduce", {x.data, values.data, indices.data}, [&] { cpu().arg_reduce(is_max, x, values, indices); });
  }
  void softmax(const View<const T>& x, const View<T>& y, bool log) override {
    run("softmax", {x.data, y.data}, [&] { cpu().softmax(x, y, log); });
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
            std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta, T* c, std::int64_t ldc,
            std::int64_t sc, std::int64_t batch) override {
    run("gemm", {a, b, c}, [&] { cpu().gemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch); });
  }
  void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index,
                    const View<T>& y) override {
    run("index_select", {x.data, index.data, y.data}, [&] { cpu().index_select(x, dim, index, y); });
  }
  void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) override {
    run("gather", {x.data, index.data, y.data}, [&] { cpu().gather(x, dim, index, y); });
  }
  void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index,
                   const View<const T>& src) override {
    run("scatter_add", {y.data, index.data, src.data}, [&] { cpu().scatter_add(y, dim, index, src); });
  }
  void conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias, const View<T>& y,
              UnaryOp act) override {
    run("conv2d", {x.data, w.data, bias, y.data}, [&] { cpu().conv2d(p, x, w, bias, y, act); });
  }
  void conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                         const View<T>& dx) override {
    run("conv2d_grad_input", {dy.data, w.data, dx.data}, [&] { cpu().conv2d_grad_input(p, dy, w, dx); });
  }
  void conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                          const View<T>& dw) override {
    run("conv2d_grad_weight", {x.data, dy.data, dw.data}, [&] { cpu().conv2d_grad_weight(p, x, dy, dw); });
  }
  void max_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y,
                  const View<std::int64_t>& indices) override {
    run("max_pool2d", {x.data, y.data, indices.data}, [&] { cpu().max_pool2d(p, x, y, indices); });
  }
  void max_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<const std::int64_t>& indices,
                           const View<T>& dx) override {
    run("max_pool2d_backward", {dy.data, indices.data, dx.data}, [&] { cpu().max_pool2d_backward(p, dy, indices, dx); });
  }
  void avg_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y) override {
    run("avg_pool2d", {x.data, y.data}, [&] { cpu().avg_pool2d(p, x, y); });
  }
  void avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<T>& dx) override {
    run("avg_pool2d_backward", {dy.data, dx.data}, [&] { cpu().avg_pool2d_backward(p, dy, dx); });
  }
  bool batch_norm_runs(std::int64_t n, std::int64_t c, std::int64_t inner, double eps, bool training) override {
    return cpu().batch_norm_runs(n, c, inner, eps, training);
  }
  void batch_norm_training(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b, T* y,
                           T* save_mean, T* save_invstd, T* running_mean, T* running_var, double momentum,
                           double eps) override {
    run("batch_norm_training", {x, w, b, y, save_mean, save_invstd, running_mean, running_var}, [&] {
      cpu().batch_norm_training(n, c, inner, x, w, b, y, save_mean, save_invstd, running_mean, running_var, momentum, eps);
    });
  }
  void batch_norm_inference(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* w, const T* b,
                            const T* mean, const T* var, T* y, double eps) override {
    run("batch_norm_inference", {x, w, b, mean, var, y},
        [&] { cpu().batch_norm_inference(n, c, inner, x, w, b, mean, var, y, eps); });
  }
  void batch_norm_backward(std::int64_t n, std::int64_t c, std::int64_t inner, const T* x, const T* dy, const T* w,
                           const T* save_mean, const T* save_invstd, T* dx, T* dw, T* db, double eps) override {
    run("batch_norm_backward", {x, dy, w, save_mean, save_invstd, dx, dw, db},
        [&] { cpu().batch_norm_backward(n, c, inner, x, dy, w, save_mean, save_invstd, dx, dw, db, eps); });
  }
  void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                         std::int64_t n) override {
    for (int i = 0; i < n_inputs; ++i) need_device("fused_elementwise", {inputs[i]});
    run("fused_elementwise", {y}, [&] { cpu().fused_elementwise(prog, n_instrs, inputs, n_inputs, y, n); });
  }
  void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) override {
    run("bias_act", {y, bias}, [&] { cpu().bias_act(y, n, bias, channels, inner, act); });
  }
  void optimizer_step(const OptimStep<T>& o, T* p, const T* g, T* s0, T* s1, T* s2, std::int64_t n) override {
    run("optimizer_step", {p, g, s0, s1, s2}, [&] { cpu().optimizer_step(o, p, g, s0, s1, s2, n); });
  }
  void copy_from_host(const T* host, T* dev, std::int64_t n) override {
    if (memory().holds(host)) memory().violations += "copy_from_host got a device pointer as its host side; ";
    run("copy_from_host", {dev}, [&] { cpu().copy_from_host(host, dev, n); });
  }
  void copy_to_host(const T* dev, T* host, std::int64_t n) override {
    if (memory().holds(host)) memory().violations += "copy_to_host got a device pointer as its host side; ";
    ++memory().host_reads;
    run("copy_to_host", {dev}, [&] { cpu().copy_to_host(dev, host, n); });
  }

 private:
  static frost::Backend<T>& cpu() { return cpu_backend<T>(); }
  template <class X>
  static void cast_from(const View<const X>& x, const View<T>& y) {
    run("cast", {x.data, y.data}, [&] { cpu().cast(x, y); });
  }
  template <class F>
  static void run(const char* kernel, std::initializer_list<const void*> device_pointers, F&& f) {
    need_device(kernel, device_pointers);
    KernelScope open;
    f();
  }

  int index_;
  Allocator alloc_;
};

/// Registers the fake as cuda:0 and cuda:1 for every dtype (once; the
/// backends live to the end of the program, as real ones do).
inline void install() {
  static const bool done = [] {
    for (int i = 0; i < 2; ++i) {
#define FROST_FAKE_REGISTER(S, e, name, st) register_backend<S>(Device::cuda(i), new Backend<S>(i));
      FROST_FOR_EACH_DTYPE(FROST_FAKE_REGISTER)
#undef FROST_FAKE_REGISTER
    }
    return true;
  }();
  (void)done;
}

}  // namespace frost::test::fake
