// Convolution and pooling: op-table rows (naive loop references, float and
// double forward, gradchecks, second derivatives) for every option that
// changes the arithmetic, PyTorch checksums (tests/reference/conv_pool_reference.py),
// double backward through the gradient ops, the threaded paths against the
// single-image ones, and bad input.
#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "op_table.hpp"  // first: <frost/frost.hpp>, which the ops headers build on

#include <frost/backend/cpu/conv.hpp>  // use_winograd, use_direct_conv: which path a shape takes
#include <frost/ops/conv.hpp>
#include <frost/ops/pool.hpp>

namespace frost::test::optable {

namespace {

// ---- naive references over host arrays ----------------------------------------

struct Geo {
  std::int64_t sh = 1, sw = 1;
  std::int64_t top = 0, bottom = 0, left = 0, right = 0;
  std::int64_t dh = 1, dw = 1, groups = 1;
};
Geo sym(std::int64_t s, std::int64_t p, std::int64_t d = 1, std::int64_t g = 1) { return {s, s, p, p, p, p, d, d, g}; }

std::int64_t ix4(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

/// The 7-loop convolution: y[n, o, oy, ox] = b[o] + sum_{c, i, j} x[n, group(o) Cg + c, oy sh - top + i dh, ...] w[o, c, i, j].
Arr conv2d_ref(const Arr& x, const Arr& w, const Arr* b, const Geo& g) {
  const std::int64_t N = x.shape[0], H = x.shape[2], W = x.shape[3];
  const std::int64_t O = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3], Og = O / g.groups;
  const std::int64_t OH = (H + g.top + g.bottom - g.dh * (kh - 1) - 1) / g.sh + 1;
  const std::int64_t OW = (W + g.left + g.right - g.dw * (kw - 1) - 1) / g.sw + 1;
  Arr y{Shape{N, O, OH, OW}, std::vector<double>(static_cast<std::size_t>(N * O * OH * OW))};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox) {
          double s = b ? b->v[static_cast<std::size_t>(o)] : 0.0;
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = oy * g.sh - g.top + i * g.dh, jx = ox * g.sw - g.left + j * g.dw;
                if (iy < 0 || iy >= H || jx < 0 || jx >= W) continue;
                s += x.v[static_cast<std::size_t>(ix4(x.shape, n, (o / Og) * Cg + c, iy, jx))] *
                     w.v[static_cast<std::size_t>(ix4(w.shape, o, c, i, j))];
              }
          y.v[static_cast<std::size_t>(ix4(y.shape, n, o, oy, ox))] = s;
        }
  return y;
}

/// The weight gradient of a stride-1, dilation-1 convolution with symmetric padding:
/// dw[o, c, i, j] = sum_{n, oy, ox} dy[n, o, oy, ox] x[n, group(o) Cg + c, oy - pad + i, ox - pad + j].
Arr conv2d_grad_weight_ref(const Arr& x, const Arr& dy, const Shape& ws, std::int64_t pad, std::int64_t groups) {
  const std::int64_t N = x.shape[0], H = x.shape[2], W = x.shape[3], OH = dy.shape[2], OW = dy.shape[3];
  const std::int64_t O = ws[0], Cg = ws[1], Og = O / groups;
  Arr dw{ws, std::vector<double>(static_cast<std::size_t>(ws.numel()))};
  for (std::int64_t o = 0; o < O; ++o)
    for (std::int64_t c = 0; c < Cg; ++c)
      for (std::int64_t i = 0; i < ws[2]; ++i)
        for (std::int64_t j = 0; j < ws[3]; ++j) {
          double s = 0;
          for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t oy = 0; oy < OH; ++oy)
              for (std::int64_t ox = 0; ox < OW; ++ox) {
                const std::int64_t iy = oy - pad + i, jx = ox - pad + j;
                if (iy < 0 || iy >= H || jx < 0 || jx >= W) continue;
                s += dy.v[static_cast<std::size_t>(ix4(dy.shape, n, o, oy, ox))] *
                     x.v[static_cast<std::size_t>(ix4(x.shape, n, (o / Og) * Cg + c, iy, jx))];
              }
          dw.v[static_cast<std::size_t>(ix4(ws, o, c, i, j))] = s;
        }
  return dw;
}

/// Transposed convolution as a scatter: every x[n, ci, iy, ix] adds x w[ci, co, i, j]
/// at y[n, group(ci) Cog + co, iy sh - p + i dh, ...].
Arr conv_transpose2d_ref(const Arr& x, const Arr& w, const Arr* b, std::int64_t sh, std::int64_t sw, std::int64_t ph,
                         std::int64_t pw, std::int64_t oph, std::int64_t opw, std::int64_t dh, std::int64_t dw,
                         std::int64_t groups) {
  const std::int64_t N = x.shape[0], Cin = x.shape[1], H = x.shape[2], W = x.shape[3];
  const std::int64_t Cog = w.shape[1], kh = w.shape[2], kw = w.shape[3], Cig = Cin / groups;
  const std::int64_t OH = (H - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1;
  const std::int64_t OW = (W - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1;
  Arr y{Shape{N, Cog * groups, OH, OW}, std::vector<double>(static_cast<std::size_t>(N * Cog * groups * OH * OW))};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t ci = 0; ci < Cin; ++ci)
      for (std::int64_t iy = 0; iy < H; ++iy)
        for (std::int64_t jx = 0; jx < W; ++jx)
          for (std::int64_t co = 0; co < Cog; ++co)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t oy = iy * sh - ph + i * dh, ox = jx * sw - pw + j * dw;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                y.v[static_cast<std::size_t>(ix4(y.shape, n, (ci / Cig) * Cog + co, oy, ox))] +=
                    x.v[static_cast<std::size_t>(ix4(x.shape, n, ci, iy, jx))] *
                    w.v[static_cast<std::size_t>(ix4(w.shape, ci, co, i, j))];
              }
  if (b)
    for (std::int64_t k = 0; k < y.shape.numel(); ++k)
      y.v[static_cast<std::size_t>(k)] += b->v[static_cast<std::size_t>((k / (OH * OW)) % (Cog * groups))];
  return y;
}

/// [C, ...] as [1, C, ...] and back, for unbatched rows.
Arr batched(Arr x) {
  x.shape.insert(0, 1);
  return x;
}
Arr unbatched(Arr x) {
  x.shape.erase(0);
  return x;
}
/// [N, C, L] as [N, C, 1, L] and back, for conv1d rows.
Arr as_2d(Arr x) {
  x.shape.insert(2, 1);
  return x;
}
Arr as_1d(Arr x) {
  x.shape.erase(2);
  return x;
}

struct PoolCfg {
  std::int64_t kh, kw, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil_mode = false, count_include_pad = true;
  std::int64_t divisor = 0;
};

std::int64_t out_extent(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d, bool ceil_mode) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  std::int64_t out = static_cast<std::int64_t>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside the input or the left padding
  return out;
}

