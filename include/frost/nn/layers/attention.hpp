// MultiheadAttention with PyTorch's parameters (in_proj_weight [3E, E],
// in_proj_bias [3E], out_proj), initialisation and mask conventions, so a
// PyTorch state dict loads as is.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../functional/attention.hpp"
#include "../module.hpp"
#include "init_detail.hpp"
#include "linear.hpp"

namespace frost::nn {

/// Constructor options of MultiheadAttention (PyTorch's keywords; query, key
/// and value all have embed_dim features).
struct MultiheadAttentionOptions {
  double dropout = 0.0;      ///< dropout on the attention weights, in training mode
  bool bias = true;          ///< in_proj_bias and out_proj.bias
  bool batch_first = false;  ///< inputs and output are [N, L, E] instead of [L, N, E]
};

/// Optional arguments of MultiheadAttention's forward (PyTorch's keywords).
/// frost has no bool dtype, so the two masks are float tensors:
template <class T>
struct MultiheadAttentionForwardOptions {
  /// [N, S] ([S] unbatched), PyTorch's bool convention: non-zero = this key is
  /// padding and is ignored.
  Tensor<T> key_padding_mask;
  bool need_weights = true;
  /// Additive, as PyTorch's float masks: [L, S] or [N*num_heads, L, S]
  /// ([num_heads, L, S] unbatched), added to the scores; -inf blocks a pair.
  Tensor<T> attn_mask;
  bool average_attn_weights = true;  ///< average the returned weights over heads
  /// Also mask key j > query i. PyTorch takes it as a hint that attn_mask is
  /// the causal mask; here it adds that mask, which gives the same result.
  bool is_causal = false;
};

/// MultiheadAttention's result: `auto [out, weights] = mha(q, k, v);`
template <class T>
struct MultiheadAttentionOutput {
  Tensor<T> attn_output;   ///< [L, N, E] ([N, L, E] batch_first, [L, E] unbatched)
  Tensor<T> attn_weights;  ///< [N, L, S] averaged or [N, num_heads, L, S]; undefined unless need_weights
};

/// Multi-head attention (torch.nn.MultiheadAttention): project query, key and
/// value with in_proj_weight, attend per head with
/// softmax(q k^T / sqrt(head_dim) + mask), join the heads and apply out_proj.
/// Initialisation as PyTorch: xavier_uniform_ in_proj_weight, zero biases,
/// out_proj.weight uniform in +-1/sqrt(E).
/// \code
/// nn::MultiheadAttention mha(64, 8, {.batch_first = true});
/// auto [y, w] = mha(x, x, x, {.key_padding_mask = pad});
/// \endcode
template <class T>
struct MultiheadAttentionImpl : ModuleT<T> {
  std::int64_t embed_dim, num_heads, head_dim;
  MultiheadAttentionOptions options;
  Tensor<T> in_proj_weight, in_proj_bias;
  LinearT<T> out_proj;

  MultiheadAttentionImpl(std::int64_t embed, std::int64_t heads, const MultiheadAttentionOptions& o = {})
      : embed_dim(embed), num_heads(heads), head_dim(heads > 0 ? embed / heads : 0), options(o),
        out_proj(checked(embed, heads, o), embed, o.bias) {
    in_proj_weight = this->register_parameter("in_proj_weight", init::xavier_uniform_(Tensor<T>::empty({3 * embed, embed})));
    if (o.bias) in_proj_bias = this->register_parameter("in_proj_bias", Tensor<T>::zeros({3 * embed}));
    this->register_module("out_proj", out_proj);
    if (o.bias) {
      NoGradGuard ng;
      out_proj->bias.zero_();
    }
  }

  /// query [L, N, E], key and value [S, N, E] ([N, *, E] batch_first; [L, E]
  /// and [S, E] unbatched).
  MultiheadAttentionOutput<T> forward(const Tensor<T>& query, const Tensor<T>& key, const Tensor<T>& value,
                                      const MultiheadAttentionForwardOptions<T>& o = {}) const {
    frost::detail::check_same_device(query, key, "nn::MultiheadAttention");
    frost::detail::check_same_device(query, value, "nn::MultiheadAttention");
    const int nd = query.dim();
    const bool unbatched = nd == 2;
    FROST_CHECK((nd == 2 || nd == 3) && key.dim() == nd && value.dim() == nd && query.size(-1) == embed_dim &&
                    key.size(-1) == embed_dim && value.size(-1) == embed_dim && key.shape() == value.shape() &&
                    (unbatched || query.size(options.batch_first ? 0 : 1) == key.size(options.batch_first ? 0 : 1)),
                "frost::nn::MultiheadAttention: expects query ", batched_layout("L"), ", key and value ",
                batched_layout("S"), " (or unbatched [L, E], [S, E]) with E = embed_dim = ", embed_dim,
                ", got shapes ", query.shape().str(), ", ", key.shape().str(), " and ", value.shape().str());
    auto seq_first = [&](const Tensor<T>& x) {
      return unbatched ? x.unsqueeze(1) : options.batch_first ? x.transpose(0, 1) : x;
    };
    const auto q = seq_first(query), k = seq_first(key), v = seq_first(value);
    const std::int64_t L = q.size(0), N = q.size(1), S = k.size(0), E = embed_dim, h = num_heads;

    // Projections: self-attention (one tensor for all three) takes one GEMM.
    Tensor<T> qp, kp, vp;
    if (query.is_same(key) && key.is_same(value)) {
      auto qkv = functional::linear(q, in_proj_weight, in_proj_bias);
      qp = qkv.narrow(2, 0, E);
      kp = qkv.narrow(2, E, E);
      vp = qkv.narrow(2, 2 * E, E);
    } else {
      auto proj = [&](const Tensor<T>& x, std::int64_t i) {
        return functional::linear(x, in_proj_weight.narrow(0, i * E, E),
                                  in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, E) : Tensor<T>());
      };
      qp = proj(q, 0);
      kp = proj(k, 1);
      vp = proj(v, 2);
    }
    // [len, N, E] -> [N*h, len, head_dim]: batch n, head j is row n*h + j (PyTorch's layout).
    auto heads = [&](const Tensor<T>& x, std::int64_t len) { return x.reshape({len, N * h, head_dim}).transpose(0, 1); };

