// float16 and bfloat16 math and autograd. Each op is checked two ways:
// against PyTorch 2.15's CPU values (tests/reference/half_math_reference.py
// writes tests/data/half_math_reference.safetensors), within one 16-bit
// rounding step where float libraries may differ by a float ulp; and, bit
// for bit, against frost's own float op on the widened inputs rounded once
// (PyTorch's opmath rule, which the CPU's 16-bit kernels follow).
#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support.hpp"

using namespace frost;
using namespace frost::test;

namespace {

const SafetensorsFile& reference() {
  static const SafetensorsFile f = SafetensorsFile::open(test_data_path("half_math_reference.safetensors"));
  return f;
}
template <class H>
Tensor<H> ref(const std::string& name) {
  return reference().get<H>(name + "." + dtype_name<H>());
}

/// Relative size of one rounding step of H: 2^-10 (float16), 2^-7 (bfloat16).
template <class H>
double ulp() {
  return std::is_same_v<H, half> ? 0x1p-10 : 0x1p-7;
}

/// got is want within `steps` rounding steps of H (relative to max(|want|, floor)).
template <class H>
void check_close(const Tensor<H>& got, const Tensor<H>& want, const std::string& what, double steps = 1,
                 double floor = 1e-3) {
  INFO(what << " (" << dtype_name<H>() << ")");
  REQUIRE(got.shape() == want.shape());
  const auto g = got.template to<double>().to_vector(), w = want.template to<double>().to_vector();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double tol = steps * ulp<H>() * std::max(std::abs(w[i]), floor);
    if (!(std::abs(g[i] - w[i]) <= tol || (std::isnan(g[i]) && std::isnan(w[i])))) {
      if (bad++ == 0) FAIL_CHECK(what << ": element " << i << " is " << g[i] << ", PyTorch's " << w[i]);
    }
  }
  CHECK(bad == 0);
}

/// ||got - want|| within `steps` rounding steps of H of ||want|| (L2 norms).
template <class H>
void check_norm_close(const Tensor<H>& got, const Tensor<H>& want, const std::string& what, double steps) {
  INFO(what << " (" << dtype_name<H>() << ")");
  REQUIRE(got.shape() == want.shape());
  const auto g = got.template to<double>().to_vector(), w = want.template to<double>().to_vector();
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < g.size(); ++i) err += (g[i] - w[i]) * (g[i] - w[i]), norm += w[i] * w[i];
  CHECK(std::sqrt(err) <= steps * ulp<H>() * std::sqrt(norm));
}

/// Exactly the float op on the widened inputs, rounded once.
template <class H>
void check_opmath(const Tensor<H>& got, const Tensor<float>& in_float, const std::string& what) {
  INFO(what << " (" << dtype_name<H>() << ")");
  const auto g = got.to_vector();
  const auto w = in_float.template to<H>().to_vector();
  REQUIRE(g.size() == w.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i].bits != w[i].bits && !(std::isnan(float(g[i])) && std::isnan(float(w[i]))))
      if (bad++ == 0) FAIL_CHECK(what << ": element " << i << " is " << float(g[i]) << ", the float op's " << float(w[i]));
  CHECK(bad == 0);
}

template <class T>
using Unary = std::function<Tensor<T>(const Tensor<T>&)>;
template <class T>
using Binary = std::function<Tensor<T>(const Tensor<T>&, const Tensor<T>&)>;

