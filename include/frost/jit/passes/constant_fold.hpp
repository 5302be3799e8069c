// Freeze passes that turn what the trace saw into constants: the module's
// parameters become plan-owned copies, and every step whose inputs are all
// constants (a scale computed from parameters, a mask built from arange,
// ...) runs once now, in its own dtype, so that it gives eager's values.
// Guards on constants that hold are dropped.
#pragma once
#include "common.hpp"

namespace frost::jit::passes {

/// Parameters and buffers to plan-owned constants (the plan no longer sees later training).
inline void params_to_constants(FreezeState& st) {
  int n = 0;
  std::int64_t bytes = 0;
  for (auto& b : st.g.buffers) {
    if (b.kind != BufferKind::constant || !b.data) continue;
    auto copy = StorageImpl::cpu(b.data->nbytes);
    if (b.data->nbytes) std::memcpy(copy->data, b.data->data, b.data->nbytes);
    b.data = copy;
    ++n;
    bytes += static_cast<std::int64_t>(copy->nbytes);
  }
  st.report.push_back("parameters to constants: " + std::to_string(n) + " tensors, " + std::to_string(bytes) + " bytes");
}

inline bool foldable_kind(StepKind k) {
  return k != StepKind::guard && k != StepKind::random && k != StepKind::dropout && k != StepKind::batch_norm &&
         k != StepKind::linear;
}

/// Steps whose inputs are all constants run now; their outputs become constants.
inline void fold_constants(FreezeState& st) {
  Graph& g = st.g;
  const std::size_t nb = g.buffers.size();
  std::vector<bool> blocked(g.steps.size(), false), cand(g.steps.size(), false), cst(nb, false);
  const Uses u(g);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = 0; b < nb; ++b) cst[b] = g.buffers[b].kind == BufferKind::constant;
    for (std::size_t k = 0; k < g.steps.size(); ++k) {
      const Step& s = g.steps[k];
      cand[k] = !blocked[k] && foldable_kind(s.kind) &&
                std::all_of(s.in.begin(), s.in.end(), [&](const Slot& x) { return x.buf < 0 || cst[static_cast<std::size_t>(x.buf)]; });
      if (cand[k])
        for (const auto& o : s.out)
          if (o.buf >= 0) cst[static_cast<std::size_t>(o.buf)] = true;
    }
    // A buffer that some non-foldable step also writes cannot become a constant.
    for (std::size_t k = 0; k < g.steps.size(); ++k) {
      if (cand[k]) continue;
      for (const auto& o : g.steps[k].out) {
        if (o.buf < 0 || !cst[static_cast<std::size_t>(o.buf)]) continue;
        for (int w : u.writers[static_cast<std::size_t>(o.buf)])
          if (cand[static_cast<std::size_t>(w)] && !blocked[static_cast<std::size_t>(w)])
            blocked[static_cast<std::size_t>(w)] = changed = true;
      }
    }
  }
  // Evaluate in each step's own dtype, as eager did: in double, a mask like
  // arange(10) * 0.1f < 0.3f or v == v * 3 / 3 comes out otherwise (3 * 0.1f
  // is 0.3f in float, not in double), and a discrete step turns that ulp
  // into a different answer. Every buffer involved gets a shadow.
  std::map<int, std::vector<unsigned char>> shadow;
  auto shadow_of = [&](int b) -> void* {
    auto it = shadow.find(b);
    if (it != shadow.end()) return it->second.data();
    const Buffer& buf = g.buffers[static_cast<std::size_t>(b)];
    std::vector<unsigned char> bytes(static_cast<std::size_t>(buf.numel) * detail::dtype_size(buf.dtype));
    if (buf.kind == BufferKind::constant && !bytes.empty()) std::memcpy(bytes.data(), buf.data->data, bytes.size());
    return shadow.emplace(b, std::move(bytes)).first->second.data();
  };
  std::vector<void*> bases(nb, nullptr);
  std::vector<bool> dead(g.steps.size(), false);
  std::vector<int> made;
  int n = 0;
  for (std::size_t k = 0; k < g.steps.size(); ++k) {
    if (!cand[k]) continue;
    const Step& s = g.steps[k];
    for (const auto* list : {&s.in, &s.out})
      for (const auto& x : *list)
        if (x.buf >= 0) bases[static_cast<std::size_t>(x.buf)] = shadow_of(x.buf);
    detail::run_step(s, bases.data());
    for (const auto& o : s.out)
      if (o.buf >= 0) made.push_back(o.buf);
    dead[k] = true;
    ++n;
  }
  for (int b : made) {
    Buffer& buf = g.buffers[static_cast<std::size_t>(b)];
    if (buf.kind == BufferKind::constant) continue;
    buf.kind = BufferKind::constant;
    buf.name = "folded" + std::to_string(b);
    buf.data = StorageImpl::cpu(static_cast<std::size_t>(buf.numel) * detail::dtype_size(buf.dtype));
    const auto& sh = shadow[b];
    if (!sh.empty()) std::memcpy(buf.data->data, sh.data(), sh.size());
  }
  erase_steps(g, dead);
  st.report.push_back("constant folding: " + std::to_string(n) + " steps evaluated at freeze time");
}

