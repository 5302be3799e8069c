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
  // The same vector at T's alignment: what an unaligned load or store goes through.
  typedef T unaligned __attribute__((vector_size(64), aligned(alignof(T))));
};
template <class T>
using Vec64 = typename Vec64Of<T>::type;

template <class T>
inline constexpr std::int64_t kVecLanes = 64 / sizeof(T);

// Vectors go in and out by reference: passed by value, a 64-byte vector
// has another ABI without AVX-512, which compilers warn of (-Wpsabi) in
// builds without -march. The loads and stores are vector-typed, not
// memcpy: GCC tuned for recent Intel cores expands a 64-byte memcpy as two
// 32-byte moves, and a kernel whose inputs sit in a small array then stores
// them as halves and reloads them whole (a store-forwarding stall per load,
// 5x slower in conv_direct's pooled block).
template <class T>
inline void load_vec(Vec64<T>& v, const T* p) {
  v = *reinterpret_cast<const typename Vec64Of<T>::unaligned*>(p);
}
template <class T>
inline void store_vec(T* p, const Vec64<T>& v) {
  *reinterpret_cast<typename Vec64Of<T>::unaligned*>(p) = v;
}

namespace vec_detail {
template <std::size_t First, class V, std::size_t... I>
void every_other(const V& a, const V& b, V& out, std::index_sequence<I...>) {
  out = __builtin_shufflevector(a, b, (First + 2 * I)...);  // GCC 12+ and clang
}
}  // namespace vec_detail

/// The max of neighbouring lanes of a then b (lanes 2k and 2k + 1 of the
/// pair as one vector of twice the width), NaN winning as in max_pool2d.
template <class T>
inline void max_pairs(const Vec64<T>& a, const Vec64<T>& b, Vec64<T>& out) {
  Vec64<T> even, odd;
  vec_detail::every_other<0>(a, b, even, std::make_index_sequence<kVecLanes<T>>());
  vec_detail::every_other<1>(a, b, odd, std::make_index_sequence<kVecLanes<T>>());
  out = ((even > odd) | (even != even)) ? even : odd;
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
