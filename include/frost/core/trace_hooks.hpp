// The few places where eager code tells an active jit tracer what it does
// that the backend calls do not show: a storage was allocated, the host read
// tensor values (a C++ `if` on a tensor, item(), to_vector()), or an op wants
// to appear as one node (linear, batch_norm, dropout) instead of as the
// kernels it runs. Each hook is one thread-local pointer test when no trace
// is running. The tracer itself lives in jit/; core only knows this interface.
#pragma once
#include <cstdint>
#include <initializer_list>

#include <type_traits>

#include "dtype.hpp"
#include "functors.hpp"
#include "macros.hpp"
#include "shape.hpp"

namespace frost {

struct StorageImpl;

namespace detail {

/// Where the caller wrote something: std::source_location's job, built on
/// the builtins GCC and clang share (clang 14 cannot compile libstdc++'s
/// std::source_location). As a defaulted argument it names the call site.
struct SourceLocation {
  const char* file = "";
  unsigned line = 0;
  static constexpr SourceLocation current(const char* f = __builtin_FILE(), unsigned l = __builtin_LINE()) {
    return {f, l};
  }
  const char* file_name() const { return file; }
  unsigned line_number() const { return line; }
};

/// A strided window in the tracer's terms: untyped pointer + geometry.
struct RawView {
  const void* data = nullptr;
  Shape shape, strides;
  DType dtype = DType::float32;
};

enum class HostRead : std::uint8_t { condition, item, to_vector };

/// One op recorded as a single node; inputs/outputs in the op's own order.
struct OpRecord {
  const char* kind = "";
  std::initializer_list<RawView> inputs;  // undefined optional inputs have data == nullptr
  RawView output;
  double eps = 0, p = 0;
};

struct TraceHooks {
  virtual ~TraceHooks() = default;
  virtual void on_alloc(StorageImpl* s) = 0;
  /// The host is about to read `v`; `loc` is the caller's location when known.
  virtual void on_host_read(const RawView& v, HostRead kind, const frost::detail::SourceLocation* loc) = 0;
  /// The result of a comparison written at `loc` (lets a later `if` name its line).
  virtual void note_location(const void* data, const frost::detail::SourceLocation& loc) = 0;
  /// Between begin_op and end_op the kernels run but are not recorded; end_op records `r`.
  virtual void begin_op() = 0;
  virtual void end_op(const OpRecord& r) = 0;
  virtual void abort_op() = 0;
};

inline thread_local TraceHooks* trace_hooks = nullptr;

inline bool tracing() { return FROST_UNLIKELY(trace_hooks != nullptr); }

/// Records an op as one node while a trace runs: construct before the op's
/// kernels, call done() with the result. Unwinding without done() drops the node.
class TraceOpScope {
 public:
  TraceOpScope() : h_(trace_hooks) {
    if (h_) h_->begin_op();
  }
  ~TraceOpScope() {
    if (h_ && !done_) h_->abort_op();
  }
  TraceOpScope(const TraceOpScope&) = delete;
  TraceOpScope& operator=(const TraceOpScope&) = delete;
  bool active() const { return h_ != nullptr; }
  void done(const OpRecord& r) {
    if (!h_) return;
    done_ = true;
    h_->end_op(r);
  }

 private:
  TraceHooks* h_;
  bool done_ = false;
};

/// A scalar argument that remembers where the caller wrote it: `x.mean() >
/// threshold` converts `threshold` at the user's line, so a trace can name
/// that line when the result decides an `if`.
template <class T>
struct Located {
  T value;
  frost::detail::SourceLocation loc;
  template <class U>
    requires std::is_arithmetic_v<U>
  Located(U v, frost::detail::SourceLocation l = frost::detail::SourceLocation::current()) : value(static_cast<T>(v)), loc(l) {}
};

}  // namespace detail
}  // namespace frost
