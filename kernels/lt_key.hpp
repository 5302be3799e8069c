// The key a plan's cuBLASLt linear caches its algorithm under: everything
// cuBLASLt's heuristic is told (extents, leading dimensions, the weight's
// layout, the epilogue, TF32, each operand's alignment, the workspace), so
// one answer serves every later call with the same shapes. Plain C++ (no
// CUDA), so the CPU tests cover it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include <frost/core/functors.hpp>

namespace frost::cuda_detail {

/// The largest power of two up to 256 that p's address is a multiple of.
inline std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

struct LtKey {
  std::int64_t m = 0, n = 0, k = 0, ldx = 0, ldw = 0;
  std::size_t workspace_bytes = 0;
  std::uint32_t align_x = 0, align_w = 0, align_y = 0;
  UnaryOp act = UnaryOp::copy;
  bool packed = false, tf32 = false;

  LtKey(std::int64_t m_, std::int64_t n_, std::int64_t k_, const void* x, std::int64_t ldx_, const void* w,
        std::int64_t ldw_, bool packed_, const void* y, UnaryOp act_, bool tf32_, std::size_t workspace)
      : m(m_), n(n_), k(k_), ldx(ldx_), ldw(ldw_), workspace_bytes(workspace), align_x(alignment_of(x)),
        align_w(alignment_of(w)), align_y(alignment_of(y)), act(act_), packed(packed_), tf32(tf32_) {}
  bool operator==(const LtKey&) const = default;
};

struct LtKeyHash {
  std::size_t operator()(const LtKey& key) const {
    std::size_t h = static_cast<std::size_t>(key.act) * 4u + key.packed * 2u + key.tf32;
    for (std::int64_t v : {key.m, key.n, key.k, key.ldx, key.ldw, static_cast<std::int64_t>(key.workspace_bytes),
                           static_cast<std::int64_t>(key.align_x), static_cast<std::int64_t>(key.align_w),
                           static_cast<std::int64_t>(key.align_y)})
      h = h * 1000003u ^ std::hash<std::int64_t>()(v);
    return h;
  }
};

}  // namespace frost::cuda_detail
