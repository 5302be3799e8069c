// Runs one Step over raw buffer addresses: the same backend kernels the eager
// ops call ("one kernel, two callers"), with views rebuilt from the step's
// windows. Nothing here allocates: plans call it in their steady state, and
// constant folding calls it on double copies of the constants.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include "../backend/cpu/parallel.hpp"
#include "../backend/cpu/quantized_linear.hpp"
#include "graph.hpp"

namespace frost::jit::detail {

using Bases = void* const*;

template <class U>
U* ptr(const Slot& s, Bases b) {
  return s.buf < 0 ? nullptr : static_cast<U*>(b[s.buf]) + s.offset;
}
template <class U>
View<U> view(const Slot& s, Bases b) {
  return {ptr<U>(s, b), s.shape, s.strides};
}

/// A per-channel vector [C] seen against an [N, C, *] (or [N, C]) window.
template <class U>
View<const U> channel_view(const Slot& vec, const Shape& like, Bases b) {
  Shape st = Shape::filled(like.ndim(), 0);
  st[1] = vec.strides[0];
  return {ptr<const U>(vec, b), like, st};
}

/// y[r, 0:n] = act(y[r, 0:n] + bias) for `rows` rows of y (row stride ldy;
/// bias null for none): a linear layer's epilogue.
template <class T>
void bias_act(T* y, std::int64_t ldy, std::int64_t rows, std::int64_t n, const T* bias, UnaryOp act) {
  for (std::int64_t i = 0; i < rows; ++i) {
    T* row = y + i * ldy;
    if (bias)
      for (std::int64_t j = 0; j < n; ++j) row[j] += bias[j];
    if (act == UnaryOp::relu) {
      for (std::int64_t j = 0; j < n; ++j) row[j] = row[j] > T(0) ? row[j] : T(0);
    } else if (act != UnaryOp::copy) {
      for (std::int64_t j = 0; j < n; ++j) row[j] = fn::unary(act, row[j], T(0), T(0));
    }
  }
}

/// y[:, n0:n1] = act(y + b[n0:n1]) for the rows of y at `yp` (ld n): the
/// bias and activation a linear step carries.
template <class T>
void linear_epilogue(const Step& s, Bases b, T* yp, std::int64_t n0, std::int64_t n1) {
  const T* bp = s.in[2].buf >= 0 ? ptr<const T>(s.in[2], b) + n0 : nullptr;
  bias_act<T>(yp, s.out[0].shape[1], s.in[0].shape[0], n1 - n0, bp, static_cast<UnaryOp>(s.op));
}

/// The input a linear step reads: x where it is, or, when the step writes
/// over it (writes_over_input), its row copied to `row` (kInPlaceRowBytes).
/// The caller copies before any thread writes and lets every thread read the copy.
template <class T>
const T* linear_input(const Step& s, Bases b, T* row) {
  const T* x = ptr<const T>(s.in[0], b);
  if (!writes_over_input(s)) return x;
  const std::int64_t k = s.in[0].shape[1];
  // The loader admits no other form (validate.hpp); a check costs nothing next to the product.
  FROST_CHECK(s.in[0].shape[0] == 1 && k * static_cast<std::int64_t>(sizeof(T)) <= kInPlaceRowBytes,
              "frost::jit: a linear over ", s.in[0].shape.str(), " cannot write over its input");
  std::copy_n(x, k, row);
  return row;
}

/// y[:, n0:n1] = act(x W[n0:n1]^T + b[n0:n1]) (W packed [K, N]: its columns
/// n0:n1), x's data at `xp` (linear_input): the GEMM, then bias and
/// activation while the block is in cache.
template <class T>
void linear_block(const Step& s, Bases b, const T* xp, std::int64_t n0, std::int64_t n1) {
  Backend<T>& be = backend_for<T>(Device::cpu());
  const Slot &x = s.in[0], &w = s.in[1], &y = s.out[0];
  const std::int64_t m = x.shape[0], k = x.shape[1], n = y.shape[1], nb = n1 - n0;
  const auto [ta, lda] = linear_gemm_input(x);
  T* yp = ptr<T>(y, b) + n0;
  if (s.in.size() > 3)  // the CPU's panels of W (whole rows unless they take parts: takes_parts)
    be.gemm_prepared(m, m, n, k, xp, lda, ptr<const T>(s.in[3], b), ptr<T>(y, b), n, n0, n1, 0, k);
  else if (s.i0) be.gemm(ta, false, m, nb, k, T(1), xp, lda, 0, ptr<const T>(w, b) + n0, n, 0, T(0), yp, n, 0, 1);
  else be.gemm(ta, true, m, nb, k, T(1), xp, lda, 0, ptr<const T>(w, b) + n0 * w.strides[0], w.strides[0], 0, T(0), yp, n, 0, 1);
  linear_epilogue<T>(s, b, yp, n0, n1);
}
/// ... over all of y, on this thread.
template <class T>
void linear_whole(const Step& s, Bases b) {
  alignas(64) T row[kInPlaceRowBytes / sizeof(T)];
  linear_block<T>(s, b, linear_input<T>(s, b, row), 0, s.out[0].shape[1]);
}

/// True when a linear step's product can be done in parts (outputs from
/// multiples of 16, any inputs): W itself, or prepared panels that allow it.
inline bool takes_parts(const Step& s) {
  if (s.in.size() <= 3) return true;
  auto part = [&](auto& be) {
    const std::int64_t q = be.gemm_prepared_part(s.in[0].shape[0]);
    return q > 0 && 16 % q == 0;
  };
  if (s.dtype == DType::float32) return part(backend_for<float>(Device::cpu()));
  return s.dtype == DType::float64 && part(backend_for<double>(Device::cpu()));
}
/// A linear over a few rows: a matrix-vector product, bound by reading W.
inline bool few_rows_linear(const Step& s) {
  return s.kind == StepKind::linear && s.in[0].shape[0] <= 8 && takes_parts(s);
}
/// ... whose W is worth splitting by its rows over the threads (eager's GEMM
/// keeps such small products on one core).
inline bool split_linear(const Step& s) {
  const std::int64_t k = s.in[0].shape[1], n = s.out[0].shape[1];
  return few_rows_linear(s) && n >= 64 && n * k >= (std::int64_t{1} << 16);
}

/// Thread t of nt's share [first, second) of n columns: 64-byte aligned blocks.
inline std::pair<std::int64_t, std::int64_t> share(std::int64_t n, std::int64_t t, std::int64_t nt) {
  const std::int64_t per = (n / nt + 15) / 16 * 16;
  const std::int64_t n0 = std::min(n, t * per);
  return {n0, t + 1 == nt ? n : std::min(n, n0 + per)};
}
template <class T>
void linear_share(const Step& s, Bases b, const T* xp, std::int64_t t, std::int64_t nt) {
  const auto [n0, n1] = share(s.out[0].shape[1], t, nt);
  if (n0 < n1) linear_block<T>(s, b, xp, n0, n1);
}

/// y = act(x W^T + b), split over the threads when split_linear.
template <class T>
void run_linear(const Step& s, Bases b) {
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  if (split_linear(s) && threads > 1 && !omp_in_parallel()) {
    alignas(64) T row[kInPlaceRowBytes / sizeof(T)];
    const T* xp = linear_input<T>(s, b, row);
#pragma omp parallel num_threads(threads)
    linear_share<T>(s, b, xp, omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  linear_whole<T>(s, b);
}

/// The partial sums of a layer split by its inputs live on the calling
/// thread's stack (as Eigen's GEMV keeps its temporaries), at most this many bytes.
inline constexpr std::size_t kChainPartialBytes = 16384;

/// True when `next` can take `prev`'s output split by inputs: thread t then
/// multiplies the slice of y it just wrote by the matching columns of
/// next's W, with no barrier between the layers (partial sums: one per thread).
inline bool pairs_with(const Step& prev, const Step& next, std::int64_t threads, std::size_t elem) {
  const Slot &y = prev.out[0], &x = next.in[0];
  return split_linear(prev) && split_linear(next) && x.buf == y.buf && x.offset == y.offset && x.shape == y.shape &&
         x.strides == y.strides && x.strides[1] == 1 &&
         static_cast<std::size_t>(threads * x.shape[0] * next.out[0].shape[1]) * elem <= kChainPartialBytes;
}

/// next's rows of x times its inputs k0:k1 (the slice of x and W's matching
/// columns) into `out` (ld n): a partial sum, no bias or activation.
template <class T>
void linear_partial(const Step& next, Bases b, std::int64_t k0, std::int64_t k1, T* out) {
  Backend<T>& be = backend_for<T>(Device::cpu());
  const Slot &x = next.in[0], &w = next.in[1];
  const std::int64_t m = x.shape[0], n = next.out[0].shape[1], lda = std::max<std::int64_t>(x.strides[0], 1);
  if (next.in.size() > 3) {  // panels that take parts (few_rows_linear)
    be.gemm_prepared(m, m, n, x.shape[1], ptr<const T>(x, b), lda, ptr<const T>(next.in[3], b), out, n, 0, n, k0, k1);
    return;
  }
  const T* xp = ptr<const T>(x, b) + k0;
  if (next.i0) be.gemm(false, false, m, n, k1 - k0, T(1), xp, lda, 0, ptr<const T>(w, b) + k0 * n, n, 0, T(0), out, n, 0, 1);
  else be.gemm(false, true, m, n, k1 - k0, T(1), xp, lda, 0, ptr<const T>(w, b) + k0, w.strides[0], 0, T(0), out, n, 0, 1);
}

/// next's y[:, j0:j1] = act(the threads' partial sums + b): threads whose
/// share of the inputs was empty wrote none.
template <class T>
void reduce_partials(const Step& next, Bases b, const T* partial, std::int64_t nt, std::int64_t j0, std::int64_t j1) {
  const std::int64_t m = next.in[0].shape[0], k = next.in[0].shape[1], n = next.out[0].shape[1];
  T* y = ptr<T>(next.out[0], b);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = j0; j < j1; ++j) y[i * n + j] = partial[i * n + j];
    for (std::int64_t t = 1; t < nt; ++t) {
      const auto [k0, k1] = share(k, t, nt);
      if (k0 == k1) continue;
      const T* p = partial + t * m * n + i * n;
      for (std::int64_t j = j0; j < j1; ++j) y[i * n + j] += p[j];
    }
  }
  linear_epilogue<T>(next, b, y + j0, j0, j1);
}

/// Steps [first, first + count), all few_rows_linear CPU steps of type T,
/// in one OpenMP region (an MLP's three layers at batch 1 take 5 us; each
/// region's opening and closing about 0.5-1 us). Two split
/// layers in a row share no barrier: the first is split by its outputs, the
/// second by its inputs (pairs_with). Layers too small to split run on
/// thread 0, or after the region when they end the chain.
template <class T>
void run_few_rows_chain(const Step* s, std::size_t count, Bases b) {
#if defined(_OPENMP)
  std::size_t last = count;  // one past the last split layer
  while (last > 0 && !split_linear(s[last - 1])) --last;
  const int threads = omp_get_max_threads();
  alignas(64) T partial[kChainPartialBytes / sizeof(T)];
  auto paired = [&](std::size_t i) { return i + 1 < last && pairs_with(s[i], s[i + 1], threads, sizeof(T)); };
  std::int64_t team = 1;
  std::size_t unreduced = count;  // the paired layer whose partial sums are left for after the region
  alignas(64) T row[kInPlaceRowBytes / sizeof(T)];
  // Layer i's input for thread t. One that writes over its input is copied
  // first, by thread 0, before any thread writes (the second layer of a pair
  // needs no copy: its sums wait for the barrier).
  auto input = [&](std::size_t i, std::int64_t t, auto&& sync) -> const T* {
    if (!writes_over_input(s[i])) return ptr<const T>(s[i].in[0], b);
    if (t == 0) linear_input<T>(s[i], b, row);
    if (split_linear(s[i])) sync();
    return row;
  };
  // Thread t of nt; `sync` waits for the others.
  auto body = [&](std::int64_t t, std::int64_t nt, auto&& sync) {
    for (std::size_t i = 0; i < last;) {
      const T* xp = input(i, t, sync);
      if (paired(i)) {
        const auto [k0, k1] = share(s[i].out[0].shape[1], t, nt);
        if (k0 < k1) {
          linear_block<T>(s[i], b, xp, k0, k1);
          linear_partial<T>(s[i + 1], b, k0, k1, partial + t * s[i + 1].in[0].shape[0] * s[i + 1].out[0].shape[1]);
        }
        i += 2;
        if (i == last) {
          if (t == 0) team = nt, unreduced = i - 1;
          break;
        }
        sync();
        const auto [j0, j1] = share(s[i - 1].out[0].shape[1], t, nt);
        if (j0 < j1) reduce_partials<T>(s[i - 1], b, partial, nt, j0, j1);
      } else {
        if (split_linear(s[i])) linear_share<T>(s[i], b, xp, t, nt);
        else if (t == 0) linear_block<T>(s[i], b, xp, 0, s[i].out[0].shape[1]);
        ++i;
        if (i == last) break;
      }
      sync();
    }
  };
  // OpenMP's threads, not a team of frost's own waiting on a counter: that
  // saved 0.3-1 us a run, but libgomp's idle threads spin for milliseconds
  // after a region and do not yield, so next to any other parallel work
  // (another plan's convolutions) the two teams took turns on the cores
  // (a CNN plan then a matrix-vector plan: 1-4 ms instead of 0.43).
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), omp_get_num_threads(), [] {
#pragma omp barrier
  });
  if (unreduced < count) reduce_partials<T>(s[unreduced], b, partial, team, 0, s[unreduced].out[0].shape[1]);
  for (std::size_t i = last; i < count; ++i) linear_whole<T>(s[i], b);
