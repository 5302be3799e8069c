// Embedding lookup as a function (frost::nn::functional::embedding), with
// PyTorch's padding_idx (that row is looked up as usual but gets no
// gradient) and max_norm (looked-up rows renormalised in place first).
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "../../tensor.hpp"

namespace frost::nn::functional {

/// y = weight rows at the indices; dweight = zeros with dy's rows
/// scatter-added at the indices (repeated indices accumulate), rows looked
/// up at padding_idx masked out first
struct EmbeddingOp {
  static constexpr const char* name = "embedding";
  Shape weight;  // [num_embeddings, embedding_dim]
  template <class T> void backward(const Tensor<T>& dy, Grads<T> g, const IndexTensor& index,
                                   const Tensor<T>& keep) const {
    const std::int64_t rows = index.numel(), dim = weight[1];
    auto d2 = dy.reshape({rows, dim});
    if (keep.defined()) d2 = d2 * keep;
    g[0] = Tensor<T>::zeros(weight, dy.device()).scatter_add(0, index.view({rows, 1}).expand({rows, dim}), d2);
  }
};

/// Rows of `weight` [num_embeddings, embedding_dim] picked by `indices` (any
/// shape): the result has shape indices.shape + [embedding_dim]
/// (torch.nn.functional.embedding). A `padding_idx` (negative counts from
/// the end) marks the row that receives no gradient.
/// PyTorch's max_norm (torch.embedding_renorm_): the rows of `weight` that
/// `rows` names and whose p-norm exceeds max_norm are scaled, in place, to
/// norm max_norm (with PyTorch's 1e-7 guard); other rows are left alone.
template <class T>
void renorm_rows(const Tensor<T>& weight, const std::vector<std::int64_t>& rows, double max_norm, double norm_type) {
  FROST_CHECK(max_norm > 0, "frost::nn::functional::embedding: max_norm must be positive, got ", max_norm);
  std::vector<std::int64_t> unique = rows;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  if (unique.empty()) return;
  NoGradGuard ng;
  const auto n = static_cast<std::int64_t>(unique.size()), dim = weight.size(1);
  const auto idx = IndexTensor::from(unique, {n}).to(weight.device());
  const auto picked = weight.index_select(0, idx);
  const auto norms = picked.norm(norm_type, {1}, true);
  // factor 1 for rows within the bound, max_norm / (norm + 1e-7) above it
  const auto factor = frost::where(frost::detail::m01(norms) > T(max_norm), T(max_norm) / (norms + T(1e-7)), Tensor<T>::ones({n, 1}, weight.device()));
  const auto delta = picked * (factor - T(1));
  Tensor<T> w = weight;  // a handle on the caller's parameter: updated in place, as PyTorch does
  w.copy_(w.scatter_add(0, idx.view({n, 1}).expand({n, dim}), delta));
}

template <FloatingScalar T>
Tensor<T> embedding(const IndexTensor& indices, const Tensor<T>& weight,
                    std::optional<std::int64_t> padding_idx = std::nullopt,
                    std::optional<double> max_norm = std::nullopt, double norm_type = 2.0) {
  frost::detail::check_same_device(weight, indices, "embedding");
  FROST_CHECK(weight.dim() == 2, "frost::nn::functional::embedding: weight must be 2-D [num_embeddings, "
                                 "embedding_dim], got shape ", weight.shape().str());
  const std::int64_t num = weight.size(0), dim = weight.size(1);
  if (padding_idx) {
    FROST_CHECK(*padding_idx >= -num && *padding_idx < num, "frost::nn::functional::embedding: padding_idx ",
                *padding_idx, " is out of range for ", num, " embeddings (expected -", num, " <= padding_idx < ", num,
                ")");
    if (*padding_idx < 0) *padding_idx += num;
  }
  const IndexTensor flat = indices.reshape({-1}).contiguous();
  const bool grad = frost::detail::any_requires_grad<T>({&weight});
  // The indices come to the host only where something needs them there:
  // max_norm's renormalisation and padding_idx's gradient mask. Otherwise
  // the CPU checks them where they lie, which a trace does not see as a
  // host read (so a plan takes any indices, its index step checking them
  // each run), and a device's index kernel checks its own.
  std::vector<std::int64_t> v;
  if (max_norm || (padding_idx && grad)) v = flat.to_vector();
  const std::int64_t* seen = !v.empty() ? v.data() : flat.device().is_cpu() ? flat.data() : nullptr;
  for (std::int64_t i = 0; seen && i < flat.numel(); ++i)
    if (FROST_UNLIKELY(seen[i] < 0 || seen[i] >= num))
      frost::detail::fail_as<IndexError>("frost::nn::functional::embedding: index ", seen[i],
                                         " is out of range for an embedding table of ", num, " rows (weight shape ",
                                         weight.shape().str(), "); expected 0 <= index < ", num);
  if (max_norm) renorm_rows(weight, v, *max_norm, norm_type);
  Shape out = indices.shape();
  out.push_back(dim);
  auto y = Tensor<T>::empty(out, weight.device());
  backend_for<T>(weight.device())
      .index_select(weight.view_of(), 0, flat.view_of(), View<T>(y.data(), Shape{flat.numel(), dim}));
  if (grad) {
    Tensor<T> keep;  // 0 for rows looked up at padding_idx: they get no gradient
    if (padding_idx) {
      std::vector<T> k(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) k[i] = v[i] == *padding_idx ? T(0) : T(1);
      keep = Tensor<T>::from(k, {static_cast<std::int64_t>(k.size()), 1}).to(weight.device());
    }
    frost::detail::record(y, EmbeddingOp{weight.shape()}, {&weight}, flat, keep);
  }
  return y;
}

}  // namespace frost::nn::functional
