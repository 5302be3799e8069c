// jit::compile(module): a callable that freezes on first use and keeps one
// plan per specialisation (input shapes and guard outcomes). A call tries
// the plans for its shapes, most recently used first; when every guard
// rejects it, the call is traced again (that trace is the eager run that
// answers it) and the new plan joins the bounded cache. Results are always
// what eager evaluation-mode code returns.
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "freeze.hpp"

namespace frost::jit {

struct CompileOptions {
  std::size_t max_plans = 8;  // least recently used plans are evicted beyond this
};

/// What a compiled callable did so far.
struct CompileStats {
  std::int64_t calls = 0, traces = 0, guard_failures = 0, evictions = 0;
  std::size_t cached_plans = 0;
};

template <class M, FloatScalar T = float>
class Compiled {
 public:
  Compiled(M& module, CompileOptions opt) : module_(&module), opt_(opt) {
    FROST_CHECK(opt.max_plans >= 1, "frost::jit::compile: max_plans must be at least 1");
  }

  template <class... Rest>
  Tensor<T> operator()(const Tensor<T>& x, const Rest&... rest) {
    const std::vector<Tensor<T>> inputs{x, rest...};
    for (const auto& plan : candidates(inputs)) {
      try {
        auto out = plan->run_all(inputs);
        touch(plan);
        return out[0];
      } catch (const GuardFailure&) {
        std::lock_guard<std::mutex> lock(m_);
        ++stats_.guard_failures;
      }
    }
    // No plan takes this input: trace it (an eager run) and keep the plan.
    auto plan = std::make_shared<Plan<T>>(freeze(*module_, x, rest...));
    auto out = plan->run_all(inputs);
    std::lock_guard<std::mutex> lock(m_);
    ++stats_.traces;
    plans_.insert(plans_.begin(), plan);
    if (plans_.size() > opt_.max_plans) {
      plans_.pop_back();
      ++stats_.evictions;
    }
    return out[0];
  }

  CompileStats stats() const {
    std::lock_guard<std::mutex> lock(m_);
    CompileStats s = stats_;
    s.cached_plans = plans_.size();
    return s;
  }

 private:
  std::vector<std::shared_ptr<Plan<T>>> candidates(const std::vector<Tensor<T>>& inputs) {
    std::lock_guard<std::mutex> lock(m_);
    ++stats_.calls;
    std::vector<std::shared_ptr<Plan<T>>> out;
    for (const auto& p : plans_) {
      const auto& shapes = p->graph().input_shapes;
      bool same = shapes.size() == inputs.size();
      for (std::size_t i = 0; same && i < inputs.size(); ++i) same = shapes[i] == inputs[i].shape();
      if (same) out.push_back(p);
    }
    return out;
  }
  void touch(const std::shared_ptr<Plan<T>>& p) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = std::find(plans_.begin(), plans_.end(), p);
    if (it != plans_.end()) std::rotate(plans_.begin(), it, it + 1);
  }

  M* module_;
  CompileOptions opt_;
  mutable std::mutex m_;
  std::vector<std::shared_ptr<Plan<T>>> plans_;  // most recently used first
  CompileStats stats_;
};

/// A callable running `module` through frozen plans, specialised per input
/// shape and per branch its guards saw; the module must outlive it.
/// \code
/// auto fast = frost::jit::compile(*model);
/// auto y = fast(x);   // always what eager evaluation would return
/// \endcode
template <FloatScalar T = float, class M>
Compiled<M, T> compile(M& module, CompileOptions opt = {}) {
  return Compiled<M, T>(module, opt);
}

}  // namespace frost::jit
