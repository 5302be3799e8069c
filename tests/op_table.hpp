// The op table (STYLE.md, "One table drives the op tests"): one Row per op
// variant, {op name, input shapes, input values and memory layouts, frost
// lambda, naive reference, differentiable?, tolerances}, and the generic
// checks every row goes through: forward against a plain-loop reference in
// double and in float, and central-difference checks of the gradient and of
// the second derivative in double. The rows live in op_table_*.cpp;
// op_table_coverage.cpp proves every public op has them.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support.hpp"

namespace frost::test::optable {

// ---- host arrays: what references take and return -----------------------

/// Values in row-major order with their shape.
struct Arr {
  Shape shape;
  std::vector<double> v;
};
using Coord = std::vector<std::int64_t>;

inline void require(bool ok, const char* what) {
  if (!ok) throw std::logic_error(std::string("op table reference: ") + what);
}

inline Coord unravel(std::int64_t flat, const Shape& s) {
  Coord c(static_cast<std::size_t>(s.ndim()));
  for (int d = s.ndim() - 1; d >= 0; --d) {
    c[static_cast<std::size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return c;
}
inline std::int64_t ravel(const Coord& c, const Shape& s) {
  std::int64_t f = 0;
  for (int d = 0; d < s.ndim(); ++d) f = f * s[d] + c[static_cast<std::size_t>(d)];
  return f;
}
inline double at(const Arr& x, const Coord& c) { return x.v[static_cast<std::size_t>(ravel(c, x.shape))]; }
inline int wrap(std::int64_t d, int nd) { return static_cast<int>(d < 0 ? d + nd : d); }

/// Shape `s` with entry `d` removed / inserted.
inline Shape erased(Shape s, int d) {
  s.erase(d);
  return s;
}
inline Shape inserted(Shape s, int d, std::int64_t v) {
  s.insert(d, v);
  return s;
}

/// x's coordinate for output coordinate `c` of a broadcast to a shape with c.size() dims.
inline Coord broadcast_coord(const Arr& x, const Coord& c) {
  const std::size_t off = c.size() - static_cast<std::size_t>(x.shape.ndim());
  Coord cx(static_cast<std::size_t>(x.shape.ndim()));
  for (int d = 0; d < x.shape.ndim(); ++d) cx[static_cast<std::size_t>(d)] = x.shape[d] == 1 ? 0 : c[off + static_cast<std::size_t>(d)];
  return cx;
}

/// NumPy-broadcast elementwise map: y[c] = f(x0[c], x1[c], ...).
inline Arr elementwise(const std::vector<Arr>& xs, const std::function<double(const std::vector<double>&)>& f) {
  int nd = 0;
  for (auto& x : xs) nd = std::max(nd, x.shape.ndim());
  Shape out = Shape::filled(nd, 1);
  for (auto& x : xs)
    for (int d = 0; d < x.shape.ndim(); ++d) {
      const int o = nd - x.shape.ndim() + d;
      if (x.shape[d] == 1) continue;
      require(out[o] == 1 || out[o] == x.shape[d], "shapes do not broadcast");
      out[o] = x.shape[d];
    }
  Arr y{out, std::vector<double>(static_cast<std::size_t>(out.numel()))};
  std::vector<double> args(xs.size());
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const Coord c = unravel(i, out);
    for (std::size_t k = 0; k < xs.size(); ++k) args[k] = at(xs[k], broadcast_coord(xs[k], c));
    y.v[static_cast<std::size_t>(i)] = f(args);
  }
  return y;
}

inline Arr broadcast_to(const Arr& x, const Shape& s) {
  Arr y{s, std::vector<double>(static_cast<std::size_t>(s.numel()))};
  for (std::int64_t i = 0; i < s.numel(); ++i) y.v[static_cast<std::size_t>(i)] = at(x, broadcast_coord(x, unravel(i, s)));
  return y;
}

/// Reduces `dims` (all when empty) with f over each group of values, taken in row-major order.
inline Arr reduce(const Arr& x, std::vector<std::int64_t> dims, bool keepdim,
                  const std::function<double(const std::vector<double>&)>& f) {
  const int nd = x.shape.ndim();
  std::vector<bool> red(static_cast<std::size_t>(nd), dims.empty());
  for (auto d : dims) red[static_cast<std::size_t>(wrap(d, nd))] = true;
  Shape keep = x.shape, squeezed;
  for (int d = 0; d < nd; ++d) {
    if (red[static_cast<std::size_t>(d)]) keep[d] = 1;
    else squeezed.push_back(x.shape[d]);
  }
  std::vector<std::vector<double>> groups(static_cast<std::size_t>(keep.numel()));
  for (std::int64_t i = 0; i < x.shape.numel(); ++i) {
    Coord c = unravel(i, x.shape);
    for (int d = 0; d < nd; ++d)
      if (red[static_cast<std::size_t>(d)]) c[static_cast<std::size_t>(d)] = 0;
    groups[static_cast<std::size_t>(ravel(c, keep))].push_back(x.v[static_cast<std::size_t>(i)]);
  }
  Arr y{keepdim ? keep : squeezed, {}};
  for (auto& g : groups) y.v.push_back(f(g));
  return y;
}

/// Applies f to every line of x along `dim` (softmax and friends).
inline Arr along(const Arr& x, std::int64_t dim, const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  if (x.shape.ndim() == 0) return Arr{x.shape, f(x.v)};
  const int d = wrap(dim, x.shape.ndim());
  Arr y{x.shape, std::vector<double>(x.v.size())};
  for (std::int64_t i = 0; i < x.shape.numel(); ++i) {
    Coord c = unravel(i, x.shape);
    if (c[static_cast<std::size_t>(d)] != 0) continue;
    std::vector<double> line;
    for (std::int64_t k = 0; k < x.shape[d]; ++k) {
      c[static_cast<std::size_t>(d)] = k;
      line.push_back(at(x, c));
    }
    const auto out = f(line);
    for (std::int64_t k = 0; k < x.shape[d]; ++k) {
      c[static_cast<std::size_t>(d)] = k;
      y.v[static_cast<std::size_t>(ravel(c, x.shape))] = out[static_cast<std::size_t>(k)];
    }
  }
  return y;
}

// Group functions for reduce().
inline double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
inline double mean_of(const std::vector<double>& v) { return sum_of(v) / static_cast<double>(v.size()); }
inline double var_of(const std::vector<double>& v, bool unbiased) {
  const double m = mean_of(v);
  double s = 0;
  for (double e : v) s += (e - m) * (e - m);
  return s / static_cast<double>(v.size() - (unbiased ? 1 : 0));
}
inline double prod_of(const std::vector<double>& v) {
  double p = 1;
  for (double e : v) p *= e;
  return p;
}
inline double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
inline double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
/// First index of the max / min, as an index value.
inline double argmax_of(const std::vector<double>& v) { return double(std::max_element(v.begin(), v.end()) - v.begin()); }
inline double argmin_of(const std::vector<double>& v) { return double(std::min_element(v.begin(), v.end()) - v.begin()); }
inline double logsumexp_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += std::exp(e);
  return std::log(s);
}
inline double norm_of(const std::vector<double>& v, double p) {
  if (std::isinf(p)) {
    double m = p > 0 ? 0 : INFINITY;
    for (double e : v) m = p > 0 ? std::max(m, std::fabs(e)) : std::min(m, std::fabs(e));
    return m;
  }
  if (p == 0) return double(std::count_if(v.begin(), v.end(), [](double e) { return e != 0; }));
  double s = 0;
  for (double e : v) s += std::pow(std::fabs(e), p);
  return std::pow(s, 1 / p);
}
inline std::vector<double> softmax_of(const std::vector<double>& v) {
  std::vector<double> y;
  const double s = std::exp(logsumexp_of(v));
  for (double e : v) y.push_back(std::exp(e) / s);
  return y;
}
inline std::vector<double> log_softmax_of(const std::vector<double>& v) {
  std::vector<double> y;
  const double l = logsumexp_of(v);
  for (double e : v) y.push_back(e - l);
  return y;
}

/// NumPy matmul with plain loops: 1-D operands promoted and the added dim
/// removed again, batch dims broadcast.
inline Arr matmul_ref(Arr a, Arr b) {
  const bool va = a.shape.ndim() == 1, vb = b.shape.ndim() == 1;
  if (va) a.shape = Shape{1, a.shape[0]};
  if (vb) b.shape = Shape{b.shape[0], 1};
  const int na = a.shape.ndim(), nb = b.shape.ndim();
  const std::int64_t m = a.shape[na - 2], k = a.shape[na - 1], n = b.shape[nb - 1];
  require(b.shape[nb - 2] == k, "matmul inner dims differ");
  Arr ba{Shape(std::vector<std::int64_t>(a.shape.begin(), a.shape.end() - 2)), {}};
  Arr bb{Shape(std::vector<std::int64_t>(b.shape.begin(), b.shape.end() - 2)), {}};
  ba.v.assign(static_cast<std::size_t>(ba.shape.numel()), 0);
  bb.v.assign(static_cast<std::size_t>(bb.shape.numel()), 0);
  const Shape batch = elementwise({ba, bb}, [](const std::vector<double>&) { return 0.0; }).shape;
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  Arr y{out, std::vector<double>(static_cast<std::size_t>(out.numel()))};
  for (std::int64_t bi = 0; bi < batch.numel(); ++bi) {
    const Coord cb = unravel(bi, batch);
    Coord ca = broadcast_coord(ba, cb), cbb = broadcast_coord(bb, cb);
    ca.resize(ca.size() + 2);
    cbb.resize(cbb.size() + 2);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          ca[ca.size() - 2] = i;
          ca[ca.size() - 1] = p;
          cbb[cbb.size() - 2] = p;
          cbb[cbb.size() - 1] = j;
          s += at(a, ca) * at(b, cbb);
        }
        y.v[static_cast<std::size_t>((bi * m + i) * n + j)] = s;
      }
  }
  if (va) y.shape = erased(y.shape, y.shape.ndim() - 2);
  if (vb) y.shape = erased(y.shape, y.shape.ndim() - 1);
  return y;
}

