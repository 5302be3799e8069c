// jit::compile(module): a callable that freezes on first use and keeps one
// plan per specialisation (input shapes and guard outcomes). A call tries
// the plans for its shapes, most recently used first; when every guard
// rejects it, the call is traced again (that trace is the eager run that
// answers it) and the new plan joins the bounded cache. Plans hold the
// weights they were frozen with: a call first checks that the module's
// parameters and buffers are the same tensors at the same versions (an
// optimizer step, a load_state_dict or a move bumps them) and that no layer
// was registered or replaced since, and traces again when one was. Results
// are then what eager evaluation-mode code returns, as long as forward
// reads no other state that changes: a plain C++ member (a threshold) is a
// constant of the trace, as in torch.jit.trace; call reset() after changing
// one. Writes through data() or under InferenceMode bump no version.
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "freeze.hpp"

namespace frost::jit {

struct CompileOptions {
  std::size_t max_plans = 8;  // least recently used plans are evicted beyond this
};

/// What a compiled callable did so far.
struct CompileStats {
  std::int64_t calls = 0, traces = 0, guard_failures = 0, evictions = 0;
  std::int64_t invalidations = 0;  // times the module's weights or layers changed under the plans
  std::size_t cached_plans = 0;
};

template <class M, FloatScalar T = float>
class Compiled {
 public:
  Compiled(M& module, CompileOptions opt) : module_(&module), opt_(opt) {
    FROST_CHECK(opt.max_plans >= 1, "frost::jit::compile: max_plans must be at least 1");
  }

  /// The module's output for these inputs, from a cached plan whose shapes,
  /// dtypes and guards take them, or from a new trace. Inputs of any dtypes
  /// (int64 token ids, a bool mask); each combination of dtypes and shapes
  /// gets plans of its own.
  template <Scalar U, class... Rest>
  Tensor<T> operator()(const Tensor<U>& x, const Rest&... rest) {
    if constexpr (std::is_same_v<U, T> && (std::is_same_v<Rest, Tensor<T>> && ...))
      return call(std::vector<Tensor<T>>{x, rest...}, x, rest...);
    else
      return call(std::vector<AnyTensor>{AnyTensor(x), AnyTensor(rest)...}, x, rest...);
  }

  /// Drops every plan: the next call traces again (after changing state
  /// forward reads that is not a parameter or buffer, such as a threshold).
  void reset() {
    std::lock_guard<std::mutex> lock(m_);
    plans_.clear();
  }

  CompileStats stats() const {
    std::lock_guard<std::mutex> lock(m_);
    CompileStats s = stats_;
    s.cached_plans = plans_.size();
    return s;
  }

 private:
  /// operator()'s work over the inputs as one list (Tensor<T> or AnyTensor).
  template <class In, class... X>
  Tensor<T> call(const std::vector<In>& inputs, const X&... xs) {
    std::int64_t traces_seen = 0;
    if (auto out = run_cached(inputs, traces_seen, true)) return *out;
    // No plan takes this input: trace it (an eager run) and keep the plan.
    // One trace at a time: a module on a device visits the host while it is
    // traced, and a plan another thread traced meanwhile may take this input.
    std::lock_guard<std::mutex> one_trace(trace_m_);
    if (traced_since(traces_seen))
      if (auto out = run_cached(inputs, traces_seen, false)) return *out;
    bool stale;  // the cached plans were frozen from other weights
    {
      std::lock_guard<std::mutex> lock(m_);
      stale = stats_.traces == 0 || weights_changed();
    }
    auto plan = std::make_shared<Plan<T>>(freeze(*module_, xs...));
    auto out = first_output(*plan, inputs);
    std::lock_guard<std::mutex> lock(m_);
    if (stale) {
      stats_.invalidations += !plans_.empty();
      plans_.clear();
    }
    snapshot_weights();  // after the trace: a device module's weights come back from the host in new memory
    ++stats_.traces;
    plans_.insert(plans_.begin(), plan);
    if (plans_.size() > opt_.max_plans) {
      plans_.pop_back();
      ++stats_.evictions;
    }
    return out;
  }

  static Tensor<T> first_output(const Plan<T>& p, const std::vector<Tensor<T>>& in) { return p.run_all(in)[0]; }
  static Tensor<T> first_output(const Plan<T>& p, const std::vector<AnyTensor>& in) {
    const AnyTensor y = p.run_any(in)[0];
    FROST_CHECK(y.is<T>(), "frost::jit::compile: the module's output is ", dtype_name(y.dtype()), ", not ", dtype_name<T>());
    return y.as<T>();
  }
  static DType input_dtype(const Tensor<T>&) { return dtype_of<T>(); }
  static DType input_dtype(const AnyTensor& a) { return a.dtype(); }

