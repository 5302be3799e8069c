// The optimizer base: parameter groups with their own options, per-parameter
// state, zero_grad and state dicts. SGD, Adam, AdamW and RMSprop derive from
// OptimizerBase<T, Options> and only write their update rule.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../backend/cpu/parallel.hpp"
#include "../tensor.hpp"

namespace frost::optim {

/// What learning-rate schedulers and training loops see of any optimizer,
/// whatever its element type and options: step, zero_grad and the per-group
/// learning rate and momentum (SGD/RMSprop momentum, Adam's beta1).
class Optimizer {
 public:
  Optimizer() = default;
  // A copy would share the state buffers with the original.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;
  /// One update of every parameter whose gradient is defined.
  virtual void step() = 0;
  /// Clears the gradients: undefined when set_to_none (PyTorch 2.x's default), else zero.
  virtual void zero_grad(bool set_to_none = true) = 0;
  /// "SGD", "Adam", ... (used in error messages).
  virtual const char* name() const = 0;
  virtual std::size_t num_param_groups() const = 0;
  virtual double lr(std::size_t group) const = 0;
  virtual void set_lr(std::size_t group, double lr) = 0;
  /// Whether the options have a momentum that OneCycleLR can cycle: `momentum`
  /// (SGD, RMSprop) or `betas[0]` (Adam, AdamW).
  virtual bool has_momentum() const = 0;
  virtual double momentum(std::size_t group) const = 0;
  virtual void set_momentum(std::size_t group, double m) = 0;
  /// Whether the momentum is Adam's beta1 (what PyTorch calls use_beta1).
  virtual bool momentum_is_beta1() const = 0;
};

/// Parameters updated with the same options.
template <FloatScalar T, class Options>
struct ParamGroup {
  std::vector<Tensor<T>> params;
  Options options;
};

/// A parameter group as passed to an optimizer's constructor. Without
/// options the group takes the optimizer's defaults; with options it takes
/// them as written (as in LibTorch: a designated initializer cannot tell an
/// option left out from one set to its default value).
/// \code
/// optim::SGD opt({{backbone, {.lr = 1e-3, .momentum = 0.9}}, {head}}, {.lr = 1e-2, .momentum = 0.9});
/// \endcode
/// When every group is a single braced tensor without options (`{{{w}}, {{b}}}`)
/// the list also reads as a list of tensors; write `{{w}, std::nullopt}`.
template <FloatScalar T, class Options>
struct ParamGroupInit {
  std::vector<Tensor<T>> params;
  std::optional<Options> options;
};

/// An optimizer's per-parameter state (PyTorch's `optimizer.state[p]`).
/// Buffers an algorithm does not use stay undefined.
template <FloatScalar T>
struct ParamState {
  std::int64_t step = 0;        ///< Adam, AdamW, RMSprop: updates applied so far
  Tensor<T> momentum_buffer;    ///< SGD, RMSprop with momentum
  Tensor<T> exp_avg;            ///< Adam(W): first moment
  Tensor<T> exp_avg_sq;         ///< Adam(W): second moment
  Tensor<T> max_exp_avg_sq;     ///< Adam(W) with amsgrad
  Tensor<T> square_avg;         ///< RMSprop
  Tensor<T> grad_avg;           ///< RMSprop, centered

