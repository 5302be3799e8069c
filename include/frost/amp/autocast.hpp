// frost::autocast: PyTorch's torch.autocast, as a guard.
//
//   {
//     frost::autocast ac(Device::cpu());                 // bfloat16 (PyTorch's CPU default)
//     auto loss = F::cross_entropy(model(x), y);         // linear / conv / matmul in bfloat16
//   }
//   frost::autocast ac(Device::cuda(), DType::float16);  // CUDA's default is float16
//
// Inside the region, on the guard's device type, the ops of PyTorch's
// lower-precision list (mm, bmm, matmul, addmm, linear, conv1d, conv2d,
// conv_transpose2d, scaled_dot_product_attention) take float32 tensors,
// cast them to the region's dtype, compute there (float32 accumulation)
// and give the result back as float32. A tensor keeps its static type, so
// the result is a Tensor<float> holding the 16-bit values PyTorch's op
// would return; the ops PyTorch runs in float32 (softmax, norms, losses,
// exp / log / pow, reductions) run in float32 as they are. Gradients flow
// back through the casts, in the 16-bit dtype, to the float32 weights
// (master weights stay float32). The cast of a weight (a leaf that
// requires grad, as PyTorch's rule) is made once per region: a cache
// cleared when the outermost guard ends. Double tensors are left alone, as
// PyTorch leaves float64.
//
// Where frost differs: PyTorch's result of a listed op is a 16-bit tensor,
// so the unlisted op after it (gelu, add) rounds its own result to 16
// bits too; here that op reads the same values but computes and stores in
// float32. That is a little more precise, and the lower-precision ops give
// PyTorch's values exactly.
#pragma once
#include <cstddef>
#include <optional>

#include "../core/device.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"

// The lower-precision forms of the listed ops are declared beside each op
// and defined once: in src/ for frost::compiled, inline when header-only.
#if defined(FROST_CPU_BACKEND_EXTERN)
#define FROST_AUTOCAST_API
#else
#define FROST_AUTOCAST_API inline
#endif
#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#define FROST_AUTOCAST_DEFINITIONS 1
#endif

namespace frost {

namespace amp::detail {

/// One thread's autocast state (PyTorch's is per thread too): for each
/// device type, on or off and the dtype.
struct AutocastState {
  bool on[2] = {false, false};                         // [0] CPU, [1] CUDA
  DType dtype[2] = {DType::bfloat16, DType::float16};  // PyTorch's defaults
  int depth = 0;                                       // guards alive: the weight-cast cache ends with the last
};
inline AutocastState& autocast_state() {
  thread_local AutocastState s;
  return s;
}
inline int device_slot(Device d) { return d.is_cpu() ? 0 : 1; }

/// Whether an op on `d` runs in low precision now.
inline bool autocast_on(Device d) { return autocast_state().on[device_slot(d)]; }

/// Drops the weight casts the region made, and how many it holds (amp/autocast_ops.hpp).
FROST_AUTOCAST_API void clear_cast_cache();
FROST_AUTOCAST_API std::size_t cast_cache_size();

}  // namespace amp::detail

/// The guard: autocast on `device`'s type in `dtype` (float16 or bfloat16;
/// default bfloat16 on the CPU, float16 on CUDA) until it ends; enabled =
/// false turns autocast off inside an enclosing region, as PyTorch's.
class autocast {
 public:
  explicit autocast(Device device, std::optional<DType> dtype = std::nullopt, bool enabled = true)
      : slot_(amp::detail::device_slot(device)) {
    auto& s = amp::detail::autocast_state();
    const DType d = dtype.value_or(slot_ == 0 ? DType::bfloat16 : DType::float16);
    FROST_CHECK(d == DType::bfloat16 || d == DType::float16, "frost::autocast: dtype ", dtype_name(d),
                " is not a lower-precision floating type (expected float16 or bfloat16)");
    prev_on_ = s.on[slot_], prev_dtype_ = s.dtype[slot_];
    s.on[slot_] = enabled, s.dtype[slot_] = d;
    ++s.depth;
  }
  ~autocast() {
    auto& s = amp::detail::autocast_state();
    s.on[slot_] = prev_on_, s.dtype[slot_] = prev_dtype_;
    if (--s.depth == 0) amp::detail::clear_cast_cache();
  }
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

  /// Whether autocast is on for `device`'s type, and in which dtype.
  static bool is_enabled(Device device) { return amp::detail::autocast_on(device); }
  static DType get_dtype(Device device) { return amp::detail::autocast_state().dtype[amp::detail::device_slot(device)]; }

 private:
  int slot_;
  bool prev_on_ = false;
  DType prev_dtype_ = DType::bfloat16;
};

}  // namespace frost
