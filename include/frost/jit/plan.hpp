// Plan<T>: a frozen graph ready to run. Steps are a flat list over buffer
// addresses: inputs (the caller's tensors), constants (owned by the plan)
// and intermediates (offsets in one arena). run() takes a workspace (an
// arena plus the address table) from a pool, so it allocates nothing once
// warm, records no tape, and several threads can run one plan at once, each
// with its own workspace. Results are views of the workspace's arena; the
// workspace is reused once the caller has let them go.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../any_tensor.hpp"
#include "../core/device_runtime.hpp"
#include "../io/safetensors.hpp"
#include "execute.hpp"
#include "passes/constant_fold.hpp"
#include "passes/memory_plan.hpp"
#include "plan_io.hpp"
#include "profile.hpp"
#include "validate.hpp"

namespace frost::jit {

/// A guard of a plan did not hold for this input: the traced branch is not
/// the one eager code would take now.
class GuardFailure : public Error {
 public:
  using Error::Error;
};

/// Eager against frozen: the largest absolute difference per output.
struct CheckReport {
  std::vector<double> max_abs_diff;
  double tolerance = 0;
  bool ok = true;
  std::string str() const {
    std::ostringstream o;
    o << (ok ? "frozen matches eager" : "frozen DIFFERS from eager") << " (tolerance " << tolerance << "):";
    for (std::size_t i = 0; i < max_abs_diff.size(); ++i) o << " output " << i << " max |diff| " << max_abs_diff[i] << ";";
    return o.str();
  }
};

/// Which passes freeze runs (all by default; tests switch single ones off).
struct FreezeOptions {
  bool fold_constants = true, remove_identities = true, fold_affine = true, fuse_epilogues = true,
       fuse_conv_pool = true, fuse_elementwise = true, pack_weights = true;
  /// Weights in the CPU backend's own forms, made once: convolution filters
  /// Winograd-transformed, linear weights in the GEMM kernel's panels.
  bool prepare_weights = true;
  /// Linear layers over 16+ rows run depth-first, 8 rows at a time through
  /// the chain (with prepare_weights: it needs their panels).
  bool chain_linears = true;
  /// conv + max pool blocks: n > 0 runs blocks of n images one after
  /// another; 0 sizes them for the device (on the CPU one block per thread,
  /// on a GPU 16 images: what Plan::to(cuda) freezes with).
  std::int64_t conv_pool_images = 0;
  /// On CUDA, the plan's float convolutions and matmuls may use TF32 tensor
  /// cores (inputs rounded to 10 mantissa bits, float accumulation; about
  /// 1e-3 relative error), as a production engine's precision flag allows,
  /// whatever frost::cuda::set_allow_tf32 says for eager code (off, the plan
  /// follows that switch, as eager code does). Off by default, like
  /// PyTorch's allow_tf32; saved with the plan; no effect on the CPU.
  bool allow_tf32 = false;
  /// Dynamic int8 quantization of the linear layers (PyTorch's
  /// quantize_dynamic for nn.Linear): weights int8 per output channel, made
  /// at freeze (and on load, from the float weights the file keeps); every
  /// run quantizes each input row to int8 with its own scale, multiplies in
  /// exact int32 sums and rescales to float (backend/cpu/quantized_linear.hpp).
  /// About 1% error against float; a quarter of the weight bytes. CPU plans:
  /// a plan moved to CUDA runs its linears in float (as PyTorch's dynamic
  /// quantization is CPU-only). Saved with the plan.
  bool quantize_linear = false;
};

template <FloatScalar T>
class Plan;
template <FloatScalar T>
Plan<T> freeze(Graph g, const FreezeOptions& opt);

template <FloatScalar T>
class Plan {
 public:
  Plan() = default;
  /// Builds the runnable plan from a graph every freeze pass has run on;
  /// `source` is the traced graph it came from (what refit freezes again).
  Plan(FreezeState st, const passes::MemoryPlan& mp, std::shared_ptr<const Graph> source, FreezeOptions opt)
      : g_(std::move(st.g)), report_(std::move(st.report)), source_(std::move(source)), opt_(opt) {
    offsets_ = mp.offset;
    arena_bytes_ = mp.arena_bytes;
  }

