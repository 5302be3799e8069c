// The tracer: while it is installed on a thread, every backend call goes
// through a TracingBackend that appends a Step (the call with its pointers
// turned into windows of buffers) and then runs the real kernel, so the
// traced run is an ordinary eager run. Recording at the kernel boundary means
// every op, composite ones included, is traced without describing it twice.
//
// Buffers are storages. A storage first written by a kernel is an
// intermediate; one first read is data the host wrote (from_vector, arange)
// and becomes a constant snapshot; inputs and the module's parameters and
// buffers are registered up front. A kernel writing into a constant or an
// input gets a private copy (SSA renaming), so plans never mutate constants.
#pragma once
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph.hpp"

namespace frost::jit {

class Tracer;

namespace detail {

template <class T>
frost::detail::RawView raw(const View<T>& v) {
  return {v.data, v.shape, v.strides, dtype_of<std::remove_const_t<T>>()};
}

/// Records each kernel call on `t`, then runs it on `real`.
template <class T>
class TracingBackend final : public Backend<T> {
 public:
  TracingBackend(Tracer& t, Backend<T>& real) : t_(t), real_(real) {}
  Device device() const override { return real_.device(); }
  DeviceAllocator* allocator() override { return real_.allocator(); }

  void unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) override;
  void binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) override;
  void where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) override;
  void copy(const View<const T>& x, const View<T>& y) override;
  void fill(const View<T>& y, T value) override;
  void random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset, double lo,
              double hi) override;
  void reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) override;
  void arg_reduce(bool is_max, const View<const T>& x, const View<T>& values,
                  const View<std::int64_t>& indices) override;
  void softmax(const View<const T>& x, const View<T>& y, bool log) override;
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
            std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta, T* c, std::int64_t ldc,
            std::int64_t sc, std::int64_t batch) override;
  void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) override;
  void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) override;
  void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index, const View<const T>& src) override;
  void conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias, const View<T>& y,
              UnaryOp act) override;
  void conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                         const View<T>& dx) override;
  void conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                          const View<T>& dw) override;
  void max_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y,
                  const View<std::int64_t>& indices) override;
  void max_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<const std::int64_t>& indices,
                           const View<T>& dx) override;
  void avg_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y) override;
  void avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<T>& dx) override;
#define FROST_TRACE_CAST(S, e, name, st) \
  void cast(const View<const S>& x, const View<T>& y) override { cast_from(x, y); }
  FROST_FOR_EACH_DTYPE(FROST_TRACE_CAST)
#undef FROST_TRACE_CAST
  void optimizer_step(const OptimStep<T>&, T*, const T*, T*, T*, T*, std::int64_t) override {
    frost::detail::fail("frost::jit::trace: an optimizer step ran inside the trace; plans are inference "
                        "programs, so trace the forward only");
  }
  // Plans' fused kernels never run in eager code, so never inside a trace.
  void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                         std::int64_t n) override {
    real_.fused_elementwise(prog, n_instrs, inputs, n_inputs, y, n);
  }
  void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) override {
    real_.bias_act(y, n, bias, channels, inner, act);
  }
  void copy_from_host(const T* host, T* dev, std::int64_t n) override { real_.copy_from_host(host, dev, n); }
  void copy_to_host(const T* dev, T* host, std::int64_t n) override { real_.copy_to_host(dev, host, n); }

 private:
  template <class S>
  void cast_from(const View<const S>& x, const View<T>& y);
  /// A scalar operand as the double a Step holds it in: an int64 one that
  /// double does not hold exactly (beyond 2^53) is refused, not changed.
  static double held(opmath_t<T> v, const char* what) {
    const double d = static_cast<double>(v);
    if constexpr (std::is_same_v<T, std::int64_t>)
      FROST_CHECK(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18 && static_cast<T>(d) == v,
                  "frost::jit::trace: the int64 scalar ", v, " of a traced ", what, " is not a double exactly (beyond "
                  "2^53); a plan step holds its scalars as double, so pass the value as a tensor instead");
    return d;
  }
  Step step(StepKind k) const {
    Step s;
    s.kind = k;
    s.dtype = dtype_of<T>();
    return s;
  }
  Tracer& t_;
  Backend<T>& real_;
};

}  // namespace detail

