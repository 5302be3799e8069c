// autocast's out-of-line half (amp/autocast.hpp): the weight-cast cache and
// the lower-precision forms of the listed tensor ops, compiled once
// (frost::compiled: src/compiled_tensor_io.cpp) or inline (header-only).
// Convolutions, linear and scaled_dot_product_attention define theirs
// beside them (their headers come after this one).
#pragma once
#include <type_traits>
#include <unordered_map>

#include "../tensor.hpp"
#include "autocast.hpp"

#ifdef FROST_AUTOCAST_DEFINITIONS
namespace frost::amp::detail {

/// A weight's casts made in this region, held with the weight itself (so
/// its address is not reused while the entry lives).
struct CastCacheEntry {
  Tensor<float> source;
  Tensor<half> f16;
  Tensor<bfloat16> bf16;
};
inline std::unordered_map<const void*, CastCacheEntry>& cast_cache() {
  thread_local std::unordered_map<const void*, CastCacheEntry> c;
  return c;
}
FROST_AUTOCAST_API void clear_cast_cache() { cast_cache().clear(); }
FROST_AUTOCAST_API std::size_t cast_cache_size() { return cast_cache().size(); }

/// x in H: cached for weights (leaves that require grad, PyTorch's rule,
/// with grad mode on: a cast made under no_grad has no history to reuse),
/// made anew otherwise.
template <class H>
Tensor<H> lower(const Tensor<float>& x) {
  if (!x.defined()) return {};
  if (!(x.is_leaf() && x.requires_grad() && is_grad_enabled())) return x.template to<H>();
  auto& e = cast_cache()[x.impl()];
  if (!e.source.defined()) e.source = x;
  Tensor<H>& slot = [&]() -> Tensor<H>& {
    if constexpr (std::is_same_v<H, half>) return e.f16;
    else return e.bf16;
  }();
  if (!slot.defined()) slot = x.template to<H>();
  return slot;
}

/// f over the arguments cast to the region's dtype on `d`, its result back in float32.
template <class F, class... A>
Tensor<float> run_lowered(Device d, F f, const A&... args) {
  if (autocast_state().dtype[device_slot(d)] == DType::float16) return f(lower<half>(args)...).template to<float>();
  return f(lower<bfloat16>(args)...).template to<float>();
}

FROST_AUTOCAST_API Tensor<float> autocast_mm(const Tensor<float>& a, const Tensor<float>& b) {
  return run_lowered(a.device(), [](const auto& x, const auto& y) { return mm(x, y); }, a, b);
}
FROST_AUTOCAST_API Tensor<float> autocast_bmm(const Tensor<float>& a, const Tensor<float>& b) {
  return run_lowered(a.device(), [](const auto& x, const auto& y) { return bmm(x, y); }, a, b);
}
FROST_AUTOCAST_API Tensor<float> autocast_matmul(const Tensor<float>& a, const Tensor<float>& b) {
  return run_lowered(a.device(), [](const auto& x, const auto& y) { return matmul(x, y); }, a, b);
}
FROST_AUTOCAST_API Tensor<float> autocast_addmm(const Tensor<float>& c, const Tensor<float>& a, const Tensor<float>& b,
                                                double beta, double alpha) {
  return run_lowered(
      a.device(), [&](const auto& z, const auto& x, const auto& y) { return addmm(z, x, y, beta, alpha); }, c, a, b);
}
}  // namespace frost::amp::detail
#endif  // FROST_AUTOCAST_DEFINITIONS
