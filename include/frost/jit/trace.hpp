// jit::trace(module_or_callable, inputs...): one eager run with the tracer
// installed, returned as a Graph. A module's parameters and buffers become
// named constants; the example inputs become the graph's inputs.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../nn/module.hpp"
#include "tracer.hpp"

namespace frost::jit {

namespace detail {

template <class M>
constexpr bool is_module_v = nn::detail::Holder<M> || std::is_base_of_v<nn::ModuleT<float>, M> ||
                             std::is_base_of_v<nn::ModuleT<double>, M>;

/// The module behind a handle or a module reference.
template <class M>
auto& module_of(M& m) {
  if constexpr (nn::detail::Holder<M>) return *m;
  else return m;
}

/// Calls forward on a module or handle, or the callable itself.
template <class F, class... X>
decltype(auto) invoke(F& f, X&... x) {
  if constexpr (nn::detail::Holder<F>) return f(x...);
  else if constexpr (requires { f.forward(x...); }) return f.forward(x...);
  else return f(x...);
}

template <class T, class R>
void add_outputs(Tracer& tr, const R& r) {
  if constexpr (std::is_same_v<R, Tensor<T>>) tr.add_output(r);
  else if constexpr (std::is_same_v<R, std::vector<Tensor<T>>>) {
    for (const auto& y : r) tr.add_output(y);
  } else {
    static_assert(std::is_same_v<R, Tensor<T>>,
                  "frost::jit::trace: the traced function must return a Tensor<T> or a std::vector<Tensor<T>>");
  }
}

template <class T, class M>
void add_module_constants(Tracer& tr, const M& m) {
  for (const auto& [name, p] : m.named_parameters()) tr.add_constant(p, name);
  for (const auto& [name, b] : m.named_buffers()) tr.add_constant(b, name);
  for (const auto& [name, b] : m.named_index_buffers()) tr.add_constant(b, name);
}

/// The one device the module's parameters and buffers are on (none when it has none).
template <class M>
std::optional<Device> module_device(const M& m) {
  std::optional<Device> d;
  std::string first;
  auto see = [&](const std::string& name, Device at) {
    if (!d) {
      d = at;
      first = name;
      return;
    }
    FROST_CHECK(*d == at, "frost::jit::trace: '", first, "' is on ", d->str(), " and '", name, "' on ", at.str(),
                "; a plan runs on one device, so the traced module must be on one (module.to(device))");
  };
  for (const auto& [name, p] : m.named_parameters()) see(name, p.device());
  for (const auto& [name, b] : m.named_buffers()) see(name, b.device());
  for (const auto& [name, b] : m.named_index_buffers()) see(name, b.device());
  return d;
}

/// Traces `call(inputs)` where the inputs are dense private copies of
/// `examples`. The tracer records CPU kernels and the freeze reads constants
/// on the host, so a module on a device is traced on the CPU: its
/// parameters and buffers visit the host for the one run (moved in place,
/// as module.to does, so handles such as an optimizer's stay valid) and go
/// back after it, errors included; the graph keeps the device, where
/// freeze places the plan.
template <class T, class M, class Call>
Graph trace_with(M* module, const std::vector<Tensor<T>>& examples, Call&& call) {
  std::optional<Device> at;
  if constexpr (!std::is_same_v<M, void>)
    if (module) at = module_device(*module);
  for (std::size_t i = 0; i < examples.size(); ++i) {
    FROST_CHECK(examples[i].defined(), "frost::jit::trace: example input ", i, " is undefined");
    const Device d = examples[i].device();
    if (!at) at = d;
    // Eager code would refuse to mix them in the first op; so does the trace (it moves the module, not the data).
    FROST_CHECK(d == *at, "frost::jit::trace: example input ", i, " is on ", d.str(), " but ",
                module ? "the module's parameters are" : "input 0 is", " on ", at->str(),
                "; pass the inputs on the module's device");
  }
  const Device device = at.value_or(Device::cpu());
  std::vector<Tensor<T>> xs;
  for (const auto& x : examples)  // owned and dense, made before the trace starts
    xs.push_back(device.is_cpu() ? x.detach().clone() : x.detach().cpu());
  Graph g;
  auto run = [&] {
    NoGradGuard no_grad;
    Tracer tr(dtype_of<T>());
    if constexpr (!std::is_same_v<M, void>)
      if (module) add_module_constants<T>(tr, *module);
    for (const auto& x : xs) tr.add_input(x);
    const auto r = call(xs);
    add_outputs<T>(tr, r);
    g = tr.finish();
  };
  if (device.is_cpu()) {
    run();
    return g;
  }
  auto move_module = [&](Device d) {
    if constexpr (std::is_const_v<M>)
      frost::detail::fail("frost::jit::trace: the module is on ", device.str(),
                          " and was passed as const; its parameters visit the host for the trace, so pass it "
                          "non-const");
    else if constexpr (!std::is_same_v<M, void>)
      if (module) module->to(d);
  };
  auto restore = [&] { move_module(device); };
  move_module(Device::cpu());
  // The error as thrown (an IndexError stays one), with where the trace ran.
  auto explained = [&](const Error& e) {
    return std::string(e.what()) + " (the trace of work on " + device.str() +
           " runs on the CPU, with the inputs and the traced module's parameters and buffers moved there; "
           "a tensor held anywhere else stays on " + device.str() + ": pass it as an input or register it in the module)";
  };
  try {
    run();
  } catch (const IndexError& e) {
    restore();
    throw IndexError(explained(e));
  } catch (const Error& e) {
    restore();
    throw Error(explained(e));
  } catch (...) {
    restore();
    throw;
  }
  restore();
  g.device = device;
  return g;
}

}  // namespace detail

/// Traces `f(inputs...)` once: `f` is a module (or module handle), whose
/// forward is called and whose parameters and buffers become named
/// constants, or any callable over tensors. The module's mode is used as is
/// (freeze switches to eval). Branches on tensor values become guards. A
/// module and inputs on a GPU are traced on the CPU (the module's weights
/// visit the host for the run); freeze then places the plan on the GPU.
/// \code
/// auto g = frost::jit::trace(model, x);
/// std::cout << g.str();
/// \endcode
template <class F, FloatScalar T, class... Rest>
Graph trace(F& f, const Tensor<T>& x, const Rest&... rest) {
  static_assert((std::is_same_v<Rest, Tensor<T>> && ...), "frost::jit::trace: every input must be a Tensor<T> of one T");
  std::vector<Tensor<T>> ex{x, rest...};
  auto call = [&](std::vector<Tensor<T>>& xs) {
    return std::apply([&](auto&... a) { return detail::invoke(f, a...); },
                      [&]<std::size_t... I>(std::index_sequence<I...>) { return std::tie(xs[I]...); }(
                          std::make_index_sequence<1 + sizeof...(Rest)>{}));
  };
  if constexpr (detail::is_module_v<F>) return detail::trace_with<T>(&detail::module_of(f), ex, call);
  else return detail::trace_with<T, void>(nullptr, ex, call);
}

/// Traces a callable taking the inputs as one vector (any number of them).
template <FloatScalar T, class F>
Graph trace_list(F&& f, const std::vector<Tensor<T>>& inputs) {
  return detail::trace_with<T, void>(nullptr, inputs, [&](std::vector<Tensor<T>>& xs) {
    return f(static_cast<const std::vector<Tensor<T>>&>(xs));
  });
}

}  // namespace frost::jit
