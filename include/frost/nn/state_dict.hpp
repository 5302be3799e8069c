// StateDict<T>: a module's parameters and persistent buffers by dotted name,
// in registration order (PyTorch's OrderedDict). Values are float tensors of
// the module's type, or int64 ones (BatchNorm's num_batches_tracked).
#pragma once
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "../tensor.hpp"

namespace frost::nn {

template <class T>
using StateValue = std::variant<Tensor<T>, IndexTensor>;

template <class T>
inline Shape state_shape(const StateValue<T>& v) {
  return std::visit([](const auto& t) { return t.shape(); }, v);
}
template <class T>
inline std::string state_dtype(const StateValue<T>& v) {
  return std::visit([](const auto& t) { return std::string(dtype_name<typename std::remove_cvref_t<decltype(t)>::value_type>()); }, v);
}

/// Ordered name -> tensor map.
template <class T>
class StateDict {
 public:
  using Entry = std::pair<std::string, StateValue<T>>;

  /// Adds an entry; a name may appear once.
  void insert(const std::string& name, StateValue<T> value) {
    FROST_CHECK(!find(name), "frost::nn::StateDict: duplicate key '", name, "'");
    entries_.push_back({name, std::move(value)});
  }
  const StateValue<T>* find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.first == name) return &e.second;
    return nullptr;
  }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  /// The float tensor stored under `name`.
  Tensor<T> at(const std::string& name) const {
    const auto* v = find(name);
    FROST_CHECK(v, "frost::nn::StateDict: no key '", name, "'");
    const auto* t = std::get_if<Tensor<T>>(v);
    FROST_CHECK(t, "frost::nn::StateDict: '", name, "' holds an int64 tensor; use index_at");
    return *t;
  }
  IndexTensor index_at(const std::string& name) const {
    const auto* v = find(name);
    FROST_CHECK(v, "frost::nn::StateDict: no key '", name, "'");
    const auto* t = std::get_if<IndexTensor>(v);
    FROST_CHECK(t, "frost::nn::StateDict: '", name, "' holds a ", dtype_name<T>(), " tensor; use at");
    return *t;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& e : entries_) k.push_back(e.first);
    return k;
  }
  std::size_t size() const { return entries_.size(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
};

}  // namespace frost::nn
