// frost::compiled: CpuBackend<T> for std::int64_t, std::int32_t, std::int16_t, std::int8_t, std::uint8_t, bool (see backend/cpu/cpu_backend.hpp).
// One file per few dtypes: the kernels of one dtype take minutes to compile.
#define FROST_CPU_BACKEND_KERNELS
#include <frost/backend/cpu/cpu_backend.hpp>

namespace frost {
template Backend<std::int64_t>& cpu_backend<std::int64_t>();
template Backend<std::int32_t>& cpu_backend<std::int32_t>();
template Backend<std::int16_t>& cpu_backend<std::int16_t>();
template Backend<std::int8_t>& cpu_backend<std::int8_t>();
template Backend<std::uint8_t>& cpu_backend<std::uint8_t>();
template Backend<bool>& cpu_backend<bool>();
}  // namespace frost
