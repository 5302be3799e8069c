// frost::compiled: CpuBackend<T> for float (see backend/cpu/cpu_backend.hpp).
// One file per few dtypes: the kernels of one dtype take minutes to compile.
#define FROST_CPU_BACKEND_KERNELS
#include <frost/backend/cpu/cpu_backend.hpp>

namespace frost {
template Backend<float>& cpu_backend<float>();
}  // namespace frost