/// Installed for the duration of one trace on one thread (not nestable).
class Tracer final : public frost::detail::TraceHooks {
 public:
  explicit Tracer(DType dtype) {
    FROST_CHECK(frost::detail::trace_hooks == nullptr,
                "frost::jit::trace: a trace is already running on this thread; traces do not nest");
    g_.dtype = dtype;
    frost::detail::trace_hooks = this;
#define FROST_TRACER_INSTALL(type, e, name, st) frost::detail::tracing_backend<type> = &e##_;
    FROST_FOR_EACH_DTYPE(FROST_TRACER_INSTALL)
#undef FROST_TRACER_INSTALL
  }
  ~Tracer() override { uninstall(); }
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void uninstall() {
    if (frost::detail::trace_hooks != this) return;
    frost::detail::trace_hooks = nullptr;
#define FROST_TRACER_UNINSTALL(type, e, name, st) frost::detail::tracing_backend<type> = nullptr;
    FROST_FOR_EACH_DTYPE(FROST_TRACER_UNINSTALL)
#undef FROST_TRACER_UNINSTALL
  }

  template <class T>
  void add_input(const Tensor<T>& x) {
    FROST_CHECK(x.device().is_cpu(), "frost::jit::trace: input ", g_.inputs.size(), " is on ", x.device().str(),
                "; the tracer records CPU kernels (jit::trace brings a device's inputs to the host first)");
    FROST_CHECK(x.is_contiguous() && x.storage_offset() == 0 &&
                    x.impl()->storage->nbytes == static_cast<std::size_t>(x.numel()) * sizeof(T),
                "frost::jit::trace: input ", g_.inputs.size(), " must own a dense storage (pass x.clone())");
    Buffer b;
    b.kind = BufferKind::input;
    b.dtype = dtype_of<T>();
    b.numel = x.numel();
    b.input_index = static_cast<int>(g_.inputs.size());
    const int id = register_storage(x.impl()->storage.get(), std::move(b));
    g_.inputs.push_back(id);
    g_.input_shapes.push_back(x.shape());
  }

  /// A parameter or buffer of the traced module, under its dotted name.
  template <class T>
  void add_constant(const Tensor<T>& x, const std::string& name) {
    // Checked for every parameter, used or not: the freeze reads them all on the host.
    FROST_CHECK(x.device().is_cpu(), "frost::jit::trace: parameter or buffer '", name, "' is on ", x.device().str(),
                "; the tracer records CPU kernels (jit::trace brings a device module to the host first)");
    StorageImpl* s = x.impl()->storage.get();
    if (buf_of_.count(s)) return;  // shared (tied) weights: the first name wins
    Buffer b;
    b.kind = BufferKind::constant;
    b.dtype = dtype_of<T>();
    b.numel = static_cast<std::int64_t>(s->nbytes / sizeof(T));
    b.name = name;
    b.param = true;
    b.data = Ref<StorageImpl>(s);
    register_storage(s, std::move(b));
  }

  template <class T>
  void add_output(const Tensor<T>& y) {
    FROST_CHECK(y.defined(), "frost::jit::trace: the traced function returned an undefined tensor");
    g_.outputs.push_back(read(frost::detail::raw_view(y)));
  }

  Graph finish() {
    uninstall();
    return std::move(g_);
  }

  // ---- what the tracing backend calls ---------------------------------------
  bool recording() const { return depth_ == 0; }
  Slot read(const frost::detail::RawView& v) { return resolve(v, false); }
  Slot write(const frost::detail::RawView& v) { return resolve(v, true); }
  Slot read_ptr(const void* p, DType d) { return resolve({p, Shape{1}, Shape{1}, d}, false); }
  void push(Step s) {
    // A kernel on empty windows does nothing: no step (and no buffer id -1 downstream).
    if (s.kind != StepKind::guard && !s.out.empty() &&
        std::all_of(s.out.begin(), s.out.end(), [](const Slot& o) { return o.buf < 0; }))
      return;
    g_.steps.push_back(std::move(s));
  }

  // ---- TraceHooks -------------------------------------------------------------
  void on_alloc(StorageImpl* s) override {
    FROST_CHECK(s->device.is_cpu(), "frost::jit::trace: the traced code made a tensor on ", s->device.str(),
                "; a trace runs on the CPU, so make tensors where the inputs are (e.g. zeros(shape, x.device()))");
    keep_.emplace_back(s);  // alive until the trace ends: addresses stay unique
    addr_[reinterpret_cast<std::uintptr_t>(s->data)] = s;
  }

