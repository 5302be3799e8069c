// nn::ModuleT<T>: the base of every layer and every user model. It owns named
// parameters, buffers and submodules, in registration order, and derives
// PyTorch's dotted names from them (`features.0.weight`, `bn1.running_mean`),
// so a state dict written by PyTorch loads into the same structure in frost.
//
// Modules live behind shared handles (ModuleHolder): copying a handle shares
// the module and its parameters, so a member can be registered and kept in one
// line. The everyday spelling is float: `nn::Module`, `nn::Linear`; the
// templates (`nn::ModuleT<double>`, `nn::LinearT<double>`) serve gradient
// checks in double.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cxxabi.h>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "../tensor.hpp"
#include "state_dict.hpp"

namespace frost::nn {

template <class T>
class ModuleT;

/// A shared handle to a module of type `Impl`: `->` reaches the module,
/// `handle(x)` calls its forward. Layer handles (`nn::Linear`) derive from it
/// and add the layer's constructors.
template <class Impl>
class ModuleHolder {
 public:
  using Impl_t = Impl;
  /// A new default-constructed module (LibTorch's behaviour)...
  ModuleHolder()
    requires std::is_default_constructible_v<Impl>
      : impl_(std::make_shared<Impl>()) {}
  ModuleHolder()
    requires(!std::is_default_constructible_v<Impl>)
  = default;
  /// ...or, given nullptr, an empty handle to assign later.
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit like shared_ptr's
  explicit ModuleHolder(std::shared_ptr<Impl> p) : impl_(std::move(p)) {}
  /// Construct the module in place: `ModuleHolder<MyNet>(args...)`.
  template <class... A>
    requires(sizeof...(A) > 0 && !(sizeof...(A) == 1 && (std::is_same_v<std::remove_cvref_t<A>, std::shared_ptr<Impl>> && ...)) &&
             std::is_constructible_v<Impl, A...>)
  explicit ModuleHolder(A&&... a) : impl_(std::make_shared<Impl>(std::forward<A>(a)...)) {}

  Impl* operator->() const { return &get(); }
  Impl& operator*() const { return get(); }
  Impl& get() const {
    FROST_CHECK(impl_ != nullptr, "frost::nn: use of an empty module handle (a default-constructed ",
                "holder that was never given a module)");
    return *impl_;
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }

