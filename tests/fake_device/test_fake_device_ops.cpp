// Every op-table row on the fake device against the CPU, forward and
// backward: the op layer's device path for every public op (the CUDA suite's
// row parity, tests/gpu, on a machine without a GPU). An op whose host code
// reads or writes device memory dies of SIGSEGV here; one that makes a CPU
// tensor for a device op fails with the mixed-device error, or hands a host
// pointer to a device kernel (recorded); one that leaves its result or a
// gradient on the CPU is reported; one that reads device values back to the
// host (a stream sync on a GPU) is reported, unless it must. The fake's
// kernels are the CPU's, so the values agree to rounding (the op layer may
// take other paths on a device).
#include <doctest/doctest.h>

#include <string>

#include "../device_parity.hpp"
#include "fake_device.hpp"

namespace frost::test::optable {

namespace {

/// The one row that reads its input on the host: one_hot inferring its
/// number of classes from the largest index (as PyTorch's does). Given the
/// number, one_hot stays on the device.
bool reads_to_host(const Row& r) { return r.name == "one_hot" && r.note == "inferred classes"; }

template <class T>
void every_row_on_the_fake_device(double atol, double rtol) {
  fake::install();
  (void)fake::take_violations();
  for_rows(every_row(), [&](const Row& r) {
    const int reads_before = fake::memory().host_reads;
    std::string problems = row_parity<T>(r, Device::cuda(1), atol, rtol, [&]() -> std::string {
      const int reads = fake::memory().host_reads - reads_before;
      if (reads == 0 || reads_to_host(r)) return "";
      return "forward and backward read device values back to the host " + std::to_string(reads) + " times\n";
    });
    problems += fake::take_violations();
    CHECK_MESSAGE(problems.empty(), problems);
  });
}

}  // namespace

TEST_SUITE("fake device") {

// cuda:1: an op that puts a tensor on the default device (cuda:0) instead
// of its input's shows as a mixed-device error.
TEST_CASE("fake device: every op-table row matches the CPU, forward and backward, in double") {
  every_row_on_the_fake_device<double>(1e-12, 1e-10);
}

TEST_CASE("fake device: every op-table row matches the CPU, forward and backward, in float") {
  every_row_on_the_fake_device<float>(1e-6, 1e-5);
}

}  // TEST_SUITE

}  // namespace frost::test::optable
