// Per-channel affine maps after a convolution or linear layer fold into its
// weights: evaluation batch norm (y = x s + t with s = w / sqrt(var + eps),
// t = b - mean s) and constant mul / add / sub / div by a per-channel or
// scalar constant. Computed in double from the exact constants, cast back
// once. A batch norm that cannot fold (no conv/linear right before it, or its
// input is used elsewhere) is prepared as one scale-and-shift step.
#pragma once
#include <cmath>

#include "common.hpp"

namespace frost::jit::passes {

/// conv2d / linear without a fused activation, writing one whole buffer, with constant weights.
inline bool affine_producer(const Graph& g, const Step& s) {
  if (s.kind != StepKind::conv2d && s.kind != StepKind::linear) return false;
  if (static_cast<UnaryOp>(s.op) != UnaryOp::copy || (s.kind == StepKind::linear && s.i0 != 0)) return false;
  const Slot& w = s.in[1];
  if (!is_constant(g, w.buf) || !w.dense()) return false;
  if (s.in[2].buf >= 0 && (!is_constant(g, s.in[2].buf) || s.in[2].strides[0] != 1)) return false;
  const Buffer& y = g.buffers[static_cast<std::size_t>(s.out[0].buf)];
  return s.out[0].covers(y.numel);
}

/// Value of per-channel operand `c` for channel j (c seen against an [N, C, ...] window).
inline double channel_value(const std::vector<double>& cv, const Slot& c, std::int64_t j) {
  const std::int64_t stride = c.shape.ndim() > 1 ? c.strides[1] : 0;
  return cv[static_cast<std::size_t>(c.offset + j * stride)];
}

/// Producer `p`'s output becomes (y * scale + shift) per output channel.
inline void fold_into(FreezeState& st, Step& p, const std::vector<double>& scale, const std::vector<double>& shift) {
  Graph& g = st.g;
  const std::int64_t c = static_cast<std::int64_t>(scale.size());
  // The weight's own window only: it may be a part of its buffer (W[:4] of
  // a parameter W), whose other rows are not this step's channels.
  const Slot wslot = p.in[1];
  const auto all = constant_values(st, wslot.buf);
  std::vector<double> w(all.begin() + wslot.offset, all.begin() + wslot.offset + wslot.numel());
  const std::int64_t per = wslot.numel() / c;
  for (std::int64_t o = 0; o < c; ++o)
    for (std::int64_t i = 0; i < per; ++i) w[static_cast<std::size_t>(o * per + i)] *= scale[static_cast<std::size_t>(o)];
  std::vector<double> bias(static_cast<std::size_t>(c), 0.0);
  if (p.in[2].buf >= 0) {
    const auto bv = constant_values(st, p.in[2].buf);
    for (std::int64_t o = 0; o < c; ++o) bias[static_cast<std::size_t>(o)] = bv[static_cast<std::size_t>(p.in[2].offset + o)];
  }
  for (std::int64_t o = 0; o < c; ++o)
    bias[static_cast<std::size_t>(o)] = bias[static_cast<std::size_t>(o)] * scale[static_cast<std::size_t>(o)] + shift[static_cast<std::size_t>(o)];
  const DType dt = g.buffers[static_cast<std::size_t>(wslot.buf)].dtype;
  const std::string base = g.buffers[static_cast<std::size_t>(wslot.buf)].name;
  const int wb = add_constant(st, dt, std::move(w), base + "'");
  const int bb = add_constant(st, dt, std::move(bias), base + "'.bias");
  p.in[1] = Slot{wb, 0, wslot.shape, wslot.strides};  // dense: its strides are the new buffer's
  p.in[2] = Slot{bb, 0, Shape{c}, Shape{1}};
}

/// Scale and shift of an evaluation batch norm step (in = x, mean, var, weight, bias).
inline void batch_norm_affine(const FreezeState& st, const Step& m, std::vector<double>& scale, std::vector<double>& shift) {
  const Graph& g = st.g;
  for (int i = 1; i <= 2; ++i)
    FROST_CHECK(is_constant(g, m.in[static_cast<std::size_t>(i)].buf), "frost::jit::freeze: batch_norm's running ",
                i == 1 ? "mean" : "var", " is not a constant of the module (freeze needs evaluation statistics)");
  const std::int64_t c = m.in[1].numel();
  auto at = [&](const Slot& s, const std::vector<double>& v, std::int64_t j) {
    return v[static_cast<std::size_t>(s.offset + j * s.strides[0])];
  };
  const auto mean = constant_values(st, m.in[1].buf), var = constant_values(st, m.in[2].buf);
  std::vector<double> w, b;
  if (m.in[3].buf >= 0) {
    FROST_CHECK(is_constant(g, m.in[3].buf), "frost::jit::freeze: batch_norm's weight is not a constant");
    w = constant_values(st, m.in[3].buf);
  }
  if (m.in[4].buf >= 0) {
    FROST_CHECK(is_constant(g, m.in[4].buf), "frost::jit::freeze: batch_norm's bias is not a constant");
    b = constant_values(st, m.in[4].buf);
  }
  scale.assign(static_cast<std::size_t>(c), 0.0);
  shift.assign(static_cast<std::size_t>(c), 0.0);
  for (std::int64_t j = 0; j < c; ++j) {
    double s = 1.0 / std::sqrt(at(m.in[2], var, j) + m.p0);
    if (!w.empty()) s *= at(m.in[3], w, j);
    scale[static_cast<std::size_t>(j)] = s;
    shift[static_cast<std::size_t>(j)] = (b.empty() ? 0.0 : at(m.in[4], b, j)) - at(m.in[1], mean, j) * s;
  }
}

/// Whether step `m` applies a per-channel affine map to buffer `x`; fills scale and shift.
inline bool affine_consumer(const FreezeState& st, const Step& m, int x, std::int64_t c, std::vector<double>& scale,
                            std::vector<double>& shift) {
  const Graph& g = st.g;
  if (m.out.size() != 1 || m.out[0].buf < 0) return false;
  const Buffer& ob = g.buffers[static_cast<std::size_t>(m.out[0].buf)];
  if (!m.out[0].covers(ob.numel) || m.in.empty() || m.in[0].buf < 0) return false;
  scale.assign(static_cast<std::size_t>(c), 1.0);
  shift.assign(static_cast<std::size_t>(c), 0.0);
  if (m.kind == StepKind::batch_norm && m.i0 == 0 && m.in[0].buf == x && m.in[0].dense()) {
    batch_norm_affine(st, m, scale, shift);
    return true;
  }
  if (m.kind == StepKind::unary && m.in[0].buf == x && m.in[0].dense()) {
    const auto op = static_cast<UnaryOp>(m.op);
    if (op == UnaryOp::mul_scalar) scale.assign(static_cast<std::size_t>(c), m.p0);
    else if (op == UnaryOp::add_scalar) shift.assign(static_cast<std::size_t>(c), m.p0);
    else return false;
    return true;
  }
  if (m.kind != StepKind::binary) return false;
  const auto op = static_cast<BinaryOp>(m.op);
  const bool x_first = m.in[0].buf == x && m.in[0].dense();
  const bool x_second = m.in[1].buf == x && m.in[1].dense() && (op == BinaryOp::mul || op == BinaryOp::add);
  if (!(x_first || x_second) || m.in[0].buf == m.in[1].buf) return false;
  const Slot& cs = x_first ? m.in[1] : m.in[0];
  if (!is_constant(g, cs.buf) || !per_channel(cs, m.out[0].shape)) return false;
  const auto cv = constant_values(st, cs.buf);
  for (std::int64_t j = 0; j < c; ++j) {
    const double v = channel_value(cv, cs, j);
    switch (op) {
      case BinaryOp::mul: scale[static_cast<std::size_t>(j)] = v; break;
      case BinaryOp::div: scale[static_cast<std::size_t>(j)] = 1.0 / v; break;
      case BinaryOp::add: shift[static_cast<std::size_t>(j)] = v; break;
      case BinaryOp::sub: shift[static_cast<std::size_t>(j)] = -v; break;
      default: return false;
    }
  }
  return true;
}

/// Folds batch norm and constant scale/shift into the conv/linear before them; prepares the rest.
inline void fold_affine(FreezeState& st, bool fold = true) {
  Graph& g = st.g;
  int n_bn = 0, n_const = 0;
  if (fold) rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    Step& p = g.steps[k];
    if (!affine_producer(g, p)) return false;
    const int x = p.out[0].buf;
    const auto& rd = u.readers[static_cast<std::size_t>(x)];
    if (rd.empty() || !u.single_use(x, static_cast<int>(k), rd[0])) return false;
    const std::size_t mi = static_cast<std::size_t>(rd[0]);
    const Step& m = g.steps[mi];
    const std::int64_t c = p.out[0].shape[1];
    std::vector<double> scale, shift;
    if (m.out.empty() || m.out[0].shape != p.out[0].shape || !affine_consumer(st, m, x, c, scale, shift)) return false;
    const bool bn = m.kind == StepKind::batch_norm;
    fold_into(st, p, scale, shift);
    p.out[0] = m.out[0];
    p.note += std::string(p.note.empty() ? "" : ", ") + (bn ? "batch norm folded" : "constant scale/shift folded");
    (bn ? n_bn : n_const)++;
    erase_step(g, mi);
    return true;
  });
  int n_prepared = 0;
  for (auto& m : g.steps) {
    if (m.kind != StepKind::batch_norm || m.i0 != 0) continue;
    std::vector<double> scale, shift;
    batch_norm_affine(st, m, scale, shift);
    const DType dt = m.dtype;
    const std::int64_t c = static_cast<std::int64_t>(scale.size());
    const int sb = add_constant(st, dt, std::move(scale), "bn_scale");
    const int tb = add_constant(st, dt, std::move(shift), "bn_shift");
    m.in = {m.in[0], Slot{sb, 0, Shape{c}, Shape{1}}, Slot{tb, 0, Shape{c}, Shape{1}}};
    m.i0 = 1;
    m.note = "not foldable: one scale-and-shift step";
    ++n_prepared;
  }
  st.report.push_back("batch norm folding: " + std::to_string(n_bn) + " folded into conv/linear, " +
                      std::to_string(n_prepared) + " left as scale-and-shift");
  st.report.push_back("constant add/mul folding: " + std::to_string(n_const) + " folded into conv/linear");
}

}  // namespace frost::jit::passes
