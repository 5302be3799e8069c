// nn::init: in-place parameter initialisers with torch.nn.init's names,
// defaults, formulas and error messages. They write through the backend
// under NoGradGuard (as torch.no_grad() does), so they work on leaf
// parameters that require grad and leave no history; every random draw
// comes from frost's Philox generator, so manual_seed reproduces a model.
//
// Like LibTorch's torch::nn::init, each function takes the tensor handle and
// returns it: the result is the same tensor (shared storage), not a copy.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>


#include "../tensor.hpp"

namespace frost::nn::init {

/// Which fan kaiming_* preserves: fan_in keeps the forward variance,
/// fan_out the backward one (PyTorch's mode='fan_in' / 'fan_out').
enum class FanMode { fan_in, fan_out };
inline constexpr FanMode fan_in = FanMode::fan_in;
inline constexpr FanMode fan_out = FanMode::fan_out;

/// The recommended gain for a nonlinearity (torch.nn.init.calculate_gain):
/// linear/conv*/sigmoid 1, tanh 5/3, relu sqrt(2), selu 3/4 and leaky_relu
/// sqrt(2 / (1 + slope^2)) with `param` the negative slope (default 0.01).
inline double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt) {
  constexpr std::string_view linear_fns[] = {"linear",           "conv1d",           "conv2d",          "conv3d",
                                             "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"};
  for (auto f : linear_fns)
    if (nonlinearity == f) return 1.0;
  if (nonlinearity == "sigmoid") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    FROST_CHECK(std::isfinite(slope), "frost::nn::init::calculate_gain: negative_slope ", slope,
                " not a valid number");
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4.0;  // PyTorch's value: keeps the variance of self-normalising nets stable
  frost::detail::fail("frost::nn::init::calculate_gain: Unsupported nonlinearity ", nonlinearity,
               " (expected linear, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d, "
               "sigmoid, tanh, relu, leaky_relu or selu)");
}

/// fan_in and fan_out of a weight (torch.nn.init._calculate_fan_in_and_fan_out).
struct Fans {
  std::int64_t fan_in = 0;
  std::int64_t fan_out = 0;
};

/// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field,
/// where the receptive field is the product of the dims after the first two
/// (a Linear weight [out, in] or a Conv weight [out, in/groups, kH, kW]).
template <Scalar T>
Fans calculate_fan_in_and_fan_out(const Tensor<T>& tensor) {
  frost::detail::check_defined(tensor, "nn::init::calculate_fan_in_and_fan_out");
  FROST_CHECK(tensor.dim() >= 2, "frost::nn::init::calculate_fan_in_and_fan_out: Fan in and fan out can not be "
              "computed for tensor with fewer than 2 dimensions (got shape ", tensor.shape().str(), ")");
  std::int64_t receptive = 1;
  for (int i = 2; i < tensor.dim(); ++i) receptive *= tensor.shape()[i];
  return {tensor.shape()[1] * receptive, tensor.shape()[0] * receptive};
}

namespace detail {

/// Common checks of every initialiser; returns the tensor's backend.
template <class T>
Backend<T>& target(const Tensor<T>& t, const char* fn) {
  frost::detail::check_defined(t, fn);
  return backend_for<T>(t.device());
}

/// Writes a Philox draw into `t` (any strides, any device) without autograd.
template <class T>
void draw_into(const Tensor<T>& t, philox::Dist dist, double lo, double hi, Generator* gen, const char* fn) {
  Backend<T>& be = target(t, fn);
  NoGradGuard no_grad;
  Generator& g = gen ? *gen : default_generator();
  const std::uint64_t off = g.template take<T>(static_cast<std::uint64_t>(t.numel()));
  be.random(t.view_of(), dist, g.seed(), off, lo, hi);
  frost::detail::bump_version(t);
}

/// Copies host values (row-major, t's shape) into `t` (any strides).
template <class T>
void write_host(const Tensor<T>& t, const Tensor<T>& host) {
  NoGradGuard no_grad;
  Tensor<T> dst = t;
  dst.copy_(host);  // moves to t's device when t is not on the CPU
}

/// Inverse error function: a single-precision rational start (Giles 2010)
/// polished by two Newton steps on erf, accurate to double rounding.
inline double erfinv(double y) {
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      x = c + x * w;
  } else {
    w = std::sqrt(w) - 3.0;
    x = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      x = c + x * w;
  }
  x *= y;
  for (int i = 0; i < 2; ++i) {
    const double err = std::erf(x) - y;
    x -= err / (1.1283791670955126 * std::exp(-x * x));  // d/dx erf = 2/sqrt(pi) e^{-x^2}
  }
  return x;
}

