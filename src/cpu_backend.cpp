// The CPU kernels and the Tensor member functions compiled once, for programs
// that link frost::compiled (FROST_CPU_BACKEND_EXTERN): explicit
// instantiations for every element type. The safetensors JSON code
// (io/safetensors_json.hpp) and the run-time dtype half of safetensors
// (io/safetensors_any.hpp, SafetensorsFile::get<T>) are defined here out of line too.
#define FROST_CPU_BACKEND_IMPLEMENTATION
#include <frost/frost.hpp>

namespace frost {
#define FROST_INSTANTIATE_CPU_BACKEND(S, e, name, st) template Backend<S>& cpu_backend<S>();
FROST_FOR_EACH_DTYPE(FROST_INSTANTIATE_CPU_BACKEND)
#undef FROST_INSTANTIATE_CPU_BACKEND
#define FROST_INSTANTIATE_GET(S, e, name, st) template Tensor<S> SafetensorsFile::get<S>(const std::string&) const;
FROST_FOR_EACH_DTYPE(FROST_INSTANTIATE_GET)
#undef FROST_INSTANTIATE_GET
template class Tensor<float>;
template class Tensor<double>;
}  // namespace frost
