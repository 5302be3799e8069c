// Strided iteration shared by the CPU kernels: N operands of one shape with
// their own strides, dims of size 1 dropped and contiguous neighbours merged,
// walked as rows of the innermost dim so the inner loop is a plain (often
// vectorised) loop.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "../../core/shape.hpp"

namespace frost::cpu {

template <std::size_t N>
struct Loop {
  int nd = 0;
  std::int64_t size[kMaxDims];
  std::int64_t stride[N][kMaxDims];

  Loop(const Shape& shape, const std::array<const Shape*, N>& st) {
    for (int d = 0; d < shape.ndim(); ++d) {
      if (shape[d] == 1) continue;
      if (nd > 0) {
        bool merge = true;
        for (std::size_t k = 0; k < N; ++k)
          if (stride[k][nd - 1] != (*st[k])[d] * shape[d]) merge = false;
        if (merge) {
          size[nd - 1] *= shape[d];
          for (std::size_t k = 0; k < N; ++k) stride[k][nd - 1] = (*st[k])[d];
          continue;
        }
      }
      size[nd] = shape[d];
      for (std::size_t k = 0; k < N; ++k) stride[k][nd] = (*st[k])[d];
      ++nd;
    }
    if (nd == 0) {
      nd = 1;
      size[0] = 1;
      for (std::size_t k = 0; k < N; ++k) stride[k][0] = 1;
    }
  }

  std::int64_t inner_stride(std::size_t k) const { return stride[k][nd - 1]; }

  /// Calls row(offsets, count) for the rows covering flat elements [begin, end);
  /// offsets[k] is operand k's element offset of the row start, and the row
  /// continues with inner_stride(k).
  template <class Row>
  void run(std::int64_t begin, std::int64_t end, Row&& row) const {
    if (begin >= end) return;  // nothing to visit (and a size-0 dim would divide by zero below)
    std::int64_t idx[kMaxDims];
    std::int64_t rem = begin;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = rem % size[d];
      rem /= size[d];
    }
    std::array<std::int64_t, N> off;
    while (begin < end) {
      for (std::size_t k = 0; k < N; ++k) {
        std::int64_t o = 0;
        for (int d = 0; d < nd; ++d) o += idx[d] * stride[k][d];
        off[k] = o;
      }
      const std::int64_t count = std::min(size[nd - 1] - idx[nd - 1], end - begin);
      row(off, count);
      begin += count;
      idx[nd - 1] += count;
      for (int d = nd - 1; d > 0 && idx[d] >= size[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  }
};

}  // namespace frost::cpu
