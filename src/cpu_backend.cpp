// The CPU kernels and the Tensor member functions compiled once, for programs
// that link frost::compiled (FROST_CPU_BACKEND_EXTERN): explicit
// instantiations for every element type. The safetensors JSON code
// (io/safetensors_json.hpp) is defined here out of line too.
#define FROST_CPU_BACKEND_IMPLEMENTATION
#include <frost/frost.hpp>

namespace frost {
template Backend<float>& cpu_backend<float>();
template Backend<double>& cpu_backend<double>();
template Backend<std::int64_t>& cpu_backend<std::int64_t>();
template class Tensor<float>;
template class Tensor<double>;
}  // namespace frost
