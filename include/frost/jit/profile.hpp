// PlanProfile: where a frozen plan's time goes, step by step (what
// torch.profiler's key_averages().table() shows for a TorchScript module).
// Plan::profile fills it: each step timed alone over several runs (on the
// CPU by the clock, on CUDA by events on the device's stream, so a row is
// the step's kernels, not its launch), beside the whole run() it compares with.
#pragma once
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "../core/device.hpp"
#include "../core/shape.hpp"

namespace frost::jit {

/// One row: plan steps [first, first + count), timed as one unit (count > 1
/// where the plan runs several steps in one go: a CPU chain of
/// matrix-vector layers in one parallel region).
struct StepTiming {
  std::size_t first = 0, count = 1;
  std::string kind;   ///< step kind ("conv2d_pool", "linear", ...)
  std::string attrs;  ///< its attributes, as Graph::str prints them
  std::string note;   ///< what a freeze pass made of it
  Shape out;          ///< its first output's shape (empty for a guard)
  double median_ms = 0, min_ms = 0;
};

/// A plan's profile: the steps in plan order, and how their sum compares with
/// a whole run (on CUDA the whole run is one graph launch, the steps one by
/// one are not: the difference is what the graph saves).
struct PlanProfile {
  Device device = Device::cpu();
  int runs = 0;
  std::vector<StepTiming> steps;
  double run_ms = 0;  ///< median of whole runs through run_into

  /// The steps' medians added up.
  double steps_ms() const {
    return std::accumulate(steps.begin(), steps.end(), 0.0, [](double a, const StepTiming& s) { return a + s.median_ms; });
  }
  /// The rows, slowest first (the first `top` of them; 0: all), each with
  /// its share of steps_ms(); then the totals.
  std::string table(std::size_t top = 0) const {
    std::vector<const StepTiming*> order;
    for (const auto& s : steps) order.push_back(&s);
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->median_ms > b->median_ms; });
    if (top > 0 && order.size() > top) order.resize(top);
    const double total = steps_ms();
    std::string r;
    char line[512];
    std::snprintf(line, sizeof line, "%-7s %-20s %10s %10s %6s  %-20s %s\n", "step", "kind", "median ms", "min ms",
                  "share", "output", "attributes");
    r += line;
    for (const StepTiming* s : order) {
      const std::string id = s->count == 1 ? std::to_string(s->first)
                                           : std::to_string(s->first) + "-" + std::to_string(s->first + s->count - 1);
      std::string attrs = s->attrs;
      if (!s->note.empty()) attrs += (attrs.empty() ? "# " : "  # ") + s->note;
      std::snprintf(line, sizeof line, "%-7s %-20s %10.4f %10.4f %5.1f%%  %-20s ", id.c_str(), s->kind.c_str(),
                    s->median_ms, s->min_ms, total > 0 ? 100.0 * s->median_ms / total : 0.0,
                    s->out.ndim() > 0 ? s->out.str().c_str() : "-");
      r += line + attrs + "\n";
    }
    std::snprintf(line, sizeof line, "%zu steps on %s, medians of %d runs: %.4f ms one by one; a whole run %.4f ms\n",
                  steps.empty() ? std::size_t(0) : steps.back().first + steps.back().count, device.str().c_str(), runs,
                  total, run_ms);
    r += line;
    return r;
  }
};

namespace detail {
/// The median and minimum of `t` (which it sorts).
inline std::pair<double, double> median_min(std::vector<double>& t) {
  if (t.empty()) return {0.0, 0.0};
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}
}  // namespace detail

}  // namespace frost::jit