#else
  for (std::size_t i = 0; i < count; ++i) linear_whole<T>(s[i], b);
#endif
}

/// How many steps from `s` on (before `end`) run_few_rows_chain takes at once:
/// consecutive few_rows_linear steps of one floating type, at least one
/// of them split; 0 when there are fewer than two or one thread.
inline std::size_t few_rows_chain(const Step* s, const Step* end) {
#if defined(_OPENMP)
  if (omp_get_max_threads() < 2 || omp_in_parallel() || !every_kind_dtype(s->dtype)) return 0;
  std::size_t n = 0;
  bool split = false;
  for (; s + n != end && few_rows_linear(s[n]) && s[n].dtype == s->dtype; ++n) split = split || split_linear(s[n]);
  return n > 1 && split ? n : 0;
#else
  (void)s, (void)end;
  return 0;
#endif
}
inline void run_few_rows_chain(const Step* first, std::size_t count, Bases b) {
  if (first->dtype == DType::float32) run_few_rows_chain<float>(first, count, b);
  else run_few_rows_chain<double>(first, count, b);
}

/// A linear_chain step: its layers (in[1 + 3l] W [n, k], in[2 + 3l] the
/// bias or none, in[3 + 3l] W's panels; program[l].op the activation) run
/// depth-first on blocks of i0 rows. A thread takes a block through every
/// layer, its activations in the thread's slice of the scratch (out[1],
/// [threads, 2 or 1, i0, widest]: the layers alternate between the two),
/// the last layer writing the block's rows of y. Only a block's
/// activations are ever stored, not the batch's; the weights are read once a
/// block (the freeze pass keeps chains to weights that stay in cache).
template <class T>
void run_linear_rows(const Step& s, Bases b) {
  Backend<T>& be = backend_for<T>(Device::cpu());
  const Slot &x = s.in[0], &y = s.out[0], &scratch = s.out[1];
  const std::size_t layers = (s.in.size() - 1) / 3;
  const std::int64_t m = x.shape[0], rows = s.i0, widest = scratch.shape[3];
  const std::int64_t blocks = (m + rows - 1) / rows;
  auto run_block = [&](std::int64_t t, std::int64_t blk) {
    const std::int64_t r0 = blk * rows, nr = std::min(rows, m - r0);
    const T* in = ptr<const T>(x, b) + r0 * x.strides[0];
    std::int64_t ld = x.strides[0];
    T* mine = ptr<T>(scratch, b) + t * scratch.strides[0];
    for (std::size_t l = 0; l < layers; ++l) {
      const Slot& w = s.in[1 + 3 * l];
      const std::int64_t n = w.shape[0], k = w.shape[1];
      T* out = l + 1 == layers ? ptr<T>(y, b) + r0 * n : mine + static_cast<std::int64_t>(l % 2) * rows * widest;
      be.gemm_prepared(nr, rows, n, k, in, ld, ptr<const T>(s.in[3 + 3 * l], b), out, n, 0, n, 0, k);
      bias_act<T>(out, n, nr, n, ptr<const T>(s.in[2 + 3 * l], b), static_cast<UnaryOp>(s.program[l].op));
      in = out;
      ld = n;
    }
  };
#if defined(_OPENMP)
  const int threads = static_cast<int>(std::min(scratch.shape[0], blocks));
  if (threads > 1 && !omp_in_parallel()) {
    // Blocks handed out as threads come free (one core is often slower here).
#pragma omp parallel num_threads(threads)
    {
      const std::int64_t t = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t blk = 0; blk < blocks; ++blk) run_block(t, blk);
    }
    return;
  }
