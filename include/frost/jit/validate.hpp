// Checks that a plan's graph is safe to run: every window lies inside its
// buffer, has the dtype its kernel reads, and every step's geometry is what
// its kernel assumes. Plan<T>::load runs it on every file, so a corrupt or
// hostile plan is a frost::Error before any kernel touches memory.
#pragma once
#include <algorithm>
#include <string>

#include "../backend/cpu/quantized_linear.hpp"
#include "graph.hpp"

namespace frost::jit::detail {

template <class... A>
[[noreturn]] void invalid(const std::string& source, std::size_t step, const A&... parts) {
  frost::detail::fail(source, ": step ", step, ": ", parts...);
}

struct Validator {
  const Graph& g;
  const std::string& source;
  bool traced = false;  // a traced graph (batch norm not yet prepared), not a plan
  std::size_t k = 0;    // the step being checked

  const Buffer& buffer(int b) const { return g.buffers[static_cast<std::size_t>(b)]; }

  /// `s` lies inside its buffer and holds `dt`; absent (-1) only when allowed or empty.
  void slot(const Slot& s, DType dt, bool optional = false) const {
    if (s.shape.ndim() != s.strides.ndim()) invalid(source, k, "a window has ", s.shape.ndim(), " extents but ", s.strides.ndim(), " strides");
    for (int d = 0; d < s.shape.ndim(); ++d)
      if (s.shape[d] < 0 || s.shape[d] > kMaxPlanElements || s.strides[d] < 0 || s.strides[d] > kMaxPlanElements)
        invalid(source, k, "a window has a negative or huge extent or stride (shape ", s.shape.str(), ", strides ", s.strides.str(), ")");
    if (s.buf < 0) {
      if (s.buf != -1 || !(optional || s.numel() == 0)) invalid(source, k, "a required operand has no buffer");
      return;
    }
    if (static_cast<std::size_t>(s.buf) >= g.buffers.size()) invalid(source, k, "buffer ", s.buf, " does not exist");
    const Buffer& b = buffer(s.buf);
    if (b.dtype != dt) invalid(source, k, "reads buffer ", s.buf, " (", dtype_name(b.dtype), ") as ", dtype_name(dt));
    if (s.numel() == 0) return;
    std::int64_t last = s.offset;
    for (int d = 0; d < s.shape.ndim(); ++d) last += (s.shape[d] - 1) * s.strides[d];
    if (s.offset < 0 || last >= b.numel)
      invalid(source, k, "window (offset ", s.offset, ", shape ", s.shape.str(), ", strides ", s.strides.str(),
              ") reaches past buffer ", s.buf, " of ", b.numel, " elements");
  }
  void writes(const Slot& s) const {
    if (s.buf >= 0 && static_cast<std::size_t>(s.buf) < g.buffers.size() && buffer(s.buf).kind != BufferKind::intermediate)
      invalid(source, k, "writes into buffer ", s.buf, ", an input or a constant");
  }
  void dense(const Slot& s, const Shape& want, const char* what) const {
    if (s.shape != want || !s.dense()) invalid(source, k, what, " must be dense ", want.str(), ", got ", s.shape.str());
  }
  static Shape leading(const Shape& s, int n) {
    Shape r;
    for (int d = 0; d < n && d < s.ndim(); ++d) r.push_back(s[d]);
    return r;
  }
  void same(const Shape& a, const Shape& b) const {
    if (a != b) invalid(source, k, "shapes ", a.str(), " and ", b.str(), " must match");
  }
  /// idx has a's rank and fits inside a in every dim but `dim` (the indexed one).
  void within(const Shape& idx, const Shape& a, int dim, const char* what, const char* of) const {
    if (idx.ndim() != a.ndim()) invalid(source, k, what, " ", idx.str(), " must have the ", of, "'s rank (", a.str(), ")");
    for (int d = 0; d < a.ndim(); ++d)
      if (d != dim && idx[d] > a[d]) invalid(source, k, what, " ", idx.str(), " exceeds the ", of, " ", a.str(), " at dim ", d);
  }
  void count(const Step& s, std::size_t n_in, std::size_t n_out) const {
    if (s.in.size() != n_in || s.out.size() != n_out)
      invalid(source, k, step_kind_name(s.kind), " takes ", n_in, " inputs and ", n_out, " outputs, got ", s.in.size(),
              " and ", s.out.size());
  }
  void op_below(int op, int n) const {
    if (op < 0 || op >= n) invalid(source, k, "op code ", op, " is out of range");
  }

