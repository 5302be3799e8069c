// Freeze passes that merge steps: an activation right after a convolution
// or linear layer becomes its epilogue, chains of elementwise steps become
// one fused pass over memory, and linear weights are pre-packed [K, N] for
// the GEMM (no transposed operand on every run).
#pragma once
#include <map>
#include <tuple>
#include <vector>

#include "common.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace frost::jit::passes {

/// Activations the conv / linear kernels take as an epilogue.
inline bool epilogue_act(StepKind producer, UnaryOp op) {
  if (op == UnaryOp::relu) return true;  // cuDNN's fused conv epilogue takes relu only
  return producer == StepKind::linear &&
         (op == UnaryOp::sigmoid || op == UnaryOp::tanh || op == UnaryOp::gelu || op == UnaryOp::gelu_tanh ||
          op == UnaryOp::silu);
}

inline void fuse_epilogues(FreezeState& st) {
  Graph& g = st.g;
  int n = 0;
  rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    Step& p = g.steps[k];
    if ((p.kind != StepKind::conv2d && p.kind != StepKind::linear) || static_cast<UnaryOp>(p.op) != UnaryOp::copy)
      return false;
    const int x = p.out[0].buf;
    if (!p.out[0].covers(g.buffers[static_cast<std::size_t>(x)].numel)) return false;
    const auto& rd = u.readers[static_cast<std::size_t>(x)];
    if (rd.empty()) return false;
    const int r = rd[0];
    const Step& a = g.steps[static_cast<std::size_t>(r)];
    // In place (relu_ on x) or into a fresh whole buffer.
    const bool in_place = a.kind == StepKind::unary && a.out[0].buf == x;
    if (in_place) {
      const auto& w = u.writers[static_cast<std::size_t>(x)];
      if (w.size() != 2 || w[0] != static_cast<int>(k) || w[1] != r ||
          std::any_of(rd.begin(), rd.end(), [&](int j) { return j != r; }))
        return false;
    } else if (!u.single_use(x, static_cast<int>(k), r)) {
      return false;
    }
    if (a.kind != StepKind::unary || !epilogue_act(p.kind, static_cast<UnaryOp>(a.op)) ||
        a.in[0].shape != p.out[0].shape || !a.in[0].covers(g.buffers[static_cast<std::size_t>(x)].numel) ||
        !a.out[0].covers(g.buffers[static_cast<std::size_t>(a.out[0].buf)].numel) || a.out[0].shape != p.out[0].shape)
      return false;
    p.op = a.op;
    p.out[0] = a.out[0];
    erase_step(g, static_cast<std::size_t>(r));
    ++n;
    return true;
  });
  st.report.push_back("bias + activation epilogues: " + std::to_string(n) + " activations fused into conv/linear");
}