#endif
  for (std::int64_t blk = 0; blk < blocks; ++blk) run_block(0, blk);
}

/// A dynamically quantized linear (in: x [m, k] with dense rows, W, bias or
/// none, W's int8 blob; out: y [m, n], the scratch that holds x's rows in
/// int8): x's rows quantized into the scratch, then the int8 products.
template <class T>
void run_quantized_linear(const Step& s, Bases b) {
  const Slot &x = s.in[0], &w = s.in[1];
  const std::int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  void* scratch = ptr<T>(s.out[1], b);
  cpu::quantize_rows(ptr<const T>(x, b), m, k, m > 1 ? x.strides[0] : k, scratch);
  cpu::quantized_linear(scratch, ptr<const T>(s.in[3], b), m, n, k, s.in[2].buf >= 0 ? ptr<const T>(s.in[2], b) : nullptr,
                        ptr<T>(s.out[0], b), n, static_cast<UnaryOp>(s.op));
}

/// A fused chain: the backend's fused kernel over the step's dense windows.
template <class T>
void run_elementwise(Backend<T>& be, const Step& s, Bases b) {
  const T* src[8] = {};
  for (std::size_t i = 0; i < s.in.size() && i < 8; ++i) src[i] = ptr<const T>(s.in[i], b);
  be.fused_elementwise(s.program.data(), static_cast<int>(s.program.size()), src, static_cast<int>(s.in.size()),
                       ptr<T>(s.out[0], b), s.out[0].numel());
}