  /// Calls fn(name, tensor) for each buffer slot, defined or not.
  template <class Self, class Fn>
  static void for_each_buffer(Self& s, Fn&& fn) {
    fn("momentum_buffer", s.momentum_buffer);
    fn("exp_avg", s.exp_avg);
    fn("exp_avg_sq", s.exp_avg_sq);
    fn("max_exp_avg_sq", s.max_exp_avg_sq);
    fn("square_avg", s.square_avg);
    fn("grad_avg", s.grad_avg);
  }
};

/// One group in a state dict: its options and which parameters it holds,
/// as indices into OptimizerStateDict::state.
template <class Options>
struct GroupStateDict {
  Options options;
  std::vector<std::int64_t> params;
};

/// An optimizer's state as plain data, PyTorch's `optimizer.state_dict()`.
/// Parameters are numbered through the groups in order; `state` has one
/// entry per parameter (step 0 and no buffers for one never updated).
template <FloatScalar T, class Options>
struct OptimizerStateDict {
  std::vector<ParamState<T>> state;
  std::vector<GroupStateDict<Options>> param_groups;
};

namespace detail {
template <class O>
concept HasMomentum = requires(O o) { o.momentum = 0.0; };
template <class O>
concept HasBetas = requires(O o) { o.betas[0] = 0.0; };
}  // namespace detail

/// Parameter groups, state and state dicts for an optimizer whose
/// hyperparameters are `Options`; derived classes implement step().
/// Validation of options goes through `check_options(options, optimizer_name,
/// group_index)`, found by argument-dependent lookup next to each Options.
template <FloatScalar T, class Options>
class OptimizerBase : public Optimizer {
 public:
  using value_type = T;
  using options_type = Options;
  using Group = ParamGroup<T, Options>;
  using GroupInit = ParamGroupInit<T, Options>;
  using StateDict = OptimizerStateDict<T, Options>;

  std::vector<Group>& param_groups() { return groups_; }
  const std::vector<Group>& param_groups() const { return groups_; }
  /// The options a group added without its own takes.
  const Options& defaults() const { return defaults_; }

  /// Adds a group (PyTorch's add_param_group), e.g. layers unfrozen later.
  void add_param_group(GroupInit g) {
    Options o = g.options ? *g.options : defaults_;
    check_options(o, name_, groups_.size());
    FROST_CHECK(!g.params.empty(), "frost::optim::", name_, ": optimizer got an empty parameter list (param group ",
                groups_.size(), ")");
    std::unordered_set<const void*> seen;
    for (const auto& grp : groups_)
      for (const auto& p : grp.params) seen.insert(p.impl());
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      const Tensor<T>& p = g.params[i];
      FROST_CHECK(p.defined(), "frost::optim::", name_, ": parameter ", i, " of param group ", groups_.size(),
                  " is an undefined tensor");
      // A parameter that does not require grad (a frozen backbone) is taken,
      // as in PyTorch: it has no gradient, so step() leaves it alone until it
      // is unfrozen.
      FROST_CHECK(p.is_leaf(), "frost::optim::", name_, ": can't optimize a non-leaf Tensor (parameter ", i,
                  " of param group ", groups_.size(), ", shape ", p.shape().str(), ", produced by ", p.grad_fn_name(),
                  ")");
      FROST_CHECK(seen.insert(p.impl()).second, "frost::optim::", name_,
                  ": some parameters appear in more than one parameter group (or twice in one): parameter ", i,
                  " of param group ", groups_.size(), ", shape ", p.shape().str());
    }
    groups_.push_back(Group{std::move(g.params), o});
  }

  void zero_grad(bool set_to_none = true) override {
    NoGradGuard ng;
    for (auto& grp : groups_)
      for (auto& p : grp.params) {
        Tensor<T> g = p.grad();
        if (!g.defined()) continue;
        if (set_to_none) {
          p.set_grad(Tensor<T>());
        } else if (g.requires_grad() || g.impl()->is_view || !g.is_contiguous()) {
          // A gradient with history (create_graph) or one that aliases other
          // memory must not be zeroed in place: give the parameter a fresh one.
          p.set_grad(Tensor<T>::zeros(p.shape(), p.device()));
        } else {
          g.zero_();
        }
      }
  }

  /// The state of `param` (PyTorch's `optimizer.state[param]`), created empty.
  ParamState<T>& state(const Tensor<T>& param) {
    auto [it, fresh] = state_.try_emplace(param.impl());
    if (fresh) it->second.param = param;
    return it->second.state;
  }