/// Whether the values `s` sees in `data` satisfy guard `gd` (no allocation: plans call it on every run).
inline bool guard_holds(const Guard& gd, const Slot& s, DType dtype, const void* data) {
  const std::size_t es = detail::dtype_size(dtype);
  const auto* base = static_cast<const unsigned char*>(data);
  if (gd.how == frost::detail::HostRead::condition) {
    const auto* p = base + s.offset * static_cast<std::int64_t>(es);
    return detail::truth_at(dtype, p) == gd.outcome;
  }
  if (gd.expected.size() != static_cast<std::size_t>(s.numel()) * es) return false;
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    const std::int64_t off = s.offset + detail::strided_offset(s.shape, s.strides, i);
    if (std::memcmp(base + off * static_cast<std::int64_t>(es), gd.expected.data() + static_cast<std::size_t>(i) * es, es) != 0)
      return false;
  }
  return true;
}

/// Guards on constants are decided now: kept only when they depend on the inputs.
inline void resolve_constant_guards(FreezeState& st) {
  Graph& g = st.g;
  std::vector<bool> dead(g.steps.size(), false);
  int n = 0;
  for (std::size_t k = 0; k < g.steps.size(); ++k) {
    const Step& s = g.steps[k];
    if (s.kind != StepKind::guard || !is_constant(g, s.in[0].buf)) continue;
    const Buffer& b = g.buffers[static_cast<std::size_t>(s.in[0].buf)];
    const Guard& gd = g.guards[static_cast<std::size_t>(s.guard)];
    if (gd.how != frost::detail::HostRead::condition) {
      // The host read these values in the eager run and the code after it
      // used them: keep exactly those (a kernel summing in another order may
      // differ by an ulp).
      const std::size_t es = detail::dtype_size(b.dtype);
      const auto offs = element_offsets(s.in[0]);
      for (std::size_t i = 0; i < offs.size() && (i + 1) * es <= gd.expected.size(); ++i)
        std::memcpy(static_cast<unsigned char*>(b.data->data) + offs[i] * static_cast<std::int64_t>(es),
                    gd.expected.data() + i * es, es);
      st.exact.erase(s.in[0].buf);
    }
    FROST_CHECK(guard_holds(gd, s.in[0], b.dtype, b.data->data), "frost::jit::freeze: a guard on constants does not "
                "hold on the folded values (", gd.describe(), ")");
    dead[k] = true;
    ++n;
  }
  erase_steps(g, dead);
  const int left = static_cast<int>(std::count_if(g.steps.begin(), g.steps.end(), [](const Step& s) { return s.kind == StepKind::guard; }));
  st.report.push_back("guards: " + std::to_string(n) + " on constants decided now, " + std::to_string(left) +
                      " checked on every run");
}

}  // namespace frost::jit::passes