/// Threads a plan step may use (fixed at freeze time).
inline int plan_threads() {
#if defined(_OPENMP)
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

/// Convolution followed by max pooling of its whole output becomes one step
/// that pools each few images' conv output while it is in cache: the full
/// conv output (often the largest activation) is never stored. One image
/// goes in blocks of filters (output channels) instead, each thread's block near
/// kConvPoolBlockBytes, so that the threads split the image and its conv
/// output stays small (the scratch's dim 1 is the block).
inline constexpr std::int64_t kConvPoolBlockBytes = 64 << 10;
inline void fuse_conv_pool(FreezeState& st, std::int64_t images_per_block = 0) {
  Graph& g = st.g;
  int n = 0;
  rewrite_to_fixpoint(g, [&](const Uses& u, std::size_t k) {
    Step& p = g.steps[k];
    if (p.kind != StepKind::conv2d || p.conv.batch < 1) return false;
    // Channel blocks slice the weight by filters: one group only.
    const bool by_channels = p.conv.batch == 1;
    if (by_channels && p.conv.groups != 1) return false;
    const int x = p.out[0].buf;
    const Buffer& xb = g.buffers[static_cast<std::size_t>(x)];
    const auto& rd = u.readers[static_cast<std::size_t>(x)];
    if (!p.out[0].covers(xb.numel) || rd.empty() || !u.single_use(x, static_cast<int>(k), rd[0])) return false;
    const Step& q = g.steps[static_cast<std::size_t>(rd[0])];
    if (q.kind != StepKind::max_pool2d || q.out.size() != 1 || !q.in[0].covers(xb.numel) || q.in[0].shape != p.out[0].shape)
      return false;
    const std::int64_t O = p.conv.out_channels, hw = p.conv.out_h * p.conv.out_w;
    std::int64_t images = 1, block = O;
    int threads = 1;
    if (by_channels) {
      // A device (images_per_block > 0) runs the blocks one after another:
      // its scratch is one block, the same ~64 KiB, so a plan's device
      // memory at batch 1 stays near a third of eager's.
      const int nt = images_per_block > 0 ? 1 : plan_threads();
      const auto esize = static_cast<std::int64_t>(detail::dtype_size(xb.dtype));
      const std::int64_t plane = std::max<std::int64_t>(hw * esize, 1);
      block = std::clamp<std::int64_t>(kConvPoolBlockBytes / plane, 1, (O + nt - 1) / nt);
      if (images_per_block > 0 && block < O) {
        // Each block's filters and bias start 16-byte aligned, as the first
        // block's (whose timing cuDNN's algorithm cache reuses) do.
        const std::int64_t per_filter = p.conv.in_channels * p.conv.kernel_h * p.conv.kernel_w * esize;
        std::int64_t step = 1;
        while ((step * per_filter) % 16 != 0 || (step * esize) % 16 != 0) ++step;
        block = std::min(O, std::max(step, block / step * step));
      }
      threads = static_cast<int>(std::min<std::int64_t>(nt, (O + block - 1) / block));
    } else {
      // Images per conv call: about 256 output tiles of 2x2, what the Winograd GEMMs like.
      const std::int64_t tiles = ((p.conv.out_h + 1) / 2) * ((p.conv.out_w + 1) / 2);
      // A device runs blocks of images_per_block, one after another.
      images = images_per_block > 0 ? std::min(images_per_block, p.conv.batch)
                                    : std::clamp<std::int64_t>(1024 / std::max<std::int64_t>(tiles, 1), 1, 16);
      threads = images_per_block > 0 ? 1
                                     : static_cast<int>(std::min<std::int64_t>(plan_threads(), (p.conv.batch + images - 1) / images));
    }
    Buffer scratch;
    scratch.dtype = xb.dtype;
    const Shape ss{threads * images, block, p.conv.out_h, p.conv.out_w};
    scratch.numel = ss.numel();
    const int sb = g.add_buffer(std::move(scratch));
    p.kind = StepKind::conv2d_pool;
    p.pool = q.pool;
    p.i0 = images;
    p.out = {q.out[0], Slot{sb, 0, ss, contiguous_strides(ss)}};
    erase_step(g, static_cast<std::size_t>(rd[0]));
    ++n;
    return true;
  });
  st.report.push_back("conv + max pool: " + std::to_string(n) +
                      " pairs run image-block by image-block, or one image by blocks of filters (the conv output is never stored whole)");
}

/// conv + max pool steps whose CPU kernels pool in the conv's own pass
/// (F(4x4)'s output transform, the direct few-channel convolution) keep no
/// scratch: out[1] becomes an empty window whose first two extents still
/// give the threads' calls and the filter block. A device plan (frozen with
/// conv_pool_images) keeps its scratch.
template <class T>
void drop_pooled_scratch(FreezeState& st) {
  Backend<T>& be = backend_for<T>(Device::cpu());
  int n = 0;
  std::int64_t bytes = 0;
  for (auto& s : st.g.steps) {
    if (s.kind != StepKind::conv2d_pool || s.dtype != dtype_of<T>() || s.out[1].buf < 0) continue;
    if (!detail::pools_every_call(be, s, s.in.size() > 3 ? s.in[3].shape[0] : 0)) continue;
    bytes += s.out[1].numel() * static_cast<std::int64_t>(sizeof(T));
    const Shape none{s.out[1].shape[0], s.out[1].shape[1], 0, 0};
    s.out[1] = Slot{-1, 0, none, contiguous_strides(none)};
    ++n;
  }
  st.report.push_back("conv + max pool in one pass: " + std::to_string(n) + " steps pool in the conv's registers (" +
                      std::to_string(bytes) + " bytes of scratch not reserved)");
}

/// A unary or binary float step over dense windows of one shape, no broadcasting.
inline bool fusable(const Step& s) {
  if ((s.kind != StepKind::unary && s.kind != StepKind::binary) || !every_kind_dtype(s.dtype)) return false;
  const Slot& y = s.out[0];
  if (!y.dense()) return false;
  for (const auto& x : s.in)
    if (x.buf < 0 || x.shape != y.shape || !x.dense()) return false;
  return true;
}

/// Adjacent elementwise steps, each reading the previous one's result (used by it alone), become one step.
inline void fuse_elementwise(FreezeState& st) {
  Graph& g = st.g;
  const Uses u(g);
  std::vector<bool> dead(g.steps.size(), false);
  int n_groups = 0, n_steps = 0;
  for (std::size_t k = 0; k < g.steps.size();) {
    if (!fusable(g.steps[k])) {
      ++k;
      continue;
    }
    std::size_t e = k;  // the group is steps k..e
    while (e + 1 < g.steps.size() && e - k + 1 < 8 && fusable(g.steps[e + 1])) {
      const Step& cur = g.steps[e];
      const Step& nxt = g.steps[e + 1];
      const int r = cur.out[0].buf;
      const bool reads_it = std::any_of(nxt.in.begin(), nxt.in.end(), [&](const Slot& x) { return x.buf == r; });
      if (!reads_it || !u.single_use(r, static_cast<int>(e), static_cast<int>(e + 1)) || nxt.out[0].buf == r ||
          cur.out[0].offset != 0 || nxt.out[0].shape != cur.out[0].shape)
        break;
      ++e;
    }
    if (e == k) {  // nothing to fuse
      k = e + 1;
      continue;
    }
    Step f;
    f.kind = StepKind::elementwise;
    f.dtype = g.steps[k].dtype;
    f.out = {g.steps[e].out[0]};
    // Registers 0..7 hold the fused step's inputs (read in place), 8..15 the intermediate results.
    std::map<int, std::uint8_t> reg_of_result;
    bool fits = true;
    auto input_reg = [&](const Slot& x) -> std::uint8_t {
      auto r = reg_of_result.find(x.buf);
      if (r != reg_of_result.end()) return r->second;
      for (std::size_t i = 0; i < f.in.size(); ++i)
        if (f.in[i].buf == x.buf && f.in[i].offset == x.offset) return static_cast<std::uint8_t>(i);
      f.in.push_back(x);
      fits = fits && f.in.size() <= 8;
      return static_cast<std::uint8_t>(f.in.size() - 1);
    };
    std::vector<ElementwiseInstr> prog;
    std::uint8_t next = 8;
    for (std::size_t j = k; j <= e; ++j) {
      const Step& s = g.steps[j];
      ElementwiseInstr in;
      in.binary = s.kind == StepKind::binary;
      in.op = static_cast<std::uint8_t>(s.op);
      in.a = input_reg(s.in[0]);
      if (in.binary) in.b = input_reg(s.in[1]);
      in.p0 = s.p0;
      in.p1 = s.p1;
      in.dst = next++;
      if (j < e) reg_of_result[s.out[0].buf] = in.dst;
      prog.push_back(in);
    }
    if (!fits) {
      k = e + 1;
      continue;
    }
    f.program = std::move(prog);
    for (std::size_t j = k; j < e; ++j) dead[j] = true;
    n_steps += static_cast<int>(e - k + 1);
    ++n_groups;
    g.steps[e] = std::move(f);
    k = e + 1;
  }
  erase_steps(g, dead);
  st.report.push_back("elementwise fusion: " + std::to_string(n_steps) + " steps into " + std::to_string(n_groups) +
                      " fused kernels");
}

/// Linear weights [N, K] stored transposed [K, N] when the batch is large enough: the GEMM reads them row-major.
inline void pack_weights(FreezeState& st) {
  Graph& g = st.g;
  int n = 0;
  // Shared weights are packed once: the same window of the same buffer
  // (W and W[:4] are one buffer, not one weight).
  std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>, int> packed;
  for (auto& s : g.steps) {
    if (s.kind != StepKind::linear || s.i0 != 0 || s.in.size() > 3) continue;  // not the prepared ones
    // A few rows are matrix-vector products: there the [N, K] rows are the
    // contiguous dot products and packing makes it slower (1.7 -> 2.4 ms for
    // ResearchModel's classifier at batch 1).
    if (s.in[0].shape[0] < 16) continue;
    const Slot w = s.in[1];
    if (!is_constant(g, w.buf) || !w.dense()) continue;
    const std::int64_t nn = w.shape[0], kk = w.shape[1];
    const auto key = std::tuple{w.buf, w.offset, nn, kk};
    auto it = packed.find(key);
    if (it == packed.end()) {
      const auto v = constant_values(st, w.buf);
      std::vector<double> t(static_cast<std::size_t>(nn * kk));
      for (std::int64_t i = 0; i < nn; ++i)
        for (std::int64_t j = 0; j < kk; ++j)
          t[static_cast<std::size_t>(j * nn + i)] = v[static_cast<std::size_t>(w.offset + i * kk + j)];
      const auto& wb = g.buffers[static_cast<std::size_t>(w.buf)];
      it = packed.emplace(key, add_constant(st, wb.dtype, std::move(t), wb.name + "^T")).first;
      ++n;
    }
    s.in[1] = Slot{it->second, 0, Shape{kk, nn}, Shape{nn, 1}};
    s.i0 = 1;
  }
  st.report.push_back("weight pre-packing: " + std::to_string(n) + " linear weights stored [K, N]");
}

/// Weights in the CPU backend's own forms, made once instead of on every
/// run: convolution filters Winograd-transformed (2.25-4x their bytes; 25 us
/// a run per thread for ResearchModel's second conv at batch 1), from the
/// stored filters so that runs equal the unprepared plan's, as a constant
/// in[3]; linear weights in the GEMM kernel's panels for 16+ rows of x (a
/// third of ResearchModel's classifier product at batch 64) or in
/// matrix-vector panels for up to 8 (read front to back by each thread's
/// share), as a prepared buffer in[3] that the plan makes again on load. Steps keep their weights
/// as in[1]: a device freezes the traced graph again without these.
template <class T>
void prepare_weights(FreezeState& st) {
  Graph& g = st.g;
  Backend<T>& be = backend_for<T>(Device::cpu());
  int filters = 0, linears = 0, vectors = 0;
  // (filters' buffer, their shape, the prepared form) -> prepared buffer: two
  // convolutions share a bank only when they read the same filters (W and
  // W[:16] are one buffer but not one bank).
  std::map<std::tuple<int, std::vector<std::int64_t>, std::vector<std::int64_t>>, int> made;
  for (auto& s : g.steps) {
    if (s.in.size() != 3 || s.dtype != dtype_of<T>()) continue;
    const Slot w = s.in[1];
    if (!is_constant(g, w.buf) || !w.dense() || w.offset != 0) continue;
    const Buffer& wb = g.buffers[static_cast<std::size_t>(w.buf)];
    if (s.kind == StepKind::linear && s.i0 == 0 && s.in[0].strides[1] == 1) {
      const std::int64_t size = be.gemm_prepared_size(s.in[0].shape[0], w.shape[0], w.shape[1]);
      if (size == 0) continue;
      Buffer b;
      b.kind = BufferKind::prepared;
      b.dtype = wb.dtype;
      b.numel = size;
      b.name = wb.name + ".panels";
      const int id = g.add_buffer(std::move(b));
      s.in.push_back(Slot{id, 0, Shape{size}, Shape{1}});
      ++(be.gemm_prepared_part(s.in[0].shape[0]) > 0 ? vectors : linears);  // the form that takes parts: matrix-vector
      continue;
    }
    if (s.kind != StepKind::conv2d && s.kind != StepKind::conv2d_pool) continue;
    // The form one call makes: conv2d_pool's calls take i0 images, and blocks of filters.
    const Conv2dParams call = s.kind == StepKind::conv2d_pool ? detail::conv_pool_call(s).conv : s.conv;
    Shape form = be.conv2d_prepared_shape(call);
    if (form.ndim() == 0) continue;
    form[1] = s.conv.out_channels;  // the whole bank; a block's calls read their filters' rows
    const auto key = std::tuple{w.buf, std::vector<std::int64_t>(w.shape.begin(), w.shape.end()),
                                std::vector<std::int64_t>(form.begin(), form.end())};
    auto it = made.find(key);
    if (it == made.end()) {
      std::vector<T> u(static_cast<std::size_t>(form.numel()));
      be.conv2d_prepare(s.conv, View<const T>(static_cast<const T*>(wb.data->data), w.shape), View<T>(u.data(), form));
      it = made.emplace(key, add_constant(st, wb.dtype, std::vector<double>(u.begin(), u.end()),
                                                               wb.name + ".prepared"))
               .first;
      ++filters;
    }
    s.in.push_back(Slot{it->second, 0, form, contiguous_strides(form)});
  }
  detail::make_prepared<T>(g);
  st.report.push_back("weight preparation: " + std::to_string(filters) + " convolutions' filters Winograd-transformed, " +
                      std::to_string(linears) + " linear weights in GEMM panels, " + std::to_string(vectors) +
                      " in matrix-vector panels");
}

}  // namespace frost::jit::passes
