// Plan<T>: a frozen graph ready to run. Steps are a flat list over buffer
// addresses: inputs (the caller's tensors), constants (owned by the plan)
// and intermediates (offsets in one arena). run() takes a workspace (an
// arena plus the address table) from a pool, so it allocates nothing once
// warm, records no tape, and several threads can run one plan at once, each
// with its own workspace. Results are views of the workspace's arena; the
// workspace is reused once the caller has let them go.
#pragma once
#include <cmath>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "execute.hpp"
#include "passes/constant_fold.hpp"
#include "passes/memory_plan.hpp"

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

template <FloatScalar T>
class Plan {
 public:
  Plan() = default;
  /// Builds the runnable plan from a graph every freeze pass has run on.
  Plan(FreezeState st, const passes::MemoryPlan& mp) : g_(std::move(st.g)), report_(std::move(st.report)) {
    offsets_ = mp.offset;
    arena_bytes_ = mp.arena_bytes;
  }

  const Graph& graph() const { return g_; }
  std::size_t num_inputs() const { return g_.inputs.size(); }
  std::size_t num_outputs() const { return g_.outputs.size(); }
  std::int64_t arena_bytes() const { return arena_bytes_; }
  std::int64_t constant_bytes() const { return g_.constant_bytes(); }

  /// What each freeze pass did, and the plan's size.
  std::string summary() const {
    std::ostringstream o;
    o << "frost::jit::Plan<" << dtype_name<T>() << ">: " << g_.steps.size() << " steps, " << g_.inputs.size()
      << " inputs, " << g_.outputs.size() << " outputs, arena " << arena_bytes_ << " bytes, constants "
      << constant_bytes() << " bytes\n";
    for (const auto& line : report_) o << "  " << line << "\n";
    return o.str();
  }

  /// Runs the plan on inputs of the traced shapes; all outputs.
  std::vector<Tensor<T>> run_all(const std::vector<Tensor<T>>& inputs) const {
    std::vector<Tensor<T>> out;
    out.reserve(g_.outputs.size());
    run_into(inputs, out);
    return out;
  }

  /// Runs the plan on one or more inputs; the single output.
  template <class... Rest>
  Tensor<T> run(const Tensor<T>& x, const Rest&... rest) const {
    static_assert((std::is_same_v<Rest, Tensor<T>> && ...), "frost::jit::Plan::run: inputs must be Tensor<T>");
    FROST_CHECK(g_.outputs.size() == 1, "frost::jit::Plan::run: this plan has ", g_.outputs.size(),
                " outputs; use run_all");
    return run_all({x, rest...})[0];
  }

