// Learning-rate schedulers: StepLR, MultiStepLR, ExponentialLR, LinearLR,
// ConstantLR, CosineAnnealingLR, OneCycleLR, and ReduceLROnPlateau (which
// steps on a metric). Each computes the new rates the way PyTorch does (the
// same recursive or closed forms, so the sequences agree to rounding) and
// writes them into the optimizer's param groups. They see the optimizer
// through optim::Optimizer, so one scheduler type serves every optimizer and
// element type.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <utility>
#include <vector>

#include "optimizer.hpp"

namespace frost::optim {

/// What a scheduler carries between steps (PyTorch's scheduler state_dict
/// minus the constructor arguments): enough to resume a schedule.
struct LRSchedulerState {
  std::int64_t last_epoch = -1;
  std::vector<double> base_lrs, last_lr;
};

/// Base of the schedulers: call step() once per epoch (or per batch for
/// OneCycleLR) after optimizer.step(). Construction already applies the
/// rate for step 0, as in PyTorch.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one step and writes the new learning rates into the optimizer.
  void step() {
    ++last_epoch_;
    last_lr_ = get_lr();
    for (std::size_t i = 0; i < last_lr_.size(); ++i) optimizer_.set_lr(i, last_lr_[i]);
  }
  /// The rates the last step() set, one per param group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// Steps taken since construction (0 right after it).
  std::int64_t last_epoch() const { return last_epoch_; }
  /// The rates the optimizer's groups had when the scheduler was made.
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  /// The step count and rates, to resume later with load_state_dict.
  LRSchedulerState state_dict() const { return {last_epoch_, base_lrs_, last_lr_}; }
  /// Resumes from `s` (taken from a scheduler built with the same arguments
  /// over an optimizer with as many groups). As in PyTorch, the optimizer's
  /// rates come back with the optimizer's own load_state_dict, not this.
  void load_state_dict(const LRSchedulerState& s) {
    FROST_CHECK(s.base_lrs.size() == base_lrs_.size() && s.last_lr.size() == base_lrs_.size() && s.last_epoch >= 0,
                "frost::optim::LRScheduler::load_state_dict: the state has ", s.base_lrs.size(), " base rates, ",
                s.last_lr.size(), " last rates and last_epoch ", s.last_epoch, "; this scheduler's optimizer has ",
                base_lrs_.size(), " param groups (expected as many of each and last_epoch >= 0)");
    last_epoch_ = s.last_epoch;
    base_lrs_ = s.base_lrs;
    last_lr_ = s.last_lr;
  }

 protected:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
    for (std::size_t i = 0; i < optimizer.num_param_groups(); ++i) base_lrs_.push_back(optimizer.lr(i));
  }
  /// The rates for step last_epoch_ (called by step()).
  virtual std::vector<double> get_lr() = 0;
  /// Derived constructors end with this: PyTorch's initial step to epoch 0.
  void initial_step() { step(); }
  std::vector<double> group_lrs() const {
    std::vector<double> v;
    for (std::size_t i = 0; i < optimizer_.num_param_groups(); ++i) v.push_back(optimizer_.lr(i));
    return v;
  }

  Optimizer& optimizer_;
  std::vector<double> base_lrs_, last_lr_;
  std::int64_t last_epoch_ = -1;
};

/// Multiplies each group's rate by gamma every step_size steps.
/// \code
/// optim::StepLR sched(opt, 30, 0.1);   // lr 0.1 for epochs 0-29, 0.01 for 30-59, ...
/// \endcode
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1)
      : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
    FROST_CHECK(step_size > 0, "frost::optim::StepLR: step_size must be positive, got ", step_size);
    initial_step();
  }

 protected:
  std::vector<double> get_lr() override {
    auto lrs = group_lrs();
    if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
    for (auto& lr : lrs) lr *= gamma_;
    return lrs;
  }

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// Cosine annealing from each group's rate down to eta_min over T_max steps
/// (and back up over the next T_max, as PyTorch's recursive form does).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0)
      : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
    FROST_CHECK(T_max > 0, "frost::optim::CosineAnnealingLR: T_max must be positive, got ", T_max);
    initial_step();
  }

 protected:
  std::vector<double> get_lr() override {
    constexpr double pi = std::numbers::pi;
    auto lrs = group_lrs();
    if (last_epoch_ == 0) return lrs;
    const double T = static_cast<double>(T_max_), e = static_cast<double>(last_epoch_);
    // Python's modulo (non-negative for a positive divisor).
    const std::int64_t period = 2 * T_max_, r = ((last_epoch_ - 1 - T_max_) % period + period) % period;
    for (std::size_t i = 0; i < lrs.size(); ++i) {
      if (r == 0)
        lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(pi / T)) / 2;
      else
        lrs[i] = (1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) * (lrs[i] - eta_min_) + eta_min_;
    }
    return lrs;
  }

 private:
  std::int64_t T_max_;
  double eta_min_;
};

