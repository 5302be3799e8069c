// Shape: up to kMaxDims extents stored inline (no heap), plus the shape rules
// shared by every op (dim wrapping, broadcasting, contiguous strides).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "error.hpp"

namespace frost {

/// Most dims a tensor may have; shapes live inline so ops never allocate for them.
inline constexpr int kMaxDims = 8;

/// A list of up to kMaxDims int64 extents (also used for strides).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const std::int64_t> dims) { assign(dims.data(), dims.size()); }
  explicit Shape(const std::vector<std::int64_t>& dims) { assign(dims.data(), dims.size()); }

  /// `n` dims all equal to `value`.
  static Shape filled(int n, std::int64_t value) {
    Shape s;
    FROST_CHECK(n >= 0 && n <= kMaxDims, "frost::Shape: ", n, " dims requested, at most ", kMaxDims, " supported");
    s.n_ = n;
    for (int i = 0; i < n; ++i) s.d_[i] = value;
    return s;
  }

  int ndim() const { return n_; }
  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::int64_t operator[](int i) const { return d_[i]; }
  std::int64_t& operator[](int i) { return d_[i]; }
  std::int64_t back() const { return d_[n_ - 1]; }
  const std::int64_t* begin() const { return d_.data(); }
  const std::int64_t* end() const { return d_.data() + n_; }
  std::int64_t* begin() { return d_.data(); }
  std::int64_t* end() { return d_.data() + n_; }
  const std::int64_t* data() const { return d_.data(); }

  void push_back(std::int64_t v) {
    FROST_CHECK(n_ < kMaxDims, "frost::Shape: more than ", kMaxDims, " dims are not supported");
    d_[n_++] = v;
  }
  void insert(int pos, std::int64_t v) {
    FROST_CHECK(n_ < kMaxDims, "frost::Shape: more than ", kMaxDims, " dims are not supported");
    for (int i = n_; i > pos; --i) d_[i] = d_[i - 1];
    d_[pos] = v;
    ++n_;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
    --n_;
  }
  void resize(int n, std::int64_t fill = 0) {
    FROST_CHECK(n >= 0 && n <= kMaxDims, "frost::Shape: ", n, " dims requested, at most ", kMaxDims, " supported");
    for (int i = n_; i < n; ++i) d_[i] = fill;
    n_ = n;
  }

  /// Product of the extents (1 for a 0-dim shape).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < n_; ++i) n *= d_[i];
    return n;
  }

  bool operator==(const Shape& o) const {
    if (n_ != o.n_) return false;
    for (int i = 0; i < n_; ++i)
      if (d_[i] != o.d_[i]) return false;
    return true;
  }

  std::vector<std::int64_t> vec() const { return {begin(), end()}; }

  /// "[2, 3]", as shapes appear in error messages.
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < n_; ++i) {
      if (i) s += ", ";
      s += std::to_string(d_[i]);
    }
    return s + "]";
  }

 private:
  void assign(const std::int64_t* p, std::size_t n) {
    FROST_CHECK(n <= static_cast<std::size_t>(kMaxDims), "frost::Shape: ", n, " dims given, at most ", kMaxDims,
                " supported");
    n_ = static_cast<int>(n);
    for (int i = 0; i < n_; ++i) d_[i] = p[i];
  }

  std::array<std::int64_t, kMaxDims> d_{};
  int n_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

/// Row-major strides of a dense tensor of shape `s`.
inline Shape contiguous_strides(const Shape& s) {
  Shape st = Shape::filled(s.ndim(), 1);
  std::int64_t acc = 1;
  for (int i = s.ndim() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

/// Wraps a possibly negative dim into [0, ndim); errors name the op.
inline int wrap_dim(std::int64_t dim, int ndim, const char* op) {
  const int n = ndim > 0 ? ndim : 1;  // a 0-dim tensor accepts dim 0 / -1 like PyTorch
  if (FROST_UNLIKELY(dim < -n || dim >= n))  // an IndexError, as PyTorch's "Dimension out of range"
    detail::fail_as<IndexError>("frost::", op, ": dim ", dim, " is out of range for a tensor with ", ndim,
                                " dims (expected a dim in [", -n, ", ", n - 1, "])");
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

/// NumPy broadcasting of two shapes; the error names the op and both shapes.
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  const int n = a.ndim() > b.ndim() ? a.ndim() : b.ndim();
  Shape out = Shape::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.ndim() - n + i, ib = b.ndim() - n + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    FROST_CHECK(da == db || da == 1 || db == 1, "frost::", op, ": shapes ", a.str(), " and ", b.str(),
                " are not broadcastable (dim ", i - n, " is ", da, " vs ", db,
                "; expected equal sizes or 1 after aligning trailing dims)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Checks extents are non-negative; used by factories and reshape.
inline void check_extents(const Shape& s, const char* op) {
  for (auto d : s) FROST_CHECK(d >= 0, "frost::", op, ": negative size in shape ", s.str());
}

}  // namespace frost