  /// Writes the plan as one safetensors file that runs with no model source:
  /// constants as tensors, graph, guards, memory plan and format version in
  /// the metadata (plus the traced graph, so a loaded plan can refit).
  void save(const std::string& path) const;

  /// Loads a plan saved by save(); every part of the file is checked first:
  /// a corrupt, truncated, hostile or other-version file is a frost::Error.
  static Plan load(const std::string& path) { return from_file(SafetensorsFile::open(path)); }

  /// The same from an in-memory image (what the loader's fuzz target feeds).
  static Plan from_file(const SafetensorsFile& f);

  /// New weights, same plan: the module's parameters and buffers replace the
  /// traced constants of the same names and the freeze passes run again (so
  /// folded weights are recomputed); no trace, no model code involved.
  template <class M>
    requires(!std::is_convertible_v<const M&, std::string>)  // a path (a string literal too) is the overload below
  void refit(const M& module);

  /// refit from a safetensors weights file (a state dict, e.g. save_safetensors(model, path)).
  void refit(const std::string& path);

  const Graph& graph() const { return g_; }
  std::size_t num_inputs() const { return g_.inputs.size(); }
  std::size_t num_outputs() const { return g_.outputs.size(); }
  std::int64_t arena_bytes() const { return arena_bytes_; }
  /// How many runs were one CUDA Graph launch (the capturing run included)
  /// since the plan was placed on its device: 0 on the CPU and for device
  /// plans that run step by step (guards, failed captures).
  /// It is how a caller, or the GPU check, sees that replay really happens.
  std::int64_t graph_launches() const { return pool_->graph_launches.load(); }
  std::int64_t constant_bytes() const { return g_.constant_bytes(); }
  /// The options the plan was frozen with (a loaded plan: the defaults, and
  /// the saved allow_tf32 and quantize_linear).
  const FreezeOptions& options() const { return opt_; }

  /// What each freeze pass did, and the plan's size.
  std::string summary() const {
    std::ostringstream o;
    o << "frost::jit::Plan<" << dtype_name<T>() << ">: " << g_.steps.size() << " steps, " << g_.inputs.size()
      << " inputs, " << g_.outputs.size() << " outputs, arena " << arena_bytes_ << " bytes, constants "
      << constant_bytes() << " bytes" << (opt_.allow_tf32 ? ", TF32 allowed on CUDA" : "") << "\n";
    for (const auto& line : report_) o << "  " << line << "\n";
    return o.str();
  }

  /// Moves the plan to `d` in place: its constants are copied to the device
  /// once, each run's arena lives there, inputs (on the CPU or on `d`) are
  /// staged into the arena, and outputs are tensors on `d`. On CUDA a plan
  /// without guards or indexing steps runs once here, on zeros, to time its
  /// convolution algorithms and size the cuDNN / cuBLAS workspaces; its
  /// first run is then captured as a CUDA Graph and replayed from then on.
  /// Needs frost::cuda for CUDA.
  Plan& to(Device d) {
    if (d == device_) return *this;
    if (!d.is_cpu()) (void)backend_for<T>(d).allocator();  // no CUDA backend: the error comes before any change
    FROST_CHECK(d.is_cpu() || source_ || std::none_of(g_.buffers.begin(), g_.buffers.end(), [](const Buffer& b) {
                  return b.kind == BufferKind::prepared;
                }),
                "frost::jit::Plan::to(", d.str(), "): the plan holds weights prepared for the CPU and no traced graph to freeze again from");
    if (source_ && d.is_cpu() != device_.is_cpu()) {
      // Freeze again for the new kind of device: on a GPU the conv + pool
      // blocks run one after another, 16 images each unless the options say
      // otherwise (little scratch, full kernels), instead of one block per
      // CPU thread.
      *this = refrozen(Graph(*source_), d);
    }
    place_on(d);
    return *this;
  }
  Device device() const { return device_; }