/// Multiplies each group's rate by gamma at each milestone step (a
/// milestone listed twice multiplies twice, as PyTorch's Counter).
/// \code
/// optim::MultiStepLR sched(opt, {30, 80}, 0.1);   // 0.1, then 0.01 from 30, 0.001 from 80
/// \endcode
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1)
      : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
    initial_step();
  }

 protected:
  std::vector<double> get_lr() override {
    auto lrs = group_lrs();
    const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
    for (auto& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(hits));
    return lrs;
  }

 private:
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

/// Multiplies each group's rate by gamma every step.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) { initial_step(); }

 protected:
  std::vector<double> get_lr() override {
    auto lrs = group_lrs();
    if (last_epoch_ > 0)
      for (auto& lr : lrs) lr *= gamma_;
    return lrs;
  }

 private:
  double gamma_;
};

/// Scales each group's rate by a factor going linearly from start_factor to
/// end_factor over total_iters steps (a warm-up), then leaves it.
/// \code
/// optim::LinearLR warmup(opt, 0.1, 1.0, 5);   // 10% of the rate at step 0, all of it from step 5
/// \endcode
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, std::int64_t total_iters = 5)
      : LRScheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
    FROST_CHECK(start_factor > 0 && start_factor <= 1, "frost::optim::LinearLR: start_factor must be in (0, 1], got ",
                start_factor);
    FROST_CHECK(end_factor >= 0 && end_factor <= 1, "frost::optim::LinearLR: end_factor must be in [0, 1], got ",
                end_factor);
    FROST_CHECK(total_iters > 0, "frost::optim::LinearLR: total_iters must be positive, got ", total_iters);
    initial_step();
  }

 protected:
  // PyTorch's recursive form: each step multiplies by the ratio of consecutive factors.
  std::vector<double> get_lr() override {
    auto lrs = group_lrs();
    if (last_epoch_ == 0) {
      for (auto& lr : lrs) lr *= start_;
    } else if (last_epoch_ <= total_) {
      const double t = static_cast<double>(total_), e = static_cast<double>(last_epoch_);
      for (auto& lr : lrs) lr *= 1 + (end_ - start_) / (t * start_ + (e - 1) * (end_ - start_));
    }
    return lrs;
  }

 private:
  double start_, end_;
  std::int64_t total_;
};

/// Scales each group's rate by factor for the first total_iters steps.
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, std::int64_t total_iters = 5)
      : LRScheduler(optimizer), factor_(factor), total_(total_iters) {
    FROST_CHECK(factor > 0 && factor <= 1, "frost::optim::ConstantLR: factor must be in (0, 1], got ", factor);
    FROST_CHECK(total_iters >= 0, "frost::optim::ConstantLR: total_iters must be non-negative, got ", total_iters);
    initial_step();
  }

 protected:
  std::vector<double> get_lr() override {
    auto lrs = group_lrs();
    for (auto& lr : lrs) {
      if (last_epoch_ == 0) lr *= factor_;
      else if (last_epoch_ == total_) lr /= factor_;
    }
    return lrs;
  }

 private:
  double factor_;
  std::int64_t total_;
};

/// How OneCycleLR interpolates within a phase.
enum class AnnealStrategy { cos, linear };

/// Options of OneCycleLR (PyTorch's names and defaults).
struct OneCycleLROptions {
  double pct_start = 0.3;  ///< fraction of the steps spent increasing the rate
  AnnealStrategy anneal_strategy = AnnealStrategy::cos;
  /// Cycle momentum (SGD/RMSprop) or beta1 (Adam) inversely to the rate.
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;         ///< initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  ///< min_lr = initial_lr / final_div_factor
  /// Three phases (up, down to initial_lr, anneal to min_lr) instead of two.
  bool three_phase = false;
  /// PyTorch's total_steps=None form: the schedule spans epochs * steps_per_epoch steps.
  std::int64_t epochs = 0, steps_per_epoch = 0;
};

