// frost::amp::GradScaler: PyTorch's torch.amp.GradScaler, dynamic loss
// scaling for training in low precision. The loss is multiplied by a scale
// before backward so small float16 gradients do not flush to zero; unscale_
// divides the gradients back and looks for inf/NaN; step skips the
// optimizer's update when any turned up; update halves the scale after an
// overflow and doubles it after growth_interval clean steps.
//
//   amp::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);                       // optional: before clipping
//   nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//   scaler.step(opt);                           // skipped on inf/NaN gradients
//   scaler.update();
//
// The arithmetic is PyTorch's, step by step (tests/test_grad_scaler.cpp runs
// a reference of torch.amp.GradScaler with injected inf and NaN): the scale
// is a float32 value; the inverse scale is 1/scale in double rounded to
// float32; each gradient is multiplied by it in its own dtype; the scale's
// growth and backoff are computed in double and rounded to float32, and a
// growth that would overflow float32 is not taken.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "../tensor.hpp"

namespace frost::amp {

/// GradScaler's constructor arguments, PyTorch's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;
};

/// GradScaler::state_dict(): PyTorch's keys (scale, growth_factor,
/// backoff_factor, growth_interval, _growth_tracker).
struct GradScalerStateDict {
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  std::int64_t growth_tracker = 0;
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& o = {})
      : enabled_(o.enabled),
        scale_(static_cast<float>(o.init_scale)),
        growth_factor_(o.growth_factor),
        backoff_factor_(o.backoff_factor),
        growth_interval_(o.growth_interval) {
    check_options(o.init_scale, o.growth_factor, o.backoff_factor, o.growth_interval);
  }

  bool is_enabled() const { return enabled_; }
  /// The current scale (1 when disabled, as PyTorch's get_scale).
  double get_scale() const { return enabled_ ? static_cast<double>(scale_) : 1.0; }
  std::int64_t get_growth_tracker() const { return growth_tracker_; }
  double get_growth_factor() const { return growth_factor_; }
  double get_backoff_factor() const { return backoff_factor_; }
  std::int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_factor(double f) {
    check_options(scale_, f, backoff_factor_, growth_interval_);
    growth_factor_ = f;
  }
  void set_backoff_factor(double f) {
    check_options(scale_, growth_factor_, f, growth_interval_);
    backoff_factor_ = f;
  }
  void set_growth_interval(std::int64_t n) {
    check_options(scale_, growth_factor_, backoff_factor_, n);
    growth_interval_ = n;
  }

  /// outputs * scale (differentiable; the outputs themselves when disabled).
  template <FloatScalar T>
  Tensor<T> scale(const Tensor<T>& outputs) const {
    frost::detail::check_defined(outputs, "amp::GradScaler::scale");
    return enabled_ ? outputs * T(scale_) : outputs;
  }
  template <FloatScalar T>
  std::vector<Tensor<T>> scale(const std::vector<Tensor<T>>& outputs) const {
    std::vector<Tensor<T>> out;
    out.reserve(outputs.size());
    for (const auto& y : outputs) out.push_back(scale(y));
    return out;
  }

  /// Divides the gradients of opt's parameters by the scale, in place, and
  /// records whether any was inf or NaN. Once per optimizer between updates,
  /// and before step.
  template <class Opt>
  void unscale_(Opt& opt) {
    if (!enabled_) return;
    auto& st = state_of(opt);
    FROST_CHECK(st.stage != Stage::unscaled,
                "frost::amp::GradScaler::unscale_: already called on this optimizer (", opt.name(),
                ") since the last update()");
    FROST_CHECK(st.stage != Stage::stepped, "frost::amp::GradScaler::unscale_: called after step() on this optimizer (",
                opt.name(), "); unscale_ comes before step, once per update()");
    using T = typename Opt::value_type;
    // PyTorch's inverse: 1/scale in double, rounded to float32, then used in the gradient's dtype.
    const T inv = static_cast<T>(static_cast<float>(1.0 / static_cast<double>(scale_)));
    NoGradGuard ng;
    // g * 0 is 0 where g is finite and NaN at an inf or NaN, so one sum per
    // device tells whether any gradient was non-finite: no value comes back
    // to the host until step() asks.
    std::map<std::pair<int, int>, Tensor<T>> bad;
    bool any = false;
    for (auto& group : opt.param_groups())
      for (auto& p : group.params) {
        Tensor<T> g = p.grad();
        if (!g.defined()) continue;
        any = true;
        const Device d = g.device();
        const auto key = std::make_pair(static_cast<int>(d.kind), d.index);
        auto probe = (g * T(0)).sum();
        auto it = bad.find(key);
        if (it == bad.end()) bad.emplace(key, probe);
        else it->second = it->second + probe;
        g.mul_(inv);
      }
    FROST_CHECK(any, "frost::amp::GradScaler::unscale_: no parameter of the optimizer (", opt.name(),
                ") has a gradient; call scale(loss).backward() first");
    st.found_inf = false;
    for (auto& [key, v] : bad) st.found_inf = st.found_inf || std::isnan(static_cast<double>(v.item()));
    st.stage = Stage::unscaled;
  }

  /// opt.step() unless the gradients held inf or NaN (unscaling them first
  /// if unscale_ was not called). Returns whether the optimizer stepped.
  template <class Opt>
  bool step(Opt& opt) {
    if (!enabled_) {
      opt.step();
      return true;
    }
    auto& st = state_of(opt);
    FROST_CHECK(st.stage != Stage::stepped, "frost::amp::GradScaler::step: already called on this optimizer (",
                opt.name(), ") since the last update()");
    if (st.stage == Stage::ready) unscale_(opt);
    st.stage = Stage::stepped;
    if (st.found_inf) return false;
    opt.step();
    return true;
  }

  /// Ends the iteration: backs the scale off if any optimizer saw inf/NaN
  /// since the last update, grows it after growth_interval clean updates in
  /// a row. With new_scale, sets the scale to it instead.
  void update(std::optional<double> new_scale = std::nullopt) {
    if (!enabled_) return;
    if (new_scale) {
      FROST_CHECK(*new_scale > 0 && std::isfinite(*new_scale),
                  "frost::amp::GradScaler::update: new_scale must be positive and finite, got ", *new_scale);
      scale_ = static_cast<float>(*new_scale);
    } else {
      bool checked = false, found_inf = false;
      for (const auto& [opt, st] : states_)
        if (st.stage != Stage::ready) {
          checked = true;
          found_inf = found_inf || st.found_inf;
        }
      FROST_CHECK(checked, "frost::amp::GradScaler::update: no inf checks were recorded since the last update() "
                           "(call unscale_ or step on an optimizer first)");
      if (found_inf) {
        scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
        growth_tracker_ = 0;
      } else if (++growth_tracker_ == growth_interval_) {
        const float grown = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
        if (std::isfinite(grown)) scale_ = grown;
        growth_tracker_ = 0;
      }
    }
    states_.clear();
  }

  /// PyTorch's state_dict: nullopt for a disabled scaler (PyTorch's is empty).
  std::optional<GradScalerStateDict> state_dict() const {
    if (!enabled_) return std::nullopt;
    return GradScalerStateDict{static_cast<double>(scale_), growth_factor_, backoff_factor_, growth_interval_,
                               growth_tracker_};
  }
  void load_state_dict(const std::optional<GradScalerStateDict>& sd) {
    FROST_CHECK(sd.has_value(), "frost::amp::GradScaler::load_state_dict: the state dict is empty, as a disabled "
                                "scaler's is; expected one saved by an enabled GradScaler");
    check_options(sd->scale, sd->growth_factor, sd->backoff_factor, sd->growth_interval);
    FROST_CHECK(sd->growth_tracker >= 0 && sd->growth_tracker < sd->growth_interval,
                "frost::amp::GradScaler::load_state_dict: _growth_tracker ", sd->growth_tracker,
                " is outside [0, growth_interval ", sd->growth_interval, ")");
    scale_ = static_cast<float>(sd->scale);
    growth_factor_ = sd->growth_factor;
    backoff_factor_ = sd->backoff_factor;
    growth_interval_ = sd->growth_interval;
    growth_tracker_ = sd->growth_tracker;
  }

 private:
  enum class Stage { ready, unscaled, stepped };
  struct OptState {
    Stage stage = Stage::ready;
    bool found_inf = false;
  };

  static void check_options(double init_scale, double growth, double backoff, std::int64_t interval) {
    FROST_CHECK(init_scale > 0 && std::isfinite(init_scale) && init_scale <= std::numeric_limits<float>::max(),
                "frost::amp::GradScaler: the scale must be positive and finite in float32, got ", init_scale);
    FROST_CHECK(growth > 1.0, "frost::amp::GradScaler: growth_factor must be > 1, got ", growth);
    FROST_CHECK(backoff < 1.0 && backoff > 0, "frost::amp::GradScaler: backoff_factor must be in (0, 1), got ",
                backoff);
    FROST_CHECK(interval > 0, "frost::amp::GradScaler: growth_interval must be a positive integer, got ", interval);
  }
  template <class Opt>
  OptState& state_of(const Opt& opt) {
    return states_[static_cast<const void*>(&opt)];
  }

  bool enabled_;
  float scale_;
  double growth_factor_, backoff_factor_;
  std::int64_t growth_interval_;
  std::int64_t growth_tracker_ = 0;
  std::unordered_map<const void*, OptState> states_;
};

}  // namespace frost::amp