template <class T>
double correct_fan(const Tensor<T>& t, FanMode mode) {
  const Fans f = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == FanMode::fan_in ? f.fan_in : f.fan_out);
}

template <class T>
bool has_zero_dim(const Tensor<T>& t) {
  for (auto d : t.shape())
    if (d == 0) return true;
  return false;
}

}  // namespace detail

/// Fills `tensor` with `val`.
template <Scalar T>
Tensor<T> constant_(Tensor<T> tensor, std::type_identity_t<T> val) {
  Backend<T>& be = detail::target(tensor, "nn::init::constant_");
  NoGradGuard no_grad;
  be.fill(tensor.view_of(), val);
  frost::detail::bump_version(tensor);
  return tensor;
}

/// Fills `tensor` with 0.
template <Scalar T>
Tensor<T> zeros_(Tensor<T> tensor) { return constant_(std::move(tensor), T(0)); }

/// Fills `tensor` with 1.
template <Scalar T>
Tensor<T> ones_(Tensor<T> tensor) { return constant_(std::move(tensor), T(1)); }

/// Writes the identity into a 2-D `tensor` (ones on the main diagonal of a
/// possibly rectangular matrix), preserving the identity of Linear inputs.
template <Scalar T>
Tensor<T> eye_(Tensor<T> tensor) {
  Backend<T>& be = detail::target(tensor, "nn::init::eye_");
  FROST_CHECK(tensor.dim() == 2, "frost::nn::init::eye_: Only tensors with 2 dimensions are supported (got shape ",
              tensor.shape().str(), ")");
  NoGradGuard no_grad;
  be.fill(tensor.view_of(), T(0));
  // The diagonal is a 1-D view with stride row + column stride: the kernel
  // fills it on any device and for any layout.
  const std::int64_t n = std::min(tensor.shape()[0], tensor.shape()[1]);
  be.fill(View<T>(tensor.data(), Shape{n}, Shape{tensor.strides()[0] + tensor.strides()[1]}), T(1));
  frost::detail::bump_version(tensor);
  return tensor;
}

/// Fills `tensor` with draws from U(a, b).
template <FloatingScalar T>
Tensor<T> uniform_(Tensor<T> tensor, double a = 0.0, double b = 1.0, Generator* generator = nullptr) {
  FROST_CHECK(a <= b, "frost::nn::init::uniform_: uniform_ expects to return a [from, to) range, but found from=", a,
              " > to=", b);
  detail::draw_into(tensor, philox::Dist::uniform, a, b, generator, "nn::init::uniform_");
  return tensor;
}

/// Fills `tensor` with draws from N(mean, std^2).
template <FloatingScalar T>
Tensor<T> normal_(Tensor<T> tensor, double mean = 0.0, double std = 1.0, Generator* generator = nullptr) {
  FROST_CHECK(std >= 0.0, "frost::nn::init::normal_: normal expects std >= 0.0, but found std ", std);
  detail::draw_into(tensor, philox::Dist::normal, mean, std, generator, "nn::init::normal_");
  return tensor;
}

/// Fills `tensor` with draws from N(mean, std^2) truncated to [a, b], by
/// PyTorch's inverse-CDF method (uniform between the CDF values of a and b,
/// mapped back through erfinv), so no draw is rejected or redrawn.
/// The transform runs on the host; the values are then copied to the tensor's device.
template <FloatingScalar T>
Tensor<T> trunc_normal_(Tensor<T> tensor, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                        Generator* generator = nullptr) {
  detail::target(tensor, "nn::init::trunc_normal_");
  FROST_CHECK(std > 0.0, "frost::nn::init::trunc_normal_: expects std > 0, got ", std);
  FROST_CHECK(a < b, "frost::nn::init::trunc_normal_: expects a < b, got a=", a, " b=", b);
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = cdf((a - mean) / std), u = cdf((b - mean) / std);
  // Draw in double whatever T is, so float tensors get the same accuracy
  // near the tails.
  Generator& g = generator ? *generator : default_generator();
  const std::uint64_t off = g.template take<double>(static_cast<std::uint64_t>(tensor.numel()));
  auto host = Tensor<T>::empty(tensor.shape());
  T* p = host.data();
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    const double v = philox::sample<double>(philox::Dist::uniform, g.seed(), off, static_cast<std::uint64_t>(i),
                                            2 * l - 1, 2 * u - 1);
    const double x = mean + std * std::sqrt(2.0) * detail::erfinv(v);
    p[i] = static_cast<T>(std::min(std::max(x, a), b));
  }
  detail::write_host(tensor, host);
  return tensor;
}