/// The 1cycle policy (Smith & Topin): the rate rises from max_lr/div_factor
/// to max_lr, then anneals far below the start, over total_steps calls to
/// step() (one per batch); momentum cycles the opposite way.
/// \code
/// optim::OneCycleLR sched(opt, 0.1, epochs * batches_per_epoch);
/// \endcode
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, std::int64_t total_steps, const OneCycleLROptions& o = {})
      : OneCycleLR(optimizer, std::vector<double>(optimizer.num_param_groups(), max_lr), total_steps, o) {}

  /// Steps from the options: `OneCycleLR(opt, 0.1, {.epochs = 10, .steps_per_epoch = 100})`.
  OneCycleLR(Optimizer& optimizer, double max_lr, const OneCycleLROptions& o)
      : OneCycleLR(optimizer, max_lr, steps_from(o), o) {}

  /// One max_lr per param group.
  OneCycleLR(Optimizer& optimizer, const std::vector<double>& max_lrs, std::int64_t total_steps,
             const OneCycleLROptions& o = {})
      : LRScheduler(optimizer), total_steps_(total_steps), o_(o) {
    FROST_CHECK(total_steps > 0, "frost::optim::OneCycleLR: Expected positive integer total_steps, but got ",
                total_steps);
    FROST_CHECK(o.pct_start >= 0 && o.pct_start <= 1,
                "frost::optim::OneCycleLR: Expected float between 0 and 1 pct_start, but got ", o.pct_start);
    FROST_CHECK(max_lrs.size() == optimizer.num_param_groups(), "frost::optim::OneCycleLR: expected ",
                optimizer.num_param_groups(), " values for max_lr, got ", max_lrs.size());
    FROST_CHECK(!o.cycle_momentum || optimizer.has_momentum(), "frost::optim::OneCycleLR: optimizer (",
                optimizer.name(), ") must support momentum with `cycle_momentum` option enabled");
    const double n = static_cast<double>(total_steps);
    if (o.three_phase)
      phases_ = {{o.pct_start * n - 1, Lr::initial, Lr::max, Mom::max, Mom::base},
                 {2 * o.pct_start * n - 2, Lr::max, Lr::initial, Mom::base, Mom::max},
                 {n - 1, Lr::initial, Lr::min, Mom::max, Mom::max}};
    else
      phases_ = {{o.pct_start * n - 1, Lr::initial, Lr::max, Mom::max, Mom::base},
                 {n - 1, Lr::max, Lr::min, Mom::base, Mom::max}};
    for (std::size_t i = 0; i < max_lrs.size(); ++i) {
      const double initial = max_lrs[i] / o.div_factor;
      groups_.push_back({initial, max_lrs[i], initial / o.final_div_factor});
      if (o.cycle_momentum) optimizer.set_momentum(i, o.max_momentum);
    }
    initial_step();
  }

 protected:
  static std::int64_t steps_from(const OneCycleLROptions& o) {
    FROST_CHECK(o.epochs > 0 && o.steps_per_epoch > 0,
                "frost::optim::OneCycleLR: You must define either total_steps OR (epochs AND steps_per_epoch); got "
                "epochs ", o.epochs, " and steps_per_epoch ", o.steps_per_epoch, " (expected positive integers)");
    return o.epochs * o.steps_per_epoch;
  }

  std::vector<double> get_lr() override {
    FROST_CHECK(last_epoch_ <= total_steps_, "frost::optim::OneCycleLR: Tried to step ", last_epoch_ + 1,
                " times. The specified number of total steps is ", total_steps_);
    const double step = static_cast<double>(last_epoch_);
    std::vector<double> lrs;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      double start = 0, lr = 0, mom = 0;
      for (std::size_t k = 0; k < phases_.size(); ++k) {
        const Phase& ph = phases_[k];
        if (step <= ph.end_step || k + 1 == phases_.size()) {
          // A tolerance, not ==: with FMA contraction pct_start * n - 1 can
          // come out as 5.6e-17 where Python computes exactly 0.
          FROST_CHECK(std::abs(ph.end_step - start) > 1e-9, "frost::optim::OneCycleLR: phase ", k, " of the schedule has zero length "
                      "(pct_start ", o_.pct_start, ", total_steps ", total_steps_,
                      "); use more total_steps or another pct_start");
          const double pct = (step - start) / (ph.end_step - start);
          lr = anneal(value(g, ph.start_lr), value(g, ph.end_lr), pct);
          mom = anneal(value(ph.start_mom), value(ph.end_mom), pct);
          break;
        }
        start = ph.end_step;
      }
      lrs.push_back(lr);
      if (o_.cycle_momentum) optimizer_.set_momentum(g, mom);
    }
    return lrs;
  }

 private:
  enum class Lr { initial, max, min };
  enum class Mom { base, max };
  struct Phase {
    double end_step;
    Lr start_lr, end_lr;
    Mom start_mom, end_mom;
  };
  struct GroupLrs {
    double initial, max, min;
  };

  double value(std::size_t g, Lr which) const {
    const GroupLrs& v = groups_[g];
    return which == Lr::initial ? v.initial : which == Lr::max ? v.max : v.min;
  }
  double value(Mom which) const { return which == Mom::base ? o_.base_momentum : o_.max_momentum; }
  double anneal(double start, double end, double pct) const {
    if (o_.anneal_strategy == AnnealStrategy::linear) return (end - start) * pct + start;
    return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  }

  std::int64_t total_steps_;
  OneCycleLROptions o_;
  std::vector<Phase> phases_;
  std::vector<GroupLrs> groups_;
};