  void conv(const Step& s) const {
    const Conv2dParams& p = s.conv;
    const bool bad = p.batch < 0 || p.in_channels < 1 || p.out_channels < 1 || p.groups < 1 || p.in_channels % p.groups ||
                     p.out_channels % p.groups || p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 ||
                     p.dilation_h < 1 || p.dilation_w < 1 || p.pad_h < 0 || p.pad_w < 0 || p.in_h < 0 || p.in_w < 0 ||
                     p.out_h < 0 || p.out_w < 0;
    if (bad) invalid(source, k, "convolution parameters out of range");
    const Shape x{p.batch, p.in_channels, p.in_h, p.in_w}, w{p.out_channels, p.in_channels / p.groups, p.kernel_h, p.kernel_w},
        y{p.batch, p.out_channels, p.out_h, p.out_w};
    if (s.kind == StepKind::conv2d) {
      count(s, s.in.size() == 4 ? 4 : 3, 1);
      prepared_filters(s);
      dense(s.in[0], x, "the input"), dense(s.in[1], w, "the weight"), dense(s.out[0], y, "the output");
      if (s.in[2].buf >= 0 && (s.in[2].shape != Shape{p.out_channels} || s.in[2].strides[0] != 1))
        invalid(source, k, "the bias must be [", p.out_channels, "] and dense");
      op_below(s.op, kUnaryOpCount);
    } else if (s.kind == StepKind::conv2d_grad_input) {
      count(s, 2, 1);
      dense(s.in[0], y, "dy"), dense(s.in[1], w, "the weight"), dense(s.out[0], x, "dx");
    } else {
      count(s, 2, 1);
      dense(s.in[0], x, "x"), dense(s.in[1], y, "dy"), dense(s.out[0], w, "dw");
    }
  }

  /// A conv's optional in[3]: its filters Winograd-transformed once, [16 or
  /// 36, out_channels, in_channels / groups], for a 3x3 stride-1 convolution.
  void prepared_filters(const Step& s) const {
    if (s.in.size() < 4) return;
    const Conv2dParams& p = s.conv;
    const Slot& u = s.in[3];
    if (u.buf < 0 || buffer(u.buf).kind != BufferKind::constant || u.shape.ndim() != 3 ||
        (u.shape[0] != 16 && u.shape[0] != 36) || u.shape[1] != p.out_channels || u.shape[2] != p.in_channels / p.groups ||
        !u.dense() || p.kernel_h != 3 || p.kernel_w != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 ||
        p.dilation_w != 1)
      invalid(source, k, "prepared filters ", u.shape.str(), " must be a dense constant [16 or 36, ", p.out_channels, ", ",
              p.in_channels / std::max<std::int64_t>(p.groups, 1), "] of a 3x3 stride-1 convolution");
  }

  void pool(const Step& s) const {
    const Pool2dParams& p = s.pool;
    if (p.batch < 0 || p.channels < 0 || p.in_h < 0 || p.in_w < 0 || p.out_h < 0 || p.out_w < 0 || p.kernel_h < 1 ||
        p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0 || p.dilation_h < 1 ||
        p.dilation_w < 1 || p.divisor_override < 0)
      invalid(source, k, "pooling parameters out of range");
    const Shape x{p.batch, p.channels, p.in_h, p.in_w}, y{p.batch, p.channels, p.out_h, p.out_w};
    switch (s.kind) {
      case StepKind::max_pool2d:
        if (s.in.size() != 1 || s.out.empty() || s.out.size() > 2) invalid(source, k, "max_pool2d takes 1 input and 1 or 2 outputs");
        dense(s.in[0], x, "the input"), dense(s.out[0], y, "the output");
        if (s.out.size() == 2) dense(s.out[1], y, "the indices");
        break;
      case StepKind::max_pool2d_backward:
        count(s, 2, 1);
        dense(s.in[0], y, "dy"), dense(s.in[1], y, "the indices"), dense(s.out[0], x, "dx");
        break;
      case StepKind::avg_pool2d: count(s, 1, 1), dense(s.in[0], x, "the input"), dense(s.out[0], y, "the output"); break;
      default: count(s, 1, 1), dense(s.in[0], y, "dy"), dense(s.out[0], x, "dx"); break;
    }
  }