/// Options of kaiming_uniform_ / kaiming_normal_, with PyTorch's defaults.
/// \code
/// nn::init::kaiming_normal_(w, {.mode = nn::init::fan_out, .nonlinearity = "relu"});
/// \endcode
struct KaimingOptions {
  double a = 0.0;  ///< negative slope of the rectifier after this layer (leaky_relu only)
  FanMode mode = FanMode::fan_in;
  std::string nonlinearity = "leaky_relu";
  Generator* generator = nullptr;
};

/// He et al. (2015) uniform init: U(-bound, bound) with bound = gain * sqrt(3 / fan).
template <FloatingScalar T>
Tensor<T> kaiming_uniform_(Tensor<T> tensor, const KaimingOptions& o = {}) {
  detail::target(tensor, "nn::init::kaiming_uniform_");
  if (detail::has_zero_dim(tensor)) return tensor;  // PyTorch warns and leaves an empty tensor alone
  const double fan = detail::correct_fan(tensor, o.mode);  // first, as PyTorch: a 1-D tensor fails on its fans
  const double std = calculate_gain(o.nonlinearity, o.a) / std::sqrt(fan);
  const double bound = std::sqrt(3.0) * std;
  detail::draw_into(tensor, philox::Dist::uniform, -bound, bound, o.generator, "nn::init::kaiming_uniform_");
  return tensor;
}

/// He et al. (2015) normal init: N(0, std^2) with std = gain / sqrt(fan).
template <FloatingScalar T>
Tensor<T> kaiming_normal_(Tensor<T> tensor, const KaimingOptions& o = {}) {
  detail::target(tensor, "nn::init::kaiming_normal_");
  if (detail::has_zero_dim(tensor)) return tensor;
  const double fan = detail::correct_fan(tensor, o.mode);  // first, as PyTorch: a 1-D tensor fails on its fans
  const double std = calculate_gain(o.nonlinearity, o.a) / std::sqrt(fan);
  detail::draw_into(tensor, philox::Dist::normal, 0.0, std, o.generator, "nn::init::kaiming_normal_");
  return tensor;
}