  void on_host_read(const frost::detail::RawView& v, frost::detail::HostRead how,
                    const frost::detail::SourceLocation* loc) override {
    Guard gd;
    gd.how = how;
    if (how == frost::detail::HostRead::condition) {
      gd.outcome = detail::truth_at(v.dtype, v.data);
      auto it = locations_.find(v.data);
      gd.where = it != locations_.end() ? where(it->second)
                                        : std::string("an `if` on a tensor (compare it with a scalar, e.g. "
                                                      "`x.mean() > t`, to have its line named here)");
    } else {
      gd.where = loc ? where(*loc) : std::string("?");
      gd.expected = dense_bytes(v);
      std::fprintf(stderr, "frost::jit::trace: %s at %s reads tensor values on the host; the plan guards on the "
                   "exact values seen\n", how == frost::detail::HostRead::item ? "item()" : "to_vector()",
                   gd.where.c_str());
    }
    Step s;
    s.kind = StepKind::guard;
    s.dtype = v.dtype;
    s.in.push_back(read(v));
    s.guard = static_cast<int>(g_.guards.size());
    g_.guards.push_back(std::move(gd));
    push(std::move(s));
  }

  void note_location(const void* data, const frost::detail::SourceLocation& loc) override { locations_[data] = loc; }
  void begin_op() override { ++depth_; }
  void abort_op() override { --depth_; }
  void end_op(const frost::detail::OpRecord& r) override {
    if (--depth_ > 0) return;
    Step s;
    const std::string kind = r.kind;
    s.kind = kind == "linear" ? StepKind::linear : kind == "batch_norm" ? StepKind::batch_norm : StepKind::dropout;
    s.dtype = r.output.dtype;
    s.op = static_cast<int>(UnaryOp::copy);
    s.p0 = kind == "dropout" ? r.p : r.eps;
    for (const auto& in : r.inputs) s.in.push_back(in.data ? read(in) : Slot{});
    if (s.kind == StepKind::linear && !s.in.empty() && s.in[0].buf >= 0 && !linear_input_ok(s.in[0]))
      s.in[0] = dense_copy(s.in[0], s.dtype, "a linear's input made dense (a GEMM cannot read its strides)");
    s.out.push_back(write(r.output));
    push(std::move(s));
  }

 private:
  static std::string where(const frost::detail::SourceLocation& l) {
    std::string f = l.file_name();
    const auto cut = f.find_last_of('/');
    if (cut != std::string::npos) f = f.substr(cut + 1);
    return f + ":" + std::to_string(l.line_number());
  }

  static std::vector<unsigned char> dense_bytes(const frost::detail::RawView& v) {
    const std::size_t es = detail::dtype_size(v.dtype);
    std::vector<unsigned char> out(static_cast<std::size_t>(v.shape.numel()) * es);
    for (std::int64_t i = 0, n = v.shape.numel(); i < n; ++i) {
      const std::int64_t off = detail::strided_offset(v.shape, v.strides, i);
      std::memcpy(out.data() + static_cast<std::size_t>(i) * es, static_cast<const unsigned char*>(v.data) + off * static_cast<std::int64_t>(es), es);
    }
    return out;
  }

  int register_storage(StorageImpl* s, Buffer b) {
    keep_.emplace_back(s);
    addr_[reinterpret_cast<std::uintptr_t>(s->data)] = s;
    const int id = g_.add_buffer(std::move(b));
    buf_of_[s] = id;
    return id;
  }