  /// The first cached plan whose guards take `inputs` runs them; `traces`
  /// gets how many traces there had been when the candidates were chosen.
  template <class In>
  std::optional<Tensor<T>> run_cached(const std::vector<In>& inputs, std::int64_t& traces, bool new_call) {
    for (const auto& plan : candidates(inputs, traces, new_call)) {
      try {
        auto out = first_output(*plan, inputs);
        touch(plan);
        return out;
      } catch (const GuardFailure&) {
        std::lock_guard<std::mutex> lock(m_);
        ++stats_.guard_failures;
      }
    }
    return std::nullopt;
  }
  bool traced_since(std::int64_t traces) const {
    std::lock_guard<std::mutex> lock(m_);
    return stats_.traces != traces;
  }
  template <class In>
  std::vector<std::shared_ptr<Plan<T>>> candidates(const std::vector<In>& inputs, std::int64_t& traces, bool new_call) {
    std::lock_guard<std::mutex> lock(m_);
    traces = stats_.traces;
    stats_.calls += new_call;
    // Plans frozen from weights that have changed since answer nothing.
    if (new_call && !plans_.empty() && weights_changed()) {
      plans_.clear();
      ++stats_.invalidations;
    }
    std::vector<std::shared_ptr<Plan<T>>> out;
    for (const auto& p : plans_) {
      const Graph& g = p->graph();
      bool same = g.input_shapes.size() == inputs.size();
      for (std::size_t i = 0; same && i < inputs.size(); ++i)
        same = g.input_shapes[i] == inputs[i].shape() &&
               g.buffers[static_cast<std::size_t>(g.inputs[i])].dtype == input_dtype(inputs[i]);
      if (same) out.push_back(p);
    }
    return out;
  }
  void touch(const std::shared_ptr<Plan<T>>& p) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = std::find(plans_.begin(), plans_.end(), p);
    if (it != plans_.end()) std::rotate(plans_.begin(), it, it + 1);
  }

  /// A tensor of the module as the plans froze it.
  struct Stamp {
    const void* storage;
    std::uint32_t version;
  };
  template <class U>
  static Stamp stamp_of(const Tensor<U>& t) {
    return {t.impl()->storage.get(), t.impl()->storage->version};
  }
  auto& module_ref() const {
    if constexpr (nn::detail::Holder<M>) return **module_;
    else return *module_;
  }
  /// Lists the module's parameters and buffers and their stamps (m_ held).
  void snapshot_weights() {
    const auto& m = module_ref();
    weights_ = m.parameters();
    for (auto& b : m.buffers()) weights_.push_back(b);
    index_weights_.clear();
    for (auto& [n, b] : m.named_index_buffers()) index_weights_.push_back(b);
    stamps_.clear();
    for (const auto& w : weights_) stamps_.push_back(stamp_of(w));
    for (const auto& w : index_weights_) stamps_.push_back(stamp_of(w));
    structure_ = m.structure_stamp();
  }
  /// Whether a layer was registered or a weight written since the snapshot (m_ held).
  bool weights_changed() const {
    if (module_ref().structure_stamp() != structure_) return true;
    std::size_t k = 0;
    auto moved = [&](const auto& w) {
      const Stamp now = stamp_of(w), then = stamps_[k++];
      return now.storage != then.storage || now.version != then.version;
    };
    for (const auto& w : weights_)
      if (moved(w)) return true;
    for (const auto& w : index_weights_)
      if (moved(w)) return true;
    return false;
  }

  M* module_;
  CompileOptions opt_;
  mutable std::mutex m_;
  std::mutex trace_m_;  // held while tracing (taken before m_, never inside it)
  std::vector<std::shared_ptr<Plan<T>>> plans_;  // most recently used first
  CompileStats stats_;
  // The module's weights when the cached plans were frozen (guarded by m_).
  std::vector<Tensor<T>> weights_;
  std::vector<IndexTensor> index_weights_;
  std::vector<Stamp> stamps_;
  std::uint64_t structure_ = 0;
};

/// A callable running `module` through frozen plans, specialised per input
/// shape and per branch its guards saw; the module must outlive it. A
/// module on a GPU gives plans on that GPU; a call that traces moves its
/// weights to the host and back (see jit::trace), so other threads should
/// not run the module itself meanwhile (its plans are safe).
/// \code
/// auto fast = frost::jit::compile(*model);
/// auto y = fast(x);   // always what eager evaluation would return
/// \endcode
template <FloatScalar T = float, class M>
Compiled<M, T> compile(M& module, CompileOptions opt = {}) {
  return Compiled<M, T>(module, opt);
}

}  // namespace frost::jit