/// Max or average of every window, visiting its kernel positions one by one.
Arr pool_ref(const Arr& x, const PoolCfg& c, bool is_max) {
  const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const std::int64_t OH = out_extent(H, c.kh, c.sh, c.ph, c.dh, c.ceil_mode);
  const std::int64_t OW = out_extent(W, c.kw, c.sw, c.pw, c.dw, c.ceil_mode);
  Arr y{Shape{N, C, OH, OW}, std::vector<double>(static_cast<std::size_t>(N * C * OH * OW))};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t ch = 0; ch < C; ++ch)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox) {
          double best = -INFINITY, sum = 0;
          std::int64_t inside = 0, padded = 0;
          for (std::int64_t i = 0; i < c.kh; ++i)
            for (std::int64_t j = 0; j < c.kw; ++j) {
              const std::int64_t iy = oy * c.sh - c.ph + i * c.dh, jx = ox * c.sw - c.pw + j * c.dw;
              // average pooling counts padding positions, but not window parts past the padding
              if (iy < H + c.ph && jx < W + c.pw) ++padded;
              if (iy < 0 || iy >= H || jx < 0 || jx >= W) continue;
              const double v = x.v[static_cast<std::size_t>(ix4(x.shape, n, ch, iy, jx))];
              best = std::max(best, v);
              sum += v;
              ++inside;
            }
          const double div = c.divisor ? double(c.divisor) : double(c.count_include_pad ? padded : inside);
          y.v[static_cast<std::size_t>(ix4(y.shape, n, ch, oy, ox))] = is_max ? best : sum / div;
        }
  return y;
}

Arr adaptive_ref(const Arr& x, std::int64_t oh, std::int64_t ow) {
  const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  Arr y{Shape{N, C, oh, ow}, std::vector<double>(static_cast<std::size_t>(N * C * oh * ow))};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t ch = 0; ch < C; ++ch)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          const auto y0 = static_cast<std::int64_t>(std::floor(double(i * H) / double(oh)));
          const auto y1 = static_cast<std::int64_t>(std::ceil(double((i + 1) * H) / double(oh)));
          const auto x0 = static_cast<std::int64_t>(std::floor(double(j * W) / double(ow)));
          const auto x1 = static_cast<std::int64_t>(std::ceil(double((j + 1) * W) / double(ow)));
          double s = 0;
          for (std::int64_t a = y0; a < y1; ++a)
            for (std::int64_t b = x0; b < x1; ++b) s += x.v[static_cast<std::size_t>(ix4(x.shape, n, ch, a, b))];
          y.v[static_cast<std::size_t>(ix4(y.shape, n, ch, i, j))] = s / double((y1 - y0) * (x1 - x0));
        }
  return y;
}

RefFn conv(const Geo& g, bool bias) {
  return [=](const std::vector<Arr>& x) { return conv2d_ref(x[0], x[1], bias ? &x[2] : nullptr, g); };
}
RefFn conv_unbatched(const Geo& g, bool bias) {
  return [=](const std::vector<Arr>& x) { return unbatched(conv2d_ref(batched(x[0]), x[1], bias ? &x[2] : nullptr, g)); };
}
RefFn conv1(const Geo& g, bool bias) {
  return [=](const std::vector<Arr>& x) { return as_1d(conv2d_ref(as_2d(x[0]), as_2d(x[1]), bias ? &x[2] : nullptr, g)); };
}
RefFn pooled(const PoolCfg& c, bool is_max, bool unbatch = false) {
  return [=](const std::vector<Arr>& x) {
    return unbatch ? unbatched(pool_ref(batched(x[0]), c, is_max)) : pool_ref(x[0], c, is_max);
  };
}

}  // namespace

