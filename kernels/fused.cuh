// Frozen plans' fused kernels on the device: an elementwise chain run per
// element in registers (one pass over memory), and the bias + activation
// epilogue of linear and convolution steps.
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

template <class T>
__global__ void fused_kernel(FusedProgram<T> p, T* y, std::int64_t n) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T r[16];
    for (int k = 0; k < p.n_in; ++k) r[k] = p.in[k][i];
    for (int k = 0; k < p.n_instrs; ++k) {
      const FusedInstr& in = p.instr[k];
      r[in.dst] = in.binary ? fn::binary(static_cast<BinaryOp>(in.op), r[in.a], r[in.b], T(in.p0))
                            : fn::unary(static_cast<UnaryOp>(in.op), r[in.a], T(in.p0), T(in.p1));
    }
    y[i] = r[p.instr[p.n_instrs - 1].dst];
  }
}

/// y = act(y + bias[(i / inner) % channels]) in place.
template <class T>
__global__ void bias_act_kernel(std::int64_t n, std::int64_t channels, std::int64_t inner, const T* bias, UnaryOp act,
                                T* y) {
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T v = y[i];
    if (bias) v += bias[(i / inner) % channels];
    y[i] = fn::unary(act, v, T(0), T(0));
  }
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
  fused_kernel<T><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(p, y, n);
  check_launch("fused_elementwise");
}

template <class T>
void launch_bias_act(const Launch& L, T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner,
                     UnaryOp act, const char* op) {
  if (n == 0) return;
  bias_act_kernel<T><<<grid_for(n, L.sm_count), kThreads, 0, L.stream>>>(n, channels, inner, bias, act, y);
  check_launch(op);
}

}  // namespace frost::cuda_detail