inline Arr reshaped(Arr x, const Shape& s) {
  require(s.numel() == x.shape.numel(), "reshape changes the element count");
  x.shape = s;
  return x;
}

/// y[c] = x[c'] with c'[perm[i]] = c[i].
inline Arr permuted(const Arr& x, const std::vector<int>& perm) {
  Shape s = x.shape;
  for (std::size_t i = 0; i < perm.size(); ++i) s[static_cast<int>(i)] = x.shape[perm[i]];
  Arr y{s, std::vector<double>(x.v.size())};
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    const Coord c = unravel(i, s);
    Coord cx(c.size());
    for (std::size_t k = 0; k < perm.size(); ++k) cx[static_cast<std::size_t>(perm[k])] = c[k];
    y.v[static_cast<std::size_t>(i)] = at(x, cx);
  }
  return y;
}
inline Arr transposed(const Arr& x, int d0, int d1) {
  std::vector<int> p(static_cast<std::size_t>(x.shape.ndim()));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[static_cast<std::size_t>(wrap(d0, x.shape.ndim()))], p[static_cast<std::size_t>(wrap(d1, x.shape.ndim()))]);
  return permuted(x, p);
}

/// `len` elements along `dim` from `start` every `step`.
inline Arr sliced(const Arr& x, std::int64_t dim, std::int64_t start, std::int64_t len, std::int64_t step = 1) {
  const int d = wrap(dim, x.shape.ndim());
  Shape s = x.shape;
  s[d] = len;
  Arr y{s, std::vector<double>(static_cast<std::size_t>(s.numel()))};
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    Coord c = unravel(i, s);
    c[static_cast<std::size_t>(d)] = start + c[static_cast<std::size_t>(d)] * step;
    y.v[static_cast<std::size_t>(i)] = at(x, c);
  }
  return y;
}