  StorageImpl* storage_at(const void* p, DType d) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = addr_.upper_bound(a);
    if (it != addr_.begin()) {
      --it;
      if (a < it->first + it->second->nbytes || (a == it->first && it->second->nbytes == 0)) return it->second;
    }
    frost::detail::fail("frost::jit::trace: a ", dtype_name(d), " tensor used during the trace is neither an input, "
                        "a parameter or buffer of the traced module, nor created during the trace; pass it as an "
                        "input or register it as a buffer (register_buffer) so the plan can hold it");
  }

  /// A constant holding the storage's bytes now (the host wrote them, or a kernel is about to overwrite them).
  Buffer snapshot(StorageImpl* s, DType d, std::string name) {
    Buffer b;
    b.kind = BufferKind::constant;
    b.dtype = d;
    b.numel = static_cast<std::int64_t>(s->nbytes / detail::dtype_size(d));
    b.name = std::move(name);
    b.data = StorageImpl::cpu(s->nbytes);
    if (s->nbytes) std::memcpy(b.data->data, s->data, s->nbytes);
    return b;
  }

  Slot resolve(const frost::detail::RawView& v, bool is_write) {
    Slot sl;
    sl.shape = v.shape;
    sl.strides = v.strides;
    if (v.shape.numel() == 0 || v.data == nullptr) return sl;
    StorageImpl* s = storage_at(v.data, v.dtype);
    const std::size_t es = detail::dtype_size(v.dtype);
    sl.offset = static_cast<std::int64_t>((static_cast<const char*>(v.data) - static_cast<const char*>(s->data)) / static_cast<std::ptrdiff_t>(es));
    auto it = buf_of_.find(s);
    if (it == buf_of_.end()) {
      // First touch of a storage made during the trace.
      Buffer b;
      if (!is_write) {
        b = snapshot(s, v.dtype, "c" + std::to_string(n_snapshots_++));
      } else {
        b.dtype = v.dtype;
        b.numel = static_cast<std::int64_t>(s->nbytes / es);
      }
      it = buf_of_.emplace(s, g_.add_buffer(std::move(b))).first;
    } else if (is_write && g_.buffers[static_cast<std::size_t>(it->second)].kind != BufferKind::intermediate) {
      // A kernel writes into an input or a constant: from here on the storage
      // is a private intermediate that starts as a copy of the old contents.
      const int old = it->second;
      const Buffer& ob = g_.buffers[static_cast<std::size_t>(old)];
      Buffer b;
      b.dtype = ob.dtype;
      b.numel = ob.numel;
      const int fresh = g_.add_buffer(std::move(b));
      Step c;
      c.kind = StepKind::copy;
      c.dtype = g_.buffers[static_cast<std::size_t>(old)].dtype;
      const Shape flat{g_.buffers[static_cast<std::size_t>(old)].numel};
      c.in.push_back(Slot{old, 0, flat, Shape{1}});
      c.out.push_back(Slot{fresh, 0, flat, Shape{1}});
      c.note = "private copy before an in-place write";
      push(std::move(c));
      it->second = fresh;
    }
    sl.buf = it->second;
    return sl;
  }

  /// A copy step from x into a fresh dense intermediate, which it returns.
  Slot dense_copy(const Slot& x, DType d, const char* why) {
    Buffer b;
    b.dtype = d;
    b.numel = x.numel();
    Step c;
    c.kind = StepKind::copy;
    c.dtype = d;
    c.in.push_back(x);
    c.out.push_back(Slot{g_.add_buffer(std::move(b)), 0, x.shape, contiguous_strides(x.shape)});
    c.note = why;
    const Slot out = c.out[0];
    push(std::move(c));
    return out;
  }

  Graph g_;
  // One recording backend per dtype: a plan holds values of every dtype.
#define FROST_TRACER_MEMBER(type, e, name, st) detail::TracingBackend<type> e##_{*this, cpu_backend<type>()};
  FROST_FOR_EACH_DTYPE(FROST_TRACER_MEMBER)
#undef FROST_TRACER_MEMBER
  std::map<std::uintptr_t, StorageImpl*> addr_;
  std::unordered_map<const StorageImpl*, int> buf_of_;
  std::unordered_map<const void*, frost::detail::SourceLocation> locations_;
  std::vector<Ref<StorageImpl>> keep_;
  int depth_ = 0, n_snapshots_ = 0;
};

// ---- TracingBackend: record, then run ---------------------------------------