  /// run_all into a caller-owned vector (its capacity is reused: no heap traffic in a loop).
  void run_into(const std::vector<Tensor<T>>& inputs, std::vector<Tensor<T>>& out) const {
    check_inputs(inputs);
    std::vector<Tensor<T>> staged;  // only for non-contiguous inputs
    auto ws = acquire();
    auto release = [&] { give_back(std::move(ws)); };
    try {
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const auto b = static_cast<std::size_t>(g_.inputs[i]);
        if (inputs[i].is_contiguous()) {
          ws->bases[b] = const_cast<T*>(inputs[i].data());
        } else {
          staged.push_back(inputs[i].contiguous());
          ws->bases[b] = staged.back().data();
        }
      }
      execute(ws->bases.data());
      out.clear();
      for (const auto& o : g_.outputs) {
        const std::int64_t at = o.buf < 0 ? 0 : offsets_[static_cast<std::size_t>(o.buf)] / std::int64_t(sizeof(T)) + o.offset;
        out.push_back(frost::detail::make_tensor<T>(ws->arena, o.shape, o.strides, at));
      }
    } catch (...) {
      release();
      throw;
    }
    release();
  }

  /// Eager (evaluation mode, InferenceMode) against this plan on `inputs`:
  /// the differential check to run before shipping a plan.
  template <class M, class... Rest>
  CheckReport check(M& module, const Tensor<T>& x, const Rest&... rest) const {
    return check_with(module, 1e-4, x, rest...);
  }
  template <class M, class... Rest>
  CheckReport check_with(M& module, double tol, const Tensor<T>& x, const Rest&... rest) const {
    auto& m = module_ref(module);
    const bool was_training = m.is_training();
    m.eval();
    Tensor<T> eager;
    {
      InferenceMode im;
      eager = call_forward(module, x, rest...);
    }
    if (was_training) m.train();
    const auto frozen = run_all({x, rest...});
    CheckReport r;
    r.tolerance = tol;
    const double d = eager.shape() == frozen[0].shape() ? (eager - frozen[0]).abs().max().item() : INFINITY;
    r.max_abs_diff.push_back(d);
    r.ok = d <= tol * (1.0 + eager.abs().max().item());
    return r;
  }

 private:
  struct Workspace {
    Ref<StorageImpl> arena;
    std::vector<void*> bases;
  };

  template <class M>
  static auto& module_ref(M& m) {
    if constexpr (nn::detail::Holder<M>) return *m;
    else return m;
  }
  template <class M, class... X>
  static Tensor<T> call_forward(M& m, const X&... x) {
    if constexpr (nn::detail::Holder<M>) return m(x...);
    else return m.forward(x...);
  }

  void check_inputs(const std::vector<Tensor<T>>& inputs) const {
    FROST_CHECK(inputs.size() == g_.inputs.size(), "frost::jit::Plan::run: expected ", g_.inputs.size(),
                " inputs (as traced), got ", inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      FROST_CHECK(inputs[i].defined(), "frost::jit::Plan::run: input ", i, " is undefined");
      FROST_CHECK(inputs[i].device().is_cpu(), "frost::jit::Plan::run: input ", i, " is on ", inputs[i].device().str(),
                  "; this plan runs on cpu");
      FROST_CHECK(inputs[i].shape() == g_.input_shapes[i], "frost::jit::Plan::run: input ", i, " has shape ",
                  inputs[i].shape().str(), " but the plan was traced with ", g_.input_shapes[i].str(),
                  " (trace again, or use jit::compile to specialise per shape)");
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
    ws->arena = StorageImpl::cpu(static_cast<std::size_t>(arena_bytes_));
    ws->bases.assign(g_.buffers.size(), nullptr);
    for (std::size_t b = 0; b < g_.buffers.size(); ++b) {
      const Buffer& buf = g_.buffers[b];
      if (buf.kind == BufferKind::constant && buf.data) ws->bases[b] = buf.data->data;
      else if (buf.kind == BufferKind::intermediate && offsets_[b] >= 0)
        ws->bases[b] = static_cast<char*>(ws->arena->data) + offsets_[b];
    }
    return ws;
  }
  void give_back(std::unique_ptr<Workspace> ws) const {
    std::lock_guard<std::mutex> lock(pool_->m);
    pool_->free.reserve(8);
    pool_->free.push_back(std::move(ws));
  }

  void execute(detail::Bases bases) const {
    for (const auto& s : g_.steps) {
      if (s.kind != StepKind::guard) {
        detail::run_step(s, bases);
        continue;
      }
      const Guard& gd = g_.guards[static_cast<std::size_t>(s.guard)];
      const Buffer& b = g_.buffers[static_cast<std::size_t>(s.in[0].buf)];
      if (!passes::guard_holds(gd, s.in[0], b.dtype, bases[s.in[0].buf]))
        throw GuardFailure("frost::jit::GuardFailure: guard " + std::to_string(s.guard) + " failed: " + gd.describe() +
                           " when traced, and this input differs; the frozen branch is not the one eager code "
                           "would take (use jit::compile to specialise per branch, or trace this input)");
    }
  }

  Graph g_;
  std::vector<std::string> report_;
  std::vector<std::int64_t> offsets_;
  std::int64_t arena_bytes_ = 0;
  struct Pool {
    std::mutex m;
    std::vector<std::unique_ptr<Workspace>> free;
  };
  std::unique_ptr<Pool> pool_ = std::make_unique<Pool>();
};

}  // namespace frost::jit
