// jit::trace(module_or_callable, inputs...): one eager run with the tracer
// installed, returned as a Graph. A module's parameters and buffers become
// named constants; the example inputs become the graph's inputs.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../any_tensor.hpp"
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

/// The traced function's results as the graph's outputs: a tensor of any
/// dtype, a std::vector of them, or a std::tuple / std::pair of tensors.
template <class R>
void add_outputs(Tracer& tr, const R& r) {
  if constexpr (is_tensor_v<R>) tr.add_output(r);
  else if constexpr (requires { typename R::value_type; } && !is_tensor_v<R>) {
    static_assert(is_tensor_v<typename R::value_type>,
                  "frost::jit::trace: the traced function must return tensors (a Tensor, a std::vector or a std::tuple of them)");
    for (const auto& y : r) tr.add_output(y);
  } else if constexpr (requires { std::tuple_size<R>::value; }) {
    std::apply([&](const auto&... y) { (add_outputs(tr, y), ...); }, r);
  } else {
    static_assert(is_tensor_v<R>,
                  "frost::jit::trace: the traced function must return tensors (a Tensor, a std::vector or a std::tuple of them)");
  }
}

/// The element type of module M's parameters: float for a ModuleT<float>
/// (or a handle to one), double for a ModuleT<double>; void for a callable.
template <class M>
auto module_scalar() {
  if constexpr (nn::detail::Holder<M>) return module_scalar<std::remove_cvref_t<decltype(*std::declval<M&>())>>();
  else if constexpr (std::is_base_of_v<nn::ModuleT<double>, M>) return double{};
  else if constexpr (std::is_base_of_v<nn::ModuleT<float>, M>) return float{};
}
template <class T, class... Rest>
auto first_float() {
  if constexpr (FloatScalar<T>) return T{};
  else if constexpr (sizeof...(Rest) > 0) return first_float<Rest...>();
  else return float{};
}

}  // namespace detail

/// The element type of the plan a trace of `f(inputs...)` freezes into (its
/// outputs' and weights' type): the module's (float for a ModuleT<float>),
/// or for a callable the first floating-point input's, else float. A
/// language model taking int64 token ids gives a Plan<float>.
template <class F, class... X>
using plan_scalar_t = std::conditional_t<std::is_void_v<decltype(detail::module_scalar<std::remove_cvref_t<F>>())>,
                                         decltype(detail::first_float<typename X::value_type...>()),
                                         decltype(detail::module_scalar<std::remove_cvref_t<F>>())>;

namespace detail {

template <class M>
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
template <class M, class Call>
Graph trace_with(M* module, DType plan_dtype, const std::vector<AnyTensor>& examples, Call&& call) {
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
  std::vector<AnyTensor> xs;
  for (const auto& x : examples)  // owned and dense, made before the trace starts
    xs.push_back(x.visit([&](const auto& t) { return AnyTensor(device.is_cpu() ? t.detach().clone() : t.detach().cpu()); }));
  Graph g;
  auto run = [&] {
    NoGradGuard no_grad;
    Tracer tr(plan_dtype);
    if constexpr (!std::is_same_v<M, void>)
      if (module) add_module_constants(tr, *module);
    for (const auto& x : xs) x.visit([&](const auto& t) { tr.add_input(t); });
    const auto r = call(static_cast<const std::vector<AnyTensor>&>(xs));
    add_outputs(tr, r);
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
/// constants, or any callable over tensors. The inputs may be of any dtypes
/// (a float image and int64 token ids; a bool mask): each becomes an input
/// of that dtype. The module's mode is used as is (freeze switches to eval).
/// Branches on tensor values become guards. A module and inputs on a GPU are
/// traced on the CPU (the module's weights visit the host for the run);
/// freeze then places the plan on the GPU.
/// \code
/// auto g = frost::jit::trace(model, x);
/// std::cout << g.str();
/// \endcode
template <class F, Scalar T, class... Rest>
Graph trace(F& f, const Tensor<T>& x, const Rest&... rest) {
  static_assert((detail::is_tensor_v<Rest> && ...), "frost::jit::trace: every input must be a Tensor");
  const std::vector<AnyTensor> ex{AnyTensor(x), AnyTensor(rest)...};
  auto call = [&](const std::vector<AnyTensor>& xs) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      // Handles on the traced copies, each of its own type.
      std::tuple<Tensor<T>, Rest...> args{xs[I].template as<typename std::tuple_element_t<I, std::tuple<Tensor<T>, Rest...>>::value_type>()...};
      return std::apply([&](auto&... a) { return detail::invoke(f, a...); }, args);
    }(std::make_index_sequence<1 + sizeof...(Rest)>{});
  };
  const DType pd = dtype_of<plan_scalar_t<F, Tensor<T>, Rest...>>();
  if constexpr (detail::is_module_v<F>) return detail::trace_with(&detail::module_of(f), pd, ex, call);
  else return detail::trace_with<void>(nullptr, pd, ex, call);
}

/// Traces a callable taking the inputs as one vector (any number of them).
template <FloatScalar T, class F>
Graph trace_list(F&& f, const std::vector<Tensor<T>>& inputs) {
  const std::vector<AnyTensor> ex(inputs.begin(), inputs.end());
  return detail::trace_with<void>(nullptr, dtype_of<T>(), ex, [&](const std::vector<AnyTensor>& xs) {
    std::vector<Tensor<T>> ts;
    for (const auto& x : xs) ts.push_back(x.template as<T>());
    return f(static_cast<const std::vector<Tensor<T>>&>(ts));
  });
}

}  // namespace frost::jit
