// Trains a small MLP on two interleaved spirals with frost's autograd and a
// hand-written SGD step, printing the loss as it falls.
//
//   build/release/train_mlp
#include <cstdio>
#include <vector>

#include <frost/frost.hpp>

using frost::Tensor;
using T = Tensor<float>;

// Two spirals of n points each: x is [2n, 2], labels are 0 / 1.
static std::pair<T, frost::IndexTensor> spirals(std::int64_t n) {
  auto t = T::linspace(0.25, 3.0, n);
  auto noise = T::randn({2 * n, 2}) * 0.05f;
  auto r = t * 1.2f;
  auto ang = t * 3.0f;
  auto a = frost::stack(std::vector<T>{r * ang.cos(), r * ang.sin()}, 1);  // class 0
  auto b = -a;                                                              // class 1: rotated by pi
  auto x = frost::cat(std::vector<T>{a, b}, 0) + noise;
  std::vector<std::int64_t> y(static_cast<std::size_t>(2 * n), 0);
  for (std::int64_t i = n; i < 2 * n; ++i) y[static_cast<std::size_t>(i)] = 1;
  return {x, frost::IndexTensor::from(y)};
}

int main() {
  frost::manual_seed(0);
  auto [x, y] = spirals(100);

  const std::int64_t hidden = 32;
  // Kaiming-style scaling by hand; frost::nn brings Linear and init later.
  auto w1 = (T::randn({2, hidden}) * 0.7f).requires_grad_();
  auto b1 = T::zeros({hidden}).requires_grad_();
  auto w2 = (T::randn({hidden, hidden}) * 0.25f).requires_grad_();
  auto b2 = T::zeros({hidden}).requires_grad_();
  auto w3 = (T::randn({hidden, 2}) * 0.25f).requires_grad_();
  auto b3 = T::zeros({2}).requires_grad_();
  std::vector<T*> params{&w1, &b1, &w2, &b2, &w3, &b3};

  const float lr = 0.05f;
  float first = 0, last = 0;
  for (int step = 0; step <= 1000; ++step) {
    auto h = (x.matmul(w1) + b1).tanh();
    h = (h.matmul(w2) + b2).tanh();
    auto logits = h.matmul(w3) + b3;
    // cross-entropy: mean of -log p[label]
    auto loss = -logits.log_softmax(1).gather(1, y.unsqueeze(1)).mean();
    loss.backward();
    {
      frost::NoGradGuard no_grad;  // the update itself is not part of the graph
      for (T* p : params) {
        *p -= p->grad() * lr;
        p->set_grad({});
      }
    }
    last = loss.item();
    if (step == 0) first = last;
    if (step % 100 == 0) {
      frost::NoGradGuard no_grad;
      auto pred = logits.argmax(1);
      std::int64_t correct = 0;
      auto pv = pred.to_vector(), yv = y.to_vector();
      for (std::size_t i = 0; i < pv.size(); ++i) correct += pv[i] == yv[i];
      std::printf("step %3d  loss %.4f  accuracy %5.1f%%\n", step, last, 100.0 * correct / static_cast<double>(pv.size()));
    }
  }
  if (!(last < 0.5f * first)) {
    std::printf("loss did not fall enough: %.4f -> %.4f\n", first, last);
    return 1;
  }
  std::printf("loss fell from %.4f to %.4f\n", first, last);
  return 0;
}