/// linear on a device: the backend's fused linear (cuBLASLt's bias and ReLU
/// epilogues on CUDA) over the whole batch.
template <class T>
void run_linear_device(Backend<T>& be, const Step& s, Bases b) {
  // Only the CPU's prepared linears write over their input, and devices freeze again without them.
  FROST_CHECK(!writes_over_input(s), "frost::jit: a linear writing over its input runs on the CPU only, not ",
              be.device().str());
  const Slot &x = s.in[0], &w = s.in[1], &bias = s.in[2], &y = s.out[0];
  const std::int64_t m = x.shape[0], k = x.shape[1], n = y.shape[1];
  const auto [ta, lda] = linear_gemm_input(x);
  be.linear(m, n, k, ptr<const T>(x, b), lda, ta, ptr<const T>(w, b), s.i0 ? n : w.strides[0], s.i0 != 0,
            ptr<const T>(bias, b), ptr<T>(y, b), static_cast<UnaryOp>(s.op));
}

/// True when a conv step carries its filters prepared for the CPU (in[3]) and runs there.
template <class T>
bool prepared(const Step& s, Backend<T>& be) {
  return s.in.size() > 3 && s.in[3].buf >= 0 && be.device().is_cpu();
}

/// The convolution and pooling one call of a conv2d_pool step makes: i0
/// images, a block of out[1]'s dim-1 filters.
struct ConvPoolCall {
  Conv2dParams conv;
  Pool2dParams pool;
};
inline ConvPoolCall conv_pool_call(const Step& s) {
  ConvPoolCall c{s.conv, s.pool};
  c.conv.batch = c.pool.batch = s.i0;
  c.conv.out_channels = c.pool.channels = s.out[1].shape[1];
  return c;
}
/// Whether `be` pools every call of conv2d_pool step s in the conv's own
/// pass (with a prepared bank of `positions`, 0 for none): the full call and
/// the short last block of images or of filters.
template <class T>
bool pools_every_call(Backend<T>& be, const Step& s, std::int64_t positions) {
  auto in_pass = [&](std::int64_t images, std::int64_t filters) {
    ConvPoolCall c = conv_pool_call(s);
    c.conv.batch = c.pool.batch = images;
    c.conv.out_channels = c.pool.channels = filters;
    return be.conv2d_pools_in_pass(c.conv, c.pool, positions);
  };
  const std::int64_t k = s.i0, block = s.out[1].shape[1], batch = s.conv.batch, O = s.conv.out_channels;
  return in_pass(k, block) && (batch % k == 0 || in_pass(batch % k, block)) && (O % block == 0 || in_pass(k, O % block));
}

