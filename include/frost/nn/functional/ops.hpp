// torch.nn.functional's names for the ops that live in frost:: (activations,
// softmaxes, convolution, pooling), so model code can spell everything
// `F::name` with `namespace F = frost::nn::functional`.
#pragma once
#include "../../ops/conv.hpp"
#include "../../ops/pool.hpp"
#include "../../tensor.hpp"

namespace frost::nn::functional {

using frost::adaptive_avg_pool2d;
using frost::avg_pool2d;
using frost::conv1d;
using frost::conv2d;
using frost::conv_transpose2d;
using frost::elu;
using frost::gelu;
using frost::hardtanh;
using frost::leaky_relu;
using frost::log_softmax;
using frost::max_pool2d;
using frost::max_pool2d_with_indices;
using frost::relu;
using frost::relu6;
using frost::sigmoid;
using frost::silu;
using frost::softmax;
using frost::softplus;
using frost::tanh;

}  // namespace frost::nn::functional