/// Glorot & Bengio (2010) uniform init: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
template <FloatingScalar T>
Tensor<T> xavier_uniform_(Tensor<T> tensor, double gain = 1.0, Generator* generator = nullptr) {
  const Fans f = calculate_fan_in_and_fan_out(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  const double a = std::sqrt(3.0) * std;
  detail::draw_into(tensor, philox::Dist::uniform, -a, a, generator, "nn::init::xavier_uniform_");
  return tensor;
}

/// Glorot & Bengio (2010) normal init: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
template <FloatingScalar T>
Tensor<T> xavier_normal_(Tensor<T> tensor, double gain = 1.0, Generator* generator = nullptr) {
  const Fans f = calculate_fan_in_and_fan_out(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  detail::draw_into(tensor, philox::Dist::normal, 0.0, std, generator, "nn::init::xavier_normal_");
  return tensor;
}

namespace detail {
/// Thin Householder QR of the column-major m x n matrix `a` (m >= n): Q's n
/// columns into `q` (column-major m x n) and sign(R_jj) into `sign_r`. Only
/// the signs of R are needed, so R itself is not kept.
inline void householder_qr(std::vector<double>& a, std::int64_t m, std::int64_t n, std::vector<double>& q,
                           std::vector<double>& sign_r) {
  auto at = [m](std::vector<double>& x, std::int64_t i, std::int64_t j) -> double& {
    return x[static_cast<std::size_t>(i + j * m)];
  };
  std::vector<std::vector<double>> vs(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    double norm2 = 0;
    for (std::int64_t i = k; i < m; ++i) norm2 += at(a, i, k) * at(a, i, k);
    const double x0 = at(a, k, k);
    const double alpha = x0 >= 0 ? -std::sqrt(norm2) : std::sqrt(norm2);  // R_kk; the sign avoids cancellation
    std::vector<double>& v = vs[static_cast<std::size_t>(k)];
    v.assign(static_cast<std::size_t>(m - k), 0.0);
    for (std::int64_t i = k; i < m; ++i) v[static_cast<std::size_t>(i - k)] = at(a, i, k);
    v[0] -= alpha;
    double vv = 0;
    for (double e : v) vv += e * e;
    sign_r[static_cast<std::size_t>(k)] = alpha > 0 ? 1.0 : (alpha < 0 ? -1.0 : 0.0);
    if (vv == 0) {  // the column is already (0, ..., 0): H = I
      v.clear();
      continue;
    }
    for (std::int64_t j = k; j < n; ++j) {  // A <- (I - 2 v v^T / v^T v) A
      double d = 0;
      for (std::int64_t i = k; i < m; ++i) d += v[static_cast<std::size_t>(i - k)] * at(a, i, j);
      const double f = 2 * d / vv;
      for (std::int64_t i = k; i < m; ++i) at(a, i, j) -= f * v[static_cast<std::size_t>(i - k)];
    }
  }
  // Q = H_0 H_1 ... H_{n-1} I[:, :n], applied right to left.
  for (std::int64_t j = 0; j < n; ++j) at(q, j, j) = 1;
  for (std::int64_t k = n - 1; k >= 0; --k) {
    const std::vector<double>& v = vs[static_cast<std::size_t>(k)];
    if (v.empty()) continue;
    double vv = 0;
    for (double e : v) vv += e * e;
    for (std::int64_t j = 0; j < n; ++j) {
      double d = 0;
      for (std::int64_t i = k; i < m; ++i) d += v[static_cast<std::size_t>(i - k)] * at(q, i, j);
      const double f = 2 * d / vv;
      for (std::int64_t i = k; i < m; ++i) at(q, i, j) -= f * v[static_cast<std::size_t>(i - k)];
    }
  }
}
}  // namespace detail

/// Saxe et al. (2013): a (semi-)orthogonal matrix from the QR of a Gaussian
/// draw, times `gain`. Dims after the first are flattened, so rows = size(0)
/// and cols = numel / rows; the rows (or columns, whichever are fewer) are
/// orthonormal. Q's columns are multiplied by sign(diag(R)), as in PyTorch, so
/// the result is Haar-distributed rather than biased by the QR's sign choice.
/// The QR runs on the host (a Householder QR in double), then moves to the tensor's device.
template <FloatingScalar T>
Tensor<T> orthogonal_(Tensor<T> tensor, double gain = 1.0, Generator* generator = nullptr) {
  detail::target(tensor, "nn::init::orthogonal_");
  FROST_CHECK(tensor.dim() >= 2, "frost::nn::init::orthogonal_: Only tensors with 2 or more dimensions are "
              "supported (got shape ", tensor.shape().str(), ")");
  if (tensor.numel() == 0) return tensor;
  const std::int64_t rows = tensor.shape()[0], cols = tensor.numel() / rows;
  const bool wide = rows < cols;
  auto draw = Tensor<double>::randn({rows, cols}, generator);
  // The tall (m >= n) matrix the thin QR wants: the draw, or its transpose.
  const std::int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  std::vector<double> a(static_cast<std::size_t>(m * n));  // column-major m x n
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double v = draw.data()[i * cols + j];
      if (wide) a[static_cast<std::size_t>(j + i * m)] = v;
      else a[static_cast<std::size_t>(i + j * m)] = v;
    }
  std::vector<double> q(static_cast<std::size_t>(m * n), 0.0), sign_r(static_cast<std::size_t>(n));
  detail::householder_qr(a, m, n, q, sign_r);
  auto host = Tensor<T>::empty(tensor.shape());
  // Row-major rows x cols result: Q itself (tall) or Q^T (wide), each column
  // of Q times sign(R_jj) (torch.sign(0) == 0) and the gain.
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t r = wide ? j : i, c = wide ? i : j;  // element (r, c) of Q
      host.data()[i * cols + j] = static_cast<T>(q[static_cast<std::size_t>(r + c * m)] * sign_r[static_cast<std::size_t>(c)] * gain);
    }
  detail::write_host(tensor, host);
  return tensor;
}

}  // namespace frost::nn::init