/// The convolution and pooling rows (for the op table's generic checks).
std::vector<Row> conv_pool_rows() {
  const Gen u = uniform(-2, 2);
  const Gen d = distinct(-3, 3);  // no ties inside a max-pool window
  return {
      // ---- conv2d --------------------------------------------------------------
      row("conv2d", {{2, 3, 6, 5}, {4, 3, 3, 3}, {4}}, u, FN(frost::conv2d(x[0], x[1], x[2], {.padding = 1})),
          conv(sym(1, 1), true)),
      row("conv2d", {{2, 3, 7, 8}, {4, 3, 3, 2}, {4}}, u,
          FN(frost::conv2d(x[0], x[1], x[2], {.stride = 2, .padding = {1, 2}, .dilation = {2, 1}})),
          conv({2, 2, 1, 1, 2, 2, 2, 1, 1}, true))
          .with_note("stride, asymmetric padding and dilation"),
      row("conv2d", {{2, 4, 5, 6}, {6, 2, 3, 3}, {6}}, u,
          FN(frost::conv2d(x[0], x[1], x[2], {.stride = {1, 2}, .padding = 1, .groups = 2})),
          conv({1, 2, 1, 1, 1, 1, 1, 1, 2}, true))
          .with_note("groups"),
      row("conv2d", {{1, 3, 5, 5}, {6, 1, 3, 2}}, u, FN(frost::conv2d(x[0], x[1], {}, {.groups = 3})),
          conv(sym(1, 0, 1, 3), false))
          .with_note("depthwise, 2 filters per channel, no bias"),
      row("conv2d", {{2, 2, 5, 6}, {3, 2, 4, 2}, {3}}, u,
          FN(frost::conv2d(x[0], x[1], x[2], {.padding = "same", .dilation = {1, 3}})),
          conv({1, 1, 1, 2, 1, 2, 1, 3, 1}, true))
          .with_note("padding same, even kernel: the extra zero goes bottom/right"),
      row("conv2d", {{2, 2, 5, 6}, {3, 2, 3, 4}}, u, FN(frost::conv2d(x[0], x[1], {}, {.padding = "valid"})),
          conv(sym(1, 0), false))
          .with_note("padding valid"),
      row("conv2d", {{2, 4, 3, 5}, {6, 4, 1, 1}, {6}}, u, FN(frost::conv2d(x[0], x[1], x[2])), conv(sym(1, 0), true))
          .with_note("1x1: the input is the GEMM operand"),
      row("conv2d", {{2, 4, 5, 5}, {6, 2, 1, 1}}, u, FN(frost::conv2d(x[0], x[1], {}, {.groups = 2})),
          conv(sym(1, 0, 1, 2), false))
          .with_note("1x1 with groups"),
      row("conv2d", {{2, 4, 5, 5}, {3, 4, 1, 1}}, u, FN(frost::conv2d(x[0], x[1], {}, {.stride = 2})),
          conv(sym(2, 0), false))
          .with_note("1x1 strided"),
      row("conv2d", {{3, 5, 4}, {2, 3, 2, 3}, {2}}, u, FN(frost::conv2d(x[0], x[1], x[2], {.padding = {0, 1}})),
          conv_unbatched({1, 1, 0, 0, 1, 1, 1, 1, 1}, true))
          .with_note("unbatched input"),
      row("conv2d", {{2, 3, 4, 5}, {4, 3, 2, 2}, {4}}, u, FN(frost::conv2d(x[0], x[1], x[2], {.padding = 1})),
          conv(sym(1, 1), true))
          .layout({kT, kS, kS}),
      row("conv2d", {{2, 3, 4, 4}, {2, 3, 3, 3}}, u, FN(frost::conv2d(x[0], x[1], {}, {.stride = 2, .padding = 1})),
          conv(sym(2, 1), false))
          .layout({kE, kT}),
      row("conv2d", {{0, 2, 4, 4}, {3, 2, 3, 3}, {3}}, u, FN(frost::conv2d(x[0], x[1], x[2])), conv(sym(1, 0), true))
          .with_note("empty batch"),
      row("conv2d", {{2, 2, 3, 3}, {2, 2, 3, 3}, {2}}, u, FN(frost::conv2d(x[0], x[1], x[2], {.padding = 2, .dilation = 2})),
          conv(sym(1, 2, 2), true))
          .with_note("kernel reaches past the input on both sides"),
      // ---- conv1d --------------------------------------------------------------
      row("conv1d", {{2, 4, 9}, {6, 2, 3}, {6}}, u,
          FN(frost::conv1d(x[0], x[1], x[2], {.stride = 2, .padding = 1, .dilation = 2, .groups = 2})),
          conv1({2, 2, 0, 0, 1, 1, 1, 2, 2}, true)),
      row("conv1d", {{2, 3, 7}, {4, 3, 4}}, u, FN(frost::conv1d(x[0], x[1], {}, {.padding = "same"})),
          conv1({1, 1, 0, 0, 1, 2, 1, 1, 1}, false))
          .with_note("padding same, even kernel"),
      row("conv1d", {{3, 8}, {2, 3, 3}, {2}}, u, FN(frost::conv1d(x[0], x[1], x[2])),
          [](const std::vector<Arr>& x) { return unbatched(as_1d(conv2d_ref(as_2d(batched(x[0])), as_2d(x[1]), &x[2], sym(1, 0)))); })
          .with_note("unbatched input"),
      row("conv1d", {{2, 3, 6}, {2, 3, 2}}, u, FN(frost::conv1d(x[0], x[1], {}, {.padding = 1})), conv1({1, 1, 0, 0, 1, 1, 1, 1, 1}, false))
          .layout({kT, kS}),
      // ---- conv_transpose2d ----------------------------------------------------
      row("conv_transpose2d", {{2, 4, 3, 4}, {4, 3, 3, 3}, {3}}, u,
          FN(frost::conv_transpose2d(x[0], x[1], x[2], {.stride = 2, .padding = 1, .output_padding = 1})),
          REF(conv_transpose2d_ref(x[0], x[1], &x[2], 2, 2, 1, 1, 1, 1, 1, 1, 1))),
      row("conv_transpose2d", {{2, 4, 3, 3}, {4, 2, 2, 3}, {4}}, u,
          FN(frost::conv_transpose2d(x[0], x[1], x[2],
                                     {.stride = {2, 1}, .padding = {0, 1}, .output_padding = {1, 1}, .groups = 2, .dilation = {1, 2}})),
          REF(conv_transpose2d_ref(x[0], x[1], &x[2], 2, 1, 0, 1, 1, 1, 1, 2, 2)))
          .with_note("groups, dilation, output_padding below the dilation"),
      row("conv_transpose2d", {{3, 4, 4}, {3, 2, 3, 3}}, u, FN(frost::conv_transpose2d(x[0], x[1])),
          [](const std::vector<Arr>& x) { return unbatched(conv_transpose2d_ref(batched(x[0]), x[1], nullptr, 1, 1, 0, 0, 0, 0, 1, 1, 1)); })
          .with_note("unbatched input"),
      row("conv_transpose2d", {{2, 3, 3, 3}, {3, 2, 1, 1}}, u, FN(frost::conv_transpose2d(x[0], x[1])),
          REF(conv_transpose2d_ref(x[0], x[1], nullptr, 1, 1, 0, 0, 0, 0, 1, 1, 1)))
          .layout({kT, kS})
          .with_note("1x1"),
      // ---- max_pool2d ------------------------------------------------------------
      row("max_pool2d", {{2, 3, 6, 7}}, d, FN(frost::max_pool2d(x[0], 2)), pooled({2, 2, 2, 2}, true)),
      row("max_pool2d", {{2, 2, 7, 6}}, d, FN(frost::max_pool2d(x[0], 3, {.stride = 2, .padding = 1})),
          pooled({3, 3, 2, 2, 1, 1}, true)),
      row("max_pool2d", {{1, 2, 5, 5}}, d, FN(frost::max_pool2d(x[0], 2, {.ceil_mode = true})),
          pooled({2, 2, 2, 2, 0, 0, 1, 1, true}, true))
          .with_note("ceil_mode: a last window hangs over the edge"),
      row("max_pool2d", {{1, 2, 6, 8}}, d, FN(frost::max_pool2d(x[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true})),
          pooled({3, 3, 2, 2, 1, 1, 1, 1, true}, true))
          .with_note("ceil_mode with padding"),
      row("max_pool2d", {{1, 2, 8, 7}}, d,
          FN(frost::max_pool2d(x[0], {3, 2}, {.stride = {1, 2}, .padding = 1, .dilation = {2, 1}})),
          pooled({3, 2, 1, 2, 1, 1, 2, 1}, true))
          .with_note("dilation"),
      row("max_pool2d", {{2, 4, 5}}, d, FN(frost::max_pool2d(x[0], {2, 3}, {.stride = 1})),
          pooled({2, 3, 1, 1}, true, true))
          .with_note("unbatched input"),
      row("max_pool2d", {{2, 2, 4, 6}}, d, FN(frost::max_pool2d(x[0], 2)), pooled({2, 2, 2, 2}, true)).layout({kT}),
      row("max_pool2d", {{2, 2, 4, 4}}, d, FN(frost::max_pool2d(x[0], 2, {.stride = 1})), pooled({2, 2, 1, 1}, true)).layout({kS}),
      // ---- avg_pool2d ------------------------------------------------------------
      row("avg_pool2d", {{2, 3, 6, 7}}, u, FN(frost::avg_pool2d(x[0], 2)), pooled({2, 2, 2, 2}, false)),
      row("avg_pool2d", {{2, 2, 7, 6}}, u, FN(frost::avg_pool2d(x[0], 3, {.stride = 2, .padding = 1})),
          pooled({3, 3, 2, 2, 1, 1}, false)),
      row("avg_pool2d", {{2, 2, 7, 6}}, u,
          FN(frost::avg_pool2d(x[0], 3, {.stride = 2, .padding = 1, .count_include_pad = false})),
          pooled({3, 3, 2, 2, 1, 1, 1, 1, false, false}, false))
          .with_note("count_include_pad=false"),
      row("avg_pool2d", {{1, 2, 6, 8}}, u, FN(frost::avg_pool2d(x[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true})),
          pooled({3, 3, 2, 2, 1, 1, 1, 1, true, true}, false))
          .with_note("ceil_mode: the hanging window counts padding but not past it"),
      row("avg_pool2d", {{1, 2, 6, 8}}, u,
          FN(frost::avg_pool2d(x[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false})),
          pooled({3, 3, 2, 2, 1, 1, 1, 1, true, false}, false))
          .with_note("ceil_mode, count_include_pad=false"),
      row("avg_pool2d", {{2, 2, 5, 5}}, u, FN(frost::avg_pool2d(x[0], {2, 3}, {.stride = {1, 2}, .padding = 1, .divisor_override = 4})),
          pooled({2, 3, 1, 2, 1, 1, 1, 1, false, true, 4}, false))
          .with_note("divisor_override"),
      row("avg_pool2d", {{3, 4, 4}}, u, FN(frost::avg_pool2d(x[0], 2, {.stride = 1})), pooled({2, 2, 1, 1}, false, true))
          .with_note("unbatched input"),
      row("avg_pool2d", {{2, 2, 4, 6}}, u, FN(frost::avg_pool2d(x[0], 2)), pooled({2, 2, 2, 2}, false)).layout({kE}),
      row("avg_pool2d", {{1, 2, 3, 70}}, u, FN(frost::avg_pool2d(x[0], {2, 66}, {.stride = {1, 2}, .padding = {1, 0}})),
          pooled({2, 66, 1, 2, 1, 0}, false))
          .with_note("windows 66 wide: each row's run in vector partial sums"),
      // ---- adaptive_avg_pool2d ---------------------------------------------------
      row("adaptive_avg_pool2d", {{2, 3, 7, 5}}, u, FN(frost::adaptive_avg_pool2d(x[0], {3, 2})),
          REF(adaptive_ref(x[0], 3, 2)))
          .with_note("overlapping bins"),
      row("adaptive_avg_pool2d", {{2, 3, 6, 4}}, u, FN(frost::adaptive_avg_pool2d(x[0], {3, 2})),
          REF(adaptive_ref(x[0], 3, 2)))
          .with_note("equal bins: avg_pool2d"),
      row("adaptive_avg_pool2d", {{2, 3, 5, 4}}, u, FN(frost::adaptive_avg_pool2d(x[0], 1)), REF(adaptive_ref(x[0], 1, 1)))
          .layout({kT})
          .with_note("global"),
      row("adaptive_avg_pool2d", {{2, 2, 8, 9}}, u, FN(frost::adaptive_avg_pool2d(x[0], 1)), REF(adaptive_ref(x[0], 1, 1)))
          .with_note("global over 72 values: one run in vector partial sums"),
      row("adaptive_avg_pool2d", {{2, 3, 4}}, u, FN(frost::adaptive_avg_pool2d(x[0], {5, 3})),
          [](const std::vector<Arr>& x) { return unbatched(adaptive_ref(batched(x[0]), 5, 3)); })
          .with_note("unbatched, larger than the input"),
  };
}