 private:
  friend Plan<T> freeze<T>(Graph g, const FreezeOptions& opt);
  /// `g` frozen once for device `d` and placed there: what Plan::to(d) makes
  /// of a CPU-frozen plan (jit::freeze of a graph traced from a device module).
  static Plan frozen_for(Graph g, Device d, const FreezeOptions& opt) {
    (void)backend_for<T>(d).allocator();  // no CUDA backend: the clear error, before any work
    Plan user;
    user.opt_ = opt;
    Plan p = user.refrozen(std::move(g), d);
    p.place_on(d);
    return p;
  }
  /// `g` frozen with the user's options as device `d` wants them.
  Plan refrozen(Graph g, Device d) const {
    FreezeOptions o = opt_;
    if (o.conv_pool_images == 0 && !d.is_cpu()) o.conv_pool_images = kDeviceConvPoolImages;
    o.prepare_weights = o.prepare_weights && d.is_cpu();  // cuDNN takes the filters as they are
    o.quantize_linear = o.quantize_linear && d.is_cpu();  // int8 kernels: the CPU's
    Plan next = freeze<T>(std::move(g), o);
    if (opt_.quantize_linear && !d.is_cpu())
      next.report_.push_back("dynamic int8 quantization: not on " + d.str() + " (its linear layers run in float)");
    next.opt_ = opt_;  // refit and save keep the user's options
    return next;
  }
  /// A device plan's step-by-step first run, on zeros (no guards: nothing
  /// reads the values), made when it moves: the workspaces and algorithms
  /// are in place before the user's first run, which the graph captures.
  void warm_up() {
    std::vector<AnyTensor> zeros;
    for (std::size_t i = 0; i < g_.inputs.size(); ++i)
      visit_dtype(g_.buffers[static_cast<std::size_t>(g_.inputs[i])].dtype, [&](auto tag) {
        zeros.push_back(AnyTensor(Tensor<decltype(tag)>::zeros(g_.input_shapes[i], device_)));
      });
    (void)run_any(zeros);
  }
  /// Copies the constants to `d` (nothing to copy for the CPU); a graphable
  /// CUDA plan then makes its warm-up run.
  void place_on(Device d) {
    device_constants_.assign(g_.buffers.size(), Ref<StorageImpl>());
    if (!d.is_cpu()) {
      for (std::size_t b = 0; b < g_.buffers.size(); ++b) {
        const Buffer& buf = g_.buffers[b];
        if (buf.kind != BufferKind::constant || !buf.data) continue;
        device_constants_[b] = upload(*buf.data, buf.dtype, d);
      }
    }
    device_ = d;
    graphable_ = g_.guards.empty();
    index_steps_.clear();
    for (std::size_t i = 0; i < g_.steps.size(); ++i) {
      const StepKind k = g_.steps[i].kind;
      if (k == StepKind::index_select || k == StepKind::gather || k == StepKind::scatter_add) index_steps_.push_back(i);
    }
    {
      std::lock_guard<std::mutex> lock(pool_->m);
      pool_->free.clear();  // workspaces of the old device
      pool_->graph_launches = 0;  // and their graphs
    }
    // Should the warm-up throw (out of device memory), the plan is on `d`,
    // not warmed: its next run is the step-by-step one. An index computed
    // from zeros may be out of range where the user's inputs give none, so
    // a plan with index steps warms up on its first run instead.
    if (d.is_cuda() && graphable_ && index_steps_.empty()) warm_up();
  }

 public:
  /// Runs the plan on inputs of the traced shapes and dtypes; all outputs,
  /// each a Tensor<T> (run_any gives outputs of other dtypes).
  std::vector<Tensor<T>> run_all(const std::vector<Tensor<T>>& inputs) const {
    std::vector<Tensor<T>> out;
    out.reserve(g_.outputs.size());
    run_into(inputs, out);
    return out;
  }

  /// Runs the plan on inputs of any dtypes, as traced (a float image and
  /// int64 token ids; a bool mask); all outputs, each of its own dtype.
  std::vector<AnyTensor> run_any(const std::vector<AnyTensor>& inputs) const {
    std::vector<AnyTensor> out;
    out.reserve(g_.outputs.size());
    run_with(inputs, [&](const Slot& o, DType dt, const Ref<StorageImpl>& arena, std::int64_t at) {
      visit_dtype(dt, [&](auto tag) {
        out.push_back(AnyTensor(frost::detail::make_tensor<decltype(tag)>(arena, o.shape, o.strides, at)));
      });
    });
    return out;
  }

