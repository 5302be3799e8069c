// The traced program: buffers (inputs, named constants, intermediates), the
// steps that read and write strided windows of them (one backend kernel call
// each, or one op recorded whole: linear, batch_norm, dropout), the guards
// the host's reads of tensor values imply, and the outputs. Passes rewrite a
// Graph; Plan<T> runs one. str() prints it one step a line with SSA value
// names (a buffer written again gets a new %name), like TorchScript's dump.
#pragma once
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../tensor.hpp"

namespace frost::jit {

/// prepared: a constant's data in a backend's own form (a linear's weight in
/// the CPU GEMM's panels), made when the plan is frozen or loaded, never saved.
enum class BufferKind : std::uint8_t { input, constant, intermediate, prepared };

struct Buffer {
  BufferKind kind = BufferKind::intermediate;
  DType dtype = DType::float32;
  std::int64_t numel = 0;
  int input_index = -1;   // inputs: position in the argument list
  std::string name;       // constants: "features.0.weight", or "c3" for values made during the trace
  bool param = false;     // a parameter or buffer of the traced module (what refit replaces)
  Ref<StorageImpl> data;  // constants and prepared buffers: their bytes (dense, numel elements)
};

/// A strided window of a buffer; buf == -1 for an absent optional operand.
struct Slot {
  int buf = -1;
  std::int64_t offset = 0;  // elements
  Shape shape, strides;
  std::int64_t numel() const { return shape.numel(); }
  bool dense() const { return View<const float>(nullptr, shape, strides).is_contiguous(); }
  /// Dense from offset 0 over all of a buffer of `n` elements.
  bool covers(std::int64_t n) const { return buf >= 0 && offset == 0 && numel() == n && dense(); }
};

enum class StepKind : std::uint8_t {
  unary, binary, where, copy, fill, random, reduce, arg_reduce, softmax, gemm, index_select, gather, scatter_add,
  conv2d, conv2d_grad_input, conv2d_grad_weight, max_pool2d, max_pool2d_backward, avg_pool2d, avg_pool2d_backward,
  linear, batch_norm, dropout, elementwise, conv2d_pool, guard,
  linear_chain,  // after guard: plan files keep their step codes
  quantized_linear,
  cast  // y (dtype) = x converted elementwise (fn::cast); op: x's DType
};
inline constexpr StepKind kLastStepKind = StepKind::cast;
/// The most layers one linear_chain step holds (its in: x, then W, bias, panels a layer).
inline constexpr int kMaxChainLayers = 8;

inline const char* step_kind_name(StepKind k) {
  static constexpr const char* names[] = {
      "unary", "binary", "where", "copy", "fill", "random", "reduce", "arg_reduce", "softmax", "gemm",
      "index_select", "gather", "scatter_add", "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d",
      "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "linear", "batch_norm", "dropout", "elementwise",
      "conv2d_pool", "guard", "linear_chain", "quantized_linear", "cast"};
  return names[static_cast<int>(k)];
}

/// Steps of float32 and float64 are of every kind; those of the other
/// dtypes only of the kinds that have a kernel for every dtype (execute.hpp's
/// run_common).
inline bool every_kind_dtype(DType d) { return d == DType::float32 || d == DType::float64; }
inline bool every_dtype_kind(StepKind k) {
  switch (k) {
    case StepKind::unary: case StepKind::binary: case StepKind::where: case StepKind::copy: case StepKind::dropout:
    case StepKind::fill: case StepKind::random: case StepKind::reduce: case StepKind::arg_reduce:
    case StepKind::index_select: case StepKind::gather: case StepKind::scatter_add: case StepKind::cast:
    case StepKind::guard: return true;
    default: return false;
  }
}

struct GemmArgs {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0, lda = 0, sa = 0, ldb = 0, sb = 0, ldc = 0, sc = 0, batch = 1;
  double alpha = 1, beta = 0;
};

/// One instruction of a fused elementwise step: r[dst] = f(r[a], r[b]) over a
/// block of elements; registers 0..n_inputs-1 hold the step's inputs.
using ElementwiseInstr = FusedInstr;

/// What the host read while tracing and what it saw: a condition (`if` on a
/// tensor) checks the truth value, item()/to_vector() the exact bytes.
struct Guard {
  detail::HostRead how = detail::HostRead::condition;
  bool outcome = false;
  std::vector<unsigned char> expected;  // item / to_vector: the values seen (dense bytes)
  std::string where;                    // "file:line" of the user's code, or a hint when unknown
  std::string describe() const {
    std::ostringstream o;
    if (how == detail::HostRead::condition) o << "condition was " << (outcome ? "true" : "false");
    else o << (how == detail::HostRead::item ? "item()" : "to_vector()") << " value must stay as traced";
    o << " at " << where;
    return o.str();
  }
};

struct Step {
  StepKind kind = StepKind::unary;
  DType dtype = DType::float32;  // the kernel's element type
  std::vector<Slot> in, out;
  int op = 0;             // UnaryOp / BinaryOp / ReduceOp / philox::Dist; conv2d, linear, quantized_linear: the fused
                          // UnaryOp; cast: the source DType
  double p0 = 0, p1 = 0;  // scalars: unary p0 p1, binary p, fill value, random lo hi, eps, dropout p
  std::int64_t i0 = 0;    // reduce: n_reduced; arg_reduce: is_max; softmax: log; index ops: dim;
                          // linear: 1 when the weight is pre-packed [K, N]; batch_norm: 1 once prepared;
                          // linear_chain: rows a block
  std::uint64_t seed = 0, rng_offset = 0;
  GemmArgs gemm;
  Conv2dParams conv;
  Pool2dParams pool;
  std::vector<ElementwiseInstr> program;  // elementwise: the fused chain; linear_chain: each layer's activation (op)
  int guard = -1;                         // guard: index into Graph::guards
  std::string note;                       // what a pass made of it
};

/// A one-row linear over prepared weights (the CPU's) may write its output
/// over its input, as an MLP's hidden layers do at batch 1 (the arena then
/// holds one hidden vector, not two): its runner first copies the input row
/// to the stack, at most this many bytes, and every thread reads that copy.
inline constexpr std::int64_t kInPlaceRowBytes = 4096;
inline bool writes_over_input(const Step& s) {
  return s.kind == StepKind::linear && s.out.size() == 1 && !s.in.empty() && s.out[0].buf >= 0 &&
         s.out[0].buf == s.in[0].buf;
}

/// How a linear step's GEMMs read its input x [m, k]: as rows (unit column
/// stride, rows at least k apart; any row stride for one row) or, for m > 1,
/// as the columns of a transposed matrix (unit row stride, columns at least
/// m apart). The trace copies an input laid out otherwise (a broadcast row,
/// a one-row view with a column stride) into a dense buffer first, and the
/// loader rejects it.
inline bool linear_input_ok(const Slot& x) {
  if (x.shape.ndim() != 2 || x.strides.ndim() != 2) return false;
  const std::int64_t m = x.shape[0], k = x.shape[1], s0 = x.strides[0], s1 = x.strides[1];
  if (m <= 1) return s1 == 1 || k <= 1;
  return (s1 == 1 && s0 >= k) || (s0 == 1 && s1 >= m);
}
/// x's GEMM arguments, for a linear_input_ok x: transposed, and the leading
/// dimension (at least k for one row, as cuBLAS asks even then).
struct LinearInput {
  bool trans = false;
  std::int64_t ld = 1;
};
inline LinearInput linear_gemm_input(const Slot& x) {
  const std::int64_t m = x.shape[0], k = x.shape[1];
  if (m > 1 && x.strides[1] != 1) return {true, x.strides[1]};
  return {false, std::max<std::int64_t>({m > 1 ? x.strides[0] : k, k, 1})};
}

/// Name of the fused activation of a conv2d / linear step ("" for none).
inline std::string act_name(int op) {
  return static_cast<UnaryOp>(op) == UnaryOp::copy ? std::string() : op_name(static_cast<UnaryOp>(op));
}

struct Graph {
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<Guard> guards;
  std::vector<int> inputs;    // buffer ids of the inputs, in argument order
  std::vector<Shape> input_shapes;
  std::vector<Slot> outputs;  // windows holding the results
  DType dtype = DType::float32;
  /// Where the traced module and inputs were (the trace itself ran on the
  /// CPU): freeze places the plan there. Not saved: a loaded plan is on the CPU.
  Device device = Device::cpu();

