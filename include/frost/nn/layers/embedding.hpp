// Embedding: a lookup table of num_embeddings rows, N(0, 1) initialised with
// the padding row zeroed, as in PyTorch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "../functional/embedding.hpp"
#include "../module.hpp"

namespace frost::nn {

struct EmbeddingOptions {
  std::optional<std::int64_t> padding_idx;
};

template <class T>
struct EmbeddingImpl : ModuleT<T> {
  std::int64_t num_embeddings, embedding_dim;
  std::optional<std::int64_t> padding_idx;
  Tensor<T> weight;

  EmbeddingImpl(std::int64_t num, std::int64_t dim, EmbeddingOptions o = {})
      : num_embeddings(num), embedding_dim(dim), padding_idx(o.padding_idx) {
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
  Tensor<T> forward(const IndexTensor& indices) { return functional::embedding(indices, weight, padding_idx); }
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override {
    return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
           (padding_idx ? ", padding_idx=" + std::to_string(*padding_idx) : "");
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
