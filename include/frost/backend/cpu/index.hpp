// CPU indexing kernels: index_select, gather, scatter_add. Each checks its
// indices as it reads them and reports the first bad one as a frost::Error.
#pragma once
#include <cstdint>

#include "../../core/error.hpp"
#include "../view.hpp"
#include "loop.hpp"
#include "parallel.hpp"

namespace frost::cpu {

inline void check_index(std::int64_t i, std::int64_t size, const char* op, int dim) {
  if (FROST_UNLIKELY(i < 0 || i >= size)) frost::detail::fail_index(op, i, dim, size);
}

// Offsets of y's elements, with y's multi-index applied to another operand's strides.
template <class T, class Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  const std::int64_t n = shape.numel();
  std::int64_t idx[kMaxDims] = {};
  for (std::int64_t flat = 0; flat < n; ++flat) {
    fn(idx);
    for (int d = shape.ndim() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T>
void index_select(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) {
  const std::int64_t size = x.shape[dim];
  for (std::int64_t k = 0; k < index.numel(); ++k)
    check_index(index.data[k * index.strides[0]], size, "index_select", dim);
  for_each_index<T>(y.shape, [&](const std::int64_t* idx) {
    std::int64_t xo = 0, yo = 0;
    for (int d = 0; d < y.ndim(); ++d) {
      yo += idx[d] * y.strides[d];
      std::int64_t i = idx[d];
      if (d == dim) {
        i = index.data[idx[d] * index.strides[0]];
      }
      xo += i * x.strides[d];
    }
    y.data[yo] = x.data[xo];
  });
}

template <class T>
void gather(const View<const T>& x, int dim, const View<const std::int64_t>& index, const View<T>& y) {
  const std::int64_t size = x.shape[dim];
  for_each_index<T>(y.shape, [&](const std::int64_t* idx) {
    std::int64_t xo = 0, yo = 0, io = 0;
    for (int d = 0; d < y.ndim(); ++d) {
      yo += idx[d] * y.strides[d];
      io += idx[d] * index.strides[d];
    }
    std::int64_t i = index.data[io];
    check_index(i, size, "gather", dim);
    for (int d = 0; d < y.ndim(); ++d) xo += (d == dim ? i : idx[d]) * x.strides[d];
    y.data[yo] = x.data[xo];
  });
}

template <class T>
void scatter_add(const View<T>& y, int dim, const View<const std::int64_t>& index, const View<const T>& src) {
  const std::int64_t size = y.shape[dim];
  for_each_index<T>(index.shape, [&](const std::int64_t* idx) {
    std::int64_t so = 0, io = 0, yo = 0;
    for (int d = 0; d < index.ndim(); ++d) {
      so += idx[d] * src.strides[d];
      io += idx[d] * index.strides[d];
    }
    std::int64_t i = index.data[io];
    check_index(i, size, "scatter_add", dim);
    for (int d = 0; d < index.ndim(); ++d) yo += (d == dim ? i : idx[d]) * y.strides[d];
    y.data[yo] += src.data[so];
  });
}

}  // namespace frost::cpu
