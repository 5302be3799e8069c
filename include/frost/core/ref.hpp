// Ref<T>: an intrusive reference-counted pointer. Tensors, storages and autograd
// nodes carry their own count, so a handle copy is one atomic increment and
// the object and its count share one allocation.
#pragma once
#include <atomic>
#include <cstdint>
#include <utility>

namespace frost {

/// Base for intrusively counted objects.
struct RefCounted {
  mutable std::atomic<std::int32_t> refs_{0};
  std::int32_t use_count() const { return refs_.load(std::memory_order_relaxed); }
};

template <class T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}
  explicit Ref(T* p) : p_(p) { retain(); }
  /// Takes ownership of a freshly created object (count 0 -> 1 without a locked op).
  static Ref adopt(T* p) {
    p->refs_.store(1, std::memory_order_relaxed);
    Ref r;
    r.p_ = p;
    return r;
  }
  Ref(const Ref& o) : p_(o.p_) { retain(); }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U>
  Ref(const Ref<U>& o) : p_(o.get()) { retain(); }
  template <class U>
  Ref(Ref<U>&& o) noexcept : p_(o.release()) {}
  ~Ref() { drop(); }

  Ref& operator=(const Ref& o) {
    Ref(o).swap(*this);
    return *this;
  }
  Ref& operator=(Ref&& o) noexcept {
    Ref(std::move(o)).swap(*this);
    return *this;
  }
  void swap(Ref& o) noexcept { std::swap(p_, o.p_); }
  void reset() { Ref().swap(*this); }
  /// Gives up ownership without decrementing.
  T* release() { return std::exchange(p_, nullptr); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const Ref& o) const { return p_ == o.p_; }

  template <class... A>
  static Ref make(A&&... a) { return adopt(new T(std::forward<A>(a)...)); }

 private:
  void retain() {
    if (p_) p_->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void drop() {
    if (!p_) return;
    // The sole owner may skip the locked decrement: nobody else can reach
    // the object to take a new reference.
    if (p_->refs_.load(std::memory_order_acquire) == 1 || p_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      destroy(p_);
  }
  // Objects may customise destruction (autograd nodes unlink iteratively).
  static void destroy(T* p) {
    if constexpr (requires { T::destroy(p); }) T::destroy(p);
    else delete p;
  }
  T* p_ = nullptr;
};

}  // namespace frost
