// Matrix products through the backend GEMM. Operands that are transposed
// views are passed as transposed GEMM arguments rather than copied, so the
// backward rules (which multiply by transposes) cost no extra copy.
#pragma once
#include <cstdint>

#include "../amp/autocast.hpp"
#include "common.hpp"

namespace frost {

// Under autocast (amp/autocast.hpp) these products of float32 tensors run in
// the region's 16-bit dtype.
namespace amp::detail {
FROST_AUTOCAST_API Tensor<float> autocast_mm(const Tensor<float>& a, const Tensor<float>& b);
FROST_AUTOCAST_API Tensor<float> autocast_bmm(const Tensor<float>& a, const Tensor<float>& b);
FROST_AUTOCAST_API Tensor<float> autocast_matmul(const Tensor<float>& a, const Tensor<float>& b);
FROST_AUTOCAST_API Tensor<float> autocast_addmm(const Tensor<float>& c, const Tensor<float>& a, const Tensor<float>& b,
                                                double beta, double alpha);
}  // namespace amp::detail

namespace detail {

/// A 2-D matrix (last two dims of `x`) as a GEMM argument.
template <class T>
struct GemmArg {
  Tensor<T> keep;  // the tensor the pointer refers to (a copy when x's layout was unusable)
  bool trans = false;
  std::int64_t ld = 1;
  std::int64_t batch_stride = 0;
};

template <class T>
GemmArg<T> gemm_arg(const Tensor<T>& x) {
  const int nd = x.dim();
  const std::int64_t r = x.shape()[nd - 2], c = x.shape()[nd - 1];
  const std::int64_t s0 = x.strides()[nd - 2], s1 = x.strides()[nd - 1];
  const std::int64_t sb = nd == 3 ? x.strides()[0] : 0;
  if ((s1 == 1 || c == 1) && (r == 1 || s0 >= std::max<std::int64_t>(1, c)))
    return {x, false, r == 1 ? std::max<std::int64_t>(1, c) : s0, sb};
  if ((s0 == 1 || r == 1) && (c == 1 || s1 >= std::max<std::int64_t>(1, r)))
    return {x, true, c == 1 ? std::max<std::int64_t>(1, r) : s1, sb};
  auto cx = x.contiguous();
  return {cx, false, std::max<std::int64_t>(1, c), nd == 3 ? r * c : 0};
}

/// out[b] = alpha a[b] b[b] + beta out[b] for 2-D or 3-D operands.
template <class T>
void gemm_into(const Tensor<T>& a, const Tensor<T>& b, Tensor<T>& out, T alpha, T beta) {
  const int nd = a.dim();
  const std::int64_t m = a.shape()[nd - 2], k = a.shape()[nd - 1], n = b.shape()[nd - 1];
  const std::int64_t batch = nd == 3 ? a.shape()[0] : 1;
  auto ga = gemm_arg(a), gb = gemm_arg(b);
  backend_for<T>(a.device())
      .gemm(ga.trans, gb.trans, m, n, k, alpha, ga.keep.data(), ga.ld, ga.batch_stride, gb.keep.data(), gb.ld,
            gb.batch_stride, beta, out.data(), n, nd == 3 ? m * n : 0, batch);
}

/// True for a 2-D transposed view of a contiguous matrix (a linear layer's weight.t()).
template <class T>
bool transposed_layout(const Tensor<T>& x) {
  return x.dim() == 2 && x.shape()[0] > 1 && x.shape()[1] > 1 && x.strides()[0] == 1 &&
         x.strides()[1] == x.shape()[0];
}

// The gradients of a b. Each takes its operand's layout: for a transposed
// operand (linear's weight.t()) it is computed as a transpose, so the
// weight's gradient reaches the leaf contiguous and is stored as it is
// instead of copied element by element.
template <class T>
Tensor<T> mm_grad_a(const Tensor<T>& dy, const Tensor<T>& b, const Tensor<T>& a) {
  return transposed_layout(a) ? mm(b, dy.t()).t() : mm(dy, b.t());
}
template <class T>
Tensor<T> mm_grad_b(const Tensor<T>& dy, const Tensor<T>& a, const Tensor<T>& b) {
  return transposed_layout(b) ? mm(dy.t(), a).t() : mm(a.t(), dy);
}

}  // namespace detail

/// y = a b; da = dy b^T, db = a^T dy
struct MmOp {
  static constexpr const char* name = "mm";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b) const {
    if (g.needs(0)) g[0] = detail::mm_grad_a(dy, b, a);
    if (g.needs(1)) g[1] = detail::mm_grad_b(dy, a, b);
  }
};

