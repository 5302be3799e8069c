// The one translation unit the frost::cuda CMake target adds to a program:
// it instantiates the CUDA backend for every element type and installs it,
// with the runtime behind frost::cuda's functions, before main() runs. No
// CUDA call happens here: the device starts on first use.
#include "cuda_backend.cuh"

namespace frost::cuda_detail {
namespace {

/// cuda:0 to cuda:15's backends for T; none touches its device until a kernel
/// runs. Never destroyed: storages freed during static destruction still
/// reach their allocators.
template <class T>
void register_all() {
  static std::array<CudaBackend<T>*, kMaxCudaDevices> backends = [] {
    std::array<CudaBackend<T>*, kMaxCudaDevices> b{};
    for (int i = 0; i < kMaxCudaDevices; ++i) b[static_cast<std::size_t>(i)] = new CudaBackend<T>(i);
    return b;
  }();
  for (int i = 0; i < kMaxCudaDevices; ++i) register_backend<T>(Device::cuda(i), backends[static_cast<std::size_t>(i)]);
}

struct Registrar {
  Registrar() {
#define FROST_CUDA_REGISTER(S, e, name, st) register_all<S>();
    FROST_FOR_EACH_DTYPE(FROST_CUDA_REGISTER)
#undef FROST_CUDA_REGISTER
    // Never destroyed, like the contexts: a plan destroyed during static
    // destruction still reaches it through the slot.
    static CudaRuntime* runtime = new CudaRuntime;
    detail::cuda_runtime_slot() = runtime;
  }
};
const Registrar registrar;

}  // namespace
}  // namespace frost::cuda_detail
