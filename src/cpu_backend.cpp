// The CPU kernels compiled once, for programs that link frost::compiled
// (FROST_CPU_BACKEND_EXTERN): explicit instantiations for every element type.
#define FROST_CPU_BACKEND_IMPLEMENTATION
#include <frost/backend/cpu/cpu_backend.hpp>

namespace frost {
template Backend<float>& cpu_backend<float>();
template Backend<double>& cpu_backend<double>();
template Backend<std::int64_t>& cpu_backend<std::int64_t>();
}  // namespace frost