  void gemm(const Step& s) const {
    const GemmArgs& a = s.gemm;
    if (a.m < 0 || a.n < 0 || a.k < 0 || a.batch < 1 || a.lda < 0 || a.ldb < 0 || a.ldc < 0 || a.sa < 0 || a.sb < 0 || a.sc < 0)
      invalid(source, k, "GEMM sizes out of range");
    if (s.in.size() != (a.beta != 0 ? 3u : 2u) || s.out.size() != 1) invalid(source, k, "GEMM operand count");
    auto window = [&](const Slot& w, bool t, std::int64_t r, std::int64_t c, std::int64_t ld, std::int64_t bs, const char* what) {
      const Shape st = t ? Shape{bs, 1, ld} : Shape{bs, ld, 1};
      if (w.shape != Shape{a.batch, r, c} || (w.numel() > 0 && w.strides != st))
        invalid(source, k, "GEMM operand ", what, " window ", w.shape.str(), " does not match its arguments");
    };
    window(s.in[0], a.trans_a, a.m, a.k, a.lda, a.sa, "A");
    window(s.in[1], a.trans_b, a.k, a.n, a.ldb, a.sb, "B");
    window(s.out[0], false, a.m, a.n, a.ldc, a.sc, "C");
    if (a.beta != 0) window(s.in[2], false, a.m, a.n, a.ldc, a.sc, "C (read)");
  }

  void linear(const Step& s) const {
    count(s, s.in.size() == 4 ? 4 : 3, 1);
    const Slot &x = s.in[0], &w = s.in[1], &y = s.out[0];
    if (s.in.size() == 4) {  // the CPU GEMM's panels of W, made on load from the constant W
      const Slot& p = s.in[3];
      if (p.buf < 0 || buffer(p.buf).kind != BufferKind::prepared || p.offset != 0 || p.shape != Shape{buffer(p.buf).numel} ||
          s.i0 != 0 || w.buf < 0 || buffer(w.buf).kind != BufferKind::constant || x.strides.ndim() != 2 || x.strides[1] != 1)
        invalid(source, k, "a linear's prepared weight must be a whole prepared buffer beside its constant [N, K] weight");
    }
    if (x.shape.ndim() != 2 || w.shape.ndim() != 2 || y.shape.ndim() != 2) invalid(source, k, "linear operands must be 2-D");
    const std::int64_t m = x.shape[0], kk = x.shape[1], n = y.shape[1];
    if (y.shape[0] != m) invalid(source, k, "linear input/output mismatch");
    if (!linear_input_ok(x))
      invalid(source, k, "a linear's input ", x.shape.str(), " with strides ", x.strides.str(),
              " is neither rows nor a transposed matrix a GEMM reads");
    dense(w, s.i0 ? Shape{kk, n} : Shape{n, kk}, "the weight");
    dense(y, Shape{m, n}, "the output");
    if (s.in[2].buf >= 0 && (s.in[2].shape != Shape{n} || s.in[2].strides[0] != 1)) invalid(source, k, "the bias must be [", n, "]");
    if (writes_over_input(s) && (s.in.size() != 4 || m != 1 || kk * static_cast<std::int64_t>(dtype_size(s.dtype)) > kInPlaceRowBytes))
      invalid(source, k, "a linear over ", x.shape.str(), " (", s.in.size() == 4 ? "prepared" : "unprepared",
              " weights) writes over its input; only a one-row linear over prepared weights, its input at most ",
              kInPlaceRowBytes, " bytes, may write over its input");
    op_below(s.op, kUnaryOpCount);
  }

