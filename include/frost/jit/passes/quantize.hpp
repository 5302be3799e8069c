// Freeze pass (FreezeOptions::quantize_linear): dynamic int8 quantization
// of linear layers, PyTorch's quantize_dynamic for nn.Linear. A linear step
// over a constant weight becomes a quantized_linear: its weight's int8 form
// is made once (a prepared buffer, made again on load from the float
// weight the file keeps, so refit still works), and each run quantizes the
// input rows into a scratch in the arena (backend/cpu/quantized_linear.hpp).
// CPU plans only: a plan moved to CUDA freezes without it.
#pragma once
#include <string>

#include "../../backend/cpu/quantized_linear.hpp"
#include "common.hpp"

namespace frost::jit::passes {

/// A linear the int8 kernel takes: a dense constant weight [N, K] (not
/// pre-packed, K within the int32 sums' limit), input rows dense. (Weights
/// holding inf or NaN have no int8 scale: making the int8 form refuses them.)
inline bool quantizable(const Graph& g, const Step& s) {
  if (s.kind != StepKind::linear || s.in.size() != 3 || s.i0 != 0 || !every_kind_dtype(s.dtype)) return false;
  const Slot &x = s.in[0], &w = s.in[1], &y = s.out[0];
  if (!is_constant(g, w.buf) || !w.dense() || w.shape.ndim() != 2 || x.shape.ndim() != 2 || x.strides[1] != 1 ||
      (x.shape[0] > 1 && x.strides[0] < x.shape[1]) || !y.dense() || x.shape[0] < 1 || w.shape[0] < 1 ||
      w.shape[1] < 1 || w.shape[1] > cpu::kMaxQuantizedDepth)
    return false;
  return true;
}

template <class T>
void quantize_linears(FreezeState& st) {
  Graph& g = st.g;
  int layers = 0;
  std::int64_t float_bytes = 0, int8_bytes = 0;
  for (auto& s : g.steps) {
    if (s.dtype != dtype_of<T>() || !quantizable(g, s)) continue;
    const Slot& w = s.in[1];
    const std::int64_t m = s.in[0].shape[0], n = w.shape[0], k = w.shape[1];
    Buffer blob;
    blob.kind = BufferKind::prepared;
    blob.dtype = s.dtype;
    blob.numel = cpu::ceil_div(cpu::QuantizedWeightLayout(n, k).total, sizeof(T));
    blob.name = g.buffers[static_cast<std::size_t>(w.buf)].name + ".int8";
    const std::int64_t blob_numel = blob.numel;
    const int q = g.add_buffer(std::move(blob));
    Buffer scratch;
    scratch.dtype = s.dtype;
    scratch.numel = cpu::ceil_div(cpu::QuantizedInputLayout(m, k).total, sizeof(T));
    const Shape ss{scratch.numel};
    const int sc = g.add_buffer(std::move(scratch));
    s.kind = StepKind::quantized_linear;
    s.in.push_back(Slot{q, 0, Shape{blob_numel}, Shape{1}});
    s.out.push_back(Slot{sc, 0, ss, contiguous_strides(ss)});
    ++layers;
    float_bytes += n * k * static_cast<std::int64_t>(sizeof(T));
    int8_bytes += n * cpu::QuantizedWeightLayout(n, k).kp;
  }
  detail::make_prepared<T>(g);
  st.report.push_back("dynamic int8 quantization: " + std::to_string(layers) + " linear layers (weights " +
                      std::to_string(float_bytes) + " bytes as floats, " + std::to_string(int8_bytes) +
                      " bytes as int8; input rows quantized each run)");
}

}  // namespace frost::jit::passes
