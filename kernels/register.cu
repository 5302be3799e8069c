// The one translation unit the frost::cuda CMake target adds to a program:
// it instantiates the CUDA backend for every element type and installs it,
// with the runtime behind frost::cuda's functions, before main() runs. No
// CUDA call happens here: the device starts on first use.
#include "cuda_backend.cuh"

namespace frost::cuda_detail {
namespace {

template <class T>
Backend<T>* backend_instance() {
  static CudaBackend<T> b;  // never touches the device until a kernel runs
  return &b;
}

struct Registrar {
  Registrar() {
    register_backend<float>(DeviceKind::cuda, backend_instance<float>());
    register_backend<double>(DeviceKind::cuda, backend_instance<double>());
    register_backend<std::int64_t>(DeviceKind::cuda, backend_instance<std::int64_t>());
    static CudaRuntime runtime;
    detail::cuda_runtime_slot() = &runtime;
  }
};
const Registrar registrar;

}  // namespace
}  // namespace frost::cuda_detail