/// Convolution then max pooling a few images at a time: each thread's conv
/// output lives in its slice of the scratch window (out[1], [threads * k, B,
/// H, W]; empty when the backend pools in the conv's pass) and is pooled
/// while in cache; the full conv output never exists.
/// With B below the output channels (one image, k = 1), the units of work
/// are blocks of B filters: the weight's and bias's slices, pooled into the
/// output's matching channels.
template <class T>
void run_conv_pool(Backend<T>& be, const Step& s, Bases b) {
  const Slot& scratch = s.out[1];
  const std::int64_t batch = s.conv.batch, O = s.conv.out_channels, block = scratch.shape[1];
  const std::int64_t per_image_x = s.conv.in_channels * s.conv.in_h * s.conv.in_w, hw = s.conv.out_h * s.conv.out_w;
  const std::int64_t pooled_hw = s.pool.out_h * s.pool.out_w, per_image_y = O * pooled_hw;
  const std::int64_t per_filter = s.conv.in_channels / s.conv.groups * s.conv.kernel_h * s.conv.kernel_w;
  const std::int64_t k = s.i0;  // images per conv call
  const std::int64_t blocks = (O + block - 1) / block;
  const int threads = static_cast<int>(scratch.shape[0] / k);
  const T* x = ptr<const T>(s.in[0], b);
  const T* bias = ptr<const T>(s.in[2], b);
  const T* w = ptr<const T>(s.in[1], b);
  const View<const T> u = prepared(s, be) ? view<const T>(s.in[3], b) : View<const T>(nullptr, Shape{});
  T* y = ptr<T>(s.out[0], b);
  T* tmp = ptr<T>(scratch, b);
  // No scratch (drop_pooled_scratch): the backend must pool every call in one pass.
  FROST_CHECK(tmp || pools_every_call(be, s, u.data ? u.shape[0] : 0),
              "frost::jit: a conv + max pool step frozen to pool in the convolution's pass (no scratch) cannot on this "
              "build's ", be.device().str(), " kernels (", s.conv.in_channels, " -> ", s.conv.out_channels, " channels, ",
              s.pool.kernel_h, "x", s.pool.kernel_w, " pool); freeze the model again here");
  // Images [n, n + m), filters [o0, o0 + oc) (all of them when m > 1).
  auto conv_pool = [&](int t, std::int64_t n, std::int64_t m, std::int64_t o0, std::int64_t oc) {
    Conv2dParams cp = s.conv;
    cp.batch = m;
    cp.out_channels = oc;
    Pool2dParams pp = s.pool;
    pp.batch = m;
    pp.channels = oc;
    T* c = tmp + t * k * block * hw;
    const Shape cs{m, oc, cp.out_h, cp.out_w}, ys{m, oc, pp.out_h, pp.out_w};
    const View<const T> xs(x + n * per_image_x, Shape{m, cp.in_channels, cp.in_h, cp.in_w});
    const View<T> ym(y + n * per_image_y + o0 * pooled_hw, ys);
    if (u.data) {  // the block's rows of the prepared bank, pooled in the conv's last pass where the backend can
      const View<const T> ub(u.data + o0 * u.strides[1], Shape{u.shape[0], oc, u.shape[2]}, u.strides);
      if (be.conv2d_prepared_max_pool(cp, pp, xs, ub, bias ? bias + o0 : nullptr, ym, static_cast<UnaryOp>(s.op))) return;
      be.conv2d_prepared(cp, xs, ub, bias ? bias + o0 : nullptr, View<T>(c, cs), static_cast<UnaryOp>(s.op));
    } else {
      const View<const T> wb(w + o0 * per_filter, Shape{oc, cp.in_channels / cp.groups, cp.kernel_h, cp.kernel_w});
      if (be.conv2d_max_pool(cp, pp, xs, wb, bias ? bias + o0 : nullptr, ym, static_cast<UnaryOp>(s.op))) return;
      be.conv2d(cp, xs, wb, bias ? bias + o0 : nullptr, View<T>(c, cs), static_cast<UnaryOp>(s.op));
    }
    be.max_pool2d(pp, View<const T>(c, cs), ym, View<std::int64_t>(nullptr, ys));
  };
  // Units [lo, hi): images, k to a call, or (image, filter block) pairs.
  auto work = [&](int t, std::int64_t lo, std::int64_t hi) {
    if (blocks == 1)
      for (std::int64_t n = lo; n < hi; n += k) conv_pool(t, n, std::min(k, hi - n), 0, O);
    else
      for (std::int64_t u = lo; u < hi; ++u) conv_pool(t, u / blocks, 1, u % blocks * block, std::min(block, O - u % blocks * block));
  };
  const std::int64_t units = blocks == 1 ? batch : batch * blocks;
  if (!be.device().is_cpu()) {  // a device runs the chunks in order, reusing the scratch
    for (std::int64_t n = 0; n < units; n += k * threads) {
      const std::int64_t hi = std::min(units, n + k * threads);
      for (std::int64_t c = n, t = 0; c < hi; c += k, ++t) work(static_cast<int>(t), c, std::min(hi, c + k));
    }
    return;
  }
#if defined(_OPENMP)
  if (threads > 1 && units > k && !omp_in_parallel()) {
    // Calls of k units handed out as threads come free: on a shared machine
    // one core often runs slower than the other, and equal shares would
    // leave the faster one waiting.
    const std::int64_t calls = (units + k - 1) / k;
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t c = 0; c < calls; ++c) work(t, c * k, std::min(units, c * k + k));
    }
    return;
  }