TEST_CASE("conv/pool table: forward in double matches the naive loops") { check_forward_double(conv_pool_rows()); }

TEST_CASE("conv/pool: the Winograd paths (3x3, stride 1, 16+ channels) and their gradients match the naive loops") {
  struct Case {
    Shape x, w;
    std::int64_t pad, groups;
    bool f4;  // the forward pass takes F(4x4, 3x3), not F(2x2, 3x3)
    const char* what;
  };
  const Case cases[] = {
      {{2, 16, 6, 7}, {16, 16, 3, 3}, 1, 1, false, "odd output width"},
      {{5, 16, 5, 4}, {24, 16, 3, 3}, 0, 1, false, "odd output height, one chunk of images"},
      {{7, 16, 16, 16}, {16, 16, 3, 3}, 1, 1, true, "several chunks of images, a short last one"},
      {{17, 16, 16, 16}, {16, 16, 3, 3}, 1, 1, true, "several weight-gradient chunks, a short last one"},
      {{2, 32, 6, 6}, {32, 16, 3, 3}, 1, 2, false, "groups"},
      {{2, 17, 6, 6}, {19, 17, 3, 3}, 1, 1, false, "323 filters: a short last block of the weight transforms"},
      {{1, 16, 4, 5}, {16, 16, 3, 3}, 2, 1, false, "padding 2"},
      {{6, 16, 13, 11}, {20, 16, 3, 3}, 0, 1, true, "F(4x4): outputs 11x9, not a multiple of the tile"},
      {{5, 32, 10, 12}, {34, 16, 3, 3}, 2, 2, true, "F(4x4): groups, padding 2"},
      {{1, 16, 30, 29}, {16, 16, 3, 3}, 1, 1, true, "F(4x4): one image, 30x29"},
      {{4, 16, 9, 18}, {16, 16, 3, 3}, 1, 1, true, "F(4x4): 5 tiles a row (the row's last copy overlaps)"},
  };
  std::mt19937_64 rng(17);
  for (const auto& c : cases) {
    INFO(c.what);
    const Arr x{c.x, uniform(-2, 2)(c.x.numel(), rng)}, w{c.w, uniform(-1, 1)(c.w.numel(), rng)};
    const Arr b{Shape{c.w[0]}, uniform(-1, 1)(c.w[0], rng)};
    const Arr want = conv2d_ref(x, w, &b, sym(1, c.pad, 1, c.groups));
    frost::Conv2dParams p = frost::detail::conv_params(frost::detail::ConvGeom{1, 1, c.pad, c.pad, 1, 1, c.groups}, c.x,
                                                       c.w, want.shape[2], want.shape[3]);
    CHECK(frost::cpu::conv_detail::use_winograd(p));
    CHECK(frost::cpu::conv_detail::use_winograd4(p) == c.f4);
    const frost::Conv2dOptions o{.padding = c.pad, .groups = c.groups};
    const auto yd = frost::conv2d(TD::from(x.v, x.shape), TD::from(w.v, w.shape), TD::from(b.v, b.shape), o);
    CHECK(mismatch(yd, want, 1e-11, 1e-11, "double").empty());
    auto f = [](const std::vector<double>& v, const Shape& s) { return TF::from(std::vector<float>(v.begin(), v.end()), s); };
    CHECK(mismatch(frost::conv2d(f(x.v, x.shape), f(w.v, w.shape), f(b.v, b.shape), o), want, 2e-4, 1e-4, "float").empty());
    // The fused bias + relu epilogue on the same path.
    Arr relu_want = want;
    for (auto& v : relu_want.v) v = std::max(v, 0.0);
    const auto yr = frost::detail::conv2d_forward(TD::from(x.v, x.shape), TD::from(w.v, w.shape), TD::from(b.v, b.shape),
                                                  frost::detail::ConvGeom{1, 1, c.pad, c.pad, 1, 1, c.groups},
                                                  want.shape[2], want.shape[3], frost::UnaryOp::relu);
    CHECK(mismatch(yr, relu_want, 1e-11, 1e-11, "double, fused relu").empty());
    // The input gradient: a Winograd convolution of dy with the flipped kernel.
    // The weight gradient: dy and x on the same tiles.
    const Arr dy{want.shape, uniform(-1, 1)(want.shape.numel(), rng)};
    const Arr dx_want = conv_transpose2d_ref(dy, w, nullptr, 1, 1, c.pad, c.pad, 0, 0, 1, 1, c.groups);
    const Arr dw_want = conv2d_grad_weight_ref(x, dy, c.w, c.pad, c.groups);
    auto xd = TD::from(x.v, x.shape).requires_grad_();
    auto wd = TD::from(w.v, w.shape).requires_grad_();
    frost::conv2d(xd, wd, TD(), o).backward(TD::from(dy.v, dy.shape));
    CHECK(mismatch(xd.grad(), dx_want, 1e-11, 1e-11, "double input gradient").empty());
    CHECK(mismatch(wd.grad(), dw_want, 1e-11, 1e-11, "double weight gradient").empty());
    auto xf = f(x.v, x.shape).requires_grad_();
    auto wf = f(w.v, w.shape).requires_grad_();
    frost::conv2d(xf, wf, TF(), o).backward(f(dy.v, dy.shape));
    CHECK(mismatch(xf.grad(), dx_want, 2e-4, 1e-4, "float input gradient").empty());
    CHECK(mismatch(wf.grad(), dw_want, 2e-4, 1e-4, "float weight gradient").empty());
  }
}
/// A 3x3 stride-1 convolution with an activation, for the fused paths' tests.
struct ActConvCase {
  Shape x, w;
  std::int64_t pad, groups;
  frost::UnaryOp act;
  const char* what;
};
/// A plain 2x2 stride-2 max pool (floor) of a conv output of shape y.
frost::Pool2dParams pool_2x2(const Shape& y) {
  frost::Pool2dParams q;
  q.batch = y[0], q.channels = y[1], q.in_h = y[2], q.in_w = y[3], q.out_h = y[2] / 2, q.out_w = y[3] / 2;
  q.kernel_h = q.kernel_w = q.stride_h = q.stride_w = 2;
  return q;
}

