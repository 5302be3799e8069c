// Plan<T>'s measuring and checking (plan.hpp): profile (each step timed
// alone, beside whole runs) and check (eager against the plan).
#pragma once
#include <chrono>
#include <cmath>
#include <vector>

#include "plan.hpp"

namespace frost::jit {

template <FloatScalar T>
template <class M, Scalar U, class... Rest>
CheckReport Plan<T>::check_with(M& module, double tol, const Tensor<U>& x, const Rest&... rest) const {
  auto& m = module_ref(module);
  const bool was_training = m.is_training();
  m.eval();
  std::vector<Tensor<T>> eager;
  {
    InferenceMode im;
    eager = as_outputs(call_forward(module, x, rest...));
  }
  if (was_training) m.train();
  std::vector<Tensor<T>> frozen;
  for (const auto& y : run_any({AnyTensor(x), AnyTensor(rest)...})) frozen.push_back(y.template to<T>());
  FROST_CHECK(eager.size() == frozen.size(), "frost::jit::Plan::check: the module returned ", eager.size(),
              " outputs, the plan ", frozen.size());
  CheckReport r;
  r.tolerance = tol;
  for (std::size_t i = 0; i < eager.size(); ++i) {
    const double d = eager[i].shape() == frozen[i].shape() ? (eager[i] - frozen[i]).abs().max().item() : INFINITY;
    r.max_abs_diff.push_back(d);
    r.ok = r.ok && d <= tol * (1.0 + eager[i].abs().max().item());
  }
  return r;
}

template <FloatScalar T>
template <class M>
CheckReport Plan<T>::check(M& module, const std::vector<Tensor<T>>& inputs, double tol) const {
  CheckReport r;
  bool done = false;
  auto try_n = [&]<std::size_t... I>(std::index_sequence<I...>) {
    using Impl = std::remove_reference_t<decltype(module_ref(module))>;
    if constexpr (requires(Impl& i, const Tensor<T>& t) { i.forward(((void)I, t)...); }) {
      if (inputs.size() == sizeof...(I)) {
        r = check_with(module, tol, inputs[I]...);
        done = true;
      }
    }
  };
  try_n(std::make_index_sequence<1>{});
  try_n(std::make_index_sequence<2>{});
  try_n(std::make_index_sequence<3>{});
  try_n(std::make_index_sequence<4>{});
  FROST_CHECK(done, "frost::jit::Plan::check: the module's forward does not take ", inputs.size(),
              " tensors (the list form takes one to four; call check_with for more)");
  return r;
}

template <FloatScalar T>
template <class In>
PlanProfile Plan<T>::profile_of(const std::vector<In>& inputs, int runs) const {
  FROST_CHECK(runs >= 1, "frost::jit::Plan::profile: runs must be at least 1, got ", runs);
  check_inputs(inputs);
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point a) { return std::chrono::duration<double, std::milli>(clock::now() - a).count(); };
  auto wait = [&] {
    if (device_.is_cuda()) frost::cuda::synchronize(device_.index);
  };
  PlanProfile p;
  p.device = device_;
  p.runs = runs;
  {
    // Untimed warm-up runs: one, and on CUDA two (a workspace's first run
    // goes step by step, its second captures the graph).
    const int warm = device_.is_cpu() ? 1 : 2;
    std::vector<double> whole;
    for (int r = 0; r < runs + warm; ++r) {
      const auto t0 = clock::now();
      run_with(inputs, [](const Slot&, DType, const Ref<StorageImpl>&, std::int64_t) {});
      wait();
      if (r >= warm) whole.push_back(ms_since(t0));
    }
    p.run_ms = detail::median_min(whole).first;
  }
  // The units a run takes one at a time: a step, or a CPU chain of matrix-vector layers.
  const Step* const begin = g_.steps.data();
  const Step* const end = begin + g_.steps.size();
  for (const Step* s = begin; s != end; s += p.steps.back().count) {
    StepTiming t;
    t.first = static_cast<std::size_t>(s - begin);
    t.count = device_.is_cpu() ? host_unit(s, end) : 1;
    t.kind = step_kind_name(s->kind);
    t.attrs = t.count > 1 ? std::to_string(t.count) + " matrix-vector layers in one parallel region" : detail::step_attrs(*s);
    t.note = s->note;
    if (!s->out.empty()) t.out = s->out[0].shape;
    p.steps.push_back(std::move(t));
  }
  std::vector<std::vector<double>> times(p.steps.size());
  std::vector<AnyTensor> staged;
  Lease ws(*this);
  if (device_.is_cpu()) {
    bind_host_inputs(inputs, *ws, staged);
    for (int r = 0; r < runs; ++r)
      for (std::size_t u = 0; u < p.steps.size(); ++u) {
        const auto t0 = clock::now();
        run_host_unit(begin + p.steps[u].first, p.steps[u].count, ws->bases.data());
        times[u].push_back(ms_since(t0));
      }
  } else {
    stage_device_inputs(inputs, *ws);
    frost::detail::DeviceRuntime& rt = frost::detail::cuda_runtime("jit::Plan::profile");
    const DeviceSwitches switches(&rt, opt_.allow_tf32);
    struct Events {  // before step 0, then after each step
      frost::detail::DeviceRuntime& rt;
      std::vector<void*> e;
      ~Events() {
        for (void* x : e) rt.event_destroy(x);
      }
    } ev{rt, {}};
    for (std::size_t i = 0; i <= p.steps.size(); ++i) ev.e.push_back(rt.event_create(device_.index));
    for (int r = 0; r < runs; ++r) {
      rt.event_record(ev.e[0], device_.index);
      for (std::size_t u = 0; u < p.steps.size(); ++u) {
        run_device_step(g_.steps[u], *ws);
        rt.event_record(ev.e[u + 1], device_.index);
      }
      for (std::size_t u = 0; u < p.steps.size(); ++u) times[u].push_back(rt.event_elapsed_ms(ev.e[u], ev.e[u + 1]));
    }
  }
  for (std::size_t u = 0; u < p.steps.size(); ++u)
    std::tie(p.steps[u].median_ms, p.steps[u].min_ms) = detail::median_min(times[u]);
  return p;
}

}  // namespace frost::jit