  /// x [m, k] (rows dense), layers W [n, k] with bias [n] or none and their
  /// whole prepared panels, each layer's k the last one's n; y [m, n_last];
  /// scratch [threads, min(2, layers - 1), rows, widest hidden width].
  void linear_chain(const Step& s) const {
    const std::size_t layers = (s.in.size() - 1) / 3;
    if (s.in.size() < 7 || (s.in.size() - 1) % 3 || layers > static_cast<std::size_t>(kMaxChainLayers) ||
        s.out.size() != 2 || s.program.size() != layers)
      invalid(source, k, "a linear_chain needs x, then weight, bias and panels for each of 2-", kMaxChainLayers,
              " layers, an activation a layer, and y and a scratch");
    const Slot &x = s.in[0], &y = s.out[0], &sc = s.out[1];
    if (x.shape.ndim() != 2 || x.strides[1] != 1 || x.strides[0] < x.shape[1])
      invalid(source, k, "a linear_chain's input must be [m, k] with dense rows, got ", x.shape.str());
    const std::int64_t m = x.shape[0];
    std::int64_t width = x.shape[1], widest = 0;
    for (std::size_t l = 0; l < layers; ++l) {
      const Slot &w = s.in[1 + 3 * l], &bias = s.in[2 + 3 * l], &p = s.in[3 + 3 * l];
      if (w.shape.ndim() != 2 || w.shape[1] != width || w.shape[0] < 1 || !w.dense() || w.buf < 0 ||
          buffer(w.buf).kind != BufferKind::constant)
        invalid(source, k, "layer ", l, " of a linear_chain needs a dense constant weight [N, ", width, "], got ", w.shape.str());
      const std::int64_t n = w.shape[0];
      if (bias.buf >= 0 && (bias.shape != Shape{n} || bias.strides[0] != 1))
        invalid(source, k, "layer ", l, "'s bias must be [", n, "]");
      if (p.buf < 0 || buffer(p.buf).kind != BufferKind::prepared || p.offset != 0 || p.shape != Shape{buffer(p.buf).numel})
        invalid(source, k, "layer ", l, "'s panels must be a whole prepared buffer");
      op_below(s.program[l].op, kUnaryOpCount);
      if (l + 1 < layers) widest = std::max(widest, n);
      width = n;
    }
    dense(y, Shape{m, width}, "the output");
    const Shape want{sc.shape.ndim() == 4 ? sc.shape[0] : 0, layers > 2 ? 2 : 1, s.i0, widest};
    if (s.i0 < 1 || s.i0 > 64 || want[0] < 1 || want[0] > 1024) invalid(source, k, "a linear_chain's rows a block or threads are out of range");
    dense(sc, want, "the scratch");
  }

  /// x [m, k] (rows dense), a dense constant W [n, k] (k at most
  /// kMaxQuantizedDepth), bias [n] or none, W's whole int8 blob (prepared);
  /// y [m, n] and the scratch for x's int8 rows, both dense.
  void quantized_linear(const Step& s) const {
    count(s, 4, 2);
    const Slot &x = s.in[0], &w = s.in[1], &bias = s.in[2], &q = s.in[3], &y = s.out[0], &sc = s.out[1];
    if (x.shape.ndim() != 2 || x.strides[1] != 1 || (x.shape[0] > 1 && x.strides[0] < x.shape[1]))
      invalid(source, k, "a quantized_linear's input must be [m, k] with dense rows, got ", x.shape.str());
    const std::int64_t m = x.shape[0], kk = x.shape[1];
    if (w.shape.ndim() != 2 || w.shape[1] != kk || w.shape[0] < 1 || kk < 1 || kk > cpu::kMaxQuantizedDepth || !w.dense() ||
        w.buf < 0 || buffer(w.buf).kind != BufferKind::constant)
      invalid(source, k, "a quantized_linear needs a dense constant weight [N, ", kk, "] (K from 1 to ",
              cpu::kMaxQuantizedDepth, "), got ", w.shape.str());
    const std::int64_t n = w.shape[0], size = static_cast<std::int64_t>(dtype_size(s.dtype));
    if (bias.buf >= 0 && (bias.shape != Shape{n} || bias.strides[0] != 1)) invalid(source, k, "the bias must be [", n, "]");
    const std::int64_t blob = cpu::ceil_div(cpu::QuantizedWeightLayout(n, kk).total, size);
    if (q.buf < 0 || buffer(q.buf).kind != BufferKind::prepared || q.offset != 0 || q.shape != Shape{blob} ||
        buffer(q.buf).numel != blob)
      invalid(source, k, "a quantized_linear's int8 weight must be a whole prepared buffer of ", blob, " elements");
    dense(y, Shape{m, n}, "the output");
    dense(sc, Shape{cpu::ceil_div(cpu::QuantizedInputLayout(m, kk).total, size)}, "the scratch");
    op_below(s.op, kUnaryOpCount);
  }