inline Arr concatenated(const std::vector<Arr>& xs, std::int64_t dim) {
  const int d = wrap(dim, xs[0].shape.ndim());
  Shape s = xs[0].shape;
  s[d] = 0;
  for (auto& x : xs) s[d] += x.shape[d];
  Arr y{s, std::vector<double>(static_cast<std::size_t>(s.numel()))};
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    Coord c = unravel(i, s);
    std::size_t k = 0;
    while (c[static_cast<std::size_t>(d)] >= xs[k].shape[d]) c[static_cast<std::size_t>(d)] -= xs[k++].shape[d];
    y.v[static_cast<std::size_t>(i)] = at(xs[k], c);
  }
  return y;
}
inline Arr stacked(std::vector<Arr> xs, std::int64_t dim) {
  const int d = wrap(dim, xs[0].shape.ndim() + 1);
  for (auto& x : xs) x.shape = inserted(x.shape, d, 1);
  return concatenated(xs, d);
}

/// Fixed integer index data for gather, index_select and scatter_add rows.
struct Idx {
  Shape shape;
  std::vector<std::int64_t> v;
  IndexTensor t() const { return IndexTensor::from(v, shape); }
  /// On `like`'s device (the CUDA parity run moves the rows' inputs).
  template <class T>
  IndexTensor t(const Tensor<T>& like) const {
    return t().to(like.device());
  }
};