TEST_CASE("conv/pool: 3x3 convolutions of few channels (the direct kernel) match the naive loops") {
  const ActConvCase cases[] = {
      {{2, 3, 32, 32}, {64, 3, 3, 3}, 1, 1, frost::UnaryOp::relu, "RGB 32x32, relu: whole blocks"},
      {{3, 1, 9, 20}, {13, 1, 3, 3}, 1, 1, frost::UnaryOp::copy, "13 filters (the last block overlaps), 20 columns"},
      {{1, 5, 17, 37}, {9, 5, 3, 3}, 2, 1, frost::UnaryOp::tanh, "padding 2, 39 columns, tanh"},
      {{2, 2, 6, 10}, {8, 2, 3, 3}, 0, 1, frost::UnaryOp::relu, "no padding, one vector of columns"},
  };
  std::mt19937_64 rng(29);
  for (const auto& c : cases) {
    INFO(c.what);
    const Arr x{c.x, uniform(-2, 2)(c.x.numel(), rng)}, w{c.w, uniform(-1, 1)(c.w.numel(), rng)};
    const Arr b{Shape{c.w[0]}, uniform(-1, 1)(c.w[0], rng)};
    Arr want = conv2d_ref(x, w, &b, sym(1, c.pad));
    for (auto& v : want.v) v = frost::fn::unary(c.act, v, 0.0, 0.0);
    const frost::Conv2dParams p = frost::detail::conv_params(frost::detail::ConvGeom{1, 1, c.pad, c.pad, 1, 1, 1}, c.x,
                                                             c.w, want.shape[2], want.shape[3]);
    CHECK(frost::cpu::conv_detail::use_direct_conv<double>(p));
    // Through the backend: the ops' conv2d fuses relu only, plans any activation.
    auto run = [&]<class T>(T) {
      auto cast = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
      const auto xt = cast(x.v), wt = cast(w.v), bt = cast(b.v);
      std::vector<T> y(static_cast<std::size_t>(want.shape.numel()));
      frost::backend_for<T>(frost::Device::cpu())
          .conv2d(p, frost::View<const T>(xt.data(), c.x), frost::View<const T>(wt.data(), c.w), bt.data(),
                  frost::View<T>(y.data(), want.shape), c.act);
      return frost::Tensor<T>::from(y, want.shape);
    };
    CHECK(mismatch(run(0.0), want, 1e-12, 1e-12, "double").empty());
    CHECK(mismatch(run(0.0f), want, 1e-5, 1e-5, "float").empty());
  }
}
/// A fused conv + 2x2 max pool equals the conv then max_pool2d bit for bit
/// (the same sums, pooled), and leaves other pools (3x3, padded) to the
/// caller. conv and fused take (p, [q,] x, w, bias, y, act).
template <class Conv, class Fused>
void check_fused_pool(const ActConvCase& c, std::mt19937_64& rng, Conv&& conv, Fused&& fused) {
  INFO(c.what);
  auto& be = frost::backend_for<double>(frost::Device::cpu());
  const auto x = TD::from(uniform(-2, 2)(c.x.numel(), rng), c.x), w = TD::from(uniform(-1, 1)(c.w.numel(), rng), c.w);
  const auto b = TD::from(uniform(-1, 1)(c.w[0], rng), Shape{c.w[0]});
  const std::int64_t oh = c.x[2] + 2 * c.pad - 2, ow = c.x[3] + 2 * c.pad - 2;
  const frost::Conv2dParams p =
      frost::detail::conv_params(frost::detail::ConvGeom{1, 1, c.pad, c.pad, 1, 1, c.groups}, c.x, c.w, oh, ow);
  const Shape ys{c.x[0], c.w[0], oh, ow}, ps{c.x[0], c.w[0], oh / 2, ow / 2};
  const frost::Pool2dParams q = pool_2x2(ys);
  const frost::View<const double> xv(x.data(), x.shape()), wv(w.data(), w.shape());
  auto y = TD::zeros(ys), want = TD::zeros(ps), got = TD::zeros(ps);
  conv(p, xv, wv, b.data(), frost::View<double>(y.data(), ys), c.act);
  be.max_pool2d(q, frost::View<const double>(y.data(), ys), frost::View<double>(want.data(), ps),
                frost::View<std::int64_t>(nullptr, ps));
  CHECK(fused(p, q, xv, wv, b.data(), frost::View<double>(got.data(), ps), c.act));
  CHECK(got.to_vector() == want.to_vector());
  frost::Pool2dParams q3 = q, qp = q;
  q3.kernel_h = q3.kernel_w = 3;
  qp.pad_h = 1;
  CHECK_FALSE(fused(p, q3, xv, wv, b.data(), frost::View<double>(got.data(), ps), c.act));
  CHECK_FALSE(fused(p, qp, xv, wv, b.data(), frost::View<double>(got.data(), ps), c.act));
}

TEST_CASE("conv/pool: a few-channel 3x3 convolution pools 2x2 in registers, as conv then max_pool2d") {
  const ActConvCase cases[] = {
      {{3, 3, 32, 32}, {64, 3, 3, 3}, 1, 1, frost::UnaryOp::relu, "RGB 32x32, relu"},
      {{2, 2, 23, 37}, {10, 2, 3, 3}, 0, 1, frost::UnaryOp::tanh, "21x35 outputs (floor: 10x17), 10 filters, tanh before the max"},
      {{1, 1, 18, 20}, {8, 1, 3, 3}, 2, 1, frost::UnaryOp::copy, "padding 2"},
      {{1, 16, 20, 20}, {8, 16, 3, 3}, 1, 1, frost::UnaryOp::relu, "16 channels in: not the direct kernel's, so the caller's"},
  };
  std::mt19937_64 rng(31);
  auto& be = frost::backend_for<double>(frost::Device::cpu());
  auto conv = [&](auto&&... a) { be.conv2d(a...); };
  for (const auto& c : cases) {
    if (c.x[1] > 5) {
      const frost::Conv2dParams p =
          frost::detail::conv_params(frost::detail::ConvGeom{1, 1, 1, 1, 1, 1, 1}, c.x, c.w, c.x[2], c.x[3]);
      const auto x = TD::zeros(c.x), w = TD::zeros(c.w);
      auto y = TD::zeros({c.x[0], c.w[0], c.x[2] / 2, c.x[3] / 2});
      CHECK_FALSE(be.conv2d_max_pool(p, pool_2x2({c.x[0], c.w[0], c.x[2], c.x[3]}), frost::View<const double>(x.data(), c.x),
                                     frost::View<const double>(w.data(), c.w), nullptr,
                                     frost::View<double>(y.data(), y.shape()), c.act));
      continue;
    }
    check_fused_pool(c, rng, conv, [&](auto&&... a) { return be.conv2d_max_pool(a...); });
  }
}
TEST_CASE("conv/pool: a prepared F(4x4) convolution pools 2x2 in its output pass, as conv then max_pool2d") {
  const ActConvCase cases[] = {
      {{3, 16, 16, 16}, {24, 16, 3, 3}, 1, 1, frost::UnaryOp::relu, "16x16 outputs, relu"},
      {{2, 16, 13, 11}, {20, 16, 3, 3}, 0, 1, frost::UnaryOp::tanh, "11x9 outputs (floor: 5x4), tanh before the max"},
      {{3, 32, 10, 12}, {34, 16, 3, 3}, 2, 2, frost::UnaryOp::copy, "groups, padding 2"},
      {{1, 64, 16, 16}, {64, 64, 3, 3}, 1, 1, frost::UnaryOp::relu, "one image: filters split over the threads"},
  };
  std::mt19937_64 rng(23);
  auto& be = frost::backend_for<double>(frost::Device::cpu());
  // F(4x4)'s bank of w: what a plan prepares for 8x8+ outputs, one image too.
  auto bank = [&](const frost::Conv2dParams& p, const frost::View<const double>& wv) {
    CHECK(be.conv2d_prepared_shape(p) == Shape{36, wv.shape[0], wv.shape[1]});
    auto u = TD::zeros({36, wv.shape[0], wv.shape[1]});
    be.conv2d_prepare(p, wv, frost::View<double>(u.data(), u.shape()));
    return u;
  };
  auto view = [](const TD& u) { return frost::View<const double>(u.data(), u.shape()); };
  for (const auto& c : cases)
    check_fused_pool(
        c, rng,
        [&](const frost::Conv2dParams& p, const auto& xv, const auto& wv, const double* b, const auto& yv, frost::UnaryOp act) {
          be.conv2d_prepared(p, xv, view(bank(p, wv)), b, yv, act);
        },
        [&](const frost::Conv2dParams& p, const frost::Pool2dParams& q, const auto& xv, const auto& wv, const double* b,
            const auto& yv, frost::UnaryOp act) { return be.conv2d_prepared_max_pool(p, q, xv, view(bank(p, wv)), b, yv, act); });
}

