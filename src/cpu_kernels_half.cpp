// frost::compiled: CpuBackend<T> for half, bfloat16 (see backend/cpu/cpu_backend.hpp).
// One file per few dtypes: the kernels of one dtype take minutes to compile.
#define FROST_CPU_BACKEND_KERNELS
#include <frost/backend/cpu/cpu_backend.hpp>

namespace frost {
template Backend<half>& cpu_backend<half>();
template Backend<bfloat16>& cpu_backend<bfloat16>();
}  // namespace frost
