// frost::autocast against PyTorch 2.15's torch.autocast on the CPU
// (tests/reference/autocast_reference.py writes
// tests/data/autocast_reference.safetensors): which ops compute in the
// 16-bit dtype, a small MLP's activations, loss and float32 gradients, and
// the guard's rules (nesting, enabled = false, the weight-cast cache).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support.hpp"

using namespace frost;
using namespace frost::test;
namespace F = frost::nn::functional;

namespace {

const SafetensorsFile& reference() {
  static const SafetensorsFile f = SafetensorsFile::open(test_data_path("autocast_reference.safetensors"));
  return f;
}
using TF = Tensor<float>;

/// Every element of x is a value of H (what a 16-bit op's result holds).
template <class H>
bool holds_16bit_values(const TF& x) {
  const auto v = x.to_vector(), r = x.template to<H>().template to<float>().to_vector();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != r[i]) return false;
  return true;
}

void check_close(const TF& got, const TF& want, double rel, double abs, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_vector(), w = want.to_vector();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= abs + rel * std::abs(w[i])))
      if (bad++ == 0) FAIL_CHECK(what << ": element " << i << " is " << g[i] << ", PyTorch's " << w[i]);
  CHECK(bad == 0);
}

// The reference script's OPS, in its order, on float32 inputs.
std::vector<std::pair<std::string, std::function<TF()>>> ops() {
  const auto a = TF::randn({4, 4}), b = TF::randn({4, 4});
  const auto x3 = TF::randn({1, 2, 5}), x4 = TF::randn({1, 2, 5, 5}), q = TF::randn({1, 3, 4});
  const auto k3 = TF::randn({3, 2, 3}), k4 = TF::randn({3, 2, 3, 3}), kt = TF::randn({2, 3, 3, 3});
  const auto target = Tensor<std::int64_t>::from({0, 1, 2, 3}, {4});
  return {
      {"mm", [=] { return mm(a, b); }},
      {"bmm", [=] { return bmm(a.unsqueeze(0), b.unsqueeze(0)); }},
      {"matmul", [=] { return matmul(a, b); }},
      {"addmm", [=] { return addmm(a, a, b); }},
      {"linear", [=] { return F::linear(a, b, a.select(0, 0)); }},
      {"conv1d", [=] { return conv1d(x3, k3); }},
      {"conv2d", [=] { return conv2d(x4, k4); }},
      {"conv_transpose2d", [=] { return conv_transpose2d(x4, kt); }},
      {"scaled_dot_product_attention", [=] { return F::scaled_dot_product_attention(q, q, q); }},
      {"softmax", [=] { return a.softmax(-1); }},
      {"log_softmax", [=] { return a.log_softmax(-1); }},
      {"layer_norm", [=] { return F::layer_norm(a, Shape{4}); }},
      {"exp", [=] { return a.exp(); }},
      {"sum", [=] { return a.sum(); }},
      {"cross_entropy", [=] { return F::cross_entropy(a, target); }},
      {"mse_loss", [=] { return F::mse_loss(a, b); }},
      {"relu", [=] { return a.relu(); }},
      {"add", [=] { return a + b; }},
  };
}

/// Each op's result under autocast: PyTorch's dtype for it (the reference),
/// here the values: a 16-bit op's float32 result equals the 16-bit op's,
/// a float32 op's equals the op outside autocast.
template <class H>
void check_op_dtypes(const char* suffix) {
  const auto want = reference().get<std::uint8_t>(std::string("dtypes.") + suffix).to_vector();
  const auto list = ops();
  REQUIRE(want.size() == list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& [name, run] = list[i];
    INFO(name);
    const TF plain = run();
    TF cast;
    {
      autocast ac(Device::cpu(), dtype_of<H>());
      cast = run();
    }
    const bool low = want[i] == static_cast<std::uint8_t>(dtype_of<H>());
    CHECK((want[i] == 0 || low));
    if (low) {
      CHECK(holds_16bit_values<H>(cast));
      // The inputs rounded to 16 bits: sqrt(k) rounding steps of |x||w| apart.
      check_close(cast, plain, 16 * (std::is_same_v<H, half> ? 0x1p-10 : 0x1p-7), 0.05, name);
    } else {
      CHECK(cast.to_vector() == plain.to_vector());
    }
  }
}

