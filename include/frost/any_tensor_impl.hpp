// AnyTensor's out-of-line half (any_tensor.hpp): conversion to a run-time
// dtype and printing, each a dispatch over every dtype.
#pragma once
#include "any_tensor.hpp"
#include "io/print.hpp"

#if defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#define FROST_ANY_INLINE
#else
#define FROST_ANY_INLINE inline
#endif

namespace frost {

FROST_ANY_INLINE AnyTensor AnyTensor::to(DType d) const {
  check("to");
  return visit_dtype(d, [&](auto tag) { return AnyTensor(to<decltype(tag)>()); });
}

FROST_ANY_INLINE std::ostream& operator<<(std::ostream& os, const AnyTensor& a) {
  return a.visit([&](const auto& t) -> std::ostream& { return os << t; });
}

}  // namespace frost

#undef FROST_ANY_INLINE
