// Freeze passes that remove work: dropout (evaluation semantics) and
// identity copies become aliases, and steps nothing downstream reads are
// dropped (dead-code elimination), with the constants only they used.
#pragma once
#include "common.hpp"

namespace frost::jit::passes {

/// Whether step `s` copies one dense buffer whole into another.
inline bool identity_copy(const Graph& g, const Step& s) {
  const bool copy_like = s.kind == StepKind::copy || s.kind == StepKind::dropout ||
                         (s.kind == StepKind::unary && ((static_cast<UnaryOp>(s.op) == UnaryOp::copy) ||
                                                        (static_cast<UnaryOp>(s.op) == UnaryOp::mul_scalar && s.p0 == 1) ||
                                                        (static_cast<UnaryOp>(s.op) == UnaryOp::add_scalar && s.p0 == 0)));
  if (!copy_like || s.in[0].buf < 0 || s.out[0].buf < 0 || s.in[0].buf == s.out[0].buf) return false;
  const auto& a = g.buffers[static_cast<std::size_t>(s.in[0].buf)];
  const auto& b = g.buffers[static_cast<std::size_t>(s.out[0].buf)];
  return a.numel == b.numel && a.dtype == b.dtype && s.in[0].covers(a.numel) && s.out[0].covers(b.numel);
}

/// Whether step `s` writes only 0 and 1 of its dtype: a comparison.
inline bool writes_zero_one(const Step& s) {
  if (s.kind == StepKind::unary) {
    const auto op = static_cast<UnaryOp>(s.op);
    return op == UnaryOp::eq_scalar || op == UnaryOp::ne_scalar || op == UnaryOp::lt_scalar ||
           op == UnaryOp::le_scalar || op == UnaryOp::gt_scalar || op == UnaryOp::ge_scalar;
  }
  if (s.kind != StepKind::binary) return false;
  const auto op = static_cast<BinaryOp>(s.op);
  return op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::le || op == BinaryOp::gt ||
         op == BinaryOp::ge;
}

/// A comparison's 0 / 1 cast to bool and back to its own dtype (the bool a
/// `<` returns, read by where() or a product in float): the second cast's
/// readers read the comparison's output instead, and dead-code elimination
/// drops the first cast when nothing else reads the bool. Returns how many.
inline int remove_bool_round_trips(Graph& g) {
  int n = 0;
  rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    const Step& back = g.steps[k];
    if (back.kind != StepKind::cast || static_cast<DType>(back.op) != DType::bool_ || back.in[0].buf < 0 || back.out[0].buf < 0)
      return false;
    const int b = back.in[0].buf, c = back.out[0].buf;
    if (u.writers[static_cast<std::size_t>(b)].size() != 1 || u.writers[static_cast<std::size_t>(c)].size() != 1) return false;
    const Step& to_bool = g.steps[static_cast<std::size_t>(u.writers[static_cast<std::size_t>(b)][0])];
    if (to_bool.kind != StepKind::cast || to_bool.dtype != DType::bool_ || static_cast<DType>(to_bool.op) != back.dtype ||
        to_bool.in[0].buf < 0)
      return false;
    const int a = to_bool.in[0].buf;
    const auto& aw = u.writers[static_cast<std::size_t>(a)];
    if (aw.size() != 1 || !writes_zero_one(g.steps[static_cast<std::size_t>(aw[0])])) return false;
    const Buffer& ab = g.buffers[static_cast<std::size_t>(a)];
    const Buffer& bb = g.buffers[static_cast<std::size_t>(b)];
    const Buffer& cb = g.buffers[static_cast<std::size_t>(c)];
    if (ab.numel != cb.numel || !to_bool.in[0].covers(ab.numel) || !to_bool.out[0].covers(bb.numel) ||
        !back.in[0].covers(bb.numel) || !back.out[0].covers(cb.numel))
      return false;
    if (u.output[static_cast<std::size_t>(c)] && u.output[static_cast<std::size_t>(a)]) return false;
    alias(g, c, a, k + 1);
    erase_step(g, k);
    ++n;
    return true;
  });
  return n;
}

/// Dropout, whole-buffer identity copies and a comparison's bool round trip:
/// later steps read the source directly.
inline void remove_identities(FreezeState& st) {
  Graph& g = st.g;
  int n_dropout = 0, n_copy = 0;
  rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    const Step& s = g.steps[k];
    if (!identity_copy(g, s)) return false;
    const int src = s.in[0].buf, dst = s.out[0].buf;
    const auto& dw = u.writers[static_cast<std::size_t>(dst)];
    const auto& sw = u.writers[static_cast<std::size_t>(src)];
    // dst must be made by this step alone, and src must not change after it.
    if (dw.size() != 1 || std::any_of(sw.begin(), sw.end(), [&](int w) { return w > static_cast<int>(k); })) return false;
    if (u.output[static_cast<std::size_t>(dst)] && u.output[static_cast<std::size_t>(src)]) return false;
    (s.kind == StepKind::dropout ? n_dropout : n_copy)++;
    alias(g, dst, src, k + 1);
    erase_step(g, k);
    return true;
  });
  const int n_bool = remove_bool_round_trips(g);
  st.report.push_back("dropout/identity removal: " + std::to_string(n_dropout) + " dropout, " + std::to_string(n_copy) +
                      " identity copies, " + std::to_string(n_bool) + " bool round trips");
}

/// Steps whose results nobody reads, and constants nobody uses.
inline void eliminate_dead_code(FreezeState& st) {
  Graph& g = st.g;
  std::vector<bool> needed(g.buffers.size(), false), dead(g.steps.size(), false);
  for (const auto& o : g.outputs)
    if (o.buf >= 0) needed[static_cast<std::size_t>(o.buf)] = true;
  int n = 0;
  for (std::size_t k = g.steps.size(); k-- > 0;) {
    const Step& s = g.steps[k];
    const bool keep = s.kind == StepKind::guard ||
                      std::any_of(s.out.begin(), s.out.end(), [&](const Slot& o) { return o.buf >= 0 && needed[static_cast<std::size_t>(o.buf)]; });
    if (!keep) {
      dead[k] = true;
      ++n;
      continue;
    }
    for (const auto& x : s.in)
      if (x.buf >= 0) needed[static_cast<std::size_t>(x.buf)] = true;
  }
  erase_steps(g, dead);
  std::int64_t freed = 0;
  const Uses u(g);
  for (std::size_t b = 0; b < g.buffers.size(); ++b) {
    auto& buf = g.buffers[b];
    if (buf.kind != BufferKind::constant || !buf.data || !u.readers[b].empty() || u.output[b]) continue;
    freed += static_cast<std::int64_t>(buf.data->nbytes);
    buf.data.reset();
    buf.numel = 0;
    st.exact.erase(static_cast<int>(b));
  }
  st.report.push_back("dead-code elimination: " + std::to_string(n) + " steps, " + std::to_string(freed) +
                      " bytes of unused constants");
}

}  // namespace frost::jit::passes