inline Arr index_selected(const Arr& x, std::int64_t dim, const Idx& idx) {
  const int d = wrap(dim, x.shape.ndim());
  Shape s = x.shape;
  s[d] = static_cast<std::int64_t>(idx.v.size());
  Arr y{s, std::vector<double>(static_cast<std::size_t>(s.numel()))};
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    Coord c = unravel(i, s);
    c[static_cast<std::size_t>(d)] = idx.v[static_cast<std::size_t>(c[static_cast<std::size_t>(d)])];
    y.v[static_cast<std::size_t>(i)] = at(x, c);
  }
  return y;
}
inline Arr gathered(const Arr& x, std::int64_t dim, const Idx& idx) {
  const int d = wrap(dim, x.shape.ndim());
  Arr y{idx.shape, std::vector<double>(idx.v.size())};
  for (std::int64_t i = 0; i < idx.shape.numel(); ++i) {
    Coord c = unravel(i, idx.shape);
    c[static_cast<std::size_t>(d)] = idx.v[static_cast<std::size_t>(i)];
    y.v[static_cast<std::size_t>(i)] = at(x, c);
  }
  return y;
}
inline Arr scatter_added(Arr self, std::int64_t dim, const Idx& idx, const Arr& src) {
  const int d = wrap(dim, self.shape.ndim());
  for (std::int64_t i = 0; i < idx.shape.numel(); ++i) {
    Coord c = unravel(i, idx.shape);
    const double v = at(src, c);
    c[static_cast<std::size_t>(d)] = idx.v[static_cast<std::size_t>(i)];
    self.v[static_cast<std::size_t>(ravel(c, self.shape))] += v;
  }
  return self;
}
inline Arr one_hot_ref(const Arr& x, std::int64_t classes) {
  if (classes < 0) classes = static_cast<std::int64_t>(max_of(x.v)) + 1;
  Shape s = x.shape;
  s.push_back(classes);
  Arr y{s, std::vector<double>(static_cast<std::size_t>(s.numel()), 0.0)};
  for (std::size_t i = 0; i < x.v.size(); ++i) y.v[i * static_cast<std::size_t>(classes) + static_cast<std::size_t>(x.v[i])] = 1;
  return y;
}

// ---- input generators ----------------------------------------------------

/// n values for one input, drawn from the row's seeded engine.
using Gen = std::function<std::vector<double>(std::int64_t n, std::mt19937_64& rng)>;

inline double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

/// Uniform in [lo, hi).
inline Gen uniform(double lo, double hi) {
  return [=](std::int64_t n, std::mt19937_64& rng) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * unit(rng));
    return v;
  };
}
/// Uniform in [lo, hi) but at least `gap` away from every kink in `points`.
inline Gen avoiding(double lo, double hi, std::vector<double> points, double gap) {
  return [=](std::int64_t n, std::mt19937_64& rng) {
    std::vector<double> v;
    while (static_cast<std::int64_t>(v.size()) < n) {
      const double x = lo + (hi - lo) * unit(rng);
      bool ok = true;
      for (double p : points) ok = ok && std::fabs(x - p) >= gap;
      if (ok) v.push_back(x);
    }
    return v;
  };
}
/// Uniform, kept `gap` away from 0 (relu, abs, sign, divisors).
inline Gen away(double lo, double hi, double gap = 0.2) { return avoiding(lo, hi, {0.0}, gap); }
/// n distinct values in [lo, hi), at least (hi - lo) / (2n) apart, shuffled: no ties for max/min.
inline Gen distinct(double lo, double hi) {
  return [=](std::int64_t n, std::mt19937_64& rng) {
    std::vector<double> v;
    const double h = (hi - lo) / static_cast<double>(n);
    for (std::int64_t i = 0; i < n; ++i) v.push_back(lo + h * (static_cast<double>(i) + 0.25 + 0.5 * unit(rng)));
    std::shuffle(v.begin(), v.end(), rng);
    return v;
  };
}
/// Distinct magnitudes in [lo, hi) with random signs (norm p=inf).
inline Gen distinct_abs(double lo, double hi) {
  return [=](std::int64_t n, std::mt19937_64& rng) {
    auto v = distinct(lo, hi)(n, rng);
    for (auto& e : v) e = (rng() & 1) ? -e : e;
    return v;
  };
}
/// Integers in [lo, hi] (ties on purpose for comparisons; class indices).
inline Gen ints(int lo, int hi) {
  return [=](std::int64_t n, std::mt19937_64& rng) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(lo + std::floor(unit(rng) * (hi - lo + 1)));
    return v;
  };
}
/// offset + k step for integers k, within [lo, hi]: two inputs on lattices
/// with different offsets never tie (maximum, minimum).
inline Gen lattice(double lo, double hi, double step, double offset) {
  return [=](std::int64_t n, std::mt19937_64& rng) {
    std::vector<double> v;
    const auto kmax = static_cast<std::int64_t>(std::floor((hi - lo) / step));
    for (std::int64_t i = 0; i < n; ++i)
      v.push_back(lo + offset + step * static_cast<double>(static_cast<std::int64_t>(unit(rng) * static_cast<double>(kmax))));
    return v;
  };
}