  void elementwise(const Step& s) const {
    if (s.out.size() != 1 || s.in.empty() || s.in.size() > 8 || s.program.empty() || s.program.size() > 8)
      invalid(source, k, "a fused elementwise step needs 1-8 inputs, 1 output and 1-8 instructions");
    if (!s.out[0].dense()) invalid(source, k, "the fused output must be dense");
    for (const auto& x : s.in)
      if (x.shape != s.out[0].shape || !x.dense()) invalid(source, k, "fused inputs must be dense and shaped like the output");
    int written = 8;
    for (const auto& in : s.program) {
      auto readable = [&](int r) { return r < static_cast<int>(s.in.size()) || (r >= 8 && r < written); };
      if (!readable(in.a) || (in.binary && !readable(in.b)) || in.dst != written)
        invalid(source, k, "a fused instruction reads an unset register or writes out of order");
      op_below(in.op, in.binary ? kBinaryOpCount : kUnaryOpCount);
      ++written;
    }
  }

  void step(const Step& s) const {
    const DType dt = s.dtype;
    for (const auto& o : s.out) writes(o);
    const auto I64 = DType::int64;
    if (!every_kind_dtype(dt) && !every_dtype_kind(s.kind))
      invalid(source, k, "a ", step_kind_name(s.kind), " step needs float32 or float64, not ", dtype_name(dt));
    switch (s.kind) {
      case StepKind::unary: count(s, 1, 1), slot(s.in[0], dt), slot(s.out[0], dt), same(s.in[0].shape, s.out[0].shape),
                            op_below(s.op, kUnaryOpCount); break;
      case StepKind::binary: count(s, 2, 1), slot(s.in[0], dt), slot(s.in[1], dt), slot(s.out[0], dt),
                             same(s.in[0].shape, s.out[0].shape), same(s.in[1].shape, s.out[0].shape),
                             op_below(s.op, kBinaryOpCount); break;
      case StepKind::where: count(s, 3, 1);
        for (const auto& x : s.in) slot(x, dt), same(x.shape, s.out[0].shape);
        slot(s.out[0], dt);
        break;
      case StepKind::copy: case StepKind::dropout: count(s, 1, 1), slot(s.in[0], dt), slot(s.out[0], dt), same(s.in[0].shape, s.out[0].shape); break;
      case StepKind::cast: count(s, 1, 1), op_below(s.op, kDTypeCount), slot(s.in[0], static_cast<DType>(s.op)), slot(s.out[0], dt),
                           same(s.in[0].shape, s.out[0].shape); break;
      case StepKind::fill: count(s, 0, 1), slot(s.out[0], dt); break;
      case StepKind::random: count(s, 0, 1), slot(s.out[0], dt), op_below(s.op, 4); break;
      case StepKind::reduce: {
        count(s, 1, 1), slot(s.in[0], dt), slot(s.out[0], dt), op_below(s.op, 4);
        if (s.i0 < 0 || s.i0 > s.in[0].shape.ndim()) invalid(source, k, "reduces ", s.i0, " of ", s.in[0].shape.ndim(), " dims");
        same(leading(s.in[0].shape, s.in[0].shape.ndim() - static_cast<int>(s.i0)), s.out[0].shape);
        break;
      }
      case StepKind::arg_reduce: {
        count(s, 1, 2), slot(s.in[0], dt), slot(s.out[0], dt), slot(s.out[1], I64);
        if (s.in[0].shape.ndim() < 1) invalid(source, k, "arg_reduce needs at least one dim");
        // The outputs are the input's leading dims, with or without the
        // reduced dim kept as 1 (the eager op records them kept).
        const Shape lead = leading(s.in[0].shape, s.in[0].shape.ndim() - 1);
        Shape kept = lead;
        kept.push_back(1);
        for (const Slot* o : {&s.out[0], &s.out[1]})
          if (o->shape != kept) same(lead, o->shape);
        break;
      }
      case StepKind::softmax:
        count(s, 1, 1), slot(s.in[0], dt), slot(s.out[0], dt), same(s.in[0].shape, s.out[0].shape);
        // (A last dim of 1 reads one element: any stride will do.)
        if (s.in[0].shape.ndim() < 1 ||
            (s.in[0].numel() > 0 && s.in[0].shape.back() > 1 && (s.in[0].strides.back() != 1 || s.out[0].strides.back() != 1)))
          invalid(source, k, "softmax needs a contiguous last dim");
        break;
      case StepKind::gemm: for (const auto& x : s.in) slot(x, dt);
        slot(s.out[0], dt), gemm(s); break;
      case StepKind::index_select: case StepKind::gather: case StepKind::scatter_add: {
        const bool sc = s.kind == StepKind::scatter_add;
        count(s, sc ? 3 : 2, 1);
        slot(s.in[0], dt), slot(s.in[1], I64), slot(s.out[0], dt);
        if (sc) slot(s.in[2], dt);
        const Slot& x = s.in[0];
        const Slot& idx = s.in[1];
        const Slot& y = s.out[0];
        if (s.i0 < 0 || s.i0 >= x.shape.ndim()) invalid(source, k, "dim ", s.i0, " out of range");
        if (s.kind == StepKind::index_select) {
          Shape want = x.shape;
          if (idx.shape.ndim() != 1) invalid(source, k, "index_select needs a 1-D index");
          want[static_cast<int>(s.i0)] = idx.shape[0];
          same(want, y.shape);
        } else if (s.kind == StepKind::gather) {
          same(idx.shape, y.shape);
          within(idx.shape, x.shape, static_cast<int>(s.i0), "gather's index", "input");
        } else {
          same(x.shape, y.shape);
          if (s.in[0].buf != y.buf || s.in[0].offset != y.offset || s.in[0].strides != y.strides)
            invalid(source, k, "scatter_add accumulates in place");
          within(idx.shape, x.shape, static_cast<int>(s.i0), "scatter_add's index", "output");
          // src may be larger than the index (as in PyTorch): only the index's extent is read.
          within(idx.shape, s.in[2].shape, -1, "scatter_add's index", "src");
        }
        break;
      }
      case StepKind::conv2d: case StepKind::conv2d_grad_input: case StepKind::conv2d_grad_weight:
        for (std::size_t i = 0; i < s.in.size(); ++i) slot(s.in[i], dt, i == 2);
        for (const auto& o : s.out) slot(o, dt);
        conv(s);
        break;
      case StepKind::max_pool2d: case StepKind::max_pool2d_backward: case StepKind::avg_pool2d: case StepKind::avg_pool2d_backward:
        for (std::size_t i = 0; i < s.in.size(); ++i) slot(s.in[i], i == 1 && s.kind == StepKind::max_pool2d_backward ? I64 : dt);
        for (std::size_t i = 0; i < s.out.size(); ++i) slot(s.out[i], i == 1 ? I64 : dt);
        pool(s);
        break;
      case StepKind::conv2d_pool: {
        count(s, s.in.size() == 4 ? 4 : 3, 2);
        slot(s.in[0], dt), slot(s.in[1], dt), slot(s.in[2], dt, true), slot(s.out[0], dt), slot(s.out[1], dt);
        if (s.in.size() == 4) slot(s.in[3], dt);
        Step conv = s;  // the convolution half, checked as a conv2d writing the scratch's first image block
        conv.kind = StepKind::conv2d;
        conv.out = {Slot{s.out[1].buf, 0, Shape{s.conv.batch, s.conv.out_channels, s.conv.out_h, s.conv.out_w},
                         contiguous_strides(Shape{s.conv.batch, s.conv.out_channels, s.conv.out_h, s.conv.out_w})}};
        if (s.conv.batch < 1) invalid(source, k, "conv2d_pool needs a batch");
        this->conv(conv);
        Step pool = s;
        pool.kind = StepKind::max_pool2d;
        pool.in = {conv.out[0]};
        pool.out = {s.out[0]};
        this->pool(pool);
        const Slot& sc = s.out[1];
        // Its dim 1: all the filters, or (one image a call, one group) blocks of them.
        const bool blocks = sc.shape.ndim() == 4 && sc.shape[1] != s.conv.out_channels;
        // No scratch (pooled in the conv's pass): an empty window, [calls, block, 0, 0].
        const bool none = sc.buf < 0 && sc.shape.ndim() == 4 && sc.shape[2] == 0 && sc.shape[3] == 0;
        if (s.i0 < 1 || sc.shape.ndim() != 4 || sc.shape[0] < s.i0 || sc.shape[0] % s.i0 || sc.shape[0] / s.i0 > 1024 || sc.shape[1] < 1 ||
            sc.shape[1] > s.conv.out_channels || (blocks && (s.i0 != 1 || s.conv.groups != 1)) ||
            (!none && (sc.shape[2] != s.conv.out_h || sc.shape[3] != s.conv.out_w || !sc.dense())) ||
            s.pool.batch != s.conv.batch || s.pool.channels != s.conv.out_channels || s.pool.in_h != s.conv.out_h ||
            s.pool.in_w != s.conv.out_w)
          invalid(source, k, "conv2d_pool's scratch or pooling geometry does not match its convolution");
        break;
      }
      case StepKind::linear:
        if (s.in.size() == 3) slot(s.in[0], dt), slot(s.in[1], dt), slot(s.in[2], dt, true);
        if (s.out.size() == 1) slot(s.out[0], dt);
        linear(s);
        break;
      case StepKind::linear_chain:
        for (std::size_t i = 0; i < s.in.size(); ++i) slot(s.in[i], dt, i % 3 == 2);
        for (const auto& o : s.out) slot(o, dt);
        linear_chain(s);
        break;
      case StepKind::quantized_linear:
        for (std::size_t i = 0; i < s.in.size(); ++i) slot(s.in[i], dt, i == 2);
        for (const auto& o : s.out) slot(o, dt);
        quantized_linear(s);
        break;
      case StepKind::batch_norm: {
        if (traced && s.i0 == 0) {  // x, running mean, running var, weight?, bias?
          count(s, 5, 1);
          slot(s.in[0], dt), slot(s.out[0], dt), same(s.in[0].shape, s.out[0].shape);
          const Shape& y = s.out[0].shape;
          if (y.ndim() < 2) invalid(source, k, "batch_norm needs [N, C, ...]");
          for (std::size_t i = 1; i < 5; ++i) {
            slot(s.in[i], dt, i >= 3);
            if (s.in[i].buf >= 0 && s.in[i].shape != Shape{y[1]}) invalid(source, k, "batch_norm statistics must be [C]");
          }
          break;
        }
        count(s, 3, 1);
        if (s.i0 != 1) invalid(source, k, "batch_norm must be in its prepared form");
        slot(s.in[0], dt), slot(s.in[1], dt), slot(s.in[2], dt), slot(s.out[0], dt), same(s.in[0].shape, s.out[0].shape);
        const Shape& y = s.out[0].shape;
        if (y.ndim() < 2 || s.in[1].shape != Shape{y[1]} || s.in[2].shape != Shape{y[1]})
          invalid(source, k, "batch_norm's scale and shift must have one value per channel");
        break;
      }
      case StepKind::elementwise:
        for (const auto& x : s.in) slot(x, dt);
        if (s.out.size() == 1) slot(s.out[0], dt);
        elementwise(s);
        break;
      case StepKind::guard: {
        count(s, 1, 0), slot(s.in[0], dt);
        if (s.guard < 0 || static_cast<std::size_t>(s.guard) >= g.guards.size()) invalid(source, k, "guard ", s.guard, " does not exist");
        const Guard& gd = g.guards[static_cast<std::size_t>(s.guard)];
        if (s.in[0].buf < 0) invalid(source, k, "a guard reads nothing");
        if (gd.how == frost::detail::HostRead::condition ? s.in[0].numel() != 1
                                                         : gd.expected.size() != static_cast<std::size_t>(s.in[0].numel()) * dtype_size(dt))
          invalid(source, k, "the guard's values do not match the window it reads");
        break;
      }
    }
  }
};

/// Throws frost::Error naming the first unsafe part of `g` (with arena
/// offsets `offsets`); `source` opens the message ("frost::jit::Plan::load: <file>").
inline void validate_plan(const Graph& g, const std::vector<std::int64_t>& offsets, std::int64_t arena_bytes,
                          const std::string& source, bool traced = false) {
  auto bad = [&](const auto&... parts) { frost::detail::fail(source, ": ", parts...); };
  if (arena_bytes < 0 || arena_bytes > kMaxPlanElements) bad("arena size ", arena_bytes, " is out of range");
  if (offsets.size() != g.buffers.size()) bad("the memory plan covers ", offsets.size(), " of ", g.buffers.size(), " buffers");
  if (g.inputs.size() != g.input_shapes.size()) bad("inputs and their shapes disagree");
  for (std::size_t b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    if (buf.numel < 0 || buf.numel > kMaxPlanElements) bad("buffer ", b, " has ", buf.numel, " elements");
    const std::int64_t bytes = buf.numel * static_cast<std::int64_t>(dtype_size(buf.dtype));
    if (buf.kind == BufferKind::constant && buf.numel > 0 && (!buf.data || buf.data->nbytes != static_cast<std::size_t>(bytes)))
      bad("constant ", b, " ('", buf.name, "') has no data of ", bytes, " bytes");
    if (buf.kind == BufferKind::intermediate && offsets[b] >= 0 && offsets[b] + bytes > arena_bytes)
      bad("buffer ", b, " (", bytes, " bytes at ", offsets[b], ") does not fit the ", arena_bytes, "-byte arena");
    if (buf.kind == BufferKind::intermediate && offsets[b] >= 0 && offsets[b] % 64 != 0)
      bad("buffer ", b, " is not 64-byte aligned in the arena");
    if (buf.kind == BufferKind::input) {
      const auto it = std::find(g.inputs.begin(), g.inputs.end(), static_cast<int>(b));
      if (it == g.inputs.end() ||
          buf.numel != g.input_shapes[static_cast<std::size_t>(it - g.inputs.begin())].numel())
        bad("input buffer ", b, " does not match the input list");
    }
  }
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    const int b = g.inputs[i];
    if (b < 0 || static_cast<std::size_t>(b) >= g.buffers.size() || g.buffers[static_cast<std::size_t>(b)].kind != BufferKind::input)
      bad("input ", i, " is not an input buffer");
    for (auto d : g.input_shapes[i])
      if (d < 0) bad("input ", i, " has a negative extent");
  }
  Validator v{g, source, traced};
  // Every intermediate a step touches must have a place in the arena.
  auto placed = [&](const Slot& s) {
    if (!traced && s.buf >= 0 && static_cast<std::size_t>(s.buf) < g.buffers.size() &&
        g.buffers[static_cast<std::size_t>(s.buf)].kind == BufferKind::intermediate && offsets[static_cast<std::size_t>(s.buf)] < 0)
      bad("buffer ", s.buf, " is used but has no place in the arena");
  };
  std::vector<int> prepared_uses(g.buffers.size(), 0);
  for (v.k = 0; v.k < g.steps.size(); ++v.k) {
    const Step& s = g.steps[v.k];
    if (static_cast<int>(s.kind) > static_cast<int>(kLastStepKind)) bad("unknown step kind");
    v.step(s);
    for (const auto& x : s.in) placed(x);
    for (const auto& x : s.out) placed(x);
    for (std::size_t i = 0; i < s.in.size(); ++i) {
      const int b = s.in[i].buf;
      if (b < 0 || g.buffers[static_cast<std::size_t>(b)].kind != BufferKind::prepared) continue;
      const bool panels = ((s.kind == StepKind::linear || s.kind == StepKind::quantized_linear) && i == 3) ||
                          (s.kind == StepKind::linear_chain && i % 3 == 0 && i > 0);
      if (!panels) bad("step ", v.k, " reads prepared buffer ", b, " as an ordinary operand");
      ++prepared_uses[static_cast<std::size_t>(b)];
    }
  }
  for (std::size_t b = 0; b < g.buffers.size(); ++b)
    if (g.buffers[b].kind == BufferKind::prepared && prepared_uses[b] != 1)
      bad("prepared buffer ", b, " must belong to exactly one linear layer, not ", prepared_uses[b]);
  for (const auto& o : g.outputs) {
    // Outputs of any dtype (a plan returns them as run_any does).
    v.slot(o, o.buf >= 0 && static_cast<std::size_t>(o.buf) < g.buffers.size() ? g.buffers[static_cast<std::size_t>(o.buf)].dtype : g.dtype);
    placed(o);
    if (!traced && o.buf >= 0 && g.buffers[static_cast<std::size_t>(o.buf)].kind != BufferKind::intermediate)
      bad("an output is not in the arena");
  }
}

}  // namespace frost::jit::detail
