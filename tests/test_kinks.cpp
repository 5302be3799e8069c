// First and second derivatives exactly at the kinks of piecewise ops, against
// PyTorch 2.15's (tests/reference/kinks_reference.py): finite differences
// straddle a kink, so the op table's gradchecks cannot pin these values; each
// row here names an op, its points (the kinks and a point on each side) and
// compares dy/dx and d2y/dx2 (the gradient of sum(dy/dx), taken with
// create_graph) with PyTorch's in double.
#include "support.hpp"

using namespace frost;
using namespace frost::test;
namespace F = frost::nn::functional;

namespace {

const SafetensorsFile& reference() {
  static const SafetensorsFile f = SafetensorsFile::open(test_data_path("kinks_reference.safetensors"));
  return f;
}
TD reference_value(const std::string& name) { return reference().get<double>(name); }

struct KinkRow {
  std::string name;
  std::function<TD(const TD&)> f;
  double tol = 1e-12;
  /// frost's second derivative where it departs from PyTorch's on purpose
  /// (the test also checks that PyTorch's differs, so the row keeps saying why)
  std::vector<double> own_h = {};
};

/// binary_cross_entropy's epsilon, PyTorch's float 1e-12 in double.
const double kBceEps = static_cast<double>(1e-12f);

/// dy/dx and d2y/dx2 of sum(f(x)) at the row's points.
std::pair<TD, TD> derivatives(const KinkRow& r, const TD& points) {
  const TD x = points.detach().clone().requires_grad_();
  const TD g = autograd::grad({r.f(x).sum()}, {x}, {}, true, true)[0];
  if (!g.requires_grad()) return {g.detach(), TD::zeros(x.shape())};
  const auto h = autograd::grad({g.sum()}, {x}, {}, false, false, /*allow_unused=*/true)[0];
  return {g.detach(), h.defined() ? h : TD::zeros(x.shape())};
}

std::string str(const std::vector<double>& v) {
  std::string s = "[";
  char buf[32];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.17g", v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

/// The Hessian, row by row: the gradient in x of each entry of g (a
/// create_graph gradient of x), row-major.
std::vector<double> hessian(const TD& g, const TD& x) {
  std::vector<double> hess;
  for (std::int64_t k = 0; k < x.numel(); ++k) {
    const auto row = autograd::grad({g.select(0, k)}, {x}, {}, true, false, /*allow_unused=*/true)[0];
    const auto v = row.defined() ? row.to_vector() : std::vector<double>(static_cast<std::size_t>(x.numel()), 0.0);
    hess.insert(hess.end(), v.begin(), v.end());
  }
  return hess;
}

TD zero_target(const TD& x) { return TD::zeros(x.shape()); }

std::vector<KinkRow> rows() {
  return {
      {"clamp", [](const TD& x) { return x.clamp(-1.0, 1.0); }},
      {"hardtanh", [](const TD& x) { return hardtanh(x, -0.5, 1.0); }},
      {"relu6", [](const TD& x) { return relu6(x); }},
      {"elu", [](const TD& x) { return elu(x, 1.0); }},
      {"elu_alpha2", [](const TD& x) { return elu(x, 2.0); }},
      {"selu", [](const TD& x) { return F::selu(x); }},
      {"softplus_t1", [](const TD& x) { return softplus(x, 1.0, 1.0); }},
      {"softplus_b2_t1", [](const TD& x) { return softplus(x, 2.0, 1.0); }},
      {"smooth_l1", [](const TD& x) { return F::smooth_l1_loss(x, zero_target(x), F::Reduction::sum); }},
      {"smooth_l1_beta05", [](const TD& x) { return F::smooth_l1_loss(x, zero_target(x), F::Reduction::sum, 0.5); }},
      {"huber", [](const TD& x) { return F::huber_loss(x, zero_target(x), F::Reduction::sum); }},
      {"huber_delta2", [](const TD& x) { return F::huber_loss(x, zero_target(x), F::Reduction::sum, 2.0); }},
      {"l1", [](const TD& x) { return F::l1_loss(x, zero_target(x), F::Reduction::sum); }},
      {"leaky_relu", [](const TD& x) { return leaky_relu(x, 0.1); }},
      {"relu", [](const TD& x) { return relu(x); }},
      {"abs", [](const TD& x) { return x.abs(); }},
      // PyTorch's CPU hardsigmoid_backward multiplies by the float constant
      // 1.0f / 6.0f even in double (5e-9 off 1/6); frost's slope is 1/6 itself
      {"hardsigmoid", [](const TD& x) { return F::hardsigmoid(x); }, 1e-8},
      {"hardswish", [](const TD& x) { return F::hardswish(x); }},
      // ties, zeros and edges of the other piecewise ops and reductions
      {"maximum_ties", [](const TD& x) { return maximum(x, TD::from({0.0, 1.0, 2.0})); }},
      {"minimum_ties", [](const TD& x) { return minimum(x, TD::from({0.0, 1.0, 2.0})); }},
      {"max_ties", [](const TD& x) { return x.max(); }},
      {"min_ties", [](const TD& x) { return x.min(); }},
      {"max_dim_ties", [](const TD& x) { return x.reshape({2, 3}).max(1).values; }},
      {"min_dim_ties", [](const TD& x) { return x.reshape({2, 3}).min(1).values; }},
      // PyTorch's double backward of the norm at a zero vector is NaN (0/0
      // inside its masked rule); frost's masked rule has no 0/0: 0
      {"norm2_zero", [](const TD& x) { return x.norm(); }, 1e-12, {0.0, 0.0, 0.0}},
      {"norm1", [](const TD& x) { return x.norm(1); }},
      {"norm3_zero_entry", [](const TD& x) { return x.norm(3); }},
      {"norm_inf_ties", [](const TD& x) { return x.norm(std::numeric_limits<double>::infinity()); }},
      {"std_constant", [](const TD& x) { return x.std(); }},
      {"max_pool_ties", [](const TD& x) { return max_pool2d(x.reshape({1, 1, 2, 2}), 2); }},
      {"max_pool_overlap", [](const TD& x) { return max_pool2d(x.reshape({1, 1, 3, 3}), 2, {.stride = 1}); }},
      {"pow0", [](const TD& x) { return pow(x, 0.0); }},
      // 0^x is constant 0 for x > 0, so the true second derivative there is 0;
      // PyTorch's is NaN (0 * log 0 in its masked rule)
      {"rpow_base0", [](const TD& x) { return pow(0.0, x); }, 1e-12, {0.0, 0.0, 0.0}},
      // dy/dx is PyTorch's rule (x - t) / max(x (1 - x), eps) (t = 0.25); d2 is
      // that rule's own derivative, 1/eps where the max clamps and
      // (x^2 - 2xt + t) / (x (1 - x))^2 = 4 at 0.5. PyTorch's double backward
      // divides by (x (1 - x) + eps)^2 instead: 2.5e23 at the edges and
      // 4 (1 - 8e-12) inside, inconsistent with its own first derivative
      {"bce_edges", [](const TD& x) { return F::binary_cross_entropy(x, TD::full(x.shape(), 0.25), F::Reduction::sum); },
       1e-12, {1 / kBceEps, 4.0, 1 / kBceEps}},
      {"round_halves", [](const TD& x) { return round(x); }},
      {"sign", [](const TD& x) { return sign(x); }},
      {"softplus_t20", [](const TD& x) { return softplus(x); }},
  };
}

}  // namespace

TEST_CASE("kinks: first and second derivatives at the kinks of piecewise ops are PyTorch's") {
  for (const auto& r : rows()) {
    INFO(r.name);
    const TD x = reference_value(r.name + ".x");
    const auto [g, h] = derivatives(r, x);
    INFO("x  = ", str(x.to_vector()), "\ndy = ", str(g.to_vector()), " (PyTorch ", str(reference_value(r.name + ".g").to_vector()),
         ")\nd2 = ", str(h.to_vector()), " (PyTorch ", str(reference_value(r.name + ".h").to_vector()), ")");
    CHECK(closeness(g.to_vector(), reference_value(r.name + ".g").to_vector(), r.tol, r.tol) <= 1);
    if (r.own_h.empty()) {
      CHECK(closeness(h.to_vector(), reference_value(r.name + ".h").to_vector(), r.tol, r.tol) <= 1);
    } else {
      CHECK(closeness(h.to_vector(), r.own_h, r.tol, r.tol) <= 1);
      CHECK(closeness(reference_value(r.name + ".h").to_vector(), r.own_h, r.tol, r.tol) > 1);
    }
  }
}

TEST_CASE("kinks: prod's gradient and Hessian with zero, one, two and three zeros are PyTorch's") {
  for (int i = 0; i < 5; ++i) {
    const std::string n = "prod" + std::to_string(i);
    INFO(n);
    const TD x = reference_value(n + ".x").requires_grad_();
    const TD g = autograd::grad({x.prod()}, {x}, {}, true, true)[0];
    CHECK(closeness(g.detach().to_vector(), reference_value(n + ".g").to_vector(), 1e-12, 1e-12) <= 1);
    const auto hess = hessian(g, x);
    INFO("Hessian ", str(hess), " (PyTorch ", str(reference_value(n + ".h").to_vector()), ")");
    CHECK(closeness(hess, reference_value(n + ".h").to_vector(), 1e-12, 1e-12) <= 1);
  }
}

TEST_CASE("kinks: prod over a dim keeps the Hessian of a slice with two zeros and of one with one") {
  const TD x = reference_value("prod_dim.x").requires_grad_();
  const TD g = autograd::grad({x.reshape({2, 3}).prod({1}).sum()}, {x}, {}, true, true)[0];
  CHECK(closeness(g.detach().to_vector(), reference_value("prod_dim.g").to_vector(), 1e-12, 1e-12) <= 1);
  const auto hess = hessian(g, x);
  INFO("Hessian ", str(hess), " (PyTorch ", str(reference_value("prod_dim.h").to_vector()), ")");
  CHECK(closeness(hess, reference_value("prod_dim.h").to_vector(), 1e-12, 1e-12) <= 1);
}

TEST_CASE("kinks: prelu at 0 (dy/dx is the weight, with no derivative in the weight) and its 0-dim shape") {
  const TD x = reference_value("prelu.x").requires_grad_(), w = reference_value("prelu.w").requires_grad_();
  const auto gs = autograd::grad({F::prelu(x, w).sum()}, {x, w}, {}, true, true);
  CHECK(closeness(gs[0].detach().to_vector(), reference_value("prelu.gx").to_vector(), 1e-12, 1e-12) <= 1);
  CHECK(closeness(gs[1].detach().to_vector(), reference_value("prelu.gw").to_vector(), 1e-12, 1e-12) <= 1);
  const auto gxw = autograd::grad({gs[0].sum()}, {w})[0];
  CHECK(closeness(gxw.to_vector(), reference_value("prelu.gxw").to_vector(), 1e-12, 1e-12) <= 1);
  CHECK(F::prelu(TD::full({}, 1.0), TD::full({}, 0.25)).shape() == Shape{});
  CHECK(F::prelu(TD::full({}, -2.0), TD::full({1}, 0.25)).item() == -0.5);
}
