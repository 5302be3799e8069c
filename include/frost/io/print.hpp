// operator<< for tensors, in PyTorch's layout: nested brackets aligned on
// one column width, long dims summarised with "...", then dtype and shape.
#pragma once
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "../tensor.hpp"

namespace frost {

namespace detail {

struct PrintFormat {
  bool integral = false, sci = false;
  int width = 1;
};

template <class T>
std::string format_value(T v, const PrintFormat& f) {
  char buf[64];
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_integral_v<T>) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    const double d = static_cast<double>(v);
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (f.sci) std::snprintf(buf, sizeof buf, "%.4e", d);
    else if (f.integral) std::snprintf(buf, sizeof buf, "%.0f.", d);
    else std::snprintf(buf, sizeof buf, "%.4f", d);
  }
  return buf;
}

template <class T>
void print_rec(std::ostream& os, const std::vector<T>& v, const Shape& s, const Shape& st, int dim, std::int64_t off,
               const PrintFormat& f, int indent, bool summarize) {
  const std::int64_t n = s[dim];
  const int edge = 3;
  os << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * edge && i == edge) {
      if (dim == s.ndim() - 1) os << "..., ";
      else os << "...,\n" << std::string(static_cast<std::size_t>(indent + 1), ' ');
      i = n - edge;
    }
    if (dim == s.ndim() - 1) {
      std::string t = format_value(v[static_cast<std::size_t>(off + i * st[dim])], f);
      os << std::string(static_cast<std::size_t>(std::max<int>(0, f.width - static_cast<int>(t.size()))), ' ') << t;
    } else {
      print_rec(os, v, s, st, dim + 1, off + i * st[dim], f, indent + 1, summarize);
    }
    if (i + 1 < n) {
      os << ',';
      if (dim == s.ndim() - 1) os << ' ';
      else os << std::string(static_cast<std::size_t>(s.ndim() - 1 - dim), '\n')
              << std::string(static_cast<std::size_t>(indent + 1), ' ');
    }
  }
  os << ']';
}

}  // namespace detail

/// Prints like PyTorch: `tensor([[1.0000, 2.0000], ...], dtype=float32, shape=[2, 2])`.
template <class T>
std::ostream& operator<<(std::ostream& os, const Tensor<T>& x) {
  if (!x.defined()) return os << "tensor(undefined)";
  const std::vector<T> v = x.to_vector();
  detail::PrintFormat f;
  if constexpr (FloatingScalar<T>) {
    double mx = 0, mn = INFINITY;
    bool integral = true;
    for (T e : v) {
      const double a = std::fabs(static_cast<double>(e));
      if (!std::isfinite(a)) continue;
      mx = std::max(mx, a);
      if (a > 0) mn = std::min(mn, a);
      integral = integral && std::floor(static_cast<double>(e)) == static_cast<double>(e);
    }
    f.integral = integral && mx < 1e8;
    f.sci = !f.integral && (mx >= 1e8 || (mn < 1e-4 && mn != INFINITY));
  }
  for (T e : v) f.width = std::max<int>(f.width, static_cast<int>(detail::format_value(e, f).size()));
  os << "tensor(";
  if (x.dim() == 0) {
    os << detail::format_value(v[0], f);
  } else if (x.numel() == 0) {
    os << "[]";
  } else {
    detail::print_rec(os, v, x.shape(), contiguous_strides(x.shape()), 0, 0, f, 7, x.numel() > 1000);
  }
  os << ", dtype=" << dtype_name<T>() << ", shape=" << x.shape().str();
  if (x.device() != Device::cpu()) os << ", device=" << x.device().str();
  if (x.grad_fn_name()[0] != '\0') os << ", grad_fn=<" << x.grad_fn_name() << '>';
  else if (x.requires_grad()) os << ", requires_grad=True";
  return os << ')';
}

}  // namespace frost
