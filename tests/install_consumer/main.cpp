#include <frost/frost.hpp>

int main() {
  auto x = frost::Tensor<float>::ones({2, 3});
  return x.numel() == 6 ? 0 : 1;
}
