// Containers: Sequential, ModuleList, ModuleDict. Each keeps its children as
// AnyModule entries (the module plus its forward, type-erased when it maps a
// tensor to a tensor), registered under PyTorch's names ("0", "1", ... or the
// dict keys), so `features.0.weight` means the same in frost and PyTorch.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "module.hpp"

namespace frost::nn {

namespace detail {
template <class Impl, class T>
concept TensorForward = requires(Impl& m, const Tensor<T>& x) {
  { m.forward(x) } -> std::convertible_to<Tensor<T>>;
};
}  // namespace detail

/// One child of a container: the module, and its forward when that takes and
/// returns one tensor.
template <class T>
class AnyModule {
 public:
  template <class H>
    requires detail::Holder<H>
  AnyModule(H h) : module_(std::static_pointer_cast<ModuleT<T>>(h.ptr())) {  // NOLINT: implicit on purpose
    using Impl = typename H::Impl_t;
    static_assert(std::is_base_of_v<ModuleT<T>, Impl>, "frost::nn: a container's modules must share its element type");
    if constexpr (detail::TensorForward<Impl, T>) {
      forward_ = [p = h.ptr().get()](const Tensor<T>& x) -> Tensor<T> { return p->forward(x); };
    }
  }

  /// Runs the module's forward on one tensor.
  Tensor<T> operator()(const Tensor<T>& x) const {
    FROST_CHECK(static_cast<bool>(forward_), "frost::nn: ", module_->type_name(),
                " in a container has no forward(Tensor) -> Tensor; call it through ->as<Type>() instead");
    return forward_(x);
  }
  bool has_tensor_forward() const { return static_cast<bool>(forward_); }
  ModuleT<T>* operator->() const { return module_.get(); }
  ModuleT<T>& operator*() const { return *module_; }
  const std::shared_ptr<ModuleT<T>>& ptr() const { return module_; }
  /// The module as layer type M (nn::Linear, ...), or nullptr.
  template <class M>
  auto* as() const {
    return module_->template as<M>();
  }

 private:
  std::shared_ptr<ModuleT<T>> module_;
  std::function<Tensor<T>(const Tensor<T>&)> forward_;
};

/// The shared part of ModuleList and Sequential: children named by position.
template <class T>
class ModuleListImpl : public ModuleT<T> {
 public:
  ModuleListImpl() = default;
  template <class... H>
    requires(detail::Holder<H> && ...)
  explicit ModuleListImpl(H... modules) {
    (push_back(std::move(modules)), ...);
  }

  /// Appends a module, registered as its position ("3"). Works at any time:
  /// the next forward sees it.
  template <class H>
    requires detail::Holder<H>
  void push_back(H module) {
    this->register_module(std::to_string(items_.size()), module);
    items_.emplace_back(std::move(module));
  }
  template <class H>
  void extend(const std::vector<H>& modules) {
    for (const auto& m : modules) push_back(m);
  }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  /// Module i; a negative i counts from the end (seq[-1] is the last), as in PyTorch.
  const AnyModule<T>& operator[](std::int64_t i) const {
    const auto n = static_cast<std::int64_t>(items_.size());
    if (FROST_UNLIKELY(i < -n || i >= n))
      frost::detail::fail_as<IndexError>("frost::nn::", this->type_name(), ": index ", i, " is out of range for ",
                                         items_.size(), " modules");
    return items_[static_cast<std::size_t>(i < 0 ? i + n : i)];
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  std::string type_name() const override { return "ModuleList"; }

 protected:
  std::vector<AnyModule<T>> items_;
};

/// Runs its modules in order: `Sequential(Conv2d(3, 64, 3), ReLU(), ...)`.
template <class T>
class SequentialImpl : public ModuleListImpl<T> {
 public:
  template <class H>
    requires detail::Holder<H>
  void push_back(H module) {
    static_assert(detail::TensorForward<typename H::Impl_t, T>,
                  "frost::nn::Sequential: every module needs forward(Tensor) -> Tensor");
    ModuleListImpl<T>::push_back(std::move(module));
  }

  Tensor<T> forward(const Tensor<T>& x) {
    Tensor<T> y = x;
    for (const auto& m : this->items_) y = m(y);
    return y;
  }
  std::string type_name() const override { return "Sequential"; }
};

/// Modules by key, in insertion order: `branches->insert("left", Linear(4, 2))`.
template <class T>
class ModuleDictImpl : public ModuleT<T> {
 public:
  ModuleDictImpl() = default;

  template <class H>
    requires detail::Holder<H>
  void insert(const std::string& key, H module) {
    this->register_module(key, module);
    items_.emplace_back(key, AnyModule<T>(std::move(module)));
  }
  bool contains(const std::string& key) const {
    for (const auto& [k, m] : items_)
      if (k == key) return true;
    return false;
  }
  const AnyModule<T>& operator[](const std::string& key) const {
    for (const auto& [k, m] : items_)
      if (k == key) return m;
    std::string known;
    for (const auto& [k, m] : items_) known += (known.empty() ? "" : ", ") + k;
    frost::detail::fail("frost::nn::ModuleDict: no key '", key, "' (keys: ", known.empty() ? "none" : known, ")");
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& [k, m] : items_) out.push_back(k);
    return out;
  }
  std::size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  std::string type_name() const override { return "ModuleDict"; }

 private:
  std::vector<std::pair<std::string, AnyModule<T>>> items_;
};

template <class T>
class ModuleListT : public ModuleHolder<ModuleListImpl<T>> {
 public:
  ModuleListT() : ModuleHolder<ModuleListImpl<T>>(std::make_shared<ModuleListImpl<T>>()) {}
  template <class... H>
    requires(sizeof...(H) > 0 && (detail::Holder<H> && ...))
  explicit ModuleListT(H... m) : ModuleHolder<ModuleListImpl<T>>(std::make_shared<ModuleListImpl<T>>(std::move(m)...)) {}
  const AnyModule<T>& operator[](std::int64_t i) const { return this->get()[i]; }
};

template <class T>
class SequentialT : public ModuleHolder<SequentialImpl<T>> {
 public:
  SequentialT() : ModuleHolder<SequentialImpl<T>>(std::make_shared<SequentialImpl<T>>()) {}
  template <class... H>
    requires(sizeof...(H) > 0 && (detail::Holder<H> && ...))
  explicit SequentialT(H... m) : ModuleHolder<SequentialImpl<T>>(std::make_shared<SequentialImpl<T>>()) {
    (this->get().push_back(std::move(m)), ...);
  }
  const AnyModule<T>& operator[](std::int64_t i) const { return this->get()[i]; }
};

template <class T>
class ModuleDictT : public ModuleHolder<ModuleDictImpl<T>> {
 public:
  ModuleDictT() : ModuleHolder<ModuleDictImpl<T>>(std::make_shared<ModuleDictImpl<T>>()) {}
  const AnyModule<T>& operator[](const std::string& key) const { return this->get()[key]; }
};

using ModuleList = ModuleListT<float>;
using Sequential = SequentialT<float>;
using ModuleDict = ModuleDictT<float>;

}  // namespace frost::nn
