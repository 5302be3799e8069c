// View<T>: a raw strided window on device memory, what backend kernels take.
// No ownership, no autograd: frozen plans build views over their arena.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../core/shape.hpp"

namespace frost {

/// Pointer (offset already applied) + shape + strides in elements.
template <class T>
struct View {
  T* data = nullptr;
  Shape shape;
  Shape strides;

  View() = default;
  View(T* d, const Shape& sh, const Shape& st) : data(d), shape(sh), strides(st) {}
  /// Dense row-major view.
  View(T* d, const Shape& sh) : data(d), shape(sh), strides(contiguous_strides(sh)) {}
  /// A View<T> reads as a View<const T>.
  template <class U>
    requires std::is_same_v<T, const U>
  View(const View<U>& o) : data(o.data), shape(o.shape), strides(o.strides) {}

  std::int64_t numel() const { return shape.numel(); }
  int ndim() const { return shape.ndim(); }
  bool is_contiguous() const {
    if (numel() == 0) return true;  // nothing to lay out; contiguous_strides() of an empty shape would fail below
    std::int64_t expect = 1;
    for (int i = shape.ndim() - 1; i >= 0; --i) {
      if (shape[i] == 1) continue;
      if (strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
};

}  // namespace frost
