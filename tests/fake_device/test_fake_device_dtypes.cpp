// Every dtype on the fake device (fake_device.hpp): factories, copies to and
// from the host, and the cast kernel between every pair of dtypes, strided
// inputs included, against the CPU bit for bit and with no read back (on a
// GPU each would be a stream sync); integer and bool math against the CPU.
#include <doctest/doctest.h>

#include "../dtype_parity.hpp"
#include "../plan_dtypes.hpp"
#include "fake_device.hpp"

namespace fake = frost::test::fake;

TEST_CASE("fake device: every dtype's factories and casts between every pair run on the device, as on the CPU") {
  fake::install();
  (void)fake::take_violations();
  frost::test::every_dtype_on(frost::Device::cuda(0), [] { return fake::memory().host_reads; });
  CHECK(fake::take_violations().empty());
}

TEST_CASE("fake device: integer and bool math runs on the device, as on the CPU") {
  fake::install();
  (void)fake::take_violations();
  frost::test::int_math_on_every_dtype(frost::Device::cuda(0));
  CHECK(fake::take_violations().empty());
}

TEST_CASE("fake device: a plan holding bool and integer values runs on the device as eager does on the CPU") {
  fake::install();
  (void)fake::take_violations();
  frost::test::plan_every_dtype_on(frost::Device::cuda(0));
  CHECK(fake::take_violations().empty());
}

TEST_CASE("fake device: a plan with int64, float and bool inputs runs on the device, inputs on the host or there") {
  fake::install();
  (void)fake::take_violations();
  frost::test::plan_mixed_inputs_on(frost::Device::cuda(0));
  CHECK(fake::take_violations().empty());
}