template <FloatingScalar T> Tensor<T> mm(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_same_device(a, b, "mm");
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(a.device())) return amp::detail::autocast_mm(a, b);
  FROST_CHECK(a.dim() == 2 && b.dim() == 2, "frost::mm: expects 2-D tensors, got shapes ", a.shape().str(), " and ",
              b.shape().str());
  FROST_CHECK(a.shape()[1] == b.shape()[0], "frost::mm: shapes ", a.shape().str(), " and ", b.shape().str(),
              " cannot be multiplied (", a.shape()[1], " != ", b.shape()[0], ")");
  auto y = Tensor<T>::empty({a.shape()[0], b.shape()[1]}, a.device());
  detail::gemm_into(a, b, y, T(1), T(0));
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, MmOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}

/// y[i] = a[i] b[i]; da = dy b^T, db = a^T dy per batch
struct BmmOp {
  static constexpr const char* name = "bmm";
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b) const {
    if (g.needs(0)) g[0] = bmm(dy, b.transpose(1, 2));
    if (g.needs(1)) g[1] = bmm(a.transpose(1, 2), dy);
  }
};

template <FloatingScalar T> Tensor<T> bmm(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_same_device(a, b, "bmm");
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(a.device())) return amp::detail::autocast_bmm(a, b);
  FROST_CHECK(a.dim() == 3 && b.dim() == 3, "frost::bmm: expects 3-D tensors, got shapes ", a.shape().str(), " and ",
              b.shape().str());
  FROST_CHECK(a.shape()[0] == b.shape()[0] && a.shape()[2] == b.shape()[1], "frost::bmm: shapes ", a.shape().str(),
              " and ", b.shape().str(), " cannot be multiplied (expected [B, m, k] and [B, k, n])");
  auto y = Tensor<T>::empty({a.shape()[0], a.shape()[1], b.shape()[2]}, a.device());
  detail::gemm_into(a, b, y, T(1), T(0));
  if (detail::any_requires_grad<T>({&a, &b}))
    detail::record(y, BmmOp{}, {&a, &b}, SavedTensor<T>::input(a), SavedTensor<T>::input(b));
  return y;
}

