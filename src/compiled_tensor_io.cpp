// frost::compiled (programs built with FROST_CPU_BACKEND_EXTERN): the Tensor
// member functions for the floating dtypes, SafetensorsFile::get<T> for every
// dtype, and the code defined out of line once (the safetensors JSON code in
// io/safetensors_json.hpp, io/safetensors_any.hpp, any_tensor_impl.hpp and
// the plan file's JSON). The CPU kernels are in src/cpu_kernels_*.cpp; this
// file sees only cpu_backend<T>()'s declaration.
#define FROST_CPU_BACKEND_EXTERN
#define FROST_CPU_BACKEND_IMPLEMENTATION
#include <frost/frost.hpp>

namespace frost {
#define FROST_INSTANTIATE_GET(S, e, name, st) template Tensor<S> SafetensorsFile::get<S>(const std::string&) const;
FROST_FOR_EACH_DTYPE(FROST_INSTANTIATE_GET)
#undef FROST_INSTANTIATE_GET
template class Tensor<float>;
template class Tensor<double>;
template class Tensor<half>;
template class Tensor<bfloat16>;
}  // namespace frost
