// One SIMD register of T as a GCC vector type, at the width the build's
// ISA has (64 bytes with AVX-512, 32 with AVX/AVX2, else 16), for the
// kernels that keep their sums in registers; kVecRegs says how many of
// them there are, and the kernels size their register blocks by it.
// A vector wider than the ISA's registers is not an option: GCC 12 keeps
// 64-byte vectors on an AVX2 build in memory, 16 bytes at a time (a whole
// block of sums in the stack frame), and the kernels ran 15-30x slower.
#pragma once
#include <cstdint>
#include <cstring>
#include <utility>

namespace frost::cpu {

#if defined(__AVX512F__)
inline constexpr std::int64_t kVecBytes = 64;
inline constexpr int kVecRegs = 32;
#elif defined(__AVX__)
inline constexpr std::int64_t kVecBytes = 32;
inline constexpr int kVecRegs = 16;
#else  // SSE2 or NEON: 16 registers of 16 bytes (NEON has 32; 16 is the safe count)
inline constexpr std::int64_t kVecBytes = 16;
inline constexpr int kVecRegs = 16;
#endif

template <class T>
struct SimdVecOf {
  typedef T type __attribute__((vector_size(kVecBytes)));  // a typedef: GCC drops the attribute on an alias template
  // The same vector at T's alignment: what an unaligned load or store goes through.
  typedef T unaligned __attribute__((vector_size(kVecBytes), aligned(alignof(T))));
};
template <class T>
using SimdVec = typename SimdVecOf<T>::type;

template <class T>
inline constexpr std::int64_t kVecLanes = kVecBytes / sizeof(T);

// Vectors go in and out by reference: passed by value, a vector wider than
// the baseline ABI's has another ABI, which compilers warn of (-Wpsabi).
// The loads and stores are vector-typed, not memcpy: GCC tuned for recent
// Intel cores expands a 64-byte memcpy as two 32-byte moves, and a kernel
// whose inputs sit in a small array then stores them as halves and reloads
// them whole (a store-forwarding stall per load, 5x slower in
// conv_direct's pooled block).
template <class T>
inline void load_vec(SimdVec<T>& v, const T* p) {
  v = *reinterpret_cast<const typename SimdVecOf<T>::unaligned*>(p);
}
template <class T>
inline void store_vec(T* p, const SimdVec<T>& v) {
  *reinterpret_cast<typename SimdVecOf<T>::unaligned*>(p) = v;
}

namespace vec_detail {
template <class T, std::size_t... I>
void splat(SimdVec<T>& v, T s, std::index_sequence<I...>) {
  v = SimdVec<T>{((void)I, s)...};
}
template <std::size_t First, class V, std::size_t... I>
void every_other(const V& a, const V& b, V& out, std::index_sequence<I...>) {
  out = __builtin_shufflevector(a, b, (First + 2 * I)...);  // GCC 12+ and clang
}
}  // namespace vec_detail

/// v = s in every lane: one broadcast (`SimdVec<T>{} + s` is an add as well:
/// 0 + s is not s for s = -0).
template <class T>
inline void splat(SimdVec<T>& v, T s) {
  vec_detail::splat(v, s, std::make_index_sequence<kVecLanes<T>>());
}

/// The max of neighbouring lanes of a then b (lanes 2k and 2k + 1 of the
/// pair as one vector of twice the width), NaN winning as in max_pool2d.
template <class T>
inline void max_pairs(const SimdVec<T>& a, const SimdVec<T>& b, SimdVec<T>& out) {
  SimdVec<T> even, odd;
  vec_detail::every_other<0>(a, b, even, std::make_index_sequence<kVecLanes<T>>());
  vec_detail::every_other<1>(a, b, odd, std::make_index_sequence<kVecLanes<T>>());
  out = ((even > odd) | (even != even)) ? even : odd;
}

/// Unrolls the next loop whole (up to 32 trips): a register block's loops
/// over its sums must be, or GCC keeps the array of sums in memory (the
/// complete unrolling of the loops around the multiply-adds comes too late
/// for the pass that puts arrays in registers; 3x slower with AVX2).
#if defined(__GNUC__) && !defined(__clang__)
#define FROST_UNROLL _Pragma("GCC unroll 32")
#elif defined(__clang__)
#define FROST_UNROLL _Pragma("unroll")
#else
#define FROST_UNROLL
#endif

/// Keeps v in a register: without this GCC folds each load of an input
/// vector into every multiply-add that uses it (4 to 8 of them), and a
/// kernel becomes bound by loads instead of multiply-adds.
template <class V>
inline void in_register(V& v) {
#if defined(__GNUC__) && defined(__AVX512F__)
  asm("" : "+v"(v));  // any of the 32 registers
#elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__)
  asm("" : "+x"(v));  // one of the 16
#else
  (void)v;
#endif
}

}  // namespace frost::cpu