TEST_CASE("conv/pool table: forward in float matches the naive loops") { check_forward_float(conv_pool_rows()); }
TEST_CASE("conv/pool table: frozen plan equals eager") { check_frozen(conv_pool_rows()); }
TEST_CASE("conv/pool table: gradients match finite differences") { check_gradients(conv_pool_rows()); }
TEST_CASE("conv/pool table: second derivatives match finite differences") { check_second_derivatives(conv_pool_rows()); }

}  // namespace frost::test::optable

namespace {

using frost::Shape;
using frost::test::TD;
using frost::test::TF;

/// sin(0.37 i + phase) over the flat index, as tests/reference/conv_pool_reference.py fills inputs.
TD filled(const Shape& s, double phase) {
  std::vector<double> v(static_cast<std::size_t>(s.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i) + phase);
  return TD::from(v, s).requires_grad_();
}
/// cos(0.1 k) over the flat index of a tensor of shape s.
TD cos_weights(const Shape& s) {
  std::vector<double> v(static_cast<std::size_t>(s.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.1 * double(i));
  return TD::from(v, s);
}

/// Checks y's shape, sum(y), sum(y w) and the same two sums of each input's
/// gradient of sum(y w) against PyTorch's (the reference script's line).
void check_torch(const TD& y, const std::vector<TD>& inputs, const Shape& shape, const std::vector<double>& sums) {
  REQUIRE(y.shape() == shape);
  REQUIRE(sums.size() == 2 + 2 * inputs.size());
  const TD loss = (y * cos_weights(y.shape())).sum();
  const auto grads = frost::autograd::grad(std::vector<TD>{loss}, inputs);
  std::vector<double> got{y.sum().item(), loss.item()};
  for (auto& g : grads) {
    got.push_back(g.sum().item());
    got.push_back((g * cos_weights(g.shape())).sum().item());
  }
  for (std::size_t i = 0; i < sums.size(); ++i) {
    INFO("checksum ", i);
    CHECK(got[i] == doctest::Approx(sums[i]).epsilon(1e-10));
  }
}

}  // namespace

TEST_CASE("conv/pool: values match PyTorch") {
  SUBCASE("conv2d with groups, stride, padding and dilation") {
    auto x = filled({2, 4, 7, 6}, 0.1), w = filled({6, 2, 3, 3}, 0.7), b = filled({6}, 1.3);
    check_torch(frost::conv2d(x, w, b, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2}), {x, w, b},
                {2, 6, 4, 6},
                {178.427652150973, -19.0702134480299, -2.5052159174122, -40.3353856657081, -2.48851248106818,
                 -28.4420037487329, -4.08121579419159, -4.73953096764661});
  }
  SUBCASE("conv2d padding same, even kernel, dilation") {
    auto x = filled({2, 3, 6, 7}, 0.2), w = filled({5, 3, 4, 2}, 0.4);
    check_torch(frost::conv2d(x, w, {}, {.padding = "same", .dilation = {1, 3}}), {x, w}, {2, 5, 6, 7},
                {1.28925982105253, 69.8537762252566, -159.713307197531, 256.525368279606, 5.02220458714912,
                 1.33543374118427});
  }
  SUBCASE("conv1d padding same, even kernel") {
    auto x = filled({3, 5, 9}, 0.3), w = filled({4, 5, 4}, 0.9), b = filled({4}, 0.5);
    check_torch(frost::conv1d(x, w, b, {.padding = "same", .dilation = 2}), {x, w, b}, {3, 4, 9},
                {88.0120472082755, 1.85507900790724, 26.5423206005195, 45.4187286885375, 27.5259387058127,
                 5.48075090600026, -9.20402151611746, -8.79365215390749});
  }
  SUBCASE("conv_transpose2d with groups, output_padding and dilation") {
    auto x = filled({2, 4, 3, 4}, 0.6), w = filled({4, 3, 3, 2}, 0.8), b = filled({6}, 0.2);
    check_torch(frost::conv_transpose2d(
                    x, w, b, {.stride = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}, .groups = 2, .dilation = {1, 2}}),
                {x, w, b}, {2, 6, 6, 14},
                {737.766842881648, -1.95512348285886, 115.236183241555, 6.19930188905583, 0.00427160083666367,
                 -13.9511285593639, 2.6737842669407, 1.9145789429795});
  }
  SUBCASE("max_pool2d with ceil_mode and padding, and its indices") {
    auto x = filled({2, 3, 7, 6}, 0.15);
    auto r = frost::max_pool2d_with_indices(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true});
    check_torch(r.values, {x}, {2, 3, 4, 4}, {76.49898277001, 0.95789674324326, -0.74947091897769, -3.74158487446239});
    const auto idx = r.indices.to_vector();
    CHECK(std::vector<std::int64_t>(idx.begin(), idx.begin() + 12) ==
          std::vector<std::int64_t>{6, 3, 4, 5, 19, 21, 21, 23, 19, 21, 21, 23});
    CHECK(r.indices.to<double>().sum().item() == 1994);
  }
  SUBCASE("max_pool2d with dilation, and its indices") {
    auto x = filled({1, 2, 8, 7}, 0.25);
    auto r = frost::max_pool2d_with_indices(x, {3, 2}, {.stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 1}});
    check_torch(r.values, {x}, {1, 2, 6, 4}, {26.1371461652178, -3.24113668145361, -9.49709282444637, -1.39238620555254});
    const auto idx = r.indices.to_vector();
    CHECK(std::vector<std::int64_t>(idx.begin(), idx.begin() + 12) ==
          std::vector<std::int64_t>{21, 22, 24, 26, 0, 2, 4, 20, 21, 37, 38, 40});
    CHECK(r.indices.to<double>().sum().item() == 1304);
  }
  SUBCASE("avg_pool2d: ceil_mode, count_include_pad, divisor_override") {
    auto x = filled({2, 3, 7, 6}, 0.35);
    check_torch(frost::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}), {x},
                {2, 3, 4, 4}, {0.211631172456641, 2.25635653996978, -0.74947091897769, -0.0296956486068768});
    check_torch(frost::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}), {x}, {2, 3, 4, 4},
                {0.145955203711182, 1.32098625208367, -0.397802424614937, -0.0905722494677387});
    check_torch(frost::avg_pool2d(x, {2, 3}, {.stride = {1, 2}, .padding = {1, 1}, .divisor_override = 5}), {x}, {2, 3, 8, 3},
                {0.55017837653296, 2.70374291504108, 9.94234632117836, -5.44526163559957});
  }
  SUBCASE("adaptive_avg_pool2d, down and up") {
    auto x = filled({2, 3, 7, 5}, 0.45);
    check_torch(frost::adaptive_avg_pool2d(x, {3, 2}), {x}, {2, 3, 3, 2},
                {-0.877642535499559, 0.217889192169093, -3.47313693966256, -1.52627233350908});
    check_torch(frost::adaptive_avg_pool2d(x, {9, 4}), {x}, {2, 3, 9, 4},
                {33.7919768735846, 1.04563084535085, 4.77156318693532, 97.0379148914159});
  }
}

