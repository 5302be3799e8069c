// The README's worked example: logistic regression with autograd and a
// data-dependent early stop. Kept here so CTest builds and runs it.
#include <frost/frost.hpp>
#include <iostream>
using frost::Tensor;

int main() {
  frost::manual_seed(0);                                  // Philox generator, per thread
  auto x = Tensor<float>::randn({64, 3});                 // a batch of inputs
  auto y = (x.sum({1}, true) > 0.0f).to<float>();         // 0/1 targets (the comparison is bool)
  auto w = (Tensor<float>::randn({3, 1}) * 0.1f).requires_grad_();
  auto b = Tensor<float>::zeros({1}).requires_grad_();
  for (int step = 0; step < 100; ++step) {
    auto p = (x.matmul(w) + b).sigmoid();                 // ops run now and record the tape
    auto loss = -(y * p.log() + (1.0f - y) * (1.0f - p).log()).mean();
    if (loss < 0.05f) break;                              // a branch on data: explicit operator bool
    loss.backward();                                      // reverse tape order, grads in .grad()
    frost::NoGradGuard no_grad;                           // the update is not recorded
    w -= w.grad() * 0.5f;  w.set_grad({});
    b -= b.grad() * 0.5f;  b.set_grad({});
  }
  std::cout << w << "\n";                                 // tensor([[...]], dtype=float32, shape=[3, 1], requires_grad=True)
}
