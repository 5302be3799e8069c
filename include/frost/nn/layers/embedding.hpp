// Embedding: a lookup table of num_embeddings rows, N(0, 1) initialised with
// the padding row zeroed, as in PyTorch.
#pragma once
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "../functional/embedding.hpp"
#include "../module.hpp"

namespace frost::nn {

struct EmbeddingOptions {
  std::optional<std::int64_t> padding_idx;
  std::optional<double> max_norm;  ///< rows looked up with a larger norm are renormalised in place
  double norm_type = 2.0;          ///< the p of max_norm's p-norm
};

template <class T>
struct EmbeddingImpl : ModuleT<T> {
  std::int64_t num_embeddings, embedding_dim;
  std::optional<std::int64_t> padding_idx;
  std::optional<double> max_norm;
  double norm_type;
  Tensor<T> weight;

  EmbeddingImpl(std::int64_t num, std::int64_t dim, EmbeddingOptions o = {})
      : num_embeddings(num), embedding_dim(dim), padding_idx(o.padding_idx), max_norm(o.max_norm),
        norm_type(o.norm_type) {
    FROST_CHECK(num > 0 && dim > 0, "frost::nn::Embedding: num_embeddings (", num, ") and embedding_dim (", dim,
                ") must be positive");
    if (padding_idx) {
      FROST_CHECK(*padding_idx >= -num && *padding_idx < num, "frost::nn::Embedding: padding_idx ", *padding_idx,
                  " must be within num_embeddings (", num, ")");
      if (*padding_idx < 0) *padding_idx += num;
    }
    auto w = Tensor<T>::randn({num, dim});
    if (padding_idx) w.select(0, *padding_idx).zero_();
    weight = this->register_parameter("weight", w);
  }
  Tensor<T> forward(const IndexTensor& indices) {
    return functional::embedding(indices, weight, padding_idx, max_norm, norm_type);
  }
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << num_embeddings << ", " << embedding_dim;
    if (padding_idx) s << ", padding_idx=" << *padding_idx;
    if (max_norm) s << ", max_norm=" << *max_norm;
    return s.str();
  }
};

template <class T>
class EmbeddingT : public ModuleHolder<EmbeddingImpl<T>> {
 public:
  EmbeddingT(std::int64_t num, std::int64_t dim, EmbeddingOptions o = {})
      : ModuleHolder<EmbeddingImpl<T>>(std::make_shared<EmbeddingImpl<T>>(num, dim, o)) {}
};
using Embedding = EmbeddingT<float>;

}  // namespace frost::nn