/// One generator for every input, or one per input (the last repeats).
struct Gens {
  std::vector<Gen> g;
  Gens(Gen one) : g{std::move(one)} {}  // NOLINT: implicit on purpose
  Gens(std::initializer_list<Gen> l) : g(l) {}
  const Gen& operator[](std::size_t i) const { return g[std::min(i, g.size() - 1)]; }
};

// ---- input layouts ---------------------------------------------------------

/// How an input is laid out in memory; the op sees the same logical values.
enum class Layout {
  contiguous,
  transposed,  // a transpose(-2, -1) view of a contiguous tensor
  strided,     // every second element (offset 1) along the last dim
  expanded,    // dim 0 broadcast from size 1 (stride 0)
};
inline constexpr Layout kC = Layout::contiguous, kT = Layout::transposed, kS = Layout::strided, kE = Layout::expanded;

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::strided: return "strided";
    case Layout::expanded: return "expanded";
  }
  return "?";
}

/// Shape of the contiguous storage behind an input of logical shape `s`.
inline Shape storage_shape(const Shape& s, Layout l) {
  Shape b = s;
  const int n = s.ndim();
  switch (l) {
    case Layout::contiguous: break;
    case Layout::transposed: std::swap(b[n - 2], b[n - 1]); break;
    case Layout::strided: b[n - 1] *= 2; break;
    case Layout::expanded: b[0] = 1; break;
  }
  return b;
}

/// The logical values of the view, computed with loops (not with frost views).
inline Arr logical_values(const Arr& base, Layout l, const Shape& s) {
  Arr y{s, std::vector<double>(static_cast<std::size_t>(s.numel()))};
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    Coord c = unravel(i, s);
    const std::size_t n = c.size();
    switch (l) {
      case Layout::contiguous: break;
      case Layout::transposed: std::swap(c[n - 2], c[n - 1]); break;
      case Layout::strided: c[n - 1] = 2 * c[n - 1] + 1; break;
      case Layout::expanded: c[0] = 0; break;
    }
    y.v[static_cast<std::size_t>(i)] = at(base, c);
  }
  return y;
}

template <class T>
Tensor<T> lay_out(const Tensor<T>& base, Layout l, const Shape& s) {
  switch (l) {
    case Layout::contiguous: return base;
    case Layout::transposed: return base.transpose(-2, -1);
    case Layout::strided: return base.slice(-1, 1, base.size(-1), 2);
    case Layout::expanded: return base.expand(s);
  }
  return base;
}

// ---- rows ------------------------------------------------------------------

template <class T>
using OpFn = std::function<Tensor<T>(const std::vector<Tensor<T>>&)>;
using RefFn = std::function<Arr(const std::vector<Arr>&)>;

/// One op variant. Build with row(...) and the chained setters.
struct Row {
  std::string name;           // an entry of frost::public_op_names
  std::vector<Shape> shapes;  // logical input shapes
  Gens gens{uniform(-2, 2)};
  OpFn<double> fd;
  OpFn<float> ff;
  RefFn ref;
  bool grad = true;       // the op records a gradient
  bool gradcheck = true;  // and its inputs are where finite differences are fair
  bool second = true;     // for the gradient too (not where it jumps)
  std::vector<Layout> layouts;
  std::string note;
  double atol = 1e-12, rtol = 1e-10;   // double forward
  double fatol = 1e-5, frtol = 1e-4;   // float forward
  double gatol = 1e-5, grtol = 1e-4;   // gradcheck

  Row& no_grad() {
    grad = false;
    return *this;
  }
  /// The inputs sit on the op's discontinuities (round's halves): the values
  /// there are checked, the gradient by another row.
  Row& kinks() {
    gradcheck = false;
    return *this;
  }
  /// The gradient jumps at the inputs (maximum's ties, split in halves):
  /// the first derivative is checked there, the second by another row.
  Row& first_order_only() {
    second = false;
    return *this;
  }
  bool gradchecked() const { return grad && gradcheck; }
  /// Input i laid out as l[i] (missing entries: contiguous).
  Row& layout(std::vector<Layout> l) {
    layouts = std::move(l);
    return *this;
  }
  Row& float_tol(double a, double r) {
    fatol = a;
    frtol = r;
    return *this;
  }
  Row& grad_tol(double a, double r) {
    gatol = a;
    grtol = r;
    return *this;
  }
  Row& with_note(std::string n) {
    note = std::move(n);
    return *this;
  }
  Layout layout_of(std::size_t i) const { return i < layouts.size() ? layouts[i] : Layout::contiguous; }
  /// "add [2, 3] [3] (input 0 transposed)".
  std::string describe() const {
    std::string s = name;
    for (auto& sh : shapes) s.append(" ").append(sh.str());
    for (std::size_t i = 0; i < shapes.size(); ++i)
      if (layout_of(i) != Layout::contiguous)
        s.append(" (input ").append(std::to_string(i)).append(" ").append(layout_name(layout_of(i))).append(")");
    if (!note.empty()) s.append(" -- ").append(note);
    return s;
  }
};

