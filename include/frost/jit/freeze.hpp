// jit::freeze: trace in evaluation mode, then the freeze passes in order,
// each reported in plan.summary(), then the memory plan.
#pragma once
#include "passes/chain.hpp"
#include "passes/cleanup.hpp"
#include "passes/constant_fold.hpp"
#include "passes/fold_affine.hpp"
#include "passes/fuse.hpp"
#include "passes/memory_plan.hpp"
#include "passes/quantize.hpp"
#include "plan.hpp"
#include "trace.hpp"
#include "validate.hpp"

namespace frost::jit {

/// A traced graph frozen into a plan (evaluation semantics).
template <FloatScalar T>
Plan<T> freeze(Graph g, const FreezeOptions& opt) {
  FROST_CHECK(g.dtype == dtype_of<T>(), "frost::jit::freeze: the graph was traced with ", dtype_name(g.dtype),
              " tensors, not ", dtype_name<T>());
  if (!g.device.is_cpu()) {  // traced from a device module: frozen for the device and placed there
    const Device d = g.device;
    g.device = Device::cpu();
    return Plan<T>::frozen_for(std::move(g), d, opt);
  }
  auto source = std::make_shared<const Graph>(g);
  FreezeState st;
  st.g = std::move(g);
  passes::params_to_constants(st);
  if (opt.fold_constants) passes::fold_constants(st);
  passes::resolve_constant_guards(st);
  if (opt.remove_identities) passes::remove_identities(st);
  passes::eliminate_dead_code(st);
  // Batch norm steps are always prepared; folding into conv/linear is the optional part.
  passes::fold_affine(st, opt.fold_affine);
  if (opt.fuse_epilogues) passes::fuse_epilogues(st);
  if (opt.fuse_conv_pool) passes::fuse_conv_pool(st, opt.conv_pool_images);
  if (opt.fuse_elementwise) passes::fuse_elementwise(st);
  if (opt.quantize_linear) passes::quantize_linears<T>(st);
  if (opt.prepare_weights) passes::prepare_weights<T>(st);
  if (opt.conv_pool_images == 0) passes::drop_pooled_scratch<T>(st);  // the CPU's kernels; a device keeps its scratch
  if (opt.pack_weights) passes::pack_weights(st);
  if (opt.chain_linears && opt.prepare_weights) passes::chain_linears(st);
  passes::eliminate_dead_code(st);
  passes::materialize_outputs(st);
  const auto mp = passes::plan_memory(st);
  // The loader's checks, on every plan made here too: a pass that left a
  // window past its buffer or a layout a kernel cannot read is a frost bug,
  // better an Error now than a wrong answer (or a plan that fails to load).
  detail::validate_plan(st.g, mp.offset, mp.arena_bytes,
                        "frost::jit::freeze: the frozen plan fails its own checks (a frost bug; please report it)");
  return Plan<T>(std::move(st), mp, std::move(source), opt);
}

template <FloatScalar T>
Plan<T> freeze(Graph g) {
  return freeze<T>(std::move(g), FreezeOptions{});
}

/// Traces `module(inputs...)` in evaluation mode (restoring its mode after)
/// and freezes it with `opt`; a module and inputs on a GPU give a plan on
/// that GPU (traced on the CPU, see jit::trace). The inputs may be of any
/// dtypes; the plan's T is plan_scalar_t (the module's float type):
/// \code
/// auto plan = frost::jit::freeze(model, {.allow_tf32 = true}, x);
/// \endcode
template <class M, Scalar U, class... Rest>
Plan<plan_scalar_t<M, Tensor<U>, Rest...>> freeze(M& module, const FreezeOptions& opt, const Tensor<U>& x, const Rest&... rest) {
  using T = plan_scalar_t<M, Tensor<U>, Rest...>;
  Graph g;
  if constexpr (detail::is_module_v<M>) {
    auto& m = detail::module_of(module);
    const bool was_training = m.is_training();
    m.eval();
    try {
      g = trace(module, x, rest...);
    } catch (...) {
      if (was_training) m.train();
      throw;
    }
    if (was_training) m.train();
  } else {
    g = trace(module, x, rest...);
  }
  return freeze<T>(std::move(g), opt);
}

/// The same with every pass on: dropout gone, batch norm folded, epilogues
/// fused, one arena.
/// \code
/// auto plan = frost::jit::freeze(model, x);
/// auto y = plan.run(x);
/// \endcode
template <class M, Scalar U, class... Rest>
Plan<plan_scalar_t<M, Tensor<U>, Rest...>> freeze(M& module, const Tensor<U>& x, const Rest&... rest) {
  return freeze(module, FreezeOptions{}, x, rest...);
}

}  // namespace frost::jit
