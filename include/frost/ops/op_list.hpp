// The one list of public op names. Tests prove every entry has a reference
// row and a gradient check (tests/op_table*.cpp); the tracer will record
// these kinds.
#pragma once
#include <array>
#include <string_view>

namespace frost {

#define FROST_PUBLIC_OPS(X)                                                                                        \
  /* elementwise unary */                                                                                          \
  X(neg) X(abs) X(sign) X(exp) X(log) X(sqrt) X(rsqrt) X(sin) X(cos) X(tanh) X(sigmoid) X(relu) X(leaky_relu)     \
  X(gelu) X(silu) X(erf) X(clamp) X(pow_scalar) X(rpow_scalar) X(add_scalar) X(mul_scalar) X(rsub_scalar)         \
  X(rdiv_scalar) X(gelu_tanh) X(floor) X(ceil) X(round) X(trunc) X(softplus) X(elu) X(hardtanh)                 \
  /* elementwise binary, comparisons, selection */                                                                 \
  X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(where)          \
  X(masked_fill) X(floor_divide) X(remainder) X(fmod)                                                              \
  /* fused gradient kernels (differentiable, for second derivatives) */                                            \
  X(relu_backward) X(tanh_backward) X(sigmoid_backward) X(leaky_relu_backward) X(gelu_backward) X(silu_backward)  \
  X(gelu_tanh_backward) X(slice_backward)                                                                          \
  /* reductions */                                                                                                 \
  X(sum) X(mean) X(var) X(std) X(prod) X(max) X(min) X(max_dim) X(min_dim) X(argmax) X(argmin) X(norm)            \
  X(logsumexp) X(softmax) X(log_softmax)                                                                           \
  /* linear algebra */                                                                                             \
  X(mm) X(bmm) X(matmul) X(outer) X(addmm)                                                                         \
  /* joining and indexing */                                                                                       \
  X(cat) X(stack) X(split) X(chunk) X(index_select) X(gather) X(scatter_add) X(one_hot)                           \
  /* convolution and pooling (ops/conv.hpp, ops/pool.hpp) */                                                      \
  X(conv2d) X(conv1d) X(conv_transpose2d) X(max_pool2d) X(avg_pool2d) X(adaptive_avg_pool2d)                      \
  /* views and copies */                                                                                           \
  X(view) X(reshape) X(flatten) X(unflatten) X(unsqueeze) X(squeeze) X(transpose) X(permute) X(expand) X(narrow)  \
  X(slice) X(select) X(contiguous) X(clone)

#define FROST_OP_NAME_STR(name) std::string_view(#name),
/// Names of every public op, for coverage checks.
inline constexpr auto public_op_names = std::array{FROST_PUBLIC_OPS(FROST_OP_NAME_STR)};
#undef FROST_OP_NAME_STR

}  // namespace frost