/// A row; `f` is a generic lambda over `const std::vector<Tensor<T>>&`, run
/// for T = double and T = float.
/// A comparison's bool result as 0 / 1 in the row's dtype (the table's values
/// are of one dtype; the cast is part of what the plan runs).
template <class T, class Y>
Tensor<T> in_row_dtype(const Y& y) {
  if constexpr (std::is_same_v<Y, Tensor<bool>>) return y.template to<T>();
  else return y;
}
template <class F>
Row row(std::string name, std::vector<Shape> shapes, Gens gens, F f, RefFn ref) {
  Row r;
  r.name = std::move(name);
  r.shapes = std::move(shapes);
  r.gens = std::move(gens);
  r.fd = [f](const std::vector<TD>& x) { return in_row_dtype<double>(f(x)); };
  r.ff = [f](const std::vector<TF>& x) { return in_row_dtype<float>(f(x)); };
  r.ref = std::move(ref);
  return r;
}

/// The frost side of a row: a generic lambda over the inputs `x`.
#define FN(...) [](const auto& x) { return __VA_ARGS__; }
/// The reference side: plain loops over the inputs' values `x` (a std::vector<Arr>).
#define REF(...) [](const std::vector<::frost::test::optable::Arr>& x) -> ::frost::test::optable::Arr { return __VA_ARGS__; }

/// Elementwise references written as an expression of the values `a` (and `b`).
#define EW1(...) ::frost::test::optable::ew1([](double a) { return __VA_ARGS__; })
#define EW2(...) ::frost::test::optable::ew2([](double a, double b) { return __VA_ARGS__; })

// Helpers for the frost lambdas, generic in the element type of `x`.
/// c as the inputs' element type.
template <class T>
T sc(const std::vector<Tensor<T>>&, double c) {
  return static_cast<T>(c);
}
/// An index result as the inputs' element type (argmax, one_hot).
template <class T>
Tensor<T> as_values(const std::vector<Tensor<T>>&, const IndexTensor& i) {
  return i.template to<T>();
}
template <class T>
IndexTensor as_index(const Tensor<T>& t) {
  return t.template to<std::int64_t>();
}

/// Elementwise references of one, two and three inputs, broadcasting.
template <class F>
RefFn ew1(F f) {
  return [f](const std::vector<Arr>& x) { return elementwise(x, [&](const std::vector<double>& a) { return f(a[0]); }); };
}
template <class F>
RefFn ew2(F f) {
  return [f](const std::vector<Arr>& x) {
    return elementwise(x, [&](const std::vector<double>& a) { return f(a[0], a[1]); });
  };
}
template <class F>
RefFn ew3(F f) {
  return [f](const std::vector<Arr>& x) {
    return elementwise(x, [&](const std::vector<double>& a) { return f(a[0], a[1], a[2]); });
  };
}

/// Reference of a reduction over `dims` (all when empty) of input 0.
inline RefFn reduced(std::vector<std::int64_t> dims, bool keepdim, std::function<double(const std::vector<double>&)> f) {
  return [=](const std::vector<Arr>& x) { return reduce(x[0], dims, keepdim, f); };
}
/// Reference of a per-line op along `dim` of input 0 (softmax).
inline RefFn lines(std::int64_t dim, std::function<std::vector<double>(const std::vector<double>&)> f) {
  return [=](const std::vector<Arr>& x) { return along(x[0], dim, f); };
}

/// Ops that record no gradient (comparisons, integer results). Every other
/// public op must have a gradcheck row.
inline constexpr std::array<std::string_view, 9> kNoGradientOps = {"eq", "ne", "lt", "le", "gt",
                                                                    "ge", "argmax", "argmin", "one_hot"};

// The tables, one per translation unit.
std::vector<Row> elementwise_rows();
std::vector<Row> reduce_linalg_rows();
std::vector<Row> views_index_rows();
std::vector<Row> conv_pool_rows();  // test_conv_pool.cpp

// ---- the generic checks ------------------------------------------------------

/// A row's inputs: the contiguous storages (what gradcheck perturbs) and the
/// logical values the reference sees.
struct Prepared {
  std::vector<Arr> base;
  std::vector<Arr> logical;
};