// The reference script's ops, written once for any floating T.
template <class T>
std::vector<std::pair<std::string, Unary<T>>> unary_ops() {
  return {
      {"neg", [](const Tensor<T>& x) { return -x; }},
      {"abs", [](const Tensor<T>& x) { return x.abs(); }},
      {"exp", [](const Tensor<T>& x) { return x.exp(); }},
      {"log", [](const Tensor<T>& x) { return (x.abs() + 0.5).log(); }},
      {"sqrt", [](const Tensor<T>& x) { return x.abs().sqrt(); }},
      {"rsqrt", [](const Tensor<T>& x) { return (x.abs() + 0.25).rsqrt(); }},
      {"sin", [](const Tensor<T>& x) { return x.sin(); }},
      {"cos", [](const Tensor<T>& x) { return x.cos(); }},
      {"tanh", [](const Tensor<T>& x) { return x.tanh(); }},
      {"sigmoid", [](const Tensor<T>& x) { return x.sigmoid(); }},
      {"relu", [](const Tensor<T>& x) { return x.relu(); }},
      {"gelu", [](const Tensor<T>& x) { return x.gelu(); }},
      {"gelu_tanh", [](const Tensor<T>& x) { return x.gelu("tanh"); }},
      {"silu", [](const Tensor<T>& x) { return frost::silu(x); }},
      {"erf", [](const Tensor<T>& x) { return frost::erf(x); }},
      {"softplus", [](const Tensor<T>& x) { return frost::softplus(x); }},
      {"elu", [](const Tensor<T>& x) { return frost::elu(x); }},
      {"leaky_relu", [](const Tensor<T>& x) { return frost::leaky_relu(x, 0.1); }},
      {"floor", [](const Tensor<T>& x) { return frost::floor(x); }},
      {"round", [](const Tensor<T>& x) { return frost::round(x); }},
      {"clamp", [](const Tensor<T>& x) { return frost::clamp(x, -0.3, 0.7); }},
      {"pow2", [](const Tensor<T>& x) { return frost::pow(x, 2.0); }},
      {"pow_half", [](const Tensor<T>& x) { return frost::pow(x.abs(), 0.5); }},
      {"add_s", [](const Tensor<T>& x) { return x + 0.1; }},
      {"mul_s", [](const Tensor<T>& x) { return x * 0.1; }},
      {"rsub_s", [](const Tensor<T>& x) { return 0.3 - x; }},
      {"div_s", [](const Tensor<T>& x) { return x / 3.0; }},
      {"rdiv_s", [](const Tensor<T>& x) { return 1.0 / (x.abs() + 0.5); }},
      {"softmax", [](const Tensor<T>& x) { return x.softmax(-1); }},
      {"log_softmax", [](const Tensor<T>& x) { return x.log_softmax(-1); }},
      {"sum", [](const Tensor<T>& x) { return x.sum(); }},
      {"sum1", [](const Tensor<T>& x) { return x.sum(Shape{1}); }},
      {"mean", [](const Tensor<T>& x) { return x.mean(); }},
      {"amax1", [](const Tensor<T>& x) { return x.max(1).values; }},
      {"layer_norm", [](const Tensor<T>& x) { return nn::functional::layer_norm(x, Shape{16}); }},
  };
}
template <class T>
std::vector<std::pair<std::string, Binary<T>>> binary_ops() {
  return {
      {"add", [](const Tensor<T>& a, const Tensor<T>& b) { return a + b; }},
      {"sub", [](const Tensor<T>& a, const Tensor<T>& b) { return a - b; }},
      {"mul", [](const Tensor<T>& a, const Tensor<T>& b) { return a * b; }},
      {"div", [](const Tensor<T>& a, const Tensor<T>& b) { return a / b; }},
      {"maximum", [](const Tensor<T>& a, const Tensor<T>& b) { return frost::maximum(a, b); }},
      {"minimum", [](const Tensor<T>& a, const Tensor<T>& b) { return frost::minimum(a, b); }},
      {"pow", [](const Tensor<T>& a, const Tensor<T>& b) { return (a.abs() + 0.5).pow(b); }},
  };
}

// Ops of one kernel each: their 16-bit result is the float op's, rounded
// once. (The composites above round between their ops, as PyTorch's do.)
bool one_kernel(const std::string& op) {
  // (add_s and rsub_s round their scalar first: the scalar-rule case checks them.)
  for (const char* c : {"log", "sqrt", "rsqrt", "pow_half", "rdiv_s", "pow", "layer_norm", "add_s", "rsub_s"})
    if (op == c) return false;
  return true;
}

