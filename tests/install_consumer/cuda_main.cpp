// Uses an installed frost with its CUDA backend linked (frost::cuda): on a
// GPU, a small computation there against the CPU; without one, moving a
// tensor to CUDA must name the missing device, not a missing backend.
#include <cstdio>
#include <frost/frost.hpp>
#include <string>

int main() {
  const auto x = frost::Tensor<float>::arange(6).reshape({2, 3});
  const float want = (x * 2.0f).sum().item();
  if (!frost::cuda::is_available()) {
    try {
      (void)x.to(frost::Device::cuda());
    } catch (const frost::Error& e) {
      const std::string what = e.what();
      if (what.find("no CUDA device") != std::string::npos) {
        std::puts("frost::cuda is linked; skipped: no CUDA device");
        return 0;
      }
      std::fprintf(stderr, "unexpected error: %s\n", e.what());
      return 1;
    }
    std::fprintf(stderr, "no CUDA device reported, but a tensor moved there\n");
    return 1;
  }
  const float got = (x.to(frost::Device::cuda()) * 2.0f).sum().item();
  std::printf("%s: %g (CPU %g)\n", frost::cuda::device_name().c_str(), got, want);
  return got == want ? 0 : 1;
}