#endif
  work(0, 0, units);
}

/// The step kinds of every dtype (elementwise, copies, fills, random draws,
/// reductions, indexing, casts) on backend `be`; false for the others.
template <class T>
bool run_common(Backend<T>& be, const Step& s, Bases b) {
  auto in = [&](std::size_t i) { return view<const T>(s.in[i], b); };
  auto out = [&](std::size_t i) { return view<T>(s.out[i], b); };
  switch (s.kind) {
    case StepKind::unary: be.unary(static_cast<UnaryOp>(s.op), in(0), out(0), opmath_t<T>(s.p0), opmath_t<T>(s.p1)); break;
    case StepKind::binary: be.binary(static_cast<BinaryOp>(s.op), in(0), in(1), out(0), opmath_t<T>(s.p0)); break;
    case StepKind::where: be.where(in(0), in(1), in(2), out(0)); break;
    case StepKind::copy: case StepKind::dropout: be.copy(in(0), out(0)); break;  // dropout: evaluation semantics
    case StepKind::fill: be.fill(out(0), T(s.p0)); break;
    case StepKind::random:
      be.random(out(0), static_cast<philox::Dist>(s.op), s.seed, s.rng_offset, s.p0, s.p1);
      break;
    case StepKind::reduce: be.reduce(static_cast<ReduceOp>(s.op), in(0), static_cast<int>(s.i0), out(0)); break;
    case StepKind::arg_reduce: be.arg_reduce(s.i0 != 0, in(0), out(0), view<std::int64_t>(s.out[1], b)); break;
    case StepKind::index_select:
      be.index_select(in(0), static_cast<int>(s.i0), view<const std::int64_t>(s.in[1], b), out(0));
      break;
    case StepKind::gather: be.gather(in(0), static_cast<int>(s.i0), view<const std::int64_t>(s.in[1], b), out(0)); break;
    case StepKind::scatter_add:
      // in[0] is the accumulator, the same window as out[0]
      be.scatter_add(out(0), static_cast<int>(s.i0), view<const std::int64_t>(s.in[1], b), in(2));
      break;
    case StepKind::cast:  // from the source's type (validate: a DType)
      visit_dtype(static_cast<DType>(s.op), [&](auto tag) { be.cast(view<const decltype(tag)>(s.in[0], b), out(0)); });
      break;
    case StepKind::guard: break;  // the plan checks guards itself
    default: return false;
  }
  return true;
}