bool exact(const std::string& op) {
  for (const char* c : {"neg", "abs", "relu", "floor", "round", "clamp", "add_s", "mul_s", "rsub_s", "add", "sub",
                        "mul", "div", "maximum", "minimum", "amax1"})
    if (op == c) return true;
  return false;
}

template <class H>
void check_ops() {
  const auto x = ref<H>("x"), y = ref<H>("y");
  const auto xf = x.template to<float>(), yf = y.template to<float>();
  const auto fops = unary_ops<float>();
  for (const auto& [name, f] : unary_ops<H>()) {
    const auto got = f(x);
    // Exact where the float math is exact before rounding; a step where float
    // libraries differ; two for sums, which run in another order.
    check_close(got, ref<H>(name), name, exact(name) ? 0 : name == "sum" || name == "mean" || name == "layer_norm" ? 2 : 1);
    if (one_kernel(name))
      for (const auto& [fname, ff] : fops)
        if (fname == name) check_opmath(got, ff(xf), name);
  }
  const auto fbin = binary_ops<float>();
  for (const auto& [name, f] : binary_ops<H>()) {
    const auto got = f(x, y);
    check_close(got, ref<H>(name), name, exact(name) ? 0 : 1);
    if (one_kernel(name))
      for (const auto& [fname, ff] : fbin)
        if (fname == name) check_opmath(got, ff(xf, yf), name);
  }
  // Products accumulate in float: within a few steps of PyTorch's (its sums run in other orders).
  const auto w = ref<H>("w");
  check_close(x.matmul(w), ref<H>("matmul"), "matmul", 2, 0.05);
  // (bfloat16's AVX-512 BF16 GEMM sums in its own order: a step from the float GEMM's.)
  check_close(x.matmul(w), xf.matmul(w.template to<float>()).template to<H>(), "matmul vs float", 1, 0.05);
  const auto k = ref<H>("k");
  const auto conv = frost::conv2d(x.reshape({2, 4, 4, 4}), k, {}, {.padding = 1});
  check_close(conv, ref<H>("conv2d"), "conv2d", 2, 0.05);
  check_opmath(conv, frost::conv2d(xf.reshape({2, 4, 4, 4}), k.template to<float>(), {}, {.padding = 1}), "conv2d");
  // Comparisons and where read the 16-bit values exactly.
  CHECK((x > y).to_vector() == (xf > yf).to_vector());
  check_opmath(where(x > 0.25, x, y), where(xf > 0.25f, xf, yf), "where");
}

template <class H>
void check_gradients() {
  auto x = ref<H>("x").requires_grad_(), w = ref<H>("w").requires_grad_();
  const auto t = ref<H>("t"), y = ref<H>("y");
  auto loss = (x.matmul(w).softmax(-1) * t).sum() + (x.gelu() * y).mean();
  loss.backward();
  REQUIRE(x.grad().defined());
  REQUIRE(w.grad().defined());
  // Each op of the backward pass rounds, in its own order, and the two terms
  // of d/dx cancel in places: the whole gradient within a few rounding steps.
  check_norm_close(x.grad(), ref<H>("gx"), "d loss / d x", 4);
  check_norm_close(w.grad(), ref<H>("gw"), "d loss / d w", 4);
}

}  // namespace

TEST_CASE("half math: float16 ops match PyTorch's and the float op rounded once") { check_ops<half>(); }
TEST_CASE("half math: bfloat16 ops match PyTorch's and the float op rounded once") { check_ops<bfloat16>(); }
TEST_CASE("half math: float16 gradients match PyTorch's") { check_gradients<half>(); }
TEST_CASE("half math: bfloat16 gradients match PyTorch's") { check_gradients<bfloat16>(); }