namespace {

/// gradcheck of (inputs..., v) -> d/d(inputs) <f(inputs), v> taken with
/// create_graph: differentiates the gradient ops w.r.t. everything,
/// including the incoming gradient v (the paths a fixed weighting misses).
bool double_backward_matches(const std::function<TD(const std::vector<TD>&)>& f, std::vector<TD> inputs) {
  const std::size_t n = inputs.size();
  {
    frost::NoGradGuard ng;
    std::vector<TD> plain;
    for (auto& x : inputs) plain.push_back(x.detach());
    frost::Generator g(99);
    inputs.push_back(TD::rand(f(plain).shape(), &g) - 0.5);
  }
  auto first = [&](const std::vector<TD>& xs_in) {
    frost::AutoGradMode on(true);  // the finite differences call this under NoGradGuard
    std::vector<TD> xs;
    for (auto& t : xs_in) xs.push_back(t.requires_grad() ? t : t.detach().requires_grad_());
    TD keep = TD::zeros({});
    for (auto& x : xs) keep = keep + x.sum() * 0.0;
    const std::vector<TD> wrt(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n));
    const TD y = f(wrt);
    const auto gs = frost::autograd::grad(std::vector<TD>{y}, wrt, std::vector<TD>{xs[n]}, true, true, true);
    std::vector<TD> flat;
    for (std::size_t i = 0; i < n; ++i) flat.push_back(gs[i].defined() ? gs[i].reshape({-1}) : TD::zeros({wrt[i].numel()}));
    return frost::cat(flat) + keep;
  };
  return frost::test::gradcheck(first, inputs);
}

}  // namespace