    const auto [out, weights] = functional::detail::attention(
        heads(qp, L), heads(kp, S), heads(vp, S), mask(o, L, S, N, unbatched), 1.0 / std::sqrt(double(head_dim)),
        this->is_training() ? options.dropout : 0.0, nullptr, "nn::MultiheadAttention");
    auto y = out_proj(out.transpose(0, 1).reshape({L, N, E}));
    y = unbatched ? y.squeeze(1) : options.batch_first ? y.transpose(0, 1) : y;
    if (!o.need_weights) return {y, {}};
    auto w = weights.reshape({N, h, L, S});
    if (o.average_attn_weights) w = w.mean({1});
    return {y, unbatched ? w.squeeze(0) : w};
  }

  std::string type_name() const override { return "MultiheadAttention"; }
  std::string extra_repr() const override {
    return "embed_dim=" + std::to_string(embed_dim) + ", num_heads=" + std::to_string(num_heads);
  }

 private:
  static std::int64_t checked(std::int64_t embed, std::int64_t heads, const MultiheadAttentionOptions& o) {
    FROST_CHECK(embed > 0 && heads > 0, "frost::nn::MultiheadAttention: embed_dim (", embed, ") and num_heads (", heads,
                ") must be positive");
    FROST_CHECK(embed % heads == 0, "frost::nn::MultiheadAttention: embed_dim (", embed,
                ") must be divisible by num_heads (", heads, ")");
    FROST_CHECK(o.dropout >= 0 && o.dropout <= 1, "frost::nn::MultiheadAttention: dropout must be in [0, 1], got ",
                o.dropout);
    return embed;
  }

  std::string batched_layout(const char* len) const {
    return options.batch_first ? std::string("[N, ") + len + ", E]" : std::string("[") + len + ", N, E]";
  }

  /// attn_mask, the causal mask and key_padding_mask as one additive mask
  /// broadcastable to the scores [N*h, L, S] (undefined when none is given).
  Tensor<T> mask(const MultiheadAttentionForwardOptions<T>& o, std::int64_t L, std::int64_t S, std::int64_t N,
                 bool unbatched) const {
    Tensor<T> m;
    if (o.attn_mask.defined()) {
      const Shape two{L, S}, three{N * num_heads, L, S};
      FROST_CHECK(o.attn_mask.shape() == two || o.attn_mask.shape() == three, "frost::nn::MultiheadAttention: attn_mask of shape ",
                  o.attn_mask.shape().str(), " must be ", two.str(), " or ", three.str(),
                  " ([L, S] or [N*num_heads, L, S])");
      m = o.attn_mask;
    }
    if (o.is_causal) {
      auto c = functional::detail::causal_mask<T>(L, S);
      m = m.defined() ? m + c : c;
    }
    if (o.key_padding_mask.defined()) {
      const Shape expect = unbatched ? Shape{S} : Shape{N, S};
      FROST_CHECK(o.key_padding_mask.shape() == expect, "frost::nn::MultiheadAttention: key_padding_mask of shape ",
                  o.key_padding_mask.shape().str(), " must be ", expect.str(), unbatched ? " ([S])" : " ([N, S])");
      auto pad = Tensor<T>::zeros(expect, o.key_padding_mask.device())
                     .masked_fill(o.key_padding_mask, -std::numeric_limits<T>::infinity())
                     .reshape({N, 1, 1, S})
                     .expand({N, num_heads, 1, S})
                     .reshape({N * num_heads, 1, S});
      m = m.defined() ? m + pad : pad;
    }
    return m;
  }
};

template <class T>
class MultiheadAttentionT : public ModuleHolder<MultiheadAttentionImpl<T>> {
 public:
  MultiheadAttentionT(std::int64_t embed_dim, std::int64_t num_heads, const MultiheadAttentionOptions& o = {})
      : ModuleHolder<MultiheadAttentionImpl<T>>(std::make_shared<MultiheadAttentionImpl<T>>(embed_dim, num_heads, o)) {}
  /// Spelled out (not the holder's variadic call) so `{.attn_mask = m}` works.
  MultiheadAttentionOutput<T> operator()(const Tensor<T>& query, const Tensor<T>& key, const Tensor<T>& value,
                                         const MultiheadAttentionForwardOptions<T>& o = {}) const {
    return this->get().forward(query, key, value, o);
  }
};

using MultiheadAttention = MultiheadAttentionT<float>;

}  // namespace frost::nn