/// Options of ReduceLROnPlateau (PyTorch's names and defaults).
struct ReduceLROnPlateauOptions {
  bool maximize = false;      ///< mode="max": the metric should grow (accuracy), else shrink (loss)
  double factor = 0.1;        ///< new rate = rate * factor
  std::int64_t patience = 10; ///< steps without improvement tolerated before a cut
  double threshold = 1e-4;    ///< what counts as an improvement
  bool threshold_abs = false; ///< threshold_mode="abs": best -+ threshold, else best * (1 -+ threshold)
  std::int64_t cooldown = 0;  ///< steps after a cut before counting again
  double min_lr = 0;          ///< no group goes below this
  double eps = 1e-8;          ///< a cut smaller than this is not made
};

/// Cuts the rates by a factor when a metric has stopped improving for
/// `patience` steps; step() takes the metric (the validation loss, say).
/// \code
/// optim::ReduceLROnPlateau sched(opt, {.patience = 5});
/// for (int epoch = 0; ...; ++epoch) { train(); sched.step(validation_loss); }
/// \endcode
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& o = {})
      : optimizer_(optimizer), o_(o), best_(o.maximize ? -INFINITY : INFINITY) {
    FROST_CHECK(o.factor < 1, "frost::optim::ReduceLROnPlateau: Factor should be < 1.0, got ", o.factor);
    FROST_CHECK(o.patience >= 0 && o.cooldown >= 0 && o.min_lr >= 0,
                "frost::optim::ReduceLROnPlateau: patience, cooldown and min_lr must be non-negative, got ", o.patience,
                ", ", o.cooldown, ", ", o.min_lr);
    for (std::size_t i = 0; i < optimizer.num_param_groups(); ++i) last_lr_.push_back(optimizer.lr(i));
  }

  /// One step with this step's metric.
  void step(double metric) {
    ++last_epoch_;
    if (better(metric)) {
      best_ = metric;
      bad_ = 0;
    } else {
      ++bad_;
    }
    if (cooldown_left_ > 0) {
      --cooldown_left_;
      bad_ = 0;  // improvements are not counted during a cooldown
    }
    if (bad_ > o_.patience) {
      for (std::size_t i = 0; i < optimizer_.num_param_groups(); ++i) {
        const double old_lr = optimizer_.lr(i), new_lr = std::max(old_lr * o_.factor, o_.min_lr);
        if (old_lr - new_lr > o_.eps) optimizer_.set_lr(i, new_lr);
      }
      cooldown_left_ = o_.cooldown;
      bad_ = 0;
    }
    for (std::size_t i = 0; i < last_lr_.size(); ++i) last_lr_[i] = optimizer_.lr(i);
  }
  /// A metric held in a one-element tensor (read to the host).
  template <class T> void step(const Tensor<T>& metric) { step(static_cast<double>(metric.item())); }

  const std::vector<double>& get_last_lr() const { return last_lr_; }
  double best() const { return best_; }
  std::int64_t num_bad_epochs() const { return bad_; }
  std::int64_t last_epoch() const { return last_epoch_; }

 private:
  bool better(double a) const {
    if (o_.maximize) return o_.threshold_abs ? a > best_ + o_.threshold : a > best_ * (1 + o_.threshold);
    return o_.threshold_abs ? a < best_ - o_.threshold : a < best_ * (1 - o_.threshold);
  }

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions o_;
  double best_;
  std::int64_t bad_ = 0, cooldown_left_ = 0, last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace frost::optim
