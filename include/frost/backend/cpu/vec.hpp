// One 64-byte SIMD register of T as a GCC vector type (16 floats or 8
// doubles: a zmm register with AVX-512, two or four narrower ones without),
// for the kernels that keep their sums in registers.
#pragma once
#include <cstdint>
#include <cstring>
#include <utility>

namespace frost::cpu {

template <class T>
struct Vec64Of {
  typedef T type __attribute__((vector_size(64)));  // a typedef: GCC drops the attribute on an alias template
};
template <class T>
using Vec64 = typename Vec64Of<T>::type;

template <class T>
inline constexpr std::int64_t kVecLanes = 64 / sizeof(T);

template <class T>
inline Vec64<T> load_vec(const T* p) {
  Vec64<T> v;
  std::memcpy(&v, p, sizeof v);  // unaligned
  return v;
}
template <class T>
inline void store_vec(T* p, const Vec64<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

namespace vec_detail {
template <std::size_t First, class V, std::size_t... I>
V every_other(const V& a, const V& b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, (First + 2 * I)...);  // GCC 12+ and clang
}
}  // namespace vec_detail

/// The even lanes of a then b (lanes 0, 2, ... of the pair as one vector of
/// twice the width), and the odd ones: neighbours' pairs side by side.
template <class T>
inline Vec64<T> even_lanes(const Vec64<T>& a, const Vec64<T>& b) {
  return vec_detail::every_other<0>(a, b, std::make_index_sequence<kVecLanes<T>>());
}
template <class T>
inline Vec64<T> odd_lanes(const Vec64<T>& a, const Vec64<T>& b) {
  return vec_detail::every_other<1>(a, b, std::make_index_sequence<kVecLanes<T>>());
}

/// Keeps v in a register: without this GCC folds each load of an input
/// vector into every multiply-add that uses it (4 to 8 of them), and a
/// kernel becomes bound by loads instead of multiply-adds.
template <class V>
inline void in_register(V& v) {
#if defined(__GNUC__) && defined(__AVX512F__)  // one 64-byte register
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

}  // namespace frost::cpu
