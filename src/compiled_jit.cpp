// frost::compiled: the jit's per-dtype code, compiled once here rather than
// in every file that includes frost.hpp: the tracer's recording backend for
// each of the ten dtypes (jit/tracer.hpp) and the plan executor's steps of
// the eight dtypes other than float32 / float64 (jit/execute_plain.hpp).
#define FROST_CPU_BACKEND_EXTERN
#define FROST_JIT_IMPLEMENTATION
#include <frost/frost.hpp>

namespace frost::jit::detail {
#define FROST_INSTANTIATE_TRACE(type, e, name, st) template class TracingBackend<type>;
FROST_FOR_EACH_DTYPE(FROST_INSTANTIATE_TRACE)
#undef FROST_INSTANTIATE_TRACE
}  // namespace frost::jit::detail