template <FloatScalar T>
void run_typed(const Step& s, Bases b, Device d) {
  Backend<T>& be = backend_for<T>(d);
  if (run_common(be, s, b)) return;
  auto in = [&](std::size_t i) { return view<const T>(s.in[i], b); };
  auto out = [&](std::size_t i) { return view<T>(s.out[i], b); };
  switch (s.kind) {
    case StepKind::softmax: be.softmax(in(0), out(0), s.i0 != 0); break;
    case StepKind::gemm: {
      const GemmArgs& g = s.gemm;
      be.gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, T(g.alpha), ptr<const T>(s.in[0], b), g.lda, g.sa,
              ptr<const T>(s.in[1], b), g.ldb, g.sb, T(g.beta), ptr<T>(s.out[0], b), g.ldc, g.sc, g.batch);
      break;
    }
    case StepKind::conv2d:
      if (prepared(s, be)) be.conv2d_prepared(s.conv, in(0), in(3), ptr<const T>(s.in[2], b), out(0), static_cast<UnaryOp>(s.op));
      else be.conv2d(s.conv, in(0), in(1), ptr<const T>(s.in[2], b), out(0), static_cast<UnaryOp>(s.op));
      break;
    case StepKind::conv2d_grad_input: be.conv2d_grad_input(s.conv, in(0), in(1), out(0)); break;
    case StepKind::conv2d_grad_weight: be.conv2d_grad_weight(s.conv, in(0), in(1), out(0)); break;
    case StepKind::max_pool2d:
      be.max_pool2d(s.pool, in(0), out(0),
                    s.out.size() > 1 ? view<std::int64_t>(s.out[1], b) : View<std::int64_t>(nullptr, s.out[0].shape));
      break;
    case StepKind::max_pool2d_backward:
      be.max_pool2d_backward(s.pool, in(0), view<const std::int64_t>(s.in[1], b), out(0));
      break;
    case StepKind::avg_pool2d: be.avg_pool2d(s.pool, in(0), out(0)); break;
    case StepKind::avg_pool2d_backward: be.avg_pool2d_backward(s.pool, in(0), out(0)); break;
    case StepKind::linear:
      if (d.is_cpu()) run_linear<T>(s, b);
      else run_linear_device<T>(be, s, b);
      break;
    case StepKind::batch_norm: {
      // Prepared form (freeze's batch-norm pass): in = {x, scale, shift}, y = x scale + shift per channel.
      FROST_CHECK(s.i0 == 1, "frost::jit: a batch_norm step must be prepared by freeze before it runs");
      const Shape& ys = s.out[0].shape;
      be.binary(BinaryOp::mul, in(0), channel_view<T>(s.in[1], ys, b), out(0), T(0));
      be.binary(BinaryOp::add, view<const T>(s.out[0], b), channel_view<T>(s.in[2], ys, b), out(0), T(0));
      break;
    }
    case StepKind::linear_chain:
      // Made by freeze for the CPU only (its panels); a device freezes the traced graph again.
      FROST_CHECK(d.is_cpu(), "frost::jit: a linear_chain step runs on the CPU only, not ", d.str());
      run_linear_rows<T>(s, b);
      break;
    case StepKind::quantized_linear:
      // Made by freeze for the CPU only; a device freezes the traced graph again (its linears in float).
      FROST_CHECK(d.is_cpu(), "frost::jit: a quantized_linear step runs on the CPU only, not ", d.str());
      run_quantized_linear<T>(s, b);
      break;
    case StepKind::elementwise: run_elementwise<T>(be, s, b); break;
    case StepKind::conv2d_pool: run_conv_pool<T>(be, s, b); break;
    default: break;  // run_common's
  }
}