namespace detail {

#define FROST_TRACE_BEGIN(KIND) \
  if (t_.recording()) {         \
    Step s = step(StepKind::KIND);
#define FROST_TRACE_END \
  t_.push(std::move(s)); \
  }

template <class T>
void TracingBackend<T>::unary(UnaryOp op, const View<const T>& x, const View<T>& y, opmath_t<T> p0, opmath_t<T> p1) {
  FROST_TRACE_BEGIN(unary)
  s.op = static_cast<int>(op), s.p0 = held(p0, op_name(op)), s.p1 = held(p1, op_name(op));
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.unary(op, x, y, p0, p1);
}
template <class T>
void TracingBackend<T>::binary(BinaryOp op, const View<const T>& a, const View<const T>& b, const View<T>& y, opmath_t<T> p) {
  FROST_TRACE_BEGIN(binary)
  s.op = static_cast<int>(op), s.p0 = held(p, op_name(op));
  s.in = {t_.read(raw(a)), t_.read(raw(b))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.binary(op, a, b, y, p);
}
template <class T>
void TracingBackend<T>::where(const View<const T>& c, const View<const T>& a, const View<const T>& b, const View<T>& y) {
  FROST_TRACE_BEGIN(where)
  s.in = {t_.read(raw(c)), t_.read(raw(a)), t_.read(raw(b))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.where(c, a, b, y);
}
template <class T>
void TracingBackend<T>::copy(const View<const T>& x, const View<T>& y) {
  FROST_TRACE_BEGIN(copy)
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.copy(x, y);
}
template <class T>
void TracingBackend<T>::fill(const View<T>& y, T value) {
  FROST_TRACE_BEGIN(fill)
  s.p0 = held(value, "fill");
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.fill(y, value);
}
template <class T>
void TracingBackend<T>::random(const View<T>& y, philox::Dist dist, std::uint64_t seed, std::uint64_t offset,
                               double lo, double hi) {
  FROST_TRACE_BEGIN(random)
  s.op = static_cast<int>(dist), s.seed = seed, s.rng_offset = offset, s.p0 = lo, s.p1 = hi;
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.random(y, dist, seed, offset, lo, hi);
}
template <class T>
void TracingBackend<T>::reduce(ReduceOp op, const View<const T>& x, int n_reduced, const View<T>& y) {
  FROST_TRACE_BEGIN(reduce)
  s.op = static_cast<int>(op), s.i0 = n_reduced;
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.reduce(op, x, n_reduced, y);
}
template <class T>
void TracingBackend<T>::arg_reduce(bool is_max, const View<const T>& x, const View<T>& values,
                                   const View<std::int64_t>& indices) {
  FROST_TRACE_BEGIN(arg_reduce)
  s.i0 = is_max;
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(values)), t_.write(raw(indices))};
  FROST_TRACE_END
  real_.arg_reduce(is_max, x, values, indices);
}
template <class T>
void TracingBackend<T>::softmax(const View<const T>& x, const View<T>& y, bool log) {
  FROST_TRACE_BEGIN(softmax)
  s.i0 = log;
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.softmax(x, y, log);
}

/// The window a GEMM operand spans: [batch, rows, cols] with the layout's strides.
inline frost::detail::RawView gemm_window(const void* p, DType d, bool trans, std::int64_t rows, std::int64_t cols,
                                          std::int64_t ld, std::int64_t bs, std::int64_t batch) {
  return {p, Shape{batch, rows, cols}, trans ? Shape{bs, 1, ld} : Shape{bs, ld, 1}, d};
}

template <class T>
void TracingBackend<T>::gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                             std::int64_t lda, std::int64_t sa, const T* b, std::int64_t ldb, std::int64_t sb, T beta,
                             T* c, std::int64_t ldc, std::int64_t sc, std::int64_t batch) {
  FROST_TRACE_BEGIN(gemm)
  s.gemm = {ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, batch, double(alpha), double(beta)};
  const DType d = dtype_of<T>();
  s.in = {t_.read(gemm_window(a, d, ta, m, k, lda, sa, batch)), t_.read(gemm_window(b, d, tb, k, n, ldb, sb, batch))};
  if (beta != T(0)) s.in.push_back(t_.read(gemm_window(c, d, false, m, n, ldc, sc, batch)));
  s.out = {t_.write(gemm_window(c, d, false, m, n, ldc, sc, batch))};
  FROST_TRACE_END
  real_.gemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
template <class T>
void TracingBackend<T>::index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index,
                                     const View<T>& y) {
  FROST_TRACE_BEGIN(index_select)
  s.i0 = dim;
  s.in = {t_.read(raw(x)), t_.read(raw(index))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.index_select(x, dim, index, y);
}
template <class T>
void TracingBackend<T>::gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) {
  FROST_TRACE_BEGIN(gather)
  s.i0 = dim;
  s.in = {t_.read(raw(x)), t_.read(raw(index))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.gather(x, dim, index, y);
}
template <class T>
void TracingBackend<T>::scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index,
                                    const View<const T>& src) {
  FROST_TRACE_BEGIN(scatter_add)
  s.i0 = dim;
  s.in = {t_.read(raw(y)), t_.read(raw(index)), t_.read(raw(src))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.scatter_add(y, dim, index, src);
}
template <class T>
void TracingBackend<T>::conv2d(const Conv2dParams& p, const View<const T>& x, const View<const T>& w, const T* bias,
                               const View<T>& y, UnaryOp act) {
  FROST_TRACE_BEGIN(conv2d)
  s.conv = p, s.op = static_cast<int>(act);
  s.in = {t_.read(raw(x)), t_.read(raw(w)),
          bias ? t_.read({bias, Shape{p.out_channels}, Shape{1}, dtype_of<T>()}) : Slot{}};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.conv2d(p, x, w, bias, y, act);
}
template <class T>
void TracingBackend<T>::conv2d_grad_input(const Conv2dParams& p, const View<const T>& dy, const View<const T>& w,
                                          const View<T>& dx) {
  FROST_TRACE_BEGIN(conv2d_grad_input)
  s.conv = p;
  s.in = {t_.read(raw(dy)), t_.read(raw(w))};
  s.out = {t_.write(raw(dx))};
  FROST_TRACE_END
  real_.conv2d_grad_input(p, dy, w, dx);
}
template <class T>
void TracingBackend<T>::conv2d_grad_weight(const Conv2dParams& p, const View<const T>& x, const View<const T>& dy,
                                           const View<T>& dw) {
  FROST_TRACE_BEGIN(conv2d_grad_weight)
  s.conv = p;
  s.in = {t_.read(raw(x)), t_.read(raw(dy))};
  s.out = {t_.write(raw(dw))};
  FROST_TRACE_END
  real_.conv2d_grad_weight(p, x, dy, dw);
}
template <class T>
void TracingBackend<T>::max_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y,
                                   const View<std::int64_t>& indices) {
  FROST_TRACE_BEGIN(max_pool2d)
  s.pool = p;
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  if (indices.data) s.out.push_back(t_.write(raw(indices)));
  FROST_TRACE_END
  real_.max_pool2d(p, x, y, indices);
}
template <class T>
void TracingBackend<T>::max_pool2d_backward(const Pool2dParams& p, const View<const T>& dy,
                                            const View<const std::int64_t>& indices, const View<T>& dx) {
  FROST_TRACE_BEGIN(max_pool2d_backward)
  s.pool = p;
  s.in = {t_.read(raw(dy)), t_.read(raw(indices))};
  s.out = {t_.write(raw(dx))};
  FROST_TRACE_END
  real_.max_pool2d_backward(p, dy, indices, dx);
}
template <class T>
void TracingBackend<T>::avg_pool2d(const Pool2dParams& p, const View<const T>& x, const View<T>& y) {
  FROST_TRACE_BEGIN(avg_pool2d)
  s.pool = p;
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.avg_pool2d(p, x, y);
}
template <class T>
void TracingBackend<T>::avg_pool2d_backward(const Pool2dParams& p, const View<const T>& dy, const View<T>& dx) {
  FROST_TRACE_BEGIN(avg_pool2d_backward)
  s.pool = p;
  s.in = {t_.read(raw(dy))};
  s.out = {t_.write(raw(dx))};
  FROST_TRACE_END
  real_.avg_pool2d_backward(p, dy, dx);
}

template <class T>
template <class S>
void TracingBackend<T>::cast_from(const View<const S>& x, const View<T>& y) {
  FROST_TRACE_BEGIN(cast)
  s.op = static_cast<int>(dtype_of<S>());  // the step's dtype is y's
  s.in = {t_.read(raw(x))};
  s.out = {t_.write(raw(y))};
  FROST_TRACE_END
  real_.cast(x, y);
}

#undef FROST_TRACE_BEGIN
#undef FROST_TRACE_END

// frost::compiled: the ten recording backends are compiled once, in
// src/compiled_jit.cpp, not in every file that includes the jit.
#if defined(FROST_CPU_BACKEND_EXTERN) && !defined(FROST_JIT_IMPLEMENTATION)
#define FROST_TRACE_EXTERN(type, e, name, st) extern template class TracingBackend<type>;
FROST_FOR_EACH_DTYPE(FROST_TRACE_EXTERN)
#undef FROST_TRACE_EXTERN
#endif

}  // namespace detail
}  // namespace frost::jit
