// CPU fused kernels for frozen plans: an elementwise chain run block by block
// in registers (small stack arrays), and the bias + activation epilogue.
#pragma once
#include <algorithm>
#include <cstdint>

#include "../backend.hpp"
#include "parallel.hpp"

namespace frost::cpu {

/// Each block of elements goes through every instruction while it sits in
/// registers: one pass over memory. Inputs are read in place.
template <class T>
void fused_elementwise(const FusedInstr* prog, int n_instrs, const T* const* src, int n_in, T* dst, std::int64_t n) {
  constexpr std::int64_t kBlock = 256;
  const int result = prog[n_instrs - 1].dst;
  parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    alignas(64) T reg[8][kBlock];  // registers 8..15
    for (std::int64_t base = lo; base < hi; base += kBlock) {
      const std::int64_t len = std::min(kBlock, hi - base);
      const T* rp[8];
      for (int i = 0; i < n_in; ++i) rp[i] = src[i] + base;
      for (int k = 0; k < n_instrs; ++k) {
        const FusedInstr& in = prog[k];
        T* out = in.dst == result ? dst + base : reg[in.dst - 8];
        const T* a = in.a < 8 ? rp[in.a] : reg[in.a - 8];
        if (in.binary) {
          const T* c = in.b < 8 ? rp[in.b] : reg[in.b - 8];
          const auto op = static_cast<BinaryOp>(in.op);
          const T p = T(in.p0);
          switch (op) {
            case BinaryOp::add: for (std::int64_t i = 0; i < len; ++i) out[i] = a[i] + c[i]; break;
            case BinaryOp::mul: for (std::int64_t i = 0; i < len; ++i) out[i] = a[i] * c[i]; break;
            case BinaryOp::sub: for (std::int64_t i = 0; i < len; ++i) out[i] = a[i] - c[i]; break;
            default: for (std::int64_t i = 0; i < len; ++i) out[i] = fn::binary(op, a[i], c[i], p);
          }
        } else {
          const auto op = static_cast<UnaryOp>(in.op);
          const T p0 = T(in.p0), p1 = T(in.p1);
          switch (op) {
            case UnaryOp::relu: for (std::int64_t i = 0; i < len; ++i) out[i] = a[i] > T(0) ? a[i] : T(0); break;
            case UnaryOp::add_scalar: for (std::int64_t i = 0; i < len; ++i) out[i] = a[i] + p0; break;
            case UnaryOp::mul_scalar: for (std::int64_t i = 0; i < len; ++i) out[i] = a[i] * p0; break;
            default: for (std::int64_t i = 0; i < len; ++i) out[i] = fn::unary(op, a[i], p0, p1);
          }
        }
      }
    }
  });
}

template <class T>
void bias_act(T* y, std::int64_t n, const T* bias, std::int64_t channels, std::int64_t inner, UnaryOp act) {
  parallel_for(n / inner, std::max<std::int64_t>(1, kParallelGrain / inner), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      T* row = y + r * inner;
      const T b = bias ? bias[r % channels] : T(0);
      for (std::int64_t i = 0; i < inner; ++i) row[i] = fn::unary(act, row[i] + b, T(0), T(0));
    }
  });
}

}  // namespace frost::cpu