inline std::uint64_t seed_of(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: the same inputs on every platform
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

inline Prepared prepare(const Row& r) {
  std::mt19937_64 rng(seed_of(r.describe()));
  Prepared p;
  for (std::size_t i = 0; i < r.shapes.size(); ++i) {
    const Shape bs = storage_shape(r.shapes[i], r.layout_of(i));
    auto v = r.gens[i](bs.numel(), rng);
    require(static_cast<std::int64_t>(v.size()) == bs.numel(), "generator returned the wrong count");
    for (auto& e : v) e = static_cast<double>(static_cast<float>(e));  // exact in float too
    p.base.push_back(Arr{bs, v});
    p.logical.push_back(logical_values(p.base.back(), r.layout_of(i), r.shapes[i]));
  }
  return p;
}

template <class T>
std::vector<Tensor<T>> bases(const Prepared& p) {
  std::vector<Tensor<T>> out;
  for (auto& b : p.base) out.push_back(Tensor<T>::from(std::vector<T>(b.v.begin(), b.v.end()), b.shape));
  return out;
}
template <class T>
std::vector<Tensor<T>> views(const Row& r, const std::vector<Tensor<T>>& b) {
  std::vector<Tensor<T>> out;
  for (std::size_t i = 0; i < b.size(); ++i) out.push_back(lay_out(b[i], r.layout_of(i), r.shapes[i]));
  return out;
}

/// What differs between `y` and the reference, or "" when they match.
template <class T>
std::string mismatch(const Tensor<T>& y, const Arr& want, double atol, double rtol, const std::string& what) {
  if (!(y.shape() == want.shape)) return what + ": shape " + y.shape().str() + ", reference " + want.shape.str() + "\n";
  const auto got = y.to_vector();
  const std::vector<double> g(got.begin(), got.end());
  const double c = closeness(g, want.v, atol, rtol);
  if (c <= 1.0) return "";
  std::string msg = what + ": values differ from the reference (closeness " + std::to_string(c) + ")\n  got: ";
  for (std::size_t i = 0; i < g.size() && i < 24; ++i) msg.append(" ").append(std::to_string(g[i]));
  msg += "\n  want:";
  for (std::size_t i = 0; i < g.size() && i < 24; ++i) msg.append(" ").append(std::to_string(want.v[i]));
  return msg + "\n";
}

/// (1) Forward in double against the reference, with and without autograd
/// recording (some ops take another path when recording); the result is on
/// the tape exactly when the row is differentiable. Returns the problems found.
inline std::string forward_double_problems(const Row& r) {
  const Prepared p = prepare(r);
  const Arr want = r.ref(p.logical);
  require(static_cast<std::int64_t>(want.v.size()) == want.shape.numel(), "reference shape and size disagree");
  std::string out;
  auto xs = views(r, bases<double>(p));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::string in = "input " + std::to_string(i);
    if (xs[i].is_contiguous() != (r.layout_of(i) == Layout::contiguous)) out += in + ": layout not as the row says\n";
    out += mismatch(xs[i], p.logical[i], 0, 0, in);
  }
  out += mismatch(r.fd(xs), want, r.atol, r.rtol, "double forward");
  auto gb = bases<double>(p);
  for (auto& b : gb) b.requires_grad_();
  const TD yg = r.fd(views(r, gb));
  out += mismatch(yg, want, r.atol, r.rtol, "double forward under autograd");
  if (yg.requires_grad() != r.grad)
    out += r.grad ? "the result is not recorded for autograd\n" : "the result of a no-gradient op is recorded\n";
  return out;
}

/// (1') The same frost lambda on float inputs (the same values: they are exact in float).
inline std::string forward_float_problems(const Row& r) {
  const Prepared p = prepare(r);
  return mismatch(r.ff(views(r, bases<float>(p))), r.ref(p.logical), r.fatol, r.frtol, "float forward");
}

/// (2) Central-difference gradcheck in double, through the row's layouts.
inline bool gradients_match(const Row& r) {
  const Prepared p = prepare(r);
  auto f = [&](const std::vector<TD>& b) { return r.fd(views(r, b)); };
  return gradcheck(f, bases<double>(p), 1e-6, r.gatol, r.grtol);
}

/// (3) Second derivatives: gradcheck of x -> d/dx sum(w f(x)), the gradient
/// taken with create_graph so that backward rules are differentiated too.
inline bool second_derivatives_match(const Row& r) {
  const Prepared p = prepare(r);
  const auto b0 = bases<double>(p);
  Generator gen(4321);
  const TD w = TD::rand(r.fd(views(r, b0)).shape(), &gen) + 0.5;
  auto first = [&](const std::vector<TD>& b) {
    AutoGradMode on(true);  // the finite differences call this under NoGradGuard
    std::vector<TD> xs;
    for (auto& t : b) xs.push_back(t.requires_grad() ? t : t.detach().requires_grad_());
    std::vector<TD> flat;
    TD keep = TD::zeros({});  // keeps the result on the tape where the gradient is constant
    for (auto& x : xs) keep = keep + x.sum() * 0.0;
    const TD y = r.fd(views(r, xs));
    if (y.requires_grad()) {
      const auto gs = autograd::grad({(y * w).sum()}, xs, {}, true, true, /*allow_unused=*/true);
      for (std::size_t i = 0; i < xs.size(); ++i)
        flat.push_back(gs[i].defined() ? gs[i].reshape({-1}) : TD::zeros({xs[i].numel()}));
    }
    return frost::cat(flat) + keep;
  };
  return gradcheck(first, b0, 1e-6, r.gatol, r.grtol);
}