TEST_CASE("conv/pool: double backward through the gradient ops, incoming gradient included") {
  frost::Generator g(5);
  auto r = [&](const Shape& s) { return TD::rand(s, &g) * 2.0 - 1.0; };
  CHECK(double_backward_matches(
      [](const std::vector<TD>& x) { return frost::conv2d(x[0], x[1], x[2], {.stride = 2, .padding = {1, 0}, .groups = 2}); },
      {r({2, 4, 5, 4}), r({4, 2, 3, 2}), r({4})}));
  CHECK(double_backward_matches(
      [](const std::vector<TD>& x) { return frost::conv2d(x[0], x[1], {}, {.padding = "same", .dilation = {2, 1}}); },
      {r({1, 2, 4, 5}), r({3, 2, 2, 4})}));
  CHECK(double_backward_matches([](const std::vector<TD>& x) { return frost::conv2d(x[0], x[1]); },
                                {r({2, 3, 3, 3}), r({2, 3, 1, 1})}));
  CHECK(double_backward_matches(
      [](const std::vector<TD>& x) {
        return frost::conv_transpose2d(x[0], x[1], x[2], {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
      },
      {r({2, 4, 3, 3}), r({4, 1, 3, 3}), r({2})}));
  CHECK(double_backward_matches([](const std::vector<TD>& x) { return frost::conv1d(x[0], x[1], {}, {.stride = 2}); },
                                {r({2, 2, 7}), r({3, 2, 3})}));
  const auto distinct = [&](const Shape& s) {
    std::vector<double> v(static_cast<std::size_t>(s.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.7 * double(i)) * 3 + 0.01 * double(i);
    return TD::from(v, s);
  };
  CHECK(double_backward_matches(
      [](const std::vector<TD>& x) { return frost::max_pool2d(x[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true}); },
      {distinct({2, 2, 6, 5})}));
  CHECK(double_backward_matches(
      [](const std::vector<TD>& x) {
        return frost::avg_pool2d(x[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
      },
      {r({2, 2, 6, 5})}));
  CHECK(double_backward_matches([](const std::vector<TD>& x) { return frost::adaptive_avg_pool2d(x[0], {2, 3}); },
                                {r({1, 2, 5, 7})}));
}

TEST_CASE("conv/pool: batches split across threads match image-by-image results") {
  // Large enough for the threaded paths (images on several threads, per-thread
  // weight-gradient sums); each image alone takes the single-image path.
  frost::Generator g(11);
  for (bool one_by_one : {false, true}) {
    INFO((one_by_one ? "1x1 kernel" : "3x3 kernel"));
    const auto x = (TF::rand({5, 16, 24, 24}, &g) - 0.5f).requires_grad_();
    const auto w = (TF::rand({32, 8, one_by_one ? 1 : 3, one_by_one ? 1 : 3}, &g) - 0.5f).requires_grad_();
    const auto b = (TF::rand({32}, &g) - 0.5f).requires_grad_();
    const frost::Conv2dOptions o{.padding = one_by_one ? 0 : 1, .groups = 2};
    const auto gy = TF::rand({5, 32, 24, 24}, &g);
    auto y = frost::conv2d(x, w, b, o);
    y.backward(gy);
    std::vector<TF> ys, dxs;
    TF dw = TF::zeros(w.shape()), db = TF::zeros(b.shape());
    for (std::int64_t n = 0; n < 5; ++n) {
      const auto xn = x.detach().narrow(0, n, 1).requires_grad_();
      const auto wn = w.detach().requires_grad_(), bn = b.detach().requires_grad_();
      auto yn = frost::conv2d(xn, wn, bn, o);
      yn.backward(gy.narrow(0, n, 1));
      ys.push_back(yn.detach());
      dxs.push_back(xn.grad());
      dw = dw + wn.grad();
      db = db + bn.grad();
    }
    frost::test::check_close(y.detach(), frost::cat(ys), 1e-5, 1e-5);
    frost::test::check_close(x.grad(), frost::cat(dxs), 1e-5, 1e-5);
    frost::test::check_close(w.grad(), dw, 1e-4, 1e-5);
    frost::test::check_close(b.grad(), db, 1e-4, 1e-5);
  }
}

TEST_CASE("conv/pool: the fused bias + relu epilogue equals relu after the conv") {
  frost::Generator g(3);
  const auto x = TF::randn({3, 4, 6, 6}, &g), w = TF::randn({5, 4, 3, 3}, &g), b = TF::randn({5}, &g);
  const frost::detail::ConvGeom geom{1, 1, 1, 1, 1, 1, 1};
  const auto plain = frost::conv2d(x, w, b, {.padding = 1}).relu();
  frost::test::check_close(frost::detail::conv2d_forward(x, w, b, geom, 6, 6, frost::UnaryOp::relu), plain);
  // Under autograd the relu is recorded as its own op, so its gradient flows.
  const auto wg = w.detach().requires_grad_();
  const auto y = frost::detail::conv2d_forward(x, wg, b, geom, 6, 6, frost::UnaryOp::relu);
  frost::test::check_close(y.detach(), plain);
  CHECK(std::string(y.grad_fn_name()) == "relu");
  y.sum().backward();
  CHECK(wg.grad().defined());
}

TEST_CASE("conv/pool: max_pool2d propagates NaN and the backward adds at repeated indices") {
  const double nan = std::nan("");
  auto x = TD::from({1, nan, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}).requires_grad_();
  auto r = frost::max_pool2d_with_indices(x, 2, {.stride = 1});
  const auto v = r.values.to_vector();
  CHECK(std::isnan(v[0]));
  CHECK(std::isnan(v[1]));
  CHECK(v[3] == 9);
  CHECK(r.indices.to_vector() == std::vector<std::int64_t>{1, 1, 7, 8});
  {  // the 2x2 / stride-2 inference path sees the NaN too
    frost::NoGradGuard ng;
    const auto y = frost::max_pool2d(TD::from({1, 2, nan, 4, 5, 6, 7, 8}, {1, 1, 2, 4}), 2).to_vector();
    CHECK(y[0] == 6);
    CHECK(std::isnan(y[1]));
  }
  // Overlapping windows pick the same input: its gradient is the sum.
  auto x2 = TD::from({1, 2, 3, 4, 9, 5, 6, 7, 8}, {1, 3, 3}).requires_grad_();
  frost::max_pool2d(x2, 2, {.stride = 1}).sum().backward();
  frost::test::check_close(x2.grad(), {0, 0, 0, 0, 4, 0, 0, 0, 0});
}

namespace {

/// `f` throws frost::Error whose message contains every part.
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> parts) {
  bool threw = false;
  try {
    f();
  } catch (const frost::Error& e) {
    threw = true;
    const std::string msg = e.what();
    INFO("message: ", msg);
    for (const char* p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing \"", p, "\"");
  }
  CHECK_MESSAGE(threw, "no frost::Error was thrown");
}

}  // namespace

TEST_CASE("conv/pool: bad arguments name the op, the shapes and what was expected") {
  const auto x = TF::zeros({2, 3, 5, 5});
  const auto w = TF::zeros({4, 3, 3, 3});
  expect_error([&] { frost::conv2d(TF::zeros({3, 5}), w); }, {"frost::conv2d", "4-D input", "[3, 5]"});
  expect_error([&] { frost::conv2d(x, TF::zeros({4, 3, 3})); }, {"frost::conv2d", "4-D weight", "[4, 3, 3]"});
  expect_error([&] { frost::conv2d(x, TF::zeros({4, 2, 3, 3})); },
               {"frost::conv2d", "weight of shape [4, 2, 3, 3]", "expects 2 input channels", "input of shape [2, 3, 5, 5]", "has 3"});
  expect_error([&] { frost::conv2d(x, TF::zeros({4, 1, 3, 3}), {}, {.groups = 2}); },
               {"frost::conv2d", "in_channels (3", "[2, 3, 5, 5]", "divisible by groups (2)"});
  expect_error([&] { frost::conv2d(TF::zeros({2, 4, 5, 5}), TF::zeros({3, 2, 3, 3}), {}, {.groups = 2}); },
               {"out_channels (3", "[3, 2, 3, 3]", "divisible by groups (2)"});
  expect_error([&] { frost::conv2d(x, TF::zeros({4, 3, 7, 3})); },
               {"frost::conv2d", "kernel (7 x 3", "larger than the padded input (5 x 5)", "[2, 3, 5, 5]", "[4, 3, 7, 3]"});
  expect_error([&] { frost::conv2d(x, w, {}, {.dilation = 3}); }, {"spanning 7 x 7", "padded input (5 x 5)"});
  expect_error([&] { frost::conv2d(x, w, TF::zeros({3})); }, {"bias of shape [3]", "out_channels 4", "expected shape [4]"});
  expect_error([&] { frost::conv2d(x, w, {}, {.stride = 2, .padding = "same"}); }, {"same", "stride 1", "(2, 2)"});
  expect_error([&] { frost::conv2d(x, w, {}, {.stride = 0}); }, {"frost::conv2d", "stride must be positive"});
  expect_error([&] { frost::conv2d(x, w, {}, {.padding = -1}); }, {"frost::conv2d", "padding must be non-negative"});
  expect_error([&] { frost::conv2d(x, w, {}, {.groups = 0}); }, {"groups must be positive"});
  expect_error([&] { frost::conv2d(x, w, {}, {.padding = "full"}); }, {"padding", "\"full\""});
  expect_error([&] { frost::conv2d(x, TF()); }, {"frost::conv2d", "undefined"});

  expect_error([&] { frost::conv1d(TF::zeros({2, 3, 5, 5}), TF::zeros({4, 3, 3})); }, {"frost::conv1d", "3-D input"});
  expect_error([&] { frost::conv1d(TF::zeros({2, 3, 5}), TF::zeros({4, 3, 7})); },
               {"frost::conv1d", "kernel (7", "larger than the padded input (5)", "[2, 3, 5]", "[4, 3, 7]"});
  expect_error([&] { frost::conv1d(TF::zeros({2, 3, 5}), TF::zeros({4, 2, 3})); },
               {"frost::conv1d", "[4, 2, 3]", "expects 2 input channels", "[2, 3, 5]"});
  expect_error([&] { frost::conv1d(TF::zeros({2, 3, 5}), TF::zeros({4, 3, 3}), {}, {.padding = {1, 2}}); },
               {"frost::conv1d", "padding is one number"});

  expect_error([&] { frost::conv_transpose2d(x, TF::zeros({4, 2, 3, 3})); },
               {"frost::conv_transpose2d", "[4, 2, 3, 3]", "expects 4 input channels", "[2, 3, 5, 5]", "has 3"});
  expect_error([&] { frost::conv_transpose2d(x, TF::zeros({3, 2, 3, 3}), {}, {.stride = 2, .output_padding = 2}); },
               {"frost::conv_transpose2d", "output_padding (2, 2)", "smaller than the stride (2, 2) or the dilation (1, 1)"});
  expect_error([&] { frost::conv_transpose2d(x, TF::zeros({3, 2, 3, 3}), {}, {.padding = 4}); },
               {"frost::conv_transpose2d", "output would be", "at least 1 x 1"});
  expect_error([&] { frost::conv_transpose2d(x, TF::zeros({3, 2, 3, 3}), TF::zeros({3})); },
               {"bias of shape [3]", "out_channels 2"});

  expect_error([&] { frost::max_pool2d(TF::zeros({5, 5}), 2); }, {"frost::max_pool2d", "4-D input", "[5, 5]"});
  expect_error([&] { frost::max_pool2d(x, 3, {.padding = 2}); }, {"frost::max_pool2d", "padding (2, 2)", "half the kernel size (3, 3)"});
  expect_error([&] { frost::max_pool2d(x, 7); }, {"frost::max_pool2d", "output would be", "[2, 3, 5, 5]", "too small"});
  expect_error([&] { frost::max_pool2d(x, 0); }, {"frost::max_pool2d", "kernel size must be positive"});
  expect_error([&] { frost::max_pool2d(x, 2, {.dilation = 0}); }, {"dilation must be positive"});
  expect_error([&] { frost::max_pool2d(TF::zeros({2, 3, 0, 5}), 2); }, {"non-empty", "[2, 3, 0, 5]"});
  expect_error([&] { frost::avg_pool2d(x, 2, {.stride = 0}); }, {"frost::avg_pool2d", "stride must be positive"});
  expect_error([&] { frost::avg_pool2d(x, 2, {.divisor_override = 0}); }, {"frost::avg_pool2d", "divisor_override"});
  expect_error([&] { frost::avg_pool2d(x, 2, {.padding = 2}); }, {"frost::avg_pool2d", "half the kernel size"});
  expect_error([&] { frost::adaptive_avg_pool2d(x, {0, 2}); }, {"frost::adaptive_avg_pool2d", "(0, 2)"});
  expect_error([&] { frost::adaptive_avg_pool2d(TF::zeros({4, 5}), 2); }, {"frost::adaptive_avg_pool2d", "[4, 5]"});
}
