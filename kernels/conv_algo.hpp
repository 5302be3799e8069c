// Choosing a convolution algorithm that runs. cuDNN ranks (or, in benchmark
// mode, times) its candidates, but a ranked one can still fail when it runs:
// its workspace cannot be had under the memory cap, or cuDNN refuses the
// shape with that algorithm. PyTorch tries the candidates in turn for that
// reason and caches only one that ran; so does frost. Plain C++ (no CUDA), so
// the CPU tests cover it.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <frost/core/error.hpp>

namespace frost::cuda_detail {

/// One candidate: the algorithm, the workspace it needs, and the
/// cudnnMathType_t it was ranked or timed with.
struct ConvAlgo {
  int algo = 0;
  std::size_t workspace = 0;
  int math = 0;
};

/// What running one candidate came to: it ran, or why it could not (then the
/// next is tried). A real error (a bad descriptor, a fault) is thrown by the
/// run itself and ends the search.
struct ConvAttempt {
  bool ran = false;
  std::string why;
  static ConvAttempt ok() { return {true, {}}; }
  static ConvAttempt unavailable(std::string why) { return {false, std::move(why)}; }
};

/// Runs the candidates best first until one runs, and returns that one;
/// when none does, an Error listing why each could not.
template <class Run>
ConvAlgo first_that_runs(const std::vector<ConvAlgo>& candidates, Run&& run, const char* op) {
  std::string tried;
  for (const ConvAlgo& a : candidates) {
    const ConvAttempt r = run(a);
    if (r.ran) return a;
    tried += (tried.empty() ? "" : "; ") + std::string("algorithm ") + std::to_string(a.algo) + " (" +
             std::to_string(a.workspace) + "-byte workspace): " + r.why;
  }
  detail::fail("frost::", op, ": none of cuDNN's ", candidates.size(),
               " candidate convolution algorithms ran for these shapes (", tried, ")");
}

}  // namespace frost::cuda_detail