/// (4) Frozen equals eager: the row traced (its layouts are made inside the
/// trace), frozen with every pass, and run on the traced values and, when
/// the plan has no guards, on the same values in reverse order (the row's
/// domain is kept); within 1e-5 of eager, relative to eager's magnitude.
/// The plan is also saved and loaded back: the loaded plan (checked by the
/// loader's validator) must give exactly the plan's values.
inline std::string frozen_problems(const Row& r) {
  const Prepared p = prepare(r);
  auto f = [&](const std::vector<TF>& xs) { return r.ff(views(r, xs)); };
  const auto b = bases<float>(p);
  const auto plan = jit::freeze<float>(jit::trace_list<float>(f, b));
  std::string out;
  auto compare = [&](const std::vector<TF>& in, const char* what) {
    TF eager;
    {
      InferenceMode im;
      eager = f(in);
    }
    const TF frozen = plan.run_all(in)[0];
    if (frozen.shape() != eager.shape()) {
      out += std::string(what) + ": frozen shape " + frozen.shape().str() + " vs eager " + eager.shape().str() + "; ";
      return;
    }
    if (eager.numel() == 0) return;
    const auto e = eager.to_vector(), z = frozen.to_vector();
    double scale = 1, worst = 0;
    for (float v : e) scale = std::max(scale, std::abs(double(v)));
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (std::isnan(e[i]) && std::isnan(z[i])) continue;
      worst = std::max(worst, std::abs(double(e[i]) - double(z[i])));
      if (std::isnan(z[i]) != std::isnan(e[i])) worst = INFINITY;
    }
    if (!(worst <= 1e-5 * scale)) out += std::string(what) + ": max |frozen - eager| " + std::to_string(worst) + "; ";
  };
  compare(b, "traced inputs");
  {
    const auto path = test::temp_path("op_row.frost");
    plan.save(path);
    struct Remove {
      const std::string& path;
      ~Remove() { std::remove(path.c_str()); }
    } remove{path};
    const auto loaded = jit::Plan<float>::load(path);
    const auto a = plan.run_all(b)[0].to_vector(), z = loaded.run_all(b)[0].to_vector();
    bool same = a.size() == z.size();
    for (std::size_t i = 0; same && i < a.size(); ++i) same = a[i] == z[i] || (std::isnan(a[i]) && std::isnan(z[i]));
    if (!same) out += "the loaded plan differs from the plan; ";
  }
  if (plan.graph().guards.empty()) {
    std::vector<TF> rev;
    for (const auto& x : b) {
      auto v = x.to_vector();
      std::reverse(v.begin(), v.end());
      rev.push_back(TF::from(v, x.shape()));
    }
    compare(rev, "reordered inputs");
  }
  return out;
}

/// Runs `check` on every row, naming the row and reporting any exception.
template <class Check>
void for_rows(const std::vector<Row>& rows, Check&& check) {
  REQUIRE(!rows.empty());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("row #", i, ": ", rows[i].describe());
    try {
      check(rows[i]);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: ", std::string(e.what()));
    }
  }
}

inline void check_forward_double(const std::vector<Row>& rows) {
  for_rows(rows, [](const Row& r) {
    const std::string problems = forward_double_problems(r);
    CHECK_MESSAGE(problems.empty(), problems);
  });
}
inline void check_forward_float(const std::vector<Row>& rows) {
  for_rows(rows, [](const Row& r) {
    const std::string problems = forward_float_problems(r);
    CHECK_MESSAGE(problems.empty(), problems);
  });
}
inline void check_gradients(const std::vector<Row>& rows) {
  for_rows(rows, [](const Row& r) {
    if (r.gradchecked()) CHECK(gradients_match(r));
  });
}

inline void check_frozen(const std::vector<Row>& rows) {
  for_rows(rows, [](const Row& r) {
    const std::string problems = frozen_problems(r);
    CHECK_MESSAGE(problems.empty(), problems);
  });
}

inline void check_second_derivatives(const std::vector<Row>& rows) {
  for_rows(rows, [](const Row& r) {
    if (r.gradchecked() && r.second) CHECK(second_derivatives_match(r));
  });
}

}  // namespace frost::test::optable