  int add_buffer(Buffer b) {
    buffers.push_back(std::move(b));
    return static_cast<int>(buffers.size()) - 1;
  }
  std::int64_t constant_bytes() const;
  std::string str() const;
  std::string to_dot() const;
};

namespace detail {

/// Whether R is a Tensor<U> of some dtype.
template <class R>
inline constexpr bool is_tensor_v = false;
template <Scalar U>
inline constexpr bool is_tensor_v<Tensor<U>> = true;

/// Bound on any element count, offset or stride a plan file may state.
inline constexpr std::int64_t kMaxPlanElements = std::int64_t{1} << 40;

/// Element offset of the i-th element (row-major) of a window of `shape` and `strides`.
inline std::int64_t strided_offset(const Shape& shape, const Shape& strides, std::int64_t i) {
  std::int64_t off = 0;
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

using frost::dtype_size;

/// Whether the one element of dtype `d` at `p` is non-zero (NaN is true), as
/// `if (t)` reads a one-element tensor of any dtype.
inline bool truth_at(DType d, const void* p) {
  return visit_dtype(d, [&](auto tag) {
    using U = decltype(tag);
    U v;
    std::memcpy(&v, p, sizeof(U));
    return static_cast<double>(v) != 0.0;
  });
}

/// PyTorch's short names (FloatTensor, LongTensor, ...).
inline const char* dtype_short(DType d) {
  switch (d) {
    case DType::float32: return "Float";
    case DType::float64: return "Double";
    case DType::int64: return "Long";
    case DType::bool_: return "Bool";
    case DType::uint8: return "Byte";
    case DType::int8: return "Char";
    case DType::int16: return "Short";
    case DType::int32: return "Int";
    case DType::float16: return "Half";
    case DType::bfloat16: return "BFloat16";
  }
  return "?";
}

inline std::string shape_list(const Shape& s) {
  std::string r = "[";
  for (int i = 0; i < s.ndim(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

/// The attributes printed after a step's name.
inline std::string step_attrs(const Step& s) {
  std::ostringstream o;
  auto pair = [&](const char* k, std::int64_t a, std::int64_t b) { o << k << "=" << a << "x" << b << ", "; };
  switch (s.kind) {
    case StepKind::unary: o << op_name(static_cast<UnaryOp>(s.op)); if (s.p0 != 0 || s.p1 != 0) o << ", p=" << s.p0 << "," << s.p1; break;
    case StepKind::binary: o << op_name(static_cast<BinaryOp>(s.op)); break;
    case StepKind::fill: o << "value=" << s.p0; break;
    case StepKind::reduce: o << "op=" << s.op << ", n_reduced=" << s.i0; break;
    case StepKind::arg_reduce: o << (s.i0 ? "max" : "min"); break;
    case StepKind::softmax: o << (s.i0 ? "log" : "softmax"); break;
    case StepKind::gemm: o << "m=" << s.gemm.m << ", n=" << s.gemm.n << ", k=" << s.gemm.k << ", batch=" << s.gemm.batch
                           << (s.gemm.trans_a ? ", A^T" : "") << (s.gemm.trans_b ? ", B^T" : ""); break;
    case StepKind::conv2d: case StepKind::conv2d_grad_input: case StepKind::conv2d_grad_weight: case StepKind::conv2d_pool:
      pair("kernel", s.conv.kernel_h, s.conv.kernel_w); pair("stride", s.conv.stride_h, s.conv.stride_w);
      pair("padding", s.conv.pad_h, s.conv.pad_w); o << "groups=" << s.conv.groups;
      if ((s.kind == StepKind::conv2d || s.kind == StepKind::conv2d_pool) && !act_name(s.op).empty())
        o << ", act=" << act_name(s.op);
      if (s.kind == StepKind::conv2d_pool)
        o << ", max_pool=" << s.pool.kernel_h << "x" << s.pool.kernel_w << "/" << s.pool.stride_h << "x" << s.pool.stride_w;
      break;
    case StepKind::max_pool2d: case StepKind::avg_pool2d: case StepKind::max_pool2d_backward: case StepKind::avg_pool2d_backward:
      pair("kernel", s.pool.kernel_h, s.pool.kernel_w); pair("stride", s.pool.stride_h, s.pool.stride_w);
      o << "padding=" << s.pool.pad_h << "x" << s.pool.pad_w; break;
    case StepKind::linear: if (!act_name(s.op).empty()) o << "act=" << act_name(s.op) << ", "; o << (s.i0 ? "packed" : s.in.size() == 4 ? "weight [N, K] with GEMM panels" : "weight [N, K]"); break;
    case StepKind::linear_chain:
      o << "layers=" << s.program.size() << ", rows=" << s.i0 << ", acts=";
      for (std::size_t i = 0; i < s.program.size(); ++i) {
        const std::string a = act_name(s.program[i].op);
        o << (i ? "," : "") << (a.empty() ? "none" : a);
      }
      break;
    case StepKind::quantized_linear:
      if (!act_name(s.op).empty()) o << "act=" << act_name(s.op) << ", ";
      o << "int8 weight per output channel, int8 input per row";
      break;
    case StepKind::batch_norm: o << "eps=" << s.p0; break;
    case StepKind::dropout: o << "p=" << s.p0; break;
    case StepKind::elementwise:
      for (std::size_t i = 0; i < s.program.size(); ++i) {
        const auto& in = s.program[i];
        o << (i ? " ; " : "") << (in.binary ? op_name(static_cast<BinaryOp>(in.op)) : op_name(static_cast<UnaryOp>(in.op)));
      }
      break;
    case StepKind::index_select: case StepKind::gather: case StepKind::scatter_add: o << "dim=" << s.i0; break;
    case StepKind::cast: if (s.op >= 0 && s.op < kDTypeCount) o << "from=" << dtype_short(static_cast<DType>(s.op)); break;
    default: break;
  }
  std::string r = o.str();
  while (!r.empty() && (r.back() == ' ' || r.back() == ',')) r.pop_back();
  return r;
}

}  // namespace detail

inline std::int64_t Graph::constant_bytes() const {
  std::int64_t n = 0;
  for (const auto& b : buffers)
    if (b.kind == BufferKind::constant || b.kind == BufferKind::prepared)
      n += b.numel * static_cast<std::int64_t>(detail::dtype_size(b.dtype));
  return n;
}

namespace detail {

/// SSA names: inputs %x0.., constants %name, each write of an intermediate a fresh %k.
struct ValueNames {
  const Graph& g;
  std::vector<std::string> current;
  int next = 0;
  explicit ValueNames(const Graph& gr) : g(gr), current(gr.buffers.size()) {
    for (std::size_t i = 0; i < g.buffers.size(); ++i) {
      const auto& b = g.buffers[i];
      if (b.kind == BufferKind::input) current[i] = "%x" + std::to_string(b.input_index);
      else if (b.kind == BufferKind::constant || b.kind == BufferKind::prepared) current[i] = "%" + b.name;
    }
  }
  std::string read(const Slot& s) const {
    if (s.buf < 0) return "None";
    const auto& b = g.buffers[static_cast<std::size_t>(s.buf)];
    std::string n = current[static_cast<std::size_t>(s.buf)].empty() ? "%?" : current[static_cast<std::size_t>(s.buf)];
    if (!s.covers(b.numel)) n += "<" + shape_list(s.shape) + (s.offset ? "@" + std::to_string(s.offset) : "") + ">";
    return n;
  }
  std::string write(const Slot& s) {
    const std::string n = "%" + std::to_string(++next);
    current[static_cast<std::size_t>(s.buf)] = n;
    return n;
  }
};

}  // namespace detail

inline std::string Graph::str() const {
  std::ostringstream o;
  detail::ValueNames names(*this);
  o << "graph(";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& b = buffers[static_cast<std::size_t>(inputs[i])];
    o << (i ? ",\n      " : "") << "%x" << i << " : " << detail::dtype_short(b.dtype)
      << detail::shape_list(input_shapes[i]);
  }
  o << "):\n";
  for (const auto& s : steps) {
    std::vector<std::string> args;
    for (const auto& in : s.in) args.push_back(names.read(in));
    if (s.kind == StepKind::guard) {
      o << "  guard(" << args[0] << ")  # " << guards[static_cast<std::size_t>(s.guard)].describe() << "\n";
      continue;
    }
    o << "  ";
    for (std::size_t i = 0; i < s.out.size(); ++i) {
      const auto& b = buffers[static_cast<std::size_t>(s.out[i].buf)];
      o << (i ? ", " : "") << names.write(s.out[i]) << " : " << detail::dtype_short(b.dtype)
        << detail::shape_list(s.out[i].shape);
    }
    o << " = " << step_kind_name(s.kind);
    const std::string attrs = detail::step_attrs(s);
    if (!attrs.empty()) o << "[" << attrs << "]";
    o << "(";
    for (std::size_t i = 0; i < args.size(); ++i) o << (i ? ", " : "") << args[i];
    o << ")";
    if (!s.note.empty()) o << "  # " << s.note;
    o << "\n";
  }
  o << "  return (";
  for (std::size_t i = 0; i < outputs.size(); ++i) o << (i ? ", " : "") << names.read(outputs[i]);
  o << ")\n";
  return o.str();
}

inline std::string Graph::to_dot() const {
  std::ostringstream o;
  o << "digraph frost {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  std::vector<std::string> producer(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = buffers[i];
    if (b.kind == BufferKind::intermediate) continue;
    producer[i] = "b" + std::to_string(i);
    o << "  " << producer[i] << " [shape=ellipse, label=\""
      << (b.kind == BufferKind::input ? "input " + std::to_string(b.input_index) : b.name) << "\"];\n";
  }
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const auto& s = steps[k];
    const std::string id = "s" + std::to_string(k);
    std::string label = step_kind_name(s.kind);
    const std::string attrs = detail::step_attrs(s);
    if (!attrs.empty()) label += "\\n" + attrs;
    if (!s.out.empty()) label += "\\n" + detail::shape_list(s.out[0].shape);
    o << "  " << id << " [label=\"" << label << "\"" << (s.kind == StepKind::guard ? ", color=red" : "") << "];\n";
    for (const auto& in : s.in)
      if (in.buf >= 0 && !producer[static_cast<std::size_t>(in.buf)].empty())
        o << "  " << producer[static_cast<std::size_t>(in.buf)] << " -> " << id << ";\n";
    for (const auto& out : s.out) producer[static_cast<std::size_t>(out.buf)] = id;
  }
  o << "  out [shape=ellipse, label=\"output\"];\n";
  for (const auto& r : outputs)
    if (r.buf >= 0 && !producer[static_cast<std::size_t>(r.buf)].empty())
      o << "  " << producer[static_cast<std::size_t>(r.buf)] << " -> out;\n";
  o << "}\n";
  return o.str();
}

}  // namespace frost::jit
