// Scaled dot-product attention (frost::nn::functional), written with matmul,
// softmax and dropout so its gradients come from their rules.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "../../tensor.hpp"
#include "dropout.hpp"

namespace frost::nn::functional {

/// Optional arguments of scaled_dot_product_attention (PyTorch's keywords).
template <class T>
struct ScaledDotProductAttentionOptions {
  /// Additive mask broadcastable to [..., L, S]: added to the scores before
  /// the softmax, so -inf keeps a query from attending to a key. (frost has no
  /// bool dtype; a PyTorch bool mask `m` is `where(m, 0, -inf)` here.)
  Tensor<T> attn_mask;
  double dropout_p = 0.0;        ///< dropout on the attention weights (always applied when > 0, as in PyTorch)
  bool is_causal = false;        ///< mask key j > query i (top-left aligned, as PyTorch); excludes attn_mask
  std::optional<double> scale;   ///< default 1/sqrt(E)
  Generator* generator = nullptr;  ///< for the dropout mask (default: this thread's generator)
};

// Under autocast (amp/autocast.hpp) attention over float32 tensors runs in
// the region's 16-bit dtype, as one op (defined below).
namespace detail {
FROST_AUTOCAST_API Tensor<float> autocast_sdpa(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                               const ScaledDotProductAttentionOptions<float>& o);

/// Whether `m` broadcasts to `s` (numpy rules, m may have fewer dims).
inline bool broadcasts_to(const Shape& m, const Shape& s) {
  if (m.ndim() > s.ndim()) return false;
  for (int i = 0; i < m.ndim(); ++i) {
    const std::int64_t a = m[m.ndim() - 1 - i], b = s[s.ndim() - 1 - i];
    if (a != b && a != 1) return false;
  }
  return true;
}

/// [L, S] additive mask on `device`: 0 where key j <= query i, -inf above the diagonal.
template <class T>
Tensor<T> causal_mask(std::int64_t L, std::int64_t S, Device device) {
  std::vector<T> m(static_cast<std::size_t>(L * S), T(0));
  for (std::int64_t i = 0; i < L; ++i)
    for (std::int64_t j = i + 1; j < S; ++j) m[static_cast<std::size_t>(i * S + j)] = -std::numeric_limits<T>::infinity();
  return Tensor<T>::from(m, {L, S}).to(device);
}

/// Attention output and weights (after dropout, as PyTorch's
/// multi_head_attention_forward returns them). `mask` is additive or undefined.
template <class T>
std::pair<Tensor<T>, Tensor<T>> attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& mask,
                                          double scale, double dropout_p, Generator* gen, const char* op) {
  // Scaling q rather than the scores is PyTorch's order (and the smaller tensor when E < S).
  auto scores = matmul(q * T(scale), k.transpose(-2, -1));
  if (mask.defined()) {
    frost::detail::check_same_device(q, mask, op);
    FROST_CHECK(broadcasts_to(mask.shape(), scores.shape()), "frost::", op, ": attn_mask of shape ",
                mask.shape().str(), " does not broadcast to the attention scores' shape ", scores.shape().str());
    scores = scores + mask;
  }
  auto w = dropout(scores.softmax(-1), dropout_p, dropout_p > 0, gen);
  return {matmul(w, v), w};
}

}  // namespace detail

/// softmax(q k^T * scale + attn_mask) v for q [..., L, E], k [..., S, E],
/// v [..., S, Ev] with broadcastable batch dims
/// (torch.nn.functional.scaled_dot_product_attention).
/// \code
/// auto y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
/// \endcode
template <FloatingScalar T>
Tensor<T> scaled_dot_product_attention(const Tensor<T>& query, const Tensor<T>& key, const Tensor<T>& value,
                                       const ScaledDotProductAttentionOptions<T>& o = {}) {
  frost::detail::check_same_device(query, key, "scaled_dot_product_attention");
  frost::detail::check_same_device(query, value, "scaled_dot_product_attention");
  if constexpr (std::is_same_v<T, float>)
    if (amp::detail::autocast_on(query.device())) return detail::autocast_sdpa(query, key, value, o);
  FROST_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2 && query.size(-1) == key.size(-1) &&
                  key.size(-2) == value.size(-2),
              "frost::nn::functional::scaled_dot_product_attention: expects query [..., L, E], key [..., S, E] and "
              "value [..., S, Ev], got shapes ",
              query.shape().str(), ", ", key.shape().str(), " and ", value.shape().str());
  FROST_CHECK(o.dropout_p >= 0 && o.dropout_p <= 1,
              "frost::nn::functional::scaled_dot_product_attention: dropout_p must be in [0, 1], got ", o.dropout_p);
  const std::int64_t L = query.size(-2), S = key.size(-2);
  FROST_CHECK(!(o.is_causal && o.attn_mask.defined()),
              "frost::nn::functional::scaled_dot_product_attention: give attn_mask or is_causal, not both (as PyTorch)");
  const Tensor<T> mask = o.is_causal ? detail::causal_mask<T>(L, S, query.device()) : o.attn_mask;
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(query.size(-1)));
  return detail::attention(query, key, value, mask, scale, o.dropout_p, o.generator, "nn::functional::scaled_dot_product_attention")
      .first;
}

#ifdef FROST_AUTOCAST_DEFINITIONS
namespace detail {
FROST_AUTOCAST_API Tensor<float> autocast_sdpa(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                               const ScaledDotProductAttentionOptions<float>& o) {
  auto f = [&](const auto& q16, const auto& k16, const auto& v16, const auto& mask16) {
    using H = typename std::decay_t<decltype(q16)>::value_type;
    const ScaledDotProductAttentionOptions<H> o16{mask16, o.dropout_p, o.is_causal, o.scale, o.generator};
    return scaled_dot_product_attention(q16, k16, v16, o16);
  };
  return amp::detail::run_lowered(q.device(), f, q, k, v, o.attn_mask);
}
}  // namespace detail
#endif

}  // namespace frost::nn::functional