  /// Runs the plan on one or more inputs (tensors of the traced dtypes); the single output.
  template <Scalar U, class... Rest>
  Tensor<T> run(const Tensor<U>& x, const Rest&... rest) const {
    static_assert((detail::is_tensor_v<Rest> && ...), "frost::jit::Plan::run: inputs must be tensors");
    FROST_CHECK(g_.outputs.size() == 1, "frost::jit::Plan::run: this plan has ", g_.outputs.size(),
                " outputs; use run_all");
    if constexpr (std::is_same_v<U, T> && (std::is_same_v<Rest, Tensor<T>> && ...)) {
      return run_all({x, rest...})[0];
    } else {
      const AnyTensor y = run_any({AnyTensor(x), AnyTensor(rest)...})[0];
      FROST_CHECK(y.is<T>(), "frost::jit::Plan::run: the output is ", dtype_name(y.dtype()), ", not ", dtype_name<T>(),
                  "; use run_any for outputs of other dtypes");
      return y.as<T>();
    }
  }

  /// run_all into a caller-owned vector (its capacity is reused: no heap traffic in a loop).
  void run_into(const std::vector<Tensor<T>>& inputs, std::vector<Tensor<T>>& out) const {
    out.clear();
    run_with(inputs, [&](const Slot& o, DType dt, const Ref<StorageImpl>& arena, std::int64_t at) {
      FROST_CHECK(dt == dtype_of<T>(), "frost::jit::Plan::run: output ", out.size(), " is ", dtype_name(dt), ", not ",
                  dtype_name<T>(), "; use run_any for outputs of other dtypes");
      out.push_back(frost::detail::make_tensor<T>(arena, o.shape, o.strides, at));
    });
  }

  /// Where the time goes: `runs` step-by-step runs on `inputs` (as for
  /// run_all), each step timed alone, beside `runs` whole runs (on CUDA one
  /// graph launch each). On the CPU a step's row is its wall time; on CUDA
  /// it is the time between events recorded before and after it on the
  /// device's stream: its kernels, and any work other threads queue on that
  /// stream meanwhile. A guard that fails throws GuardFailure, as run does.
  /// \code
  /// std::cout << plan.profile({x}).table(10);  // the ten slowest steps
  /// \endcode
  PlanProfile profile(const std::vector<Tensor<T>>& inputs, int runs = 20) const { return profile_of(inputs, runs); }
  /// profile on inputs of any dtypes (as run_any).
  PlanProfile profile_any(const std::vector<AnyTensor>& inputs, int runs = 20) const { return profile_of(inputs, runs); }

  /// Eager (evaluation mode, InferenceMode) against this plan on `inputs`:
  /// the differential check to run before shipping a plan.
  template <class M, Scalar U, class... Rest>
    requires(detail::is_tensor_v<Rest> && ...)
  CheckReport check(M& module, const Tensor<U>& x, const Rest&... rest) const {
    return check_with(module, 1e-4, x, rest...);
  }
  template <class M, Scalar U, class... Rest>
  CheckReport check_with(M& module, double tol, const Tensor<U>& x, const Rest&... rest) const;
  /// check with the inputs as a list (one to four of them) and a tolerance
  /// relative to each output's largest magnitude.
  template <class M>
  CheckReport check(M& module, const std::vector<Tensor<T>>& inputs, double tol = 1e-4) const;

 private:
  /// The run behind run_all / run_any / run_into / profile: inputs
  /// (Tensor<T> or AnyTensor) checked and bound, the steps run, then
  /// emit(output slot, its dtype, the arena, its element offset there) for
  /// each output in order.
  template <class In, class Emit>
  void run_with(const std::vector<In>& inputs, Emit&& emit) const {
    check_inputs(inputs);
    std::vector<AnyTensor> staged;  // only for non-contiguous inputs
    Lease ws(*this);
    if (!device_.is_cpu()) {
      stage_device_inputs(inputs, *ws);
      execute_device(*ws);
    } else {
      bind_host_inputs(inputs, *ws, staged);
      execute(ws->bases.data());
    }
    for (const auto& o : g_.outputs) {
      const DType dt = o.buf < 0 ? dtype_of<T>() : g_.buffers[static_cast<std::size_t>(o.buf)].dtype;
      const std::int64_t at =
          o.buf < 0 ? 0 : offsets_[static_cast<std::size_t>(o.buf)] / static_cast<std::int64_t>(dtype_size(dt)) + o.offset;
      emit(o, dt, ws->arena, at);
    }
  }
  template <class F>
  static decltype(auto) visit_input(const Tensor<T>& x, F&& f) {
    return f(x);
  }
  template <class F>
  static decltype(auto) visit_input(const AnyTensor& x, F&& f) {
    return x.visit(std::forward<F>(f));
  }

