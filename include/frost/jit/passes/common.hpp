// What every freeze pass shares: the graph being rewritten, exact (double)
// copies of the constants that the affine folding and weight packing made,
// the report lines summary() prints, and use/def queries over buffers.
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../execute.hpp"
#include "../graph.hpp"

namespace frost::jit {

struct FreezeState {
  Graph g;
  /// Double values of float constants computed by passes (batch norm and
  /// per-channel scales fold into weights in double and are cast back once,
  /// so folded weights carry one rounding).
  std::map<int, std::vector<double>> exact;
  std::vector<std::string> report;
};

namespace passes {

/// Constant values of buffer `b` in double: the exact copy when a pass made one.
inline std::vector<double> constant_values(const FreezeState& st, int b) {
  auto it = st.exact.find(b);
  if (it != st.exact.end()) return it->second;
  const Buffer& buf = st.g.buffers[static_cast<std::size_t>(b)];
  std::vector<double> v(static_cast<std::size_t>(buf.numel));
  visit_dtype(buf.dtype, [&](auto tag) {
    using U = decltype(tag);
    const U* p = static_cast<const U*>(buf.data->data);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(p[i]);
  });
  return v;
}

/// A new constant buffer holding `v` (cast to `dtype`), with its exact copy kept.
inline int add_constant(FreezeState& st, DType dtype, std::vector<double> v, std::string name) {
  Buffer b;
  b.kind = BufferKind::constant;
  b.dtype = dtype;
  b.numel = static_cast<std::int64_t>(v.size());
  b.name = std::move(name);
  b.data = StorageImpl::cpu(v.size() * detail::dtype_size(dtype));
  visit_dtype(dtype, [&](auto tag) {
    using U = decltype(tag);
    U* p = static_cast<U*>(b.data->data);
    for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<U>(v[i]);
  });
  const int id = st.g.add_buffer(std::move(b));
  if (is_floating_point(dtype)) st.exact[id] = std::move(v);
  return id;
}

/// Element offsets (relative to the slot's offset) of every element of `s`, row-major.
inline std::vector<std::int64_t> element_offsets(const Slot& s) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(s.numel()));
  for (std::int64_t i = 0; i < s.numel(); ++i) out[static_cast<std::size_t>(i)] = s.offset + detail::strided_offset(s.shape, s.strides, i);
  return out;
}

/// Readers and writers of each buffer (step indices), and whether outputs use it.
struct Uses {
  std::vector<std::vector<int>> readers, writers;
  std::vector<bool> output;
  explicit Uses(const Graph& g)
      : readers(g.buffers.size()), writers(g.buffers.size()), output(g.buffers.size(), false) {
    for (std::size_t k = 0; k < g.steps.size(); ++k) {
      for (const auto& s : g.steps[k].in)
        if (s.buf >= 0) readers[static_cast<std::size_t>(s.buf)].push_back(static_cast<int>(k));
      for (const auto& s : g.steps[k].out)
        if (s.buf >= 0) writers[static_cast<std::size_t>(s.buf)].push_back(static_cast<int>(k));
    }
    for (const auto& o : g.outputs)
      if (o.buf >= 0) output[static_cast<std::size_t>(o.buf)] = true;
  }
  /// Written once, by step k, read by step r alone (and not a graph output).
  bool single_use(int buf, int k, int r) const {
    const auto b = static_cast<std::size_t>(buf);
    if (output[b] || writers[b].size() != 1 || writers[b][0] != k) return false;
    const auto& rd = readers[b];
    return !rd.empty() && std::all_of(rd.begin(), rd.end(), [&](int x) { return x == r; });
  }
};

/// Later uses of buffer `from` read buffer `to` instead (same dense layout).
inline void alias(Graph& g, int from, int to, std::size_t after_step) {
  for (std::size_t k = after_step; k < g.steps.size(); ++k) {
    for (auto& s : g.steps[k].in)
      if (s.buf == from) s.buf = to;
    for (auto& s : g.steps[k].out)
      if (s.buf == from) s.buf = to;
  }
  for (auto& o : g.outputs)
    if (o.buf == from) o.buf = to;
}

/// Drops the steps marked in `dead`.
inline void erase_steps(Graph& g, const std::vector<bool>& dead) {
  std::size_t w = 0;
  for (std::size_t k = 0; k < g.steps.size(); ++k) {
    if (dead[k]) continue;
    if (w != k) g.steps[w] = std::move(g.steps[k]);  // never self-move: it would empty the step's vectors
    ++w;
  }
  g.steps.resize(w);
}

/// Drops step `k`.
inline void erase_step(Graph& g, std::size_t k) {
  std::vector<bool> dead(g.steps.size(), false);
  dead[k] = true;
  erase_steps(g, dead);
}

/// Offers each step to `try_at(uses, k)`; after a rewrite (it returns true)
/// the sweep starts over with fresh uses, until a sweep rewrites nothing.
template <class F>
void rewrite_to_fixpoint(Graph& g, F&& try_at) {
  for (bool again = true; again;) {
    again = false;
    const Uses u(g);
    for (std::size_t k = 0; k < g.steps.size() && !again; ++k) again = try_at(u, k);
  }
}

inline bool is_constant(const Graph& g, int buf) {
  return buf >= 0 && g.buffers[static_cast<std::size_t>(buf)].kind == BufferKind::constant;
}

/// `c` is a per-channel (dim 1) or scalar operand against an output window of shape `y`.
inline bool per_channel(const Slot& c, const Shape& y) {
  if (c.shape != y) return false;
  for (int d = 0; d < y.ndim(); ++d)
    if (d != 1 && y[d] != 1 && c.strides[d] != 0) return false;
  return true;
}

}  // namespace passes
}  // namespace frost::jit