/// NumPy matmul: dot for 1-D x 1-D, matrix-vector, and batched products with
/// broadcast batch dims.
template <FloatingScalar T> Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_same_device(a, b, "matmul");
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(a.device())) return amp::detail::autocast_matmul(a, b);
  const int na = a.dim(), nb = b.dim();
  FROST_CHECK(na >= 1 && nb >= 1, "frost::matmul: both arguments need at least 1 dim, got shapes ", a.shape().str(),
              " and ", b.shape().str());
  const std::int64_t ka = a.shape()[na - 1], kb = b.shape()[nb == 1 ? 0 : nb - 2];
  FROST_CHECK(ka == kb, "frost::matmul: shapes ", a.shape().str(), " and ", b.shape().str(), " cannot be multiplied (",
              ka, " != ", kb, ")");
  if (na == 1 && nb == 1) return sum(a * b);
  if (na == 2 && nb == 2) return mm(a, b);
  if (na == 2 && nb == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (na == 1 && nb == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (nb <= 2) {  // fold a's batch dims into the rows: one big GEMM
    auto bb = nb == 1 ? b.unsqueeze(1) : b;
    Shape out = a.shape();
    out[na - 1] = bb.shape()[1];
    auto y = mm(a.reshape({-1, ka}), bb).reshape(out);
    return nb == 1 ? y.squeeze(-1) : y;
  }
  const auto aa = na == 1 ? a.unsqueeze(0) : a;
  const auto bb = nb == 1 ? b.unsqueeze(1) : b;
  const int da = aa.dim(), db = bb.dim();
  Shape ba, bbatch;
  for (int i = 0; i < da - 2; ++i) ba.push_back(aa.shape()[i]);
  for (int i = 0; i < db - 2; ++i) bbatch.push_back(bb.shape()[i]);
  {  // checked here so the error shows the operands' full shapes, not just their batch dims
    const int nbd = std::max(ba.ndim(), bbatch.ndim());
    bool ok = true;
    for (int i = 0; i < nbd; ++i) {
      const int ia = ba.ndim() - nbd + i, ib = bbatch.ndim() - nbd + i;
      const std::int64_t sa = ia >= 0 ? ba[ia] : 1, sb = ib >= 0 ? bbatch[ib] : 1;
      ok = ok && (sa == sb || sa == 1 || sb == 1);
    }
    FROST_CHECK(ok, "frost::matmul: shapes ", a.shape().str(), " and ", b.shape().str(), " have batch dims ", ba.str(),
                " and ", bbatch.str(), " that are not broadcastable");
  }
  Shape batch = broadcast_shapes(ba, bbatch, "matmul");
  const std::int64_t m = aa.shape()[da - 2], n = bb.shape()[db - 1];
  Shape ea = batch, eb = batch, out = batch;
  ea.push_back(m);
  ea.push_back(ka);
  eb.push_back(ka);
  eb.push_back(n);
  out.push_back(m);
  out.push_back(n);
  auto y = bmm(aa.expand(ea).reshape({-1, m, ka}), bb.expand(eb).reshape({-1, ka, n})).reshape(out);
  if (na == 1) y = y.squeeze(-2);
  if (nb == 1) y = y.squeeze(-1);
  return y;
}

/// Outer product of two vectors.
template <FloatingScalar T> Tensor<T> outer(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_same_device(a, b, "outer");
  FROST_CHECK(a.dim() == 1 && b.dim() == 1, "frost::outer: expects 1-D tensors, got shapes ", a.shape().str(), " and ",
              b.shape().str());
  return a.unsqueeze(1) * b.unsqueeze(0);
}

/// y = beta c + alpha a b in one GEMM; dc = beta dy (summed to c), da = alpha dy b^T, db = alpha a^T dy
struct AddmmOp {
  static constexpr const char* name = "addmm";
  Shape c;
  double beta, alpha;
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const Tensor<T>& a, const Tensor<T>& b) const {
    if (g.needs(0)) g[0] = sum_to(beta == 1 ? dy : dy * T(beta), c);
    auto sdy = alpha == 1 ? dy : dy * T(alpha);
    if (g.needs(1)) g[1] = detail::mm_grad_a(sdy, b, a);
    if (g.needs(2)) g[2] = detail::mm_grad_b(sdy, a, b);
  }
};

template <FloatingScalar T> Tensor<T> addmm(const Tensor<T>& c, const Tensor<T>& a, const Tensor<T>& b,
                                         std::type_identity_t<T> beta = 1, std::type_identity_t<T> alpha = 1) {
  detail::check_same_device(a, b, "addmm");
  detail::check_same_device(c, a, "addmm");
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(a.device())) return amp::detail::autocast_addmm(c, a, b, double(beta), double(alpha));
  FROST_CHECK(a.dim() == 2 && b.dim() == 2 && a.shape()[1] == b.shape()[0], "frost::addmm: shapes ", a.shape().str(),
              " and ", b.shape().str(), " cannot be multiplied (expected [m, k] and [k, n])");
  const Shape s{a.shape()[0], b.shape()[1]};
  FROST_CHECK(broadcast_shapes(c.shape(), s, "addmm") == s, "frost::addmm: input of shape ", c.shape().str(),
              " does not broadcast to the product's shape ", s.str());
  auto y = Tensor<T>::empty(s, a.device());
  backend_for<T>(a.device()).copy(detail::broadcast_view(c, s), y.view_of());
  detail::gemm_into(a, b, y, alpha, beta);
  if (detail::any_requires_grad<T>({&c, &a, &b}))
    detail::record(y, AddmmOp{c.shape(), double(beta), double(alpha)}, {&c, &a, &b}, SavedTensor<T>::input(a),
                   SavedTensor<T>::input(b));
  return y;
}

}  // namespace frost
