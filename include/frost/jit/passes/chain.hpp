// Freeze pass: consecutive linear layers over many rows (an MLP at batch 16+)
// become one linear_chain step that runs them depth-first, a block of rows
// at a time through every layer. Layer by layer, each hidden activation is
// stored for the whole batch (64 x 256 floats twice for the guide's MLP,
// as eager holds them); depth-first, only a block's rows are, per thread.
#pragma once
#include "fuse.hpp"

namespace frost::jit::passes {

/// Rows a block: gemm_panels' register block, so W is read once a block.
inline constexpr std::int64_t kChainRows = 8;
/// Every block reads all of the chain's weights again, so chains stop
/// before their weights outgrow the caches (the MLP's are 1.07 MB;
/// ResearchModel's classifier, 16.8 MB, stays layer by layer).
inline constexpr std::int64_t kChainWeightBytes = std::int64_t{4} << 20;

/// A linear step on W's panels (prepare_weights) over rows of x that are dense, with at least two row blocks.
inline bool chainable(const Graph& g, const Step& s) {
  return s.kind == StepKind::linear && s.in.size() == 4 && s.i0 == 0 && s.in[0].shape[0] >= 2 * kChainRows &&
         s.in[0].strides[1] == 1 && s.in[0].strides[0] >= s.in[0].shape[1] && s.out[0].dense() &&
         g.buffers[static_cast<std::size_t>(s.in[1].buf)].kind == BufferKind::constant;
}

inline std::int64_t weight_bytes(const Step& s) {
  return s.in[1].numel() * static_cast<std::int64_t>(detail::dtype_size(s.dtype));
}

inline void chain_linears(FreezeState& st) {
  Graph& g = st.g;
  int chains = 0, layers_in = 0;
  std::int64_t saved = 0;
  rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    if (!chainable(g, g.steps[k])) return false;
    // Extend while the next step is a chainable linear reading all of this one's output, alone.
    std::size_t end = k + 1;
    std::int64_t bytes = weight_bytes(g.steps[k]);
    while (end < g.steps.size() && end - k < static_cast<std::size_t>(kMaxChainLayers)) {
      const Step &a = g.steps[end - 1], &c = g.steps[end];
      const int h = a.out[0].buf;
      if (!chainable(g, c) || c.dtype != a.dtype || c.in[0].shape[0] != a.in[0].shape[0] ||
          g.buffers[static_cast<std::size_t>(h)].kind != BufferKind::intermediate ||
          !a.out[0].covers(g.buffers[static_cast<std::size_t>(h)].numel) ||
          !u.single_use(h, static_cast<int>(end - 1), static_cast<int>(end)) || c.in[0].buf != h ||
          c.in[0].offset != a.out[0].offset || c.in[0].shape != a.out[0].shape || c.in[0].strides != a.out[0].strides ||
          bytes + weight_bytes(c) > kChainWeightBytes)
        break;
      bytes += weight_bytes(c);
      ++end;
    }
    if (end - k < 2) return false;
    Step chain;
    chain.kind = StepKind::linear_chain;
    chain.dtype = g.steps[k].dtype;
    chain.i0 = kChainRows;
    chain.in = {g.steps[k].in[0]};
    std::int64_t widest = 0;
    for (std::size_t j = k; j < end; ++j) {
      const Step& s = g.steps[j];
      chain.in.insert(chain.in.end(), {s.in[1], s.in[2], s.in[3]});
      chain.program.push_back(ElementwiseInstr{false, static_cast<std::uint8_t>(s.op)});
      if (j + 1 < end) {
        widest = std::max(widest, s.out[0].shape[1]);
        saved += g.buffers[static_cast<std::size_t>(s.out[0].buf)].numel * static_cast<std::int64_t>(detail::dtype_size(s.dtype));
      }
    }
    const std::int64_t m = chain.in[0].shape[0], blocks = (m + kChainRows - 1) / kChainRows;
    const std::int64_t layers = static_cast<std::int64_t>(end - k);
    const Shape ss{std::min<std::int64_t>(plan_threads(), blocks), layers > 2 ? 2 : 1, kChainRows, widest};
    Buffer scratch;
    scratch.dtype = chain.dtype;
    scratch.numel = ss.numel();
    saved -= scratch.numel * static_cast<std::int64_t>(detail::dtype_size(chain.dtype));
    chain.out = {g.steps[end - 1].out[0], Slot{g.add_buffer(std::move(scratch)), 0, ss, contiguous_strides(ss)}};
    chain.note = std::to_string(layers) + " linear layers, " + std::to_string(kChainRows) + " rows at a time";
    g.steps[k] = std::move(chain);
    g.steps.erase(g.steps.begin() + static_cast<std::ptrdiff_t>(k) + 1, g.steps.begin() + static_cast<std::ptrdiff_t>(end));
    ++chains;
    layers_in += static_cast<int>(layers);
    return true;
  });
  st.report.push_back("linear chains: " + std::to_string(chains) + " chains of " + std::to_string(layers_in) +
                      " layers run " + std::to_string(kChainRows) + " rows at a time through every layer (" +
                      std::to_string(saved) + " bytes of hidden activations never stored whole)");
}

}  // namespace frost::jit::passes
