// Frozen plans' fused kernels on the device: an elementwise chain run per
// element in registers (one pass over memory), and the bias + activation
// epilogue of linear and convolution steps. Operands aligned for it move
// four elements per vector access.
#pragma once
#include <cstdint>

#include <frost/backend/backend.hpp>
#include <frost/core/functors.hpp>

#include "check.cuh"
#include "strided.cuh"

namespace frost::cuda_detail {

/// The chain as a kernel argument (by value: no device copy of the program).
template <class T>
struct FusedProgram {
  FusedInstr instr[kMaxFusedInstrs];
  const T* in[8];
  int n_instrs = 0, n_in = 0;
};

/// One element of the chain: registers 0..n_in hold its inputs.
template <class T>
__device__ inline T run_chain(const FusedProgram<T>& p, T (&r)[16]) {
  for (int k = 0; k < p.n_instrs; ++k) {
    const FusedInstr& in = p.instr[k];
    r[in.dst] = in.binary ? fn::binary(static_cast<BinaryOp>(in.op), r[in.a], r[in.b], T(in.p0))
                          : fn::unary(static_cast<UnaryOp>(in.op), r[in.a], T(in.p0), T(in.p1));
  }
  return r[p.instr[p.n_instrs - 1].dst];
}

template <class T>
__global__ void fused_kernel(FusedProgram<T> p, T* y, std::int64_t n) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T r[16];
    for (int k = 0; k < p.n_in; ++k) r[k] = p.in[k][i];
    y[i] = run_chain(p, r);
  }
}

/// fused_kernel over Pack4-aligned operands: four elements per thread, each
/// input read with one vector load; the last n % 4 by single threads.
template <class T>
__global__ void fused_packed_kernel(FusedProgram<T> p, T* y, std::int64_t n) {
  const std::int64_t packs = n / 4, tid = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = tid; i < packs; i += step) {
    Pack4<T> a[8];
    for (int k = 0; k < p.n_in; ++k) a[k] = reinterpret_cast<const Pack4<T>*>(p.in[k])[i];
    Pack4<T> out;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      T r[16];
      for (int k = 0; k < p.n_in; ++k) r[k] = a[k].v[j];
      out.v[j] = run_chain(p, r);
    }
    reinterpret_cast<Pack4<T>*>(y)[i] = out;
  }
  const std::int64_t t = packs * 4 + tid;
  if (t < n) {
    T r[16];
    for (int k = 0; k < p.n_in; ++k) r[k] = p.in[k][t];
    y[t] = run_chain(p, r);
  }
}

/// y = act(y + bias[(i / inner) % channels]) in place.
template <class T>
__device__ inline T bias_act_at(std::int64_t i, T v, std::int64_t channels, std::int64_t inner, const T* bias,
                                UnaryOp act) {
  if (bias) v += bias[(i / inner) % channels];
  return fn::unary(act, v, T(0), T(0));
}

template <class T>
__global__ void bias_act_kernel(std::int64_t n, std::int64_t channels, std::int64_t inner, const T* bias, UnaryOp act,
                                T* y) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = bias_act_at(i, y[i], channels, inner, bias, act);
}

/// bias_act_kernel over a Pack4-aligned y, four elements per thread.
template <class T>
__global__ void bias_act_packed_kernel(std::int64_t n, std::int64_t channels, std::int64_t inner, const T* bias,
                                       UnaryOp act, T* y) {
  const std::int64_t packs = n / 4, tid = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = tid; i < packs; i += step) {
    Pack4<T> v = reinterpret_cast<const Pack4<T>*>(y)[i];
#pragma unroll
    for (int j = 0; j < 4; ++j) v.v[j] = bias_act_at(i * 4 + j, v.v[j], channels, inner, bias, act);
    reinterpret_cast<Pack4<T>*>(y)[i] = v;
  }
  const std::int64_t t = packs * 4 + tid;
  if (t < n) y[t] = bias_act_at(t, y[t], channels, inner, bias, act);
}

template <class T>
void launch_fused(const Launch& L, const FusedInstr* prog, int n_instrs, const T* const* inputs, int n_inputs, T* y,
                  std::int64_t n) {
  FROST_CHECK(n_instrs >= 1 && n_instrs <= kMaxFusedInstrs && n_inputs >= 0 && n_inputs <= 8,
              "frost::fused_elementwise: a chain of ", n_instrs, " instructions over ", n_inputs,
              " inputs (the CUDA kernel runs 1 to ", kMaxFusedInstrs, " over at most 8)");
  FusedProgram<T> p;
  for (int k = 0; k < n_instrs; ++k) {
    p.instr[k] = prog[k];
    FROST_CHECK(prog[k].dst < 16 && prog[k].a < 16 && prog[k].b < 16, "frost::fused_elementwise: instruction ", k,
                " names a register past 15");
  }
  for (int k = 0; k < n_inputs; ++k) p.in[k] = inputs[k];
  p.n_instrs = n_instrs;
  p.n_in = n_inputs;
  if (n == 0) return;
  if (packs_fit(y, inputs, n_inputs)) fused_packed_kernel<T><<<grid_for((n + 3) / 4, L.sm_count), kThreads, 0, L.stream>>>(p, y, n);
  else fused_kernel<T><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(p, y, n);
  check_launch("fused_elementwise");
}

template <class T>
void launch_bias_act(const Launch& L, T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner,
                     UnaryOp act, const char* op) {
  if (n == 0) return;
  if (pack_aligned(y))
    bias_act_packed_kernel<T><<<grid_for((n + 3) / 4, L.sm_count), kThreads, 0, L.stream>>>(n, channels, inner, bias,
                                                                                           act, y);
  else bias_act_kernel<T><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(n, channels, inner, bias, act, y);
  check_launch(op);
}

}  // namespace frost::cuda_detail