  template <class In>
  PlanProfile profile_of(const std::vector<In>& inputs, int runs) const;

  struct Workspace {
    Ref<StorageImpl> arena;
    std::vector<void*> bases;
    // Device plans: the inputs' fixed home (a captured graph reads them
    // there), the runs so far and the captured graph.
    std::vector<Ref<StorageImpl>> inputs;
    int runs = 0, failed_captures = 0;
    void* graph = nullptr;
    // The graph's index checks: two int64 a step of index_steps_ on the
    // device (bad?, the first bad index), read back into `index_host`.
    Ref<StorageImpl> index_slots;
    std::vector<std::int64_t> index_host;
    Workspace() = default;
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    ~Workspace() {
      if (graph && frost::detail::cuda_runtime_slot()) frost::detail::cuda_runtime_slot()->graph_destroy(graph);
    }
  };

  template <class M>
  static auto& module_ref(M& m) {
    if constexpr (nn::detail::Holder<M>) return *m;
    else return m;
  }
  template <class M, class... X>
  static decltype(auto) call_forward(M& m, const X&... x) {
    if constexpr (nn::detail::Holder<M>) return m(x...);
    else return m.forward(x...);
  }
  static std::vector<Tensor<T>> as_outputs(const Tensor<T>& y) { return {y}; }
  static std::vector<Tensor<T>> as_outputs(std::vector<Tensor<T>> ys) { return ys; }

  template <class In>
  void check_inputs(const std::vector<In>& inputs) const {
    FROST_CHECK(inputs.size() == g_.inputs.size(), "frost::jit::Plan::run: expected ", g_.inputs.size(),
                " inputs (as traced), got ", inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      visit_input(inputs[i], [&](const auto& x) {
        using U = typename std::decay_t<decltype(x)>::value_type;
        FROST_CHECK(x.defined(), "frost::jit::Plan::run: input ", i, " is undefined");
        const DType want = g_.buffers[static_cast<std::size_t>(g_.inputs[i])].dtype;
        FROST_CHECK(dtype_of<U>() == want, "frost::jit::Plan::run: input ", i, " is ", dtype_name<U>(),
                    " but the plan was traced with ", dtype_name(want), " there (convert it with to(DType::",
                    dtype_name(want), "), or trace with a ", dtype_name<U>(), " input)");
        FROST_CHECK(x.device().is_cpu() || x.device() == device_, "frost::jit::Plan::run: input ", i, " is on ",
                    x.device().str(), "; this plan runs on ", device_.str(), " (inputs on the CPU are copied there)");
        FROST_CHECK(x.shape() == g_.input_shapes[i], "frost::jit::Plan::run: input ", i, " has shape ", x.shape().str(),
                    " but the plan was traced with ", g_.input_shapes[i].str(),
                    " (trace again, or use jit::compile to specialise per shape)");
      });
    }
  }