template <class H>
void check_mlp(const char* suffix) {
  const auto& f = reference();
  const auto get = [&](const std::string& n) { return f.get<float>(n); };
  auto w1 = get("w1").requires_grad_(), b1 = get("b1").requires_grad_();
  auto w2 = get("w2").requires_grad_(), b2 = get("b2").requires_grad_();
  const auto x = get("x");
  const auto y = f.get<std::int64_t>("y");
  const std::string s = std::string(".") + suffix;
  const double step = std::is_same_v<H, half> ? 0x1p-10 : 0x1p-7;
  TF loss;
  {
    autocast ac(Device::cpu(), dtype_of<H>());
    const auto h = F::linear(x, w1, b1);
    // A 16-bit GEMM with float32 sums: PyTorch's values, to a rounding step (sums in other orders).
    CHECK(holds_16bit_values<H>(h));
    check_close(h, get("h" + s), step, 1e-3, "first linear");
    const auto logits = F::linear(F::gelu(h), w2, b2);
    CHECK(holds_16bit_values<H>(logits));
    // GELU's result rounds to 16 bits in PyTorch, not here: a few steps.
    check_close(logits, get("out" + s), 4 * step, 1e-2, "logits");
    loss = F::cross_entropy(logits, y);
  }
  check_close(loss, get("loss" + s), 2 * step, 0, "loss");
  loss.backward();
  // The float32 master weights get float32 gradients, made in 16 bits.
  for (auto [g, n] : {std::pair{w1.grad(), "gw1"}, {b1.grad(), "gb1"}, {w2.grad(), "gw2"}, {b2.grad(), "gb2"}}) {
    REQUIRE(g.defined());
    check_close(g, get(n + s), 8 * step, 4 * step * 0.05, n);
  }
}

}  // namespace

TEST_CASE("autocast: the ops PyTorch runs in bfloat16 compute in bfloat16, the rest in float32") {
  check_op_dtypes<bfloat16>("bf16");
}
TEST_CASE("autocast: the ops PyTorch runs in float16 compute in float16, the rest in float32") {
  check_op_dtypes<half>("f16");
}
TEST_CASE("autocast: an MLP's activations, loss and float32 gradients match torch.autocast (bfloat16)") {
  check_mlp<bfloat16>("bf16");
}
TEST_CASE("autocast: an MLP's activations, loss and float32 gradients match torch.autocast (float16)") {
  check_mlp<half>("f16");
}

TEST_CASE("autocast: guards nest, enabled = false turns it off inside, and each ends where it began") {
  const auto cpu = Device::cpu();
  const auto a = TF::randn({3, 3});
  const auto plain = mm(a, a).to_vector();
  CHECK_FALSE(autocast::is_enabled(cpu));
  {
    autocast outer(cpu);
    CHECK(autocast::is_enabled(cpu));
    CHECK(autocast::get_dtype(cpu) == DType::bfloat16);  // PyTorch's CPU default
    {
      autocast inner(cpu, DType::float16);
      CHECK(autocast::get_dtype(cpu) == DType::float16);
      {
        autocast off(cpu, std::nullopt, false);
        CHECK_FALSE(autocast::is_enabled(cpu));
        CHECK(mm(a, a).to_vector() == plain);
      }
      CHECK(autocast::is_enabled(cpu));
    }
    CHECK(autocast::get_dtype(cpu) == DType::bfloat16);
    // CUDA's state is its own.
    CHECK_FALSE(autocast::is_enabled(Device::cuda()));
  }
  CHECK_FALSE(autocast::is_enabled(cpu));
  CHECK_THROWS_WITH_AS(autocast(cpu, DType::float32), doctest::Contains("frost::autocast: dtype float32 is not a "
                                                                        "lower-precision floating type"),
                       frost::Error);
}

TEST_CASE("autocast: double tensors are left alone, and a weight's cast is made once per region") {
  const auto a = Tensor<double>::randn({4, 4});
  {
    autocast ac(Device::cpu());
    CHECK(mm(a, a).to_vector() == mm(a, a).to_vector());
    CHECK_FALSE(holds_16bit_values<bfloat16>(mm(a, a).to<float>()));
  }
  auto w = TF::randn({4, 4}).requires_grad_();
  const auto x = TF::randn({2, 4});
  {
    autocast ac(Device::cpu());
    const auto before = amp::detail::cast_cache_size();
    auto y = F::linear(x, w) + F::linear(x, w);  // one cast of w, used twice
    CHECK(amp::detail::cast_cache_size() == before + 1);
    y.sum().backward();
  }
  CHECK(amp::detail::cast_cache_size() == 0);  // ended with the region
  // Both uses sent their gradient to w: twice x summed over the batch, in bfloat16 products.
  const auto want = (x.sum({0}) * 2.0f).unsqueeze(0).expand({4, 4}).contiguous();
  check_close(w.grad(), want, 0x1p-6, 1e-3, "d/dw of two uses of one cached cast");
}
