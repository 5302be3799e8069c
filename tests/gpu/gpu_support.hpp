// What the CUDA test files share: the skip where no GPU is visible, the
// device they run on, and (device_parity.hpp) the CPU-vs-CUDA comparison.
#pragma once
#include <cmath>
#include <cstdlib>
#include <string>

#include <frost/frost.hpp>

#include <doctest/doctest.h>

#include "../device_parity.hpp"

namespace {

const frost::Device kCuda = frost::Device::cuda();

/// Every case starts here: without a GPU it reports the skip and returns
/// true. Where FROST_REQUIRE_CUDA is set (tests/gpu/check.sh sets it), no
/// GPU is a failure instead: a GPU machine whose device the program cannot
/// see must not pass the check by skipping it.
inline bool no_gpu() {
  if (frost::cuda::is_available()) return false;
  if (std::getenv("FROST_REQUIRE_CUDA")) FAIL_CHECK("no CUDA device is visible, and FROST_REQUIRE_CUDA is set");
  else MESSAGE("skipped: no CUDA device");
  return true;
}

}  // namespace
