// The last freeze pass: every intermediate gets an offset in one arena.
// Elementwise steps and one-row linears write over an input that dies with
// them (in-place reuse); then buffers are placed largest first at the
// lowest offset free for their whole lifetime (first to last step touching them).
#pragma once
#include "common.hpp"

namespace frost::jit::passes {

struct MemoryPlan {
  std::vector<std::int64_t> offset;  // bytes, per buffer (-1: not in the arena)
  std::int64_t arena_bytes = 0;
};

inline std::int64_t buffer_bytes(const Buffer& b) {
  return (b.numel * static_cast<std::int64_t>(detail::dtype_size(b.dtype)) + 63) / 64 * 64;
}

/// Bytes of the intermediates some step or output uses.
inline std::int64_t intermediate_bytes(const Graph& g) {
  std::vector<bool> used(g.buffers.size(), false);
  for (const Step& s : g.steps)
    for (const auto* list : {&s.in, &s.out})
      for (const auto& x : *list)
        if (x.buf >= 0) used[static_cast<std::size_t>(x.buf)] = true;
  for (const auto& o : g.outputs)
    if (o.buf >= 0) used[static_cast<std::size_t>(o.buf)] = true;
  std::int64_t n = 0;
  for (std::size_t b = 0; b < g.buffers.size(); ++b)
    if (used[b] && g.buffers[b].kind == BufferKind::intermediate) n += buffer_bytes(g.buffers[b]);
  return n;
}

/// Outputs live in the arena: results that are inputs or constants are copied there at the end.
inline void materialize_outputs(FreezeState& st) {
  Graph& g = st.g;
  for (auto& o : g.outputs) {
    if (o.buf < 0) continue;  // an empty result
    const Buffer& b = g.buffers[static_cast<std::size_t>(o.buf)];
    if (b.kind == BufferKind::intermediate) continue;
    Buffer nb;
    nb.dtype = b.dtype;
    nb.numel = o.numel();
    const int id = g.add_buffer(std::move(nb));
    Step c;
    c.kind = StepKind::copy;
    c.dtype = g.buffers[static_cast<std::size_t>(o.buf)].dtype;
    c.in = {o};
    Slot dst{id, 0, o.shape, contiguous_strides(o.shape)};
    c.out = {dst};
    c.note = "output copied out of an input or constant";
    g.steps.push_back(std::move(c));
    o = dst;
  }
}

/// Elementwise steps whose input dies with them write over it, and so do
/// one-row linears over the CPU's prepared weights whose input row is at
/// most kInPlaceRowBytes (the runner reads a copy: linear_input).
inline int reuse_in_place(Graph& g) {
  int n = 0;
  rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    const Step& s = g.steps[k];
    const bool elementwise = s.kind == StepKind::unary || s.kind == StepKind::binary ||
                             s.kind == StepKind::elementwise || s.kind == StepKind::batch_norm;
    const bool row = s.kind == StepKind::linear && s.in.size() == 4 && s.in[0].shape[0] == 1 &&
                     s.in[0].numel() * static_cast<std::int64_t>(detail::dtype_size(s.dtype)) <= kInPlaceRowBytes;
    if (!(elementwise || row) || !every_kind_dtype(s.dtype)) return false;
    const int y = s.out[0].buf;
    const Buffer& yb = g.buffers[static_cast<std::size_t>(y)];
    if (yb.kind != BufferKind::intermediate || !s.out[0].covers(yb.numel) || u.writers[static_cast<std::size_t>(y)].size() != 1)
      return false;
    // batch norm's other inputs are its constant scale and shift; a linear's its weights
    const std::size_t candidates = elementwise && s.kind != StepKind::batch_norm ? s.in.size() : 1;
    for (std::size_t i = 0; i < candidates; ++i) {
      const int x = s.in[i].buf;
      if (x < 0 || x == y) continue;
      const Buffer& xb = g.buffers[static_cast<std::size_t>(x)];
      const auto& rd = u.readers[static_cast<std::size_t>(x)];
      const auto& wr = u.writers[static_cast<std::size_t>(x)];
      const auto later = [&](int j) { return j > static_cast<int>(k); };
      // A linear's output may be the smaller, and its input the front of a
      // larger buffer that dies with it: y takes the front of that buffer.
      const bool fits = row ? s.in[i].offset == 0 && s.in[i].dense() && yb.numel <= xb.numel
                            : s.in[i].covers(xb.numel) && xb.numel == yb.numel;
      // Every other read of x in this step must be the same window: h + h.t()
      // or h * h[0] (broadcast) written over h would read elements it has
      // already overwritten.
      const bool one_window = std::all_of(s.in.begin(), s.in.end(), [&](const Slot& o) {
        return o.buf != x || (o.offset == s.in[i].offset && o.shape == s.in[i].shape && o.strides == s.in[i].strides);
      });
      if (xb.kind != BufferKind::intermediate || !fits || !one_window || xb.dtype != yb.dtype || u.output[static_cast<std::size_t>(x)] ||
          std::any_of(rd.begin(), rd.end(), later) || std::any_of(wr.begin(), wr.end(), later))
        continue;
      alias(g, y, x, k);
      ++n;
      return true;
    }
    return false;
  });
  return n;
}

