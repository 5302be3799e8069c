// Thread-local grad mode: NoGradGuard records nothing; InferenceMode also
// skips version counting. Each thread has its own mode, as in PyTorch.
#pragma once

namespace frost {

namespace detail {
inline thread_local bool grad_enabled = true;
inline thread_local bool inference_mode = false;
}  // namespace detail

/// Whether ops on this thread record the tape.
inline bool is_grad_enabled() { return detail::grad_enabled; }
/// Whether this thread is in InferenceMode (no tape, no version counters).
inline bool is_inference_mode() { return detail::inference_mode; }

/// Sets grad mode for a scope (what NoGradGuard and create_graph use).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(detail::grad_enabled) { detail::grad_enabled = enabled; }
  ~AutoGradMode() { detail::grad_enabled = prev_; }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

/// Disables the tape for its scope: results do not require grad.
/// \code
/// { frost::NoGradGuard g; w -= lr * w.grad(); }
/// \endcode
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

/// Like NoGradGuard, and in-place edits skip the version counters too:
/// the fastest eager mode for serving.
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true)
      : prev_grad_(detail::grad_enabled), prev_inf_(detail::inference_mode) {
    if (enabled) {
      detail::grad_enabled = false;
      detail::inference_mode = true;
    }
  }
  ~InferenceMode() {
    detail::grad_enabled = prev_grad_;
    detail::inference_mode = prev_inf_;
  }
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool prev_grad_, prev_inf_;
};

}  // namespace frost
