// frost: a header-only C++20 deep-learning library with a dynamic graph.
//
// Every op runs at once and, when an input requires grad, records itself on
// the tape; backward() walks the tape in reverse.
//
// \code
// #include <frost/frost.hpp>
// using frost::Tensor;
//
// // f(x) = a x^2 + b, df/dx = 2 a x
// auto x = Tensor<float>::from({2.0f}).requires_grad_();
// auto f = 3.0f * x * x + 1.0f;    // 13
// f.sum().backward();
// x.grad();                        // 12
// \endcode
#pragma once

#include "tensor.hpp"  // first: it pulls in autograd and the ops in order
#include "any_tensor.hpp"
#include "core/device_runtime.hpp"
#include "io/module_io.hpp"
#include "io/print.hpp"
#include "io/safetensors.hpp"
#include "nn/nn.hpp"
#include "jit.hpp"
#include "optim.hpp"
