// The input window of one pooling output, as PyTorch computes it: host+device
// code, so the CPU and CUDA pooling kernels clip and divide the same way.
#pragma once
#include <cstdint>

#include "../core/macros.hpp"
#include "backend.hpp"

namespace frost::pool_detail {

FROST_HOST_DEVICE inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
FROST_HOST_DEVICE inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

/// The window of output (oy, ox) clipped to the input, and PyTorch's divisor.
struct AvgWindow {
  std::int64_t y0, y1, x0, x1, divisor;
};
FROST_HOST_DEVICE inline AvgWindow avg_window(const Pool2dParams& p, std::int64_t oy, std::int64_t ox) {
  std::int64_t y0 = oy * p.stride_h - p.pad_h, x0 = ox * p.stride_w - p.pad_w;
  std::int64_t y1 = min64(y0 + p.kernel_h, p.in_h + p.pad_h), x1 = min64(x0 + p.kernel_w, p.in_w + p.pad_w);
  const std::int64_t padded = (y1 - y0) * (x1 - x0);
  y0 = max64(y0, 0);
  x0 = max64(x0, 0);
  y1 = min64(y1, p.in_h);
  x1 = min64(x1, p.in_w);
  const std::int64_t div =
      p.divisor_override > 0 ? p.divisor_override : (p.count_include_pad ? padded : (y1 - y0) * (x1 - x0));
  return {y0, y1, x0, x1, div};
}

/// The rows [y0, y1) and columns [x0, x1) a max window reads (stepping by the
/// dilation from the first position inside the input), as PyTorch computes them.
struct MaxWindow {
  std::int64_t y0, y1, x0, x1;
};
FROST_HOST_DEVICE inline MaxWindow max_window(const Pool2dParams& p, std::int64_t oy, std::int64_t ox) {
  std::int64_t y0 = oy * p.stride_h - p.pad_h, x0 = ox * p.stride_w - p.pad_w;
  const std::int64_t y1 = min64(y0 + (p.kernel_h - 1) * p.dilation_h + 1, p.in_h);
  const std::int64_t x1 = min64(x0 + (p.kernel_w - 1) * p.dilation_w + 1, p.in_w);
  while (y0 < 0) y0 += p.dilation_h;
  while (x0 < 0) x0 += p.dilation_w;
  return {y0, y1, x0, x1};
}

}  // namespace frost::pool_detail