/// A step of a dtype other than float32 / float64 (run_common's kinds). One
/// dispatch over eight dtypes: inline in header-only builds, compiled once
/// in src/compiled_jit.cpp for frost::compiled (execute_plain.hpp).
void run_plain_step(const Step& s, Bases b, Device d);

/// Fills every prepared buffer of `g` (in[3] of a linear step: the CPU
/// GEMM's panels of its weight in[1]; a linear_chain's panels beside each
/// weight; in[3] of a quantized_linear: its weight's int8 blob) for this
/// build's kernels.
template <class T>
void make_prepared(Graph& g) {
  Backend<T>& be = backend_for<T>(Device::cpu());
  // Weight in[wi], its panels in[wi + 2], for products of `rows` rows.
  auto make = [&](const Step& s, std::size_t wi, std::int64_t rows) {
    const Slot& ws = s.in[wi];
    Buffer& p = g.buffers[static_cast<std::size_t>(s.in[wi + 2].buf)];
    if (p.data) return;
    const Buffer& w = g.buffers[static_cast<std::size_t>(ws.buf)];
    const std::int64_t size = be.gemm_prepared_size(rows, ws.shape[0], ws.shape[1]);
    FROST_CHECK(size > 0 && size == p.numel, "frost::jit: prepared buffer '", p.name, "' has ", p.numel,
                " elements; this build's panels of a ", ws.shape.str(), " weight for ", rows, " rows of input take ", size,
                size > 0 ? "" : " (no prepared form for that many rows)");
    p.data = StorageImpl::cpu(static_cast<std::size_t>(p.numel) * sizeof(T));
    be.gemm_prepare(rows, static_cast<const T*>(w.data->data) + ws.offset, ws.shape[0], ws.shape[1], static_cast<T*>(p.data->data));
  };
  for (const Step& s : g.steps) {
    if (s.kind == StepKind::linear && s.in.size() == 4) make(s, 1, s.in[0].shape[0]);
    if (s.kind == StepKind::linear_chain)
      for (std::size_t wi = 1; wi + 2 < s.in.size(); wi += 3) make(s, wi, s.i0);
    if (s.kind == StepKind::quantized_linear) {
      const Slot& ws = s.in[1];
      Buffer& p = g.buffers[static_cast<std::size_t>(s.in[3].buf)];
      if (p.data) continue;
      const std::int64_t n = ws.shape[0], k = ws.shape[1];
      const std::int64_t size = cpu::ceil_div(cpu::QuantizedWeightLayout(n, k).total, sizeof(T));
      FROST_CHECK(size == p.numel, "frost::jit: prepared buffer '", p.name, "' has ", p.numel, " elements; the int8 form of a ",
                  ws.shape.str(), " weight takes ", size);
      const Buffer& w = g.buffers[static_cast<std::size_t>(ws.buf)];
      const T* wp = static_cast<const T*>(w.data->data) + ws.offset;
      // Every weight finite, and each row's scale a float: int8 has no scale otherwise.
      for (std::int64_t i = 0; i < n * k; ++i)
        FROST_CHECK(std::isfinite(double(wp[i])) && std::abs(double(wp[i])) <= 127.0 * std::numeric_limits<float>::max(),
                    "frost::jit: quantize_linear: weight '", w.name, "' ", ws.shape.str(), " holds ", double(wp[i]),
                    " at element ", i, "; an int8 form needs finite weights within float range");
      p.data = StorageImpl::cpu(static_cast<std::size_t>(p.numel) * sizeof(T));
      cpu::quantize_weight(wp, n, k, k, p.data->data);
    }
  }
}

/// Runs `s` with every buffer at bases[id] (memory of device `d`).
inline void run_step(const Step& s, Bases b, Device d = Device::cpu()) {
  if (s.dtype == DType::float32) run_typed<float>(s, b, d);
  else if (s.dtype == DType::float64) run_typed<double>(s, b, d);
  else run_plain_step(s, b, d);
}

}  // namespace frost::jit::detail

#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_JIT_IMPLEMENTATION)
#include "execute_plain.hpp"
#endif