template <class H>
void check_scalar_rule() {
  // PyTorch's CPU: x * c and x / c take c as a float; x + c, x - c and c - x
  // round c to H first. 0.3 is no 16-bit value, so the two rules differ.
  const auto x = Tensor<float>::randn({4096}).to<H>();
  const auto xf = x.template to<float>();
  const float c16 = float(H(0.3f));
  check_opmath(x * 0.3, xf * 0.3f, "x * 0.3");
  check_opmath(x + 0.3, xf + c16, "x + 0.3");
  check_opmath(x - 0.3, xf - c16, "x - 0.3");
  check_opmath(0.3 - x, c16 - xf, "0.3 - x");
  CHECK((x * 0.3).template to<float>().to_vector() != (xf * c16).template to<H>().template to<float>().to_vector());
  CHECK((x + 0.3).template to<float>().to_vector() != (xf + 0.3f).template to<H>().template to<float>().to_vector());
}

TEST_CASE("half math: scalar operands follow PyTorch's CPU (float for * and /, rounded to 16 bits for + and -)") {
  check_scalar_rule<half>();
  check_scalar_rule<bfloat16>();
}

TEST_CASE("half math: 16-bit sums accumulate in float") {
  // 4096 ones: a bfloat16 running sum would stop at 256 (256 + 1 rounds to 256).
  CHECK(float(Tensor<bfloat16>::ones({4096}).sum().item()) == 4096.0f);
  CHECK(float(Tensor<half>::ones({4096}).sum().item()) == 4096.0f);
  CHECK(float(Tensor<bfloat16>::ones({64, 64}).matmul(Tensor<bfloat16>::ones({64, 64})).max().item()) == 64.0f);
  // Overflow is the dtype's: float16's range ends at 65504.
  CHECK(std::isinf(float((Tensor<half>::full({1}, half(60000.0f)) * 2.0).item())));
  CHECK(float((Tensor<bfloat16>::full({1}, bfloat16(60000.0f)) * 2.0).item()) == float(bfloat16(60000.0f)) * 2.0f);  // exact: a power of two
}

TEST_CASE("half math: gradients flow through casts among float16, bfloat16, float and double") {
  auto x = Tensor<float>::from({0.5f, -1.25f, 2.0f}, {3}).requires_grad_();
  auto y = (x.to<half>().exp() * x.to<bfloat16>()).to<double>().sum();
  y.backward();
  // d/dx (e^x x) = e^x (1 + x), at the precision of the 16-bit values.
  const auto g = x.grad().to_vector();
  for (std::size_t i = 0; i < 3; ++i) {
    const double xi = std::vector<double>{0.5, -1.25, 2.0}[i];
    CHECK(g[i] == doctest::Approx(std::exp(xi) * (1 + xi)).epsilon(0.02));
  }
  // A 16-bit leaf gets its gradient in its own dtype.
  auto h = Tensor<half>::from({half(1.0f), half(2.0f)}, {2}).requires_grad_();
  (h.to<float>() * 3.0f).sum().backward();
  CHECK(h.grad().to<float>().to_vector() == std::vector<float>{3.0f, 3.0f});
}

TEST_CASE("half math: numeric_limits of the 16-bit types") {
  using HL = std::numeric_limits<half>;
  using BL = std::numeric_limits<bfloat16>;
  CHECK(float(HL::max()) == 65504.0f);
  CHECK(float(HL::lowest()) == -65504.0f);
  CHECK(float(HL::min()) == 0x1p-14f);
  CHECK(float(HL::epsilon()) == 0x1p-10f);
  CHECK(float(HL::denorm_min()) == 0x1p-24f);
  CHECK(std::isinf(float(HL::infinity())));
  CHECK(std::isnan(float(HL::quiet_NaN())));
  CHECK(std::isnan(float(HL::signaling_NaN())));
  CHECK(float(BL::max()) == 0x1.fep127f);
  CHECK(float(BL::min()) == 0x1p-126f);
  CHECK(float(BL::epsilon()) == 0x1p-7f);
  CHECK(float(BL::denorm_min()) == 0x1p-133f);
  CHECK(std::isinf(float(BL::infinity())));
  CHECK(std::isnan(float(BL::quiet_NaN())));
  CHECK(std::isnan(float(BL::signaling_NaN())));
  CHECK(HL::digits == 11);
  CHECK(BL::digits == 8);
}