  /// A snapshot of the state and the group options (buffers are copied, so
  /// stepping on does not change it).
  StateDict state_dict() const {
    StateDict sd;
    std::int64_t index = 0;
    for (const auto& grp : groups_) {
      GroupStateDict<Options> gs{grp.options, {}};
      for (const auto& p : grp.params) {
        gs.params.push_back(index++);
        ParamState<T> s;
        if (auto it = state_.find(p.impl()); it != state_.end()) {
          s = it->second.state;
          ParamState<T>::for_each_buffer(s, [](const char*, Tensor<T>& b) {
            if (b.defined()) b = b.clone();
          });
        }
        sd.state.push_back(std::move(s));
      }
      sd.param_groups.push_back(std::move(gs));
    }
    return sd;
  }

  /// Restores state and group options saved by state_dict() from an
  /// optimizer over parameters of the same shapes in the same groups.
  void load_state_dict(const StateDict& sd) {
    FROST_CHECK(sd.param_groups.size() == groups_.size(), "frost::optim::", name_,
                "::load_state_dict: loaded state dict has a different number of parameter groups (",
                sd.param_groups.size(), ") than the optimizer (", groups_.size(), ")");
    std::size_t total = 0;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const auto& gs = sd.param_groups[gi];
      FROST_CHECK(gs.params.size() == groups_[gi].params.size(), "frost::optim::", name_,
                  "::load_state_dict: loaded state dict contains a parameter group that doesn't match the size of "
                  "optimizer's group (group ", gi, ": ", gs.params.size(), " parameters, expected ",
                  groups_[gi].params.size(), ")");
      check_options(gs.options, name_, gi);
      total += gs.params.size();
    }
    FROST_CHECK(sd.state.size() == total, "frost::optim::", name_, "::load_state_dict: the state has ",
                sd.state.size(), " entries but the parameter groups hold ", total, " parameters");
    // Check everything before changing anything, so a bad dict leaves the optimizer as it was.
    std::vector<std::pair<const Tensor<T>*, const ParamState<T>*>> pairs;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi)
      for (std::size_t k = 0; k < groups_[gi].params.size(); ++k) {
        const std::int64_t idx = sd.param_groups[gi].params[k];
        FROST_CHECK(idx >= 0 && static_cast<std::size_t>(idx) < sd.state.size(), "frost::optim::", name_,
                    "::load_state_dict: parameter index ", idx, " in group ", gi, " is out of range [0, ",
                    sd.state.size(), ")");
        const Tensor<T>& p = groups_[gi].params[k];
        const ParamState<T>& s = sd.state[static_cast<std::size_t>(idx)];
        ParamState<T>::for_each_buffer(s, [&](const char* buf, const Tensor<T>& b) {
          FROST_CHECK(!b.defined() || b.shape() == p.shape(), "frost::optim::", name_, "::load_state_dict: ", buf,
                      " of parameter ", idx, " has shape ", b.shape().str(), " but the parameter has shape ",
                      p.shape().str());
        });
        FROST_CHECK(s.step >= 0, "frost::optim::", name_, "::load_state_dict: step of parameter ", idx,
                    " is negative (", s.step, ")");
        pairs.emplace_back(&p, &s);
      }
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options = sd.param_groups[gi].options;
    state_.clear();
    for (auto [p, s] : pairs) {
      ParamState<T>& dst = state(*p);
      dst = *s;
      // On the parameter's device, as PyTorch's load_state_dict casts them:
      // a state saved on the CPU steps a module that now lives on a GPU.
      const Device device = p->device();
      ParamState<T>::for_each_buffer(dst, [&](const char*, Tensor<T>& b) {
        if (b.defined()) b = b.to(device).clone();
      });
    }
  }

  const char* name() const override { return name_; }
  std::size_t num_param_groups() const override { return groups_.size(); }
  double lr(std::size_t group) const override { return at(group).options.lr; }
  void set_lr(std::size_t group, double lr) override { at(group).options.lr = lr; }
  bool has_momentum() const override { return detail::HasMomentum<Options> || detail::HasBetas<Options>; }
  bool momentum_is_beta1() const override { return !detail::HasMomentum<Options> && detail::HasBetas<Options>; }
  double momentum(std::size_t group) const override {
    const Options& o = at(group).options;
    if constexpr (detail::HasMomentum<Options>) return o.momentum;
    else if constexpr (detail::HasBetas<Options>) return o.betas[0];
    else detail_no_momentum();
  }
  void set_momentum(std::size_t group, double m) override {
    Options& o = at(group).options;
    if constexpr (detail::HasMomentum<Options>) o.momentum = m;
    else if constexpr (detail::HasBetas<Options>) o.betas[0] = m;
    else detail_no_momentum();
  }

 protected:
  OptimizerBase(const char* name, std::vector<GroupInit> groups, const Options& defaults)
      : name_(name), defaults_(defaults) {
    check_options(defaults_, name_, std::nullopt);
    FROST_CHECK(!groups.empty(), "frost::optim::", name_, ": optimizer got an empty parameter list");
    for (auto& g : groups) add_param_group(std::move(g));
  }

  static std::vector<GroupInit> one_group(std::vector<Tensor<T>> params) {
    std::vector<GroupInit> v;
    v.push_back(GroupInit{std::move(params), std::nullopt});
    return v;
  }

  /// Runs `update(options, param, grad, state)` for every parameter with a
  /// gradient, without recording, on contiguous memory: `param` is the
  /// parameter itself when it is contiguous (else a copy written back after)
  /// and `grad` is contiguous, on the parameter's device. The parameter's version counter is bumped so
  /// autograd notices tensors saved before the step.
  template <class Update>
  void for_each_param_with_grad(Update&& update) {
    NoGradGuard ng;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const Options& o = groups_[gi].options;
      for (std::size_t k = 0; k < groups_[gi].params.size(); ++k) {
        Tensor<T>& p = groups_[gi].params[k];
        Tensor<T> g = p.grad();
        if (!g.defined()) continue;
        FROST_CHECK(p.device() == g.device(), "frost::optim::", name_, ": parameter ", k, " of param group ", gi,
                    " is on ", p.device().str(), " but its gradient is on ", g.device().str());
        FROST_CHECK(g.shape() == p.shape(), "frost::optim::", name_, ": gradient of shape ", g.shape().str(),
                    " for parameter ", k, " of param group ", gi, " of shape ", p.shape().str());
        g = g.contiguous();
        Tensor<T> work = p.contiguous();
        update(o, work, static_cast<const T*>(g.data()), state(p));  // device pointers for a device parameter
        if (work.is_same(p)) frost::detail::bump_version(p);
        else p.copy_(work);
      }
    }
  }

 private:
  struct Entry {
    Tensor<T> param;  // keeps the key's impl alive, so its address is never reused
    ParamState<T> state;
  };

  [[noreturn]] void detail_no_momentum() const {
    frost::detail::fail("frost::optim::", name_, ": the options have no momentum or betas to cycle");
  }
  const Group& at(std::size_t i) const {
    FROST_CHECK(i < groups_.size(), "frost::optim::", name_, ": param group ", i, " is out of range (",
                groups_.size(), " groups)");
    return groups_[i];
  }
  Group& at(std::size_t i) { return const_cast<Group&>(std::as_const(*this).at(i)); }

  const char* name_;
  Options defaults_;
  std::vector<Group> groups_;
  std::unordered_map<const TensorImpl<T>*, Entry> state_;
};

namespace detail {
/// "(param group 2)" or "(defaults)" for option errors.
inline std::string where(std::optional<std::size_t> group) {
  return group ? " (param group " + std::to_string(*group) + ")" : std::string(" (defaults)");
}

/// A state buffer of the parameter's shape, zero-filled, created on first
/// use, and on the parameter's device: a module moved with to(device) after
/// some steps takes its state along at the next step (the step's kernel
/// reads it on that device).
template <class T>
T* ensure_zeros(Tensor<T>& buf, const Tensor<T>& like) {
  if (!buf.defined()) buf = Tensor<T>::zeros(like.shape(), like.device());
  else if (buf.device() != like.device()) buf = buf.to(like.device());
  return buf.data();
}
}  // namespace detail

}  // namespace frost::optim