/// Offsets for every intermediate in one arena, by liveness.
inline MemoryPlan plan_memory(FreezeState& st) {
  Graph& g = st.g;
  const std::int64_t total = intermediate_bytes(g);  // each in a place of its own
  const int in_place = reuse_in_place(g);
  const std::size_t nb = g.buffers.size();
  std::vector<int> first(nb, -1), last(nb, -1);
  const int end = static_cast<int>(g.steps.size());
  for (int k = 0; k < end; ++k) {
    for (const auto* list : {&g.steps[static_cast<std::size_t>(k)].in, &g.steps[static_cast<std::size_t>(k)].out})
      for (const auto& x : *list) {
        if (x.buf < 0) continue;
        auto b = static_cast<std::size_t>(x.buf);
        if (first[b] < 0) first[b] = k;
        last[b] = k;
      }
  }
  for (const auto& o : g.outputs)
    if (o.buf >= 0) last[static_cast<std::size_t>(o.buf)] = end;  // alive when run() returns
  std::vector<int> order;
  for (std::size_t b = 0; b < nb; ++b)
    if (g.buffers[b].kind == BufferKind::intermediate && first[b] >= 0) order.push_back(static_cast<int>(b));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return buffer_bytes(g.buffers[static_cast<std::size_t>(a)]) > buffer_bytes(g.buffers[static_cast<std::size_t>(b)]);
  });
  MemoryPlan mp;
  mp.offset.assign(nb, -1);
  std::vector<int> placed;
  for (int b : order) {
    const auto ub = static_cast<std::size_t>(b);
    const std::int64_t size = buffer_bytes(g.buffers[ub]);
    // Intervals taken by placed buffers whose lifetimes overlap this one, sorted by offset.
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (int p : placed) {
      const auto up = static_cast<std::size_t>(p);
      if (last[up] < first[ub] || last[ub] < first[up]) continue;
      busy.emplace_back(mp.offset[up], mp.offset[up] + buffer_bytes(g.buffers[up]));
    }
    std::sort(busy.begin(), busy.end());
    std::int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + size <= lo) break;
      at = std::max(at, hi);
    }
    mp.offset[ub] = at;
    mp.arena_bytes = std::max(mp.arena_bytes, at + size);
    placed.push_back(b);
  }
  st.report.push_back("memory plan: " + std::to_string(order.size()) + " intermediates in a " +
                      std::to_string(mp.arena_bytes) + "-byte arena (" + std::to_string(total) +
                      " bytes unplanned), " + std::to_string(in_place) + " written in place");
  return mp;
}

}  // namespace frost::jit::passes
