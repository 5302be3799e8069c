// Uses an installed frost: a tiny model, forward and backward.
#include <frost/frost.hpp>

int main() {
  auto x = frost::Tensor<float>::ones({2, 3});
  auto w = frost::Tensor<float>::full({3, 1}, 0.5f).requires_grad_();
  auto loss = x.matmul(w).tanh().sum();
  loss.backward();
  return x.numel() == 6 && w.grad().defined() && w.grad().numel() == 3 ? 0 : 1;
}
