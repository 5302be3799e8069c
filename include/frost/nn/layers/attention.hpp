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
  bool add_bias_kv = false;    ///< learned bias_k, bias_v [1, 1, E] appended to the keys and values
  bool add_zero_attn = false;  ///< a zero key and value appended after the projections
  std::int64_t kdim = 0;       ///< features of key (0: embed_dim); otherwise separate q/k/v_proj_weight
  std::int64_t vdim = 0;       ///< features of value (0: embed_dim)
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
  std::int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  MultiheadAttentionOptions options;
  // in_proj_weight [3E, E] when key and value have E features, else
  // q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim]
  Tensor<T> in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, bias_k, bias_v;
  LinearT<T> out_proj;

  MultiheadAttentionImpl(std::int64_t embed, std::int64_t heads, const MultiheadAttentionOptions& o = {})
      : embed_dim(embed), num_heads(heads), head_dim(heads > 0 ? embed / heads : 0), kdim(o.kdim > 0 ? o.kdim : embed),
        vdim(o.vdim > 0 ? o.vdim : embed), options(o), out_proj(checked(embed, heads, o), embed, o.bias) {
    if (same_embed_dim()) {
      in_proj_weight = this->register_parameter("in_proj_weight", init::xavier_uniform_(Tensor<T>::empty({3 * embed, embed})));
    } else {
      q_proj_weight = this->register_parameter("q_proj_weight", init::xavier_uniform_(Tensor<T>::empty({embed, embed})));
      k_proj_weight = this->register_parameter("k_proj_weight", init::xavier_uniform_(Tensor<T>::empty({embed, kdim})));
      v_proj_weight = this->register_parameter("v_proj_weight", init::xavier_uniform_(Tensor<T>::empty({embed, vdim})));
    }
    if (o.bias) in_proj_bias = this->register_parameter("in_proj_bias", Tensor<T>::zeros({3 * embed}));
    if (o.add_bias_kv) {
      bias_k = this->register_parameter("bias_k", init::xavier_normal_(Tensor<T>::empty({1, 1, embed})));
      bias_v = this->register_parameter("bias_v", init::xavier_normal_(Tensor<T>::empty({1, 1, embed})));
    }
    this->register_module("out_proj", out_proj);
    if (o.bias) {
      NoGradGuard ng;
      out_proj->bias.zero_();
    }
  }

  bool same_embed_dim() const { return kdim == embed_dim && vdim == embed_dim; }

  /// query [L, N, E], key and value [S, N, E] ([N, *, E] batch_first; [L, E]
  /// and [S, E] unbatched).
  MultiheadAttentionOutput<T> forward(const Tensor<T>& query, const Tensor<T>& key, const Tensor<T>& value,
                                      const MultiheadAttentionForwardOptions<T>& o = {}) const {
    frost::detail::check_same_device(query, key, "nn::MultiheadAttention");
    frost::detail::check_same_device(query, value, "nn::MultiheadAttention");
    const int nd = query.dim();
    const bool unbatched = nd == 2;
    FROST_CHECK((nd == 2 || nd == 3) && key.dim() == nd && value.dim() == nd && query.size(-1) == embed_dim &&
                    key.size(-1) == kdim && value.size(-1) == vdim && key.size(0) == value.size(0) &&
                    (unbatched || (key.size(1) == value.size(1) &&
                                   query.size(options.batch_first ? 0 : 1) == key.size(options.batch_first ? 0 : 1))),
                "frost::nn::MultiheadAttention: expects query ", batched_layout("L", "E"), ", key ",
                batched_layout("S", "kdim"), " and value ", batched_layout("S", "vdim"),
                " (or unbatched [L, E], [S, kdim], [S, vdim]) with E = embed_dim = ", embed_dim, ", kdim = ", kdim,
                ", vdim = ", vdim, ", got shapes ", query.shape().str(), ", ", key.shape().str(), " and ",
                value.shape().str());
    auto seq_first = [&](const Tensor<T>& x) {
      return unbatched ? x.unsqueeze(1) : options.batch_first ? x.transpose(0, 1) : x;
    };
    const auto q = seq_first(query), k = seq_first(key), v = seq_first(value);
    const std::int64_t L = q.size(0), N = q.size(1), S0 = k.size(0), E = embed_dim, h = num_heads;

    // Projections: self-attention (one tensor for all three) takes one GEMM.
    Tensor<T> qp, kp, vp;
    auto bias_part = [&](std::int64_t i) { return in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, E) : Tensor<T>(); };
    if (!same_embed_dim()) {
      qp = functional::linear(q, q_proj_weight, bias_part(0));
      kp = functional::linear(k, k_proj_weight, bias_part(1));
      vp = functional::linear(v, v_proj_weight, bias_part(2));
    } else if (query.is_same(key) && key.is_same(value)) {
      auto qkv = functional::linear(q, in_proj_weight, in_proj_bias);
      qp = qkv.narrow(2, 0, E);
      kp = qkv.narrow(2, E, E);
      vp = qkv.narrow(2, 2 * E, E);
    } else {
      auto proj = [&](const Tensor<T>& x, std::int64_t i) {
        return functional::linear(x, in_proj_weight.narrow(0, i * E, E), bias_part(i));
      };
      qp = proj(q, 0);
      kp = proj(k, 1);
      vp = proj(v, 2);
    }
    std::int64_t S = S0;
    if (options.add_bias_kv) {  // one more key and value: the learned biases
      kp = frost::cat(std::vector<Tensor<T>>{kp, bias_k.expand({1, N, E})}, 0);
      vp = frost::cat(std::vector<Tensor<T>>{vp, bias_v.expand({1, N, E})}, 0);
      ++S;
    }
    // [len, N, E] -> [N*h, len, head_dim]: batch n, head j is row n*h + j (PyTorch's layout).
    auto heads = [&](const Tensor<T>& x, std::int64_t len) { return x.reshape({len, N * h, head_dim}).transpose(0, 1); };
    Tensor<T> kh = heads(kp, S), vh = heads(vp, S);
    if (options.add_zero_attn) {  // and a zero key and value after them
      const auto zero = Tensor<T>::zeros({N * h, 1, head_dim}, kh.device());
      kh = frost::cat(std::vector<Tensor<T>>{kh, zero}, 1);
      vh = frost::cat(std::vector<Tensor<T>>{vh, zero}, 1);
      ++S;
    }
    // The masks cover the given keys; the appended ones are never masked.
    Tensor<T> m = mask(o, L, S0, N, unbatched, query);
    if (m.defined() && S > S0) {
      Shape pad = m.shape();
      pad[pad.ndim() - 1] = S - S0;
      m = frost::cat(std::vector<Tensor<T>>{m, Tensor<T>::zeros(pad, m.device())}, -1);
    }

    const auto [out, weights] = functional::detail::attention(
        heads(qp, L), kh, vh, m, 1.0 / std::sqrt(double(head_dim)), this->is_training() ? options.dropout : 0.0,
        nullptr, "nn::MultiheadAttention");
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
    FROST_CHECK(o.kdim >= 0 && o.vdim >= 0, "frost::nn::MultiheadAttention: kdim (", o.kdim, ") and vdim (", o.vdim,
                ") must be positive (or 0 for embed_dim)");
    return embed;
  }

  std::string batched_layout(const char* len, const char* feat) const {
    return options.batch_first ? std::string("[N, ") + len + ", " + feat + "]"
                               : std::string("[") + len + ", N, " + feat + "]";
  }

  /// attn_mask, the causal mask and key_padding_mask as one additive mask
  /// broadcastable to the scores [N*h, L, S] (undefined when none is given),
  /// on the query's device.
  Tensor<T> mask(const MultiheadAttentionForwardOptions<T>& o, std::int64_t L, std::int64_t S, std::int64_t N,
                 bool unbatched, const Tensor<T>& query) const {
    Tensor<T> m;
    if (o.attn_mask.defined()) {
      const Shape two{L, S}, three{N * num_heads, L, S};
      FROST_CHECK(o.attn_mask.shape() == two || o.attn_mask.shape() == three, "frost::nn::MultiheadAttention: attn_mask of shape ",
                  o.attn_mask.shape().str(), " must be ", two.str(), " or ", three.str(),
                  " ([L, S] or [N*num_heads, L, S])");
      frost::detail::check_same_device(query, o.attn_mask, "nn::MultiheadAttention (attn_mask)");
      m = o.attn_mask;
    }
    if (o.is_causal) {
      auto c = functional::detail::causal_mask<T>(L, S, query.device());
      m = m.defined() ? m + c : c;
    }
    if (o.key_padding_mask.defined()) {
      frost::detail::check_same_device(query, o.key_padding_mask, "nn::MultiheadAttention (key_padding_mask)");
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
