// The per-element update of each optimizer, written once as host+device code:
// the CPU backend loops over it and the CUDA backend runs it as one fused
// kernel per parameter, so the CPU tests cover the arithmetic of both.
#pragma once
#include <cmath>
#include <cstdint>

#include "macros.hpp"

namespace frost {

enum class OptimKind : std::uint8_t { sgd, adam, rmsprop };

/// One optimizer step's scalars for one parameter. The state buffers that go
/// with it (null when unused):
///   sgd:     s0 = momentum buffer
///   adam:    s0 = exp_avg, s1 = exp_avg_sq, s2 = max_exp_avg_sq (amsgrad)
///   rmsprop: s0 = square_avg, s1 = grad_avg (centered), s2 = momentum buffer
template <class T>
struct OptimStep {
  OptimKind kind = OptimKind::sgd;
  T lr = 0, weight_decay = 0, sign = 1;  // sign = -1 maximizes
  // sgd
  T momentum = 0, damp = 1;  // damp = 1 - dampening
  bool first = false, nesterov = false;
  // adam: weight_decay is Adam's L2 term, shrink = 1 - lr wd AdamW's decay;
  // the one_* are 1 - beta rounded from double, as the CPU loops had them.
  T beta1 = 0, beta2 = 0, one_beta1 = 1, one_beta2 = 1, step_size = 0, bc2_sqrt = 1, eps = 0, shrink = 1;
  // rmsprop (momentum above)
  T alpha = 0, one_alpha = 1;
};

namespace optim_step {

template <class T>
FROST_HOST_DEVICE inline void apply(const OptimStep<T>& o, std::int64_t i, T* p, const T* g, T* s0, T* s1, T* s2) {
  T gi = o.sign * g[i];
  switch (o.kind) {
    case OptimKind::sgd: {
      if (o.weight_decay != T(0)) gi = gi + o.weight_decay * p[i];
      if (s0) {
        s0[i] = o.first ? gi : s0[i] * o.momentum + o.damp * gi;
        gi = o.nesterov ? gi + o.momentum * s0[i] : s0[i];
      }
      p[i] = p[i] - o.lr * gi;
      return;
    }
    case OptimKind::adam: {
      if (o.shrink != T(1)) p[i] = p[i] * o.shrink;
      if (o.weight_decay != T(0)) gi = gi + o.weight_decay * p[i];
      s0[i] = s0[i] * o.beta1 + o.one_beta1 * gi;
      s1[i] = s1[i] * o.beta2 + o.one_beta2 * gi * gi;
      T second = s1[i];
      if (s2) second = s2[i] = s2[i] > s1[i] ? s2[i] : s1[i];
      const T denom = std::sqrt(second) / o.bc2_sqrt + o.eps;
      p[i] = p[i] + -o.step_size * s0[i] / denom;
      return;
    }
    case OptimKind::rmsprop: {
      if (o.weight_decay != T(0)) gi = gi + o.weight_decay * p[i];
      s0[i] = s0[i] * o.alpha + o.one_alpha * gi * gi;
      T avg;
      if (s1) {
        s1[i] = s1[i] * o.alpha + o.one_alpha * gi;
        avg = std::sqrt(s0[i] + T(-1) * s1[i] * s1[i]);
      } else {
        avg = std::sqrt(s0[i]);
      }
      avg = avg + o.eps;
      if (s2) {
        s2[i] = s2[i] * o.momentum + gi / avg;
        p[i] = p[i] + -o.lr * s2[i];
      } else {
        p[i] = p[i] + -o.lr * gi / avg;
      }
      return;
    }
  }
}

}  // namespace optim_step
}  // namespace frost