  /// Calls the module's forward.
  template <class... A>
  decltype(auto) operator()(A&&... a) const {
    return get().forward(std::forward<A>(a)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

/// `nn::make<MyNet>(args...)`: a handle to a new module of a user's type.
template <class M, class... A>
ModuleHolder<M> make(A&&... a) {
  return ModuleHolder<M>(std::make_shared<M>(std::forward<A>(a)...));
}

namespace detail {
template <class H>
concept Holder = requires(const H& h) {
  typename H::Impl_t;
  { h.ptr() } -> std::convertible_to<std::shared_ptr<typename H::Impl_t>>;
};
template <class M>
struct impl_of {
  using type = M;
};
template <Holder H>
struct impl_of<H> {
  using type = typename H::Impl_t;
};
/// "frost::nn::LinearImpl<float>" for a mangled type name; user modules print
/// their class name.
inline std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && out ? out : name;
  std::free(out);
  return s;
}
}  // namespace detail

/// The base class of layers and models. Subclass it, register members by name
/// and write `forward` however you like: C++ control flow decides the graph.
template <class T>
class ModuleT {
 public:
  using value_type = T;
  using TensorT = Tensor<T>;

  ModuleT() = default;
  // A copy would share parameter tensors while owning its own registry: an
  // easy source of silent bugs. Share modules through handles instead.
  ModuleT(const ModuleT&) = delete;
  ModuleT& operator=(const ModuleT&) = delete;
  virtual ~ModuleT() = default;

  // ---- registration ---------------------------------------------------
  /// Adds a parameter (a leaf that requires grad unless `requires_grad` is
  /// false) and returns it; the returned handle shares its data with the
  /// registry. An undefined tensor registers nothing (PyTorch's `None`).
  TensorT register_parameter(const std::string& name, TensorT t, bool requires_grad = true) {
    check_new_name(name, "register_parameter");
    ++structure_version_;
    if (!t.defined()) return t;
    FROST_CHECK(t.is_leaf(), "frost::nn::Module::register_parameter: '", name,
                "' is the result of an op (it has history); register a leaf, e.g. t.detach()");
    t.requires_grad_(requires_grad);
    params_.push_back({name, t});
    return t;
  }
  /// Adds a buffer: state saved in the state dict but not trained
  /// (running statistics). Non-persistent buffers stay out of the state dict.
  TensorT register_buffer(const std::string& name, TensorT t, bool persistent = true) {
    check_new_name(name, "register_buffer");
    ++structure_version_;
    if (t.defined()) buffers_.push_back({name, t, {}, persistent});
    return t;
  }
  /// An int64 buffer (BatchNorm's num_batches_tracked).
  IndexTensor register_buffer(const std::string& name, IndexTensor t, bool persistent = true) {
    check_new_name(name, "register_buffer");
    ++structure_version_;
    if (t.defined()) buffers_.push_back({name, {}, t, persistent});
    return t;
  }
  /// Adds a submodule under `name`; returns the handle it was given.
  template <class H>
    requires detail::Holder<H>
  H register_module(const std::string& name, H module) {
    check_new_name(name, "register_module");
    using Impl = typename H::Impl_t;
    static_assert(std::is_base_of_v<ModuleT<T>, Impl>,
                  "frost::nn::register_module: the submodule's element type differs from its parent's");
    FROST_CHECK(!module.is_empty(), "frost::nn::Module::register_module: '", name, "' is an empty handle");
    children_.push_back({name, std::static_pointer_cast<ModuleT<T>>(module.ptr())});
    ++structure_version_;
    return module;
  }
  /// PyTorch's add_module: register_module under another name.
  template <class H>
    requires detail::Holder<H>
  H add_module(const std::string& name, H module) {
    return register_module(name, std::move(module));
  }
  /// Replaces the submodule registered as `name` (e.g. a classifier head).
  template <class H>
    requires detail::Holder<H>
  H replace_module(const std::string& name, H module) {
    for (auto& c : children_)
      if (c.first == name) {
        c.second = std::static_pointer_cast<ModuleT<T>>(module.ptr());
        ++structure_version_;
        return module;
      }
    frost::detail::fail("frost::nn::Module::replace_module: no submodule named '", name, "' in ", type_name());
  }

  /// Changes with every registration in this module or below (a layer
  /// appended or replaced): jit::compile traces again when it moves.
  std::uint64_t structure_stamp() const {
    std::uint64_t h = reinterpret_cast<std::uintptr_t>(this) ^ (structure_version_ * 0x9E3779B97F4A7C15ull);
    for (const auto& c : children_) h = (h * 1099511628211ull) ^ c.second->structure_stamp();
    return h;
  }

  // ---- traversal ------------------------------------------------------
  std::vector<std::pair<std::string, TensorT>> named_parameters(bool recurse = true) const {
    std::vector<std::pair<std::string, TensorT>> out;
    std::unordered_set<const void*> seen;
    visit("", recurse, [&](const std::string& prefix, const ModuleT& m) {
      for (const auto& [n, t] : m.params_)
        if (seen.insert(t.impl()).second) out.push_back({prefix + n, t});
    });
    return out;
  }
  std::vector<TensorT> parameters(bool recurse = true) const { return values(named_parameters(recurse)); }

  /// Float buffers (int64 ones such as num_batches_tracked are in
  /// named_index_buffers and in the state dict).
  std::vector<std::pair<std::string, TensorT>> named_buffers(bool recurse = true) const {
    std::vector<std::pair<std::string, TensorT>> out;
    std::unordered_set<const void*> seen;
    visit("", recurse, [&](const std::string& prefix, const ModuleT& m) {
      for (const auto& b : m.buffers_)
        if (b.t.defined() && seen.insert(b.t.impl()).second) out.push_back({prefix + b.name, b.t});
    });
    return out;
  }
  std::vector<TensorT> buffers(bool recurse = true) const { return values(named_buffers(recurse)); }
  std::vector<std::pair<std::string, IndexTensor>> named_index_buffers(bool recurse = true) const {
    std::vector<std::pair<std::string, IndexTensor>> out;
    std::unordered_set<const void*> seen;
    visit("", recurse, [&](const std::string& prefix, const ModuleT& m) {
      for (const auto& b : m.buffers_)
        if (b.i.defined() && seen.insert(b.i.impl()).second) out.push_back({prefix + b.name, b.i});
    });
    return out;
  }

  /// The direct submodules; one registered under two names (a layer used
  /// twice in a Sequential) is listed once, under the first, as in PyTorch.
  std::vector<std::pair<std::string, std::shared_ptr<ModuleT>>> named_children() const {
    std::vector<std::pair<std::string, std::shared_ptr<ModuleT>>> out;
    std::unordered_set<const ModuleT*> seen;
    for (const auto& c : children_)
      if (seen.insert(c.second.get()).second) out.push_back(c);
    return out;
  }
  std::vector<std::shared_ptr<ModuleT>> children() const {
    std::vector<std::shared_ptr<ModuleT>> out;
    for (const auto& c : named_children()) out.push_back(c.second);
    return out;
  }
  /// Every module below this one, depth first, with dotted names ("" is this
  /// module itself, listed first as in PyTorch); a module reached twice is
  /// listed once, under its first name.
  std::vector<std::pair<std::string, ModuleT*>> named_modules() {
    std::vector<std::pair<std::string, ModuleT*>> out;
    std::unordered_set<const ModuleT*> seen;
    collect_modules("", seen, out);
    return out;
  }
  std::vector<ModuleT*> modules() {
    std::vector<ModuleT*> out;
    for (auto& [n, m] : named_modules()) out.push_back(m);
    return out;
  }

  /// Calls fn on every submodule, then on this module (PyTorch's order), so an
  /// `init_weights` function can switch on the layer type with `as<>()`.
  ModuleT& apply(const std::function<void(ModuleT&)>& fn) {
    for (auto& c : children()) c->apply(fn);  // a layer used twice here is visited once
    fn(*this);
    return *this;
  }

  /// This module as layer type M (a handle type such as nn::Conv2d, or an
  /// implementation class), or nullptr when it is something else.
  template <class M>
  auto* as() {
    return dynamic_cast<typename detail::impl_of<M>::type*>(this);
  }
  template <class M>
  const auto* as() const {
    return dynamic_cast<const typename detail::impl_of<M>::type*>(this);
  }

  // ---- modes ----------------------------------------------------------
  /// Training mode for this module and every submodule (dropout active,
  /// batch norm using batch statistics).
  ModuleT& train(bool on = true) {
    visit_mut("", [&](const std::string&, ModuleT& m) { m.training_ = on; });
    return *this;
  }
  ModuleT& eval() { return train(false); }
  bool is_training() const { return training_; }

  /// Drops (set_to_none, the default, as in PyTorch 2) or zeroes every
  /// parameter's gradient.
  void zero_grad(bool set_to_none = true) {
    for (auto& p : parameters()) {
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.set_grad({});
      } else {
        NoGradGuard ng;
        p.grad().zero_();
      }
    }
  }

  /// Moves parameters and buffers (and gradients) to `device`, in place:
  /// the tensors keep their identity, so an optimizer built before the move
  /// still updates them (PyTorch's module.to does the same). CUDA needs the
  /// frost::cuda CMake target.
  ModuleT& to(Device device) {
    NoGradGuard ng;
    visit_mut("", [&](const std::string&, ModuleT& m) {
      for (auto& p : m.params_) move_in_place(p.second, device);
      for (auto& b : m.buffers_) {
        if (b.t.defined()) move_in_place(b.t, device);
        if (b.i.defined()) move_in_place(b.i, device);
      }
    });
    return *this;
  }

  // ---- state ----------------------------------------------------------
  /// Parameters and persistent buffers by dotted name; the tensors share
  /// memory with the module (as PyTorch's state_dict does).
  StateDict<T> state_dict() const {
    StateDict<T> sd;
    visit("", true, [&](const std::string& prefix, const ModuleT& m) {
      for (const auto& [n, t] : m.params_) sd.insert(prefix + n, t.detach());
      for (const auto& b : m.buffers_) {
        if (!b.persistent) continue;
        if (b.t.defined()) sd.insert(prefix + b.name, b.t.detach());
        else sd.insert(prefix + b.name, b.i.detach());
      }
    });
    return sd;
  }

  /// Copies `sd` into this module's parameters and buffers. Every entry is
  /// checked before anything is written; a mismatch is a frost::Error listing
  /// the missing, unexpected and shape-mismatched keys (missing and unexpected
  /// ones are tolerated when `strict` is false; a shape mismatch never is).
  void load_state_dict(const StateDict<T>& sd, bool strict = true) {
    const StateDict<T> own = state_dict();
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& [name, dst] : own) {
      const auto* src = sd.find(name);
      if (!src) {
        missing.push_back(name);
        continue;
      }
      if (src->index() != dst.index()) {
        mismatched.push_back(name + " (" + state_dtype(*src) + " in the state dict, " + state_dtype(dst) +
                             " in the module)");
      } else if (state_shape(*src) != state_shape(dst)) {
        mismatched.push_back(name + " (" + state_shape(*src).str() + " in the state dict, " +
                             state_shape(dst).str() + " in the module)");
      }
    }
    for (const auto& [name, v] : sd)
      if (!own.find(name)) unexpected.push_back(name);
    if (!mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()))) {
      std::ostringstream msg;
      msg << "frost::nn::Module::load_state_dict: cannot load into " << type_name() << ":";
      auto list = [&](const char* what, const std::vector<std::string>& keys) {
        if (keys.empty()) return;
        msg << "\n  " << what << ":";
        for (const auto& k : keys) msg << " " << k << ";";
      };
      list("missing keys", missing);
      list("unexpected keys", unexpected);
      list("size or dtype mismatch", mismatched);
      throw Error(msg.str());
    }
    NoGradGuard ng;
    for (const auto& [name, dst] : own) {
      const auto* src = sd.find(name);
      if (!src) continue;
      std::visit(
          [&](const auto& d) {
            auto dd = d;
            dd.copy_(std::get<std::remove_cvref_t<decltype(d)>>(*src));
          },
          dst);
    }
  }

  // ---- printing -------------------------------------------------------
  /// The layer's name as PyTorch prints it ("Linear"); user modules give
  /// their C++ class name.
  virtual std::string type_name() const { return detail::demangle(typeid(*this).name()); }
  /// The arguments shown in parentheses ("in_features=3, out_features=4, bias=True").
  virtual std::string extra_repr() const { return ""; }
  /// PyTorch's module printout.
  void pretty_print(std::ostream& os, int indent = 0) const {
    os << type_name() << "(" << extra_repr();
    if (!children_.empty()) {
      os << "\n";
      for (const auto& [n, c] : children_) {
        os << std::string(indent + 2, ' ') << "(" << n << "): ";
        c->pretty_print(os, indent + 2);
        os << "\n";
      }
      os << std::string(indent, ' ');
    }
    os << ")";
  }

 private:
  struct Buffer {
    std::string name;
    TensorT t;
    IndexTensor i;
    bool persistent = true;
  };

  void check_new_name(const std::string& name, const char* what) const {
    FROST_CHECK(!name.empty() && name.find('.') == std::string::npos, "frost::nn::Module::", what, ": name '", name,
                "' must be non-empty and contain no '.'");
    bool taken = false;
    for (const auto& p : params_) taken |= p.first == name;
    for (const auto& b : buffers_) taken |= b.name == name;
    for (const auto& c : children_) taken |= c.first == name;
    FROST_CHECK(!taken, "frost::nn::Module::", what, ": '", name, "' is already registered in ", type_name());
  }

  /// Points `t`'s impl at a copy of its data on `d` (and its gradient too).
  template <class U>
  static void move_in_place(const Tensor<U>& t, Device d) {
    if (t.device() == d) return;
    Tensor<U> moved = t.detach().to(d);
    TensorImpl<U>* impl = t.impl();
    impl->storage = moved.impl()->storage;
    impl->strides = moved.strides();
    impl->offset = 0;
    if (impl->grad) impl->grad = Tensor<U>(impl->grad).to(d).impl_ref();
  }

  template <class F>
  void visit(const std::string& prefix, bool recurse, F&& f) const {
    f(prefix, *this);
    if (recurse)
      for (const auto& [n, c] : children_) c->visit(prefix + n + ".", true, f);
  }
  void collect_modules(const std::string& name, std::unordered_set<const ModuleT*>& seen,
                       std::vector<std::pair<std::string, ModuleT*>>& out) {
    if (!seen.insert(this).second) return;
    out.push_back({name, this});
    for (auto& [n, c] : children_) c->collect_modules(name.empty() ? n : name + "." + n, seen, out);
  }

  template <class F>
  void visit_mut(const std::string& prefix, F&& f) {
    f(prefix, *this);
    for (auto& [n, c] : children_) c->visit_mut(prefix + n + ".", f);
  }

  static std::vector<TensorT> values(const std::vector<std::pair<std::string, TensorT>>& named) {
    std::vector<TensorT> out;
    out.reserve(named.size());
    for (const auto& [n, t] : named) out.push_back(t);
    return out;
  }

  std::vector<std::pair<std::string, TensorT>> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<ModuleT>>> children_;
  bool training_ = true;
  std::uint64_t structure_version_ = 0;  // registrations in this module
};

using Module = ModuleT<float>;

template <class T>
std::ostream& operator<<(std::ostream& os, const ModuleT<T>& m) {
  m.pretty_print(os);
  return os;
}
template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& h) {
  h->pretty_print(os);
  return os;
}

}  // namespace frost::nn