TEST_CASE("half math: a traced 16-bit forward freezes its elementwise steps and refuses its products") {
  auto f = [](const Tensor<bfloat16>& x) { return (x * 0.1 + 1.0).exp(); };
  const auto x = Tensor<float>::randn({3, 4}).to<bfloat16>();
  const auto plan = jit::freeze(f, x);
  const auto got = plan.run_any({AnyTensor(x)})[0].as<bfloat16>();
  CHECK(got.to<float>().to_vector() == f(x).to<float>().to_vector());
  // A product in 16 bits is FreezeOptions::dtype's to make, not a trace's.
  auto g = [](const Tensor<bfloat16>& x) { return x.matmul(x.t()); };
  CHECK_THROWS_WITH_AS(jit::freeze(g, x), doctest::Contains("needs float32 or float64, not bfloat16"), frost::Error);
}

TEST_CASE("half math: 16-bit GEMMs of every layout, edge size, batch, alpha and beta against double sums") {
  // Through the backend: op(A) [m, k] op(B) [k, n], stored transposed or not,
  // with leading dims past the matrix (the bfloat16 kernel's tails and its
  // transposing copies), a batch of two, and beta reading C.
  auto run = [](auto tag) {
    using H = decltype(tag);
    Backend<H>& be = cpu_backend<H>();
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{1, 1, 1}, {3, 5, 7}, {4, 4, 32}, {5, 9, 33}, {17, 6, 70},
                           {8, 20, 100}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          INFO(dtype_name<H>() << " m " << m << " n " << n << " k " << k << " ta " << ta << " tb " << tb);
          const std::int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
          const std::int64_t lda = ac + 3, ldb = bc + 1, ldc = n + 2, batch = 2;
          const auto a = Tensor<float>::randn({batch, ar, lda}).template to<H>();
          const auto b = Tensor<float>::randn({batch, br, ldb}).template to<H>();
          auto c = Tensor<float>::randn({batch, m, ldc}).template to<H>();
          const auto c0 = c.template to<double>().to_vector();
          const auto av = a.template to<double>().to_vector(), bv = b.template to<double>().to_vector();
          const float alpha = 0.5f, beta = 2.0f;
          be.gemm(ta, tb, m, n, k, H(alpha), a.data(), lda, ar * lda, b.data(), ldb, br * ldb, H(beta), c.data(), ldc,
                  m * ldc, batch);
          const auto got = c.template to<double>().to_vector();
          std::size_t bad = 0;
          for (std::int64_t q = 0; q < batch; ++q)
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < ldc; ++j) {
                const std::size_t at = static_cast<std::size_t>((q * m + i) * ldc + j);
                if (j >= n) {  // past the matrix: untouched
                  if (got[at] != c0[at]) ++bad;
                  continue;
                }
                double s = 0, mag = 0;
                for (std::int64_t p = 0; p < k; ++p) {
                  const double x = av[static_cast<std::size_t>(q * ar * lda + (ta ? p * lda + i : i * lda + p))];
                  const double y = bv[static_cast<std::size_t>(q * br * ldb + (tb ? j * ldb + p : p * ldb + j))];
                  s += x * y, mag += std::abs(x * y);
                }
                const double want = alpha * s + beta * c0[at];
                // One rounding into H of a float32 sum.
                const double tol = ulp<H>() * std::abs(want) + double(k) * 0x1p-23 * alpha * mag;
                if (!(std::abs(got[at] - want) <= tol)) {
                  if (bad++ == 0) FAIL_CHECK("C[" << q << ", " << i << ", " << j << "] is " << got[at] << ", want " << want);
                }
              }
          CHECK(bad == 0);
        }
  };
  run(bfloat16{});
  run(half{});
}
