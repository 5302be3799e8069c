// What cuDNN is asked for one Conv2dParams: the tensor, filter and
// convolution descriptor extents (int32, checked), whether the input must be
// padded explicitly first, and the key the algorithm cache stores the choice
// under. Plain C++ (no CUDA), so the CPU tests cover it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include <frost/backend/backend.hpp>
#include <frost/core/dtype.hpp>
#include <frost/core/error.hpp>

namespace frost::cuda_detail {

/// The convolution cuDNN runs. cuDNN pads both sides of a dimension equally;
/// when the output extents need a different far side (PyTorch's
/// padding="same" with an even kernel), the input is copied into a padded
/// buffer first and cuDNN runs without padding.
struct ConvGeometry {
  int x[4], w[4], y[4];  // NCHW extents: x as cuDNN sees it (the padded copy when explicit_pad)
  int pad[2], stride[2], dilation[2];
  int groups = 1;
  bool explicit_pad = false;
  std::int64_t pad_top = 0, pad_left = 0;  // where the input starts inside the padded copy
};

inline int to_int(std::int64_t v, const char* what) {
  FROST_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "frost::conv2d (cuDNN): ", what, " = ", v,
              " does not fit cuDNN's 32-bit extents");
  return static_cast<int>(v);
}

/// The output extent cuDNN computes for symmetric padding `pad`.
inline std::int64_t cudnn_out_extent(std::int64_t in, std::int64_t pad, std::int64_t k, std::int64_t dilation,
                                     std::int64_t stride) {
  const std::int64_t span = in + 2 * pad - (k - 1) * dilation - 1;
  return span < 0 ? 0 : span / stride + 1;
}

inline ConvGeometry conv_geometry(const Conv2dParams& p) {
  ConvGeometry g;
  const bool sym_h = cudnn_out_extent(p.in_h, p.pad_h, p.kernel_h, p.dilation_h, p.stride_h) == p.out_h;
  const bool sym_w = cudnn_out_extent(p.in_w, p.pad_w, p.kernel_w, p.dilation_w, p.stride_w) == p.out_w;
  g.explicit_pad = !(sym_h && sym_w);
  std::int64_t in_h = p.in_h, in_w = p.in_w, pad_h = p.pad_h, pad_w = p.pad_w;
  if (g.explicit_pad) {
    // The padded extent that makes an unpadded convolution produce out_h rows exactly.
    in_h = (p.out_h - 1) * p.stride_h + (p.kernel_h - 1) * p.dilation_h + 1;
    in_w = (p.out_w - 1) * p.stride_w + (p.kernel_w - 1) * p.dilation_w + 1;
    g.pad_top = pad_h;
    g.pad_left = pad_w;
    pad_h = pad_w = 0;
  }
  const std::int64_t xs[4] = {p.batch, p.in_channels, in_h, in_w};
  const std::int64_t ws[4] = {p.out_channels, p.in_channels / p.groups, p.kernel_h, p.kernel_w};
  const std::int64_t ys[4] = {p.batch, p.out_channels, p.out_h, p.out_w};
  for (int i = 0; i < 4; ++i) {
    g.x[i] = to_int(xs[i], "an input extent");
    g.w[i] = to_int(ws[i], "a weight extent");
    g.y[i] = to_int(ys[i], "an output extent");
  }
  FROST_CHECK(p.batch * p.in_channels * in_h * in_w <= std::numeric_limits<int>::max() &&
                  p.batch * p.out_channels * p.out_h * p.out_w <= std::numeric_limits<int>::max(),
              "frost::conv2d (cuDNN): input [", p.batch, ", ", p.in_channels, ", ", in_h, ", ", in_w, "] or output [",
              p.batch, ", ", p.out_channels, ", ", p.out_h, ", ", p.out_w,
              "] holds more than 2^31 elements; split the batch");
  g.pad[0] = to_int(pad_h, "pad_h");
  g.pad[1] = to_int(pad_w, "pad_w");
  g.stride[0] = to_int(p.stride_h, "stride_h");
  g.stride[1] = to_int(p.stride_w, "stride_w");
  g.dilation[0] = to_int(p.dilation_h, "dilation_h");
  g.dilation[1] = to_int(p.dilation_w, "dilation_w");
  g.groups = to_int(p.groups, "groups");
  return g;
}

enum class ConvPass : std::uint8_t { forward, backward_data, backward_filter };

/// The algorithm cache's key: everything cuDNN's choice depends on.
struct ConvKey {
  std::int64_t v[16] = {};
  DType dtype = DType::float32;
  ConvPass pass = ConvPass::forward;
  bool tf32 = false;
  bool timed = false;  // chosen by timing the candidates (benchmark mode), not by heuristics

  ConvKey(const Conv2dParams& p, DType dt, ConvPass ps, bool allow_tf32, bool benchmark)
      : dtype(dt), pass(ps), tf32(allow_tf32), timed(benchmark) {
    const std::int64_t a[16] = {p.batch,    p.in_channels, p.in_h,  p.in_w,   p.out_channels, p.kernel_h,
                                p.kernel_w, p.out_h,       p.out_w, p.stride_h, p.stride_w,   p.pad_h,
                                p.pad_w,    p.dilation_h,  p.dilation_w, p.groups};
    for (int i = 0; i < 16; ++i) v[i] = a[i];
  }
  bool operator==(const ConvKey& o) const {
    for (int i = 0; i < 16; ++i)
      if (v[i] != o.v[i]) return false;
    return dtype == o.dtype && pass == o.pass && tf32 == o.tf32 && timed == o.timed;
  }
};

struct ConvKeyHash {
  std::size_t operator()(const ConvKey& k) const {
    std::size_t h = static_cast<std::size_t>(k.dtype) * 31u + static_cast<std::size_t>(k.pass) * 7u + k.tf32 * 3u + k.timed;
    for (std::int64_t x : k.v) h = h * 1000003u ^ std::hash<std::int64_t>()(x);
    return h;
  }
};

}  // namespace frost::cuda_detail