  std::unique_ptr<Workspace> acquire() const {
    {
      std::lock_guard<std::mutex> lock(pool_->m);
      auto& free = pool_->free;
      for (std::size_t i = 0; i < free.size(); ++i) {
        // A workspace whose arena still backs a caller's outputs stays out of use.
        if (free[i]->arena->use_count() != 1) continue;
        auto ws = std::move(free[i]);
        free.erase(free.begin() + static_cast<std::ptrdiff_t>(i));
        return ws;
      }
    }
    auto ws = std::make_unique<Workspace>();
    ws->arena = StorageImpl::on(device_, static_cast<std::size_t>(arena_bytes_), allocator());
    ws->bases.assign(g_.buffers.size(), nullptr);
    for (std::size_t b = 0; b < g_.buffers.size(); ++b) {
      const Buffer& buf = g_.buffers[b];
      if (buf.kind == BufferKind::prepared && buf.data) ws->bases[b] = buf.data->data;  // CPU plans only
      else if (buf.kind == BufferKind::constant && buf.data)
        ws->bases[b] = device_.is_cpu() ? buf.data->data : device_constants_[b]->data;
      else if (buf.kind == BufferKind::intermediate && offsets_[b] >= 0)
        ws->bases[b] = static_cast<char*>(ws->arena->data) + offsets_[b];
    }
    if (!device_.is_cpu() && !index_steps_.empty()) {
      ws->index_host.assign(2 * index_steps_.size(), 0);
      ws->index_slots = StorageImpl::on(device_, ws->index_host.size() * sizeof(std::int64_t), allocator());
    }
    if (!device_.is_cpu()) {
      for (std::size_t i = 0; i < g_.inputs.size(); ++i) {
        const Buffer& buf = g_.buffers[static_cast<std::size_t>(g_.inputs[i])];
        ws->inputs.push_back(StorageImpl::on(device_, static_cast<std::size_t>(buf.numel) * dtype_size(buf.dtype), allocator()));
        ws->bases[static_cast<std::size_t>(g_.inputs[i])] = ws->inputs.back()->data;
      }
    }
    return ws;
  }
  void give_back(std::unique_ptr<Workspace> ws) const {
    std::lock_guard<std::mutex> lock(pool_->m);
    pool_->free.reserve(8);
    pool_->free.push_back(std::move(ws));
  }
  /// A workspace taken from the pool for one run, given back at scope exit.
  struct Lease {
    const Plan& plan;
    std::unique_ptr<Workspace> ws;
    explicit Lease(const Plan& p) : plan(p), ws(p.acquire()) {}
    ~Lease() {
      try {
        plan.give_back(std::move(ws));
      } catch (...) {  // no room in the pool's list: the workspace is freed instead
      }
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Workspace& operator*() const { return *ws; }
    Workspace* operator->() const { return ws.get(); }
  };

  /// Points a CPU workspace's input buffers at the caller's tensors (a
  /// non-contiguous one at a contiguous copy kept in `staged`).
  template <class In>
  void bind_host_inputs(const std::vector<In>& inputs, Workspace& ws, std::vector<AnyTensor>& staged) const {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      void*& base = ws.bases[static_cast<std::size_t>(g_.inputs[i])];
      visit_input(inputs[i], [&](const auto& x) {
        if (x.is_contiguous()) {
          base = const_cast<void*>(static_cast<const void*>(x.data()));
        } else {
          auto c = x.contiguous();
          base = const_cast<void*>(static_cast<const void*>(c.data()));
          staged.push_back(AnyTensor(std::move(c)));
        }
      });
    }
  }

  void execute(detail::Bases bases) const {
    const Step* const end = g_.steps.data() + g_.steps.size();
    for (const Step* s = g_.steps.data(); s != end;) {
      const std::size_t n = host_unit(s, end);
      run_host_unit(s, n, bases);
      s += n;
    }
  }
  /// How many CPU steps from `s` run as one: a run of matrix-vector layers
  /// shares one parallel region; anything else runs alone.
  static std::size_t host_unit(const Step* s, const Step* end) {
    return s->kind == StepKind::guard ? 1 : std::max<std::size_t>(1, detail::few_rows_chain(s, end));
  }
  void run_host_unit(const Step* s, std::size_t n, detail::Bases bases) const {
    if (s->kind == StepKind::guard) check_guard(*s, g_.buffers[static_cast<std::size_t>(s->in[0].buf)], bases[s->in[0].buf]);
    else if (n > 1) detail::run_few_rows_chain(s, n, bases);
    else detail::run_step(*s, bases);
  }

  DeviceAllocator* allocator() const { return device_.is_cpu() ? nullptr : backend_for<T>(device_).allocator(); }

  /// A constant's bytes on device `d` (any element type).
  static Ref<StorageImpl> upload(const StorageImpl& host, DType dt, Device d);

  /// Copies the inputs (CPU or device, any layout) into the workspace's input buffers.
  template <class In>
  void stage_device_inputs(const std::vector<In>& inputs, Workspace& ws) const;

