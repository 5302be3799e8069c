// Plan<T>'s device side (plan.hpp): constants uploaded, inputs staged, the
// steps run one by one or captured and replayed as a CUDA Graph, the index
// checks read back after a replay, and guards' windows read back.
#pragma once
#include <vector>

#include "plan.hpp"

namespace frost::jit {

template <FloatScalar T>
Ref<StorageImpl> Plan<T>::upload(const StorageImpl& host, DType dt, Device d) {
  auto put = [&](auto tag) {
    using U = decltype(tag);
    Backend<U>& be = backend_for<U>(d);
    Ref<StorageImpl> dev = StorageImpl::on(d, host.nbytes, be.allocator());
    be.copy_from_host(static_cast<const U*>(host.data), static_cast<U*>(dev->data),
                      static_cast<std::int64_t>(host.nbytes / sizeof(U)));
    return dev;
  };
  return visit_dtype(dt, put);
}

template <FloatScalar T>
template <class In>
void Plan<T>::stage_device_inputs(const std::vector<In>& inputs, Workspace& ws) const {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    visit_input(inputs[i], [&](const auto& x) {
      using U = typename std::decay_t<decltype(x)>::value_type;
      Backend<U>& be = backend_for<U>(device_);
      U* dst = static_cast<U*>(ws.inputs[i]->data);
      if (x.device() == device_) {
        be.copy(x.view_of(), View<U>(dst, x.shape()));
      } else {
        const auto c = x.contiguous();
        be.copy_from_host(c.data(), dst, c.numel());
      }
    });
  }
}

template <FloatScalar T>
void Plan<T>::execute_device(Workspace& ws) const {
  frost::detail::DeviceRuntime* rt = frost::detail::cuda_runtime_slot();
  const bool cuda = rt && device_.is_cuda();
  const DeviceSwitches switches(cuda ? rt : nullptr, opt_.allow_tf32);
  if (graphable_ && cuda) {
    if (ws.graph && launch_graph(ws, rt)) return;
    // A capture that cannot hold a step (an algorithm not timed for these
    // shapes, e.g. after the TF32 switch changed; a workspace to grow)
    // falls back to a step-by-step run, which times and sizes them, so the
    // next run captures; after kMaxFailedCaptures the plan stays step by step.
    if (ws.runs > 0 && ws.failed_captures < kMaxFailedCaptures && capture(ws, rt)) return;
  }
  for (const auto& s : g_.steps) run_device_step(s, ws);
  ++ws.runs;  // only a run that went through counts as the warm one
}

template <FloatScalar T>
void Plan<T>::run_device_step(const Step& s, Workspace& ws) const {
  if (s.kind != StepKind::guard) {
    detail::run_step(s, ws.bases.data(), device_);
    return;
  }
  // A guard reads its window back to the host (a sync).
  const Buffer& b = g_.buffers[static_cast<std::size_t>(s.in[0].buf)];
  std::vector<unsigned char> host(static_cast<std::size_t>(b.numel) * detail::dtype_size(b.dtype));
  read_back(b.dtype, ws.bases[static_cast<std::size_t>(s.in[0].buf)], host.data(), b.numel);
  check_guard(s, b, host.data());
}

template <FloatScalar T>
bool Plan<T>::capture(Workspace& ws, frost::detail::DeviceRuntime* rt) const {
  rt->capture_begin(device_.index);
  try {
    capture_steps(ws, rt);
  } catch (const Error&) {
    rt->capture_abort(device_.index);
    ++ws.failed_captures;
    return false;
  } catch (...) {
    rt->capture_abort(device_.index);
    throw;
  }
  try {
    ws.graph = rt->capture_end(device_.index);
  } catch (const Error&) {
    ++ws.failed_captures;
    return false;
  }
  return launch_graph(ws, rt);
}

template <FloatScalar T>
bool Plan<T>::launch_graph(Workspace& ws, frost::detail::DeviceRuntime* rt) const {
  try {
    rt->graph_launch(ws.graph, device_.index);
  } catch (const Error&) {
    rt->graph_destroy(std::exchange(ws.graph, nullptr));
    ws.failed_captures = kMaxFailedCaptures;
    return false;
  }
  ++pool_->graph_launches;
  check_index_slots(ws);
  return true;
}

template <FloatScalar T>
void Plan<T>::capture_steps(Workspace& ws, frost::detail::DeviceRuntime* rt) const {
  if (index_steps_.empty()) {
    for (const auto& s : g_.steps) detail::run_step(s, ws.bases.data(), device_);
    return;
  }
  auto* slots = static_cast<std::int64_t*>(ws.index_slots->data);
  backend_for<std::int64_t>(device_).fill(View<std::int64_t>(slots, Shape{static_cast<std::int64_t>(ws.index_host.size())}), 0);
  struct Unset {  // the thread's usual index checks back, however the capture ends
    frost::detail::DeviceRuntime* rt;
    int device;
    ~Unset() {
      try {
        rt->set_thread_index_slot(device, nullptr);
      } catch (...) {  // only during the thread's exit, when its state is gone
      }
    }
  } unset{rt, device_.index};
  std::size_t next = 0;
  for (std::size_t i = 0; i < g_.steps.size(); ++i) {
    const bool index = next < index_steps_.size() && index_steps_[next] == i;
    if (index) rt->set_thread_index_slot(device_.index, slots + 2 * next++);
    detail::run_step(g_.steps[i], ws.bases.data(), device_);
    if (index) rt->set_thread_index_slot(device_.index, nullptr);
  }
}

template <FloatScalar T>
void Plan<T>::check_index_slots(Workspace& ws) const {
  if (index_steps_.empty()) return;
  std::vector<std::int64_t>& h = ws.index_host;
  backend_for<std::int64_t>(device_).copy_to_host(static_cast<const std::int64_t*>(ws.index_slots->data), h.data(),
                                                  static_cast<std::int64_t>(h.size()));
  for (std::size_t k = 0; k < index_steps_.size(); ++k) {
    if (h[2 * k] == 0) continue;
    const Step& s = g_.steps[index_steps_[k]];
    const std::int64_t size = (s.kind == StepKind::scatter_add ? s.out[0] : s.in[0]).shape[static_cast<int>(s.i0)];
    frost::detail::fail_index(step_kind_name(s.kind), h[2 * k + 1], s.i0, size, "; step ", index_steps_[k],
                              " of a frozen plan, in its CUDA Graph");
  }
}

template <FloatScalar T>
void Plan<T>::read_back(DType dt, const void* dev, void* host, std::int64_t n) const {
  visit_dtype(dt, [&](auto tag) {
    using U = decltype(tag);
    backend_for<U>(device_).copy_to_host(static_cast<const U*>(dev), static_cast<U*>(host), n);
  });
}

}  // namespace frost::jit
