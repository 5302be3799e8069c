// run_plain_step (execute.hpp): a plan step of a dtype other than float32 /
// float64, one dispatch over the other eight. Inline in header-only builds;
// in frost::compiled compiled once, in src/compiled_jit.cpp.
#pragma once
#include "execute.hpp"

#if defined(FROST_JIT_IMPLEMENTATION)
#define FROST_PLAIN_INLINE
#else
#define FROST_PLAIN_INLINE inline
#endif

namespace frost::jit::detail {

FROST_PLAIN_INLINE void run_plain_step(const Step& s, Bases b, Device d) {
  visit_dtype(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!FloatScalar<T>) {
      if (run_common(backend_for<T>(d), s, b)) return;
      frost::detail::fail("frost::jit: a ", step_kind_name(s.kind), " step of dtype ", dtype_name<T>(), "; ",
                          dtype_name<T>(), " steps are elementwise ops, copies, fills, reductions, indexing and casts");
    }
  });
}

}  // namespace frost::jit::detail

#undef FROST_PLAIN_INLINE