  /// The steps on the device: the first run step by step (it times the
  /// convolution algorithms for these shapes, as cudnn.benchmark does, and
  /// sizes the workspaces; to() makes it), the second captured as a CUDA
  /// Graph, later ones one graph launch. Plans with guards always run step
  /// by step; a graph with index steps is followed by one read-back of
  /// their bad-index checks (a sync; step by step, each index step syncs).
  void execute_device(Workspace& ws) const;
  /// What a device run sets on its thread, and restores after. Plans always
  /// use timed algorithms: the first run times them (once per shape,
  /// cached), later runs and the capture find them in the cache. A plan
  /// frozen with allow_tf32 turns TF32 on. Only on this thread: the
  /// process-wide switches, which other threads' eager work reads, are left
  /// as the user set them.
  struct DeviceSwitches {
    frost::detail::DeviceRuntime* rt;
    bool timed_was, tf32_was = false, tf32;
    DeviceSwitches(frost::detail::DeviceRuntime* r, bool allow_tf32)
        : rt(r), timed_was(r && r->set_thread_timed(true)), tf32(r && allow_tf32) {
      if (tf32) tf32_was = rt->set_thread_tf32(true);
    }
    ~DeviceSwitches() {
      if (tf32) rt->set_thread_tf32(tf32_was);
      if (rt) rt->set_thread_timed(timed_was);
    }
    DeviceSwitches(const DeviceSwitches&) = delete;
    DeviceSwitches& operator=(const DeviceSwitches&) = delete;
  };
  void run_device_step(const Step& s, Workspace& ws) const;
  /// Captures the steps as a CUDA Graph and launches it; false (nothing
  /// captured, nothing run) when a step could not be captured.
  bool capture(Workspace& ws, frost::detail::DeviceRuntime* rt) const;
  /// One replay of the workspace's graph, then the index steps' checks;
  /// false (nothing ran) when the launch itself failed, e.g. the device had
  /// no memory left to map the graph's. The graph is dropped then, and this
  /// workspace runs step by step from then on, as it would have without
  /// graphs: the caller's run goes on that way.
  bool launch_graph(Workspace& ws, frost::detail::DeviceRuntime* rt) const;
  /// The steps queued into the capture. The index steps record a bad index
  /// in the workspace's slots, which the graph clears first.
  void capture_steps(Workspace& ws, frost::detail::DeviceRuntime* rt) const;
  /// After a graph run with index steps: their slots read back (one sync)
  /// and the first bad index reported as the step's own check would have.
  void check_index_slots(Workspace& ws) const;
  void read_back(DType dt, const void* dev, void* host, std::int64_t n) const;
  void check_guard(const Step& s, const Buffer& b, const void* base) const {
    const Guard& gd = g_.guards[static_cast<std::size_t>(s.guard)];
    if (!passes::guard_holds(gd, s.in[0], b.dtype, base))
      throw GuardFailure("frost::jit::GuardFailure: guard " + std::to_string(s.guard) + " failed: " + gd.describe() +
                         " when traced, and this input differs; the frozen branch is not the one eager code "
                         "would take (use jit::compile to specialise per branch, or trace this input)");
  }

  /// The traced graph of a plan file (its constants are "source.b<id>").
  static Graph load_source(const SafetensorsFile& f, const std::string& json);

  void refit_with(const std::map<std::string, Ref<StorageImpl>>& by_name,
                  const std::map<std::string, std::pair<DType, std::int64_t>>& meta, const std::string& from);

  static constexpr std::int64_t kDeviceConvPoolImages = 16;
  static constexpr int kMaxFailedCaptures = 2;

  Graph g_;
  std::vector<std::string> report_;
  std::shared_ptr<const Graph> source_;
  FreezeOptions opt_;
  std::vector<std::int64_t> offsets_;
  std::int64_t arena_bytes_ = 0;
  Device device_ = Device::cpu();
  std::vector<Ref<StorageImpl>> device_constants_;  // by buffer id, on device_ (empty on the CPU)
  bool graphable_ = false;
  std::vector<std::size_t> index_steps_;  // positions of the index steps (device plans)
  struct Pool {
    std::mutex m;
    std::vector<std::unique_ptr<Workspace>> free;
    std::atomic<std::int64_t> graph_launches{0};
  };
  std::unique_ptr<Pool> pool_ = std::make_unique<Pool>();
};

}  // namespace frost::jit

#include "plan_check.hpp"
#include "plan_device.hpp"
#include "plan_file.hpp"
