// The CUDA backend's host-side logic, tested on the CPU: what cuDNN is asked
// for a convolution (descriptor extents, the explicit-padding case), the
// algorithm caches' keys (cuDNN's and cuBLASLt's), the choice of a
// convolution algorithm that runs, the device-memory bookkeeping and cap,
// and the errors a program gets when CUDA is missing.
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "../kernels/conv_algo.hpp"
#include "../kernels/conv_geometry.hpp"
#include "../kernels/lt_key.hpp"
#include "../kernels/memory_book.hpp"
#include "support.hpp"

using namespace frost;
using frost::cuda_detail::ConvAlgo;
using frost::cuda_detail::ConvAttempt;
using frost::cuda_detail::ConvKey;
using frost::cuda_detail::ConvKeyHash;
using frost::cuda_detail::ConvPass;
using frost::cuda_detail::LtKey;
using frost::cuda_detail::LtKeyHash;
using frost::cuda_detail::MemoryBook;
using frost::test::error_of;

namespace {

Conv2dParams conv(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t pad, std::int64_t out,
                  std::int64_t dilation = 1) {
  Conv2dParams p;
  p.batch = 2;
  p.in_channels = 4;
  p.in_h = p.in_w = in;
  p.out_channels = 6;
  p.kernel_h = p.kernel_w = k;
  p.out_h = p.out_w = out;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  return p;
}

}  // namespace

TEST_CASE("cuda host: symmetric padding maps straight onto cuDNN's descriptors") {
  // 3x3, pad 1: the usual "same" convolution.
  auto g = cuda_detail::conv_geometry(conv(8, 3, 1, 1, 8));
  CHECK_FALSE(g.explicit_pad);
  CHECK(g.x[0] == 2);
  CHECK(g.x[1] == 4);
  CHECK(g.x[2] == 8);
  CHECK(g.w[0] == 6);
  CHECK(g.w[1] == 4);
  CHECK(g.w[2] == 3);
  CHECK(g.y[2] == 8);
  CHECK(g.pad[0] == 1);
  // A stride that leaves a remainder: cuDNN floors the same way.
  g = cuda_detail::conv_geometry(conv(8, 3, 2, 1, 4));
  CHECK_FALSE(g.explicit_pad);
  CHECK(g.stride[0] == 2);
  // Groups reach the filter's channel count.
  auto p = conv(8, 3, 1, 1, 8);
  p.groups = 2;
  g = cuda_detail::conv_geometry(p);
  CHECK(g.w[1] == 2);
  CHECK(g.groups == 2);
}

TEST_CASE("cuda host: padding cuDNN cannot express becomes an explicitly padded input") {
  // padding="same" with a 4-wide kernel: 1 zero before, 2 after.
  auto g = cuda_detail::conv_geometry(conv(7, 4, 1, 1, 7));
  REQUIRE(g.explicit_pad);
  CHECK(g.pad[0] == 0);
  CHECK(g.pad_top == 1);
  CHECK(g.pad_left == 1);
  CHECK(g.x[2] == 10);  // 1 + 7 + 2
  CHECK(g.x[3] == 10);
  // The unpadded convolution over the padded extent gives exactly out_h rows.
  CHECK(cuda_detail::cudnn_out_extent(g.x[2], 0, 4, 1, 1) == 7);
  // Dilated even kernel.
  g = cuda_detail::conv_geometry(conv(9, 2, 1, 1, 9, 3));
  REQUIRE(g.explicit_pad);
  CHECK(cuda_detail::cudnn_out_extent(g.x[2], 0, 2, 3, 1) == 9);
}

TEST_CASE("cuda host: extents past cuDNN's 32 bits are a clear error") {
  auto p = conv(8, 3, 1, 1, 8);
  p.batch = std::int64_t(1) << 31;
  const std::string m = error_of([&] { (void)cuda_detail::conv_geometry(p); });
  CHECK(m.find("conv2d (cuDNN)") != std::string::npos);
  CHECK(m.find("32-bit") != std::string::npos);
  p.batch = 1 << 20;
  p.in_channels = 1 << 10;
  CHECK(error_of([&] { (void)cuda_detail::conv_geometry(p); }).find("2^31 elements") != std::string::npos);
}

TEST_CASE("cuda host: the algorithm cache keys tell every choice-relevant difference apart") {
  const auto p = conv(8, 3, 1, 1, 8);
  auto q = p;
  q.dilation_h = 2;
  q.out_h = 6;
  std::unordered_set<ConvKey, ConvKeyHash> keys;
  keys.insert(ConvKey(p, DType::float32, ConvPass::forward, false, false));
  keys.insert(ConvKey(p, DType::float32, ConvPass::forward, false, false));  // the same key again
  CHECK(keys.size() == 1);
  keys.insert(ConvKey(p, DType::float64, ConvPass::forward, false, false));
  keys.insert(ConvKey(p, DType::float32, ConvPass::backward_data, false, false));
  keys.insert(ConvKey(p, DType::float32, ConvPass::backward_filter, false, false));
  keys.insert(ConvKey(p, DType::float32, ConvPass::forward, true, false));
  keys.insert(ConvKey(q, DType::float32, ConvPass::forward, false, false));
  keys.insert(ConvKey(p, DType::float32, ConvPass::forward, false, true));  // timed, not heuristic
  CHECK(keys.size() == 7);
  CHECK(ConvKeyHash()(ConvKey(p, DType::float32, ConvPass::forward, false, false)) ==
        ConvKeyHash()(ConvKey(p, DType::float32, ConvPass::forward, false, false)));
}

TEST_CASE("cuda host: a convolution takes the first of cuDNN's candidates that runs, and says why none did") {
  using frost::cuda_detail::first_that_runs;
  const std::vector<ConvAlgo> candidates = {{1, 1 << 30, 0}, {6, 4096, 0}, {0, 0, 0}};
  // The best one's workspace cannot be had: the next one runs; the last is never tried.
  std::vector<int> tried;
  const ConvAlgo chosen = first_that_runs(
      candidates,
      [&](const ConvAlgo& a) {
        tried.push_back(a.algo);
        return a.workspace > (1 << 20) ? ConvAttempt::unavailable("out of memory") : ConvAttempt::ok();
      },
      "conv2d");
  CHECK(chosen.algo == 6);
  CHECK(chosen.workspace == 4096);
  CHECK(tried == std::vector<int>{1, 6});
  // None runs: one error naming the op and each candidate's reason.
  const std::string none = error_of([&] {
    (void)first_that_runs(candidates, [](const ConvAlgo&) { return ConvAttempt::unavailable("CUDNN_STATUS_NOT_SUPPORTED"); },
                          "conv2d_grad_weight");
  });
  CHECK(none.find("frost::conv2d_grad_weight: none of cuDNN's 3 candidate convolution algorithms ran") != std::string::npos);
  CHECK(none.find("algorithm 1 (1073741824-byte workspace): CUDNN_STATUS_NOT_SUPPORTED") != std::string::npos);
  CHECK(none.find("algorithm 0 (0-byte workspace)") != std::string::npos);
  // A real error from a run ends the search: no later candidate runs.
  tried.clear();
  CHECK_THROWS_AS(first_that_runs(
                      candidates,
                      [&](const ConvAlgo& a) -> ConvAttempt {
                        tried.push_back(a.algo);
                        throw Error("frost::conv2d: cudnnConvolutionForward failed: CUDNN_STATUS_BAD_PARAM");
                      },
                      "conv2d"),
                  Error);
  CHECK(tried == std::vector<int>{1});
}

TEST_CASE("cuda host: the cuBLASLt cache keys tell shapes, epilogues, TF32 and operand alignment apart") {
  CHECK(cuda_detail::alignment_of(reinterpret_cast<const void*>(std::uintptr_t(4096))) == 256);
  CHECK(cuda_detail::alignment_of(reinterpret_cast<const void*>(std::uintptr_t(4096 + 64))) == 64);
  CHECK(cuda_detail::alignment_of(reinterpret_cast<const void*>(std::uintptr_t(4096 + 4))) == 4);
  CHECK(cuda_detail::alignment_of(reinterpret_cast<const void*>(std::uintptr_t(4097))) == 1);
  const auto at = [](std::uintptr_t a) { return reinterpret_cast<const void*>(a); };
  constexpr std::size_t ws = 32 << 20;
  const auto key = [&](std::int64_t m, std::uintptr_t x, UnaryOp act, bool packed, bool tf32) {
    return LtKey(m, 128, 256, at(x), 256, at(0x10000), 256, packed, at(0x20000), act, tf32, ws);
  };
  std::unordered_set<LtKey, LtKeyHash> keys;
  keys.insert(key(64, 0x30000, UnaryOp::relu, false, false));
  // Another address with the same alignment is the same key: one answer
  // serves every batch the arena places at a 256-byte boundary.
  keys.insert(key(64, 0x40000, UnaryOp::relu, false, false));
  CHECK(keys.size() == 1);
  keys.insert(key(1, 0x30000, UnaryOp::relu, false, false));           // batch
  keys.insert(key(64, 0x30040, UnaryOp::relu, false, false));          // x only 64-byte aligned
  keys.insert(key(64, 0x30000, UnaryOp::gelu_tanh, false, false));     // epilogue
  keys.insert(key(64, 0x30000, UnaryOp::copy, false, false));          // bias alone
  keys.insert(key(64, 0x30000, UnaryOp::relu, true, false));           // packed weight
  keys.insert(key(64, 0x30000, UnaryOp::relu, false, true));           // TF32
  keys.insert(LtKey(64, 128, 256, at(0x30000), 256, at(0x10000), 256, false, at(0x20000), UnaryOp::relu, false, ws / 2));
  CHECK(keys.size() == 8);
  CHECK(LtKeyHash()(key(64, 0x30000, UnaryOp::relu, false, false)) ==
        LtKeyHash()(key(64, 0x50000, UnaryOp::relu, false, false)));
}

TEST_CASE("cuda host: device memory bookkeeping counts, peaks and caps") {
  MemoryBook book(1000, "cuda:0");
  book.reserve(300);
  book.reserve(200);
  book.release(300);
  auto s = book.stats();
  CHECK(s.current_bytes == 200);
  CHECK(s.peak_bytes == 500);
  CHECK(s.allocations == 2);
  CHECK(s.total_bytes == 1000);
  CHECK(s.limit_bytes == 0);
  book.reset_peak();
  CHECK(book.stats().peak_bytes == 200);

  book.set_fraction(0.5);
  CHECK(book.stats().limit_bytes == 500);
  book.reserve(300);  // 500 in use: exactly at the cap
  const std::string m = error_of([&] { book.reserve(1); });
  CHECK(m.find("allocating 1 bytes on cuda:0") != std::string::npos);
  CHECK(m.find("memory cap of 500 bytes") != std::string::npos);
  CHECK(m.find("500 bytes in use") != std::string::npos);
  CHECK(book.stats().current_bytes == 500);  // the refused allocation is not counted
  CHECK(error_of([&] { book.set_fraction(1.5); }).find("out of range") != std::string::npos);
  CHECK(error_of([&] { book.set_fraction(0); }).find("out of range") != std::string::npos);
}

TEST_CASE("cuda host: the memory CUDA Graphs hold counts as held, and later allocations see it under the cap") {
  MemoryBook book(1000, "cuda:0");
  book.reserve(100);
  book.set_graph_bytes(300);  // a plan's graph launched: the driver reports 300 bytes for graphs
  auto s = book.stats();
  CHECK(s.current_bytes == 400);
  CHECK(s.graph_bytes == 300);
  CHECK(s.peak_bytes == 400);
  CHECK(s.allocations == 1);  // the driver's memory is not one of frost's allocations
  book.set_graph_bytes(300);  // asked again, unchanged: not counted twice
  CHECK(book.stats().current_bytes == 400);
  book.set_fraction(0.5);
  CHECK(error_of([&] { book.reserve(101); }).find("400 bytes in use") != std::string::npos);
  book.reserve(100);
  book.set_graph_bytes(0);  // the last graph destroyed, its memory trimmed
  s = book.stats();
  CHECK(s.current_bytes == 200);
  CHECK(s.graph_bytes == 0);
  CHECK(s.peak_bytes == 500);
}

TEST_CASE("cuda host: asking for CUDA without a device, or without frost::cuda, is a clear error") {
  if (frost::cuda::is_available()) {
    MESSAGE("skipped: a CUDA device is present (tests/gpu covers it)");
    return;
  }
  CHECK(frost::cuda::device_count() == 0);
  const std::string m = error_of([] { (void)Tensor<float>::ones({2}).to(Device::cuda()); });
  if (frost::detail::cuda_runtime_slot() == nullptr) {
    // Built without frost::cuda: the message says which target to link.
    CHECK(m.find("target_link_libraries(<your target> PRIVATE frost::cuda)") != std::string::npos);
    CHECK(error_of([] { frost::cuda::synchronize(); }).find("frost::cuda") != std::string::npos);
    CHECK(error_of([] { frost::cuda::empty_cache(); }).find("frost::cuda") != std::string::npos);
  } else {
    // Linked, but this machine has no GPU.
    CHECK(m.find("no CUDA device is visible") != std::string::npos);
    CHECK(error_of([] { frost::cuda::empty_cache(); }).find("empty_cache: no CUDA device is visible") != std::string::npos);
  }
  // A module asked to move reports the same.
  frost::nn::Linear lin(2, 3);
  CHECK_FALSE(error_of([&] { lin->to(Device::cuda()); }).empty());
  CHECK(lin->weight.device() == Device::cpu());
  // So does a plan, which keeps running on the CPU.
  lin->eval();
  const auto x = Tensor<float>::ones({4, 2});
  auto plan = frost::jit::freeze(lin, x);
  CHECK_FALSE(error_of([&] { plan.to(Device::cuda()); }).empty());
  CHECK(plan.device() == Device::cpu());
  frost::InferenceMode im;
  CHECK((plan.run(x) - lin(x)).abs().max().item() < 1e-6f);
}

TEST_CASE("cuda host: a device index past frost's range, or past the visible devices, is a clear error") {
  // Index checks come before any device is touched, with or without a GPU.
  for (int bad : {-1, kMaxCudaDevices, 99}) {
    CAPTURE(bad);
    const std::string m = error_of([&] { (void)Tensor<float>::ones({2}).to(Device::cuda(bad)); });
    CHECK(m.find("cuda:" + std::to_string(bad)) != std::string::npos);
    CHECK(m.find("is not a device index frost takes (cuda:0 to cuda:15)") != std::string::npos);
  }
  if (frost::detail::cuda_runtime_slot() == nullptr) return;  // without frost::cuda: the link message above
  // One past the devices this program sees: the message counts them.
  const int visible = frost::cuda::device_count();
  const std::string m = error_of([&] { (void)Tensor<float>::ones({2}).to(Device::cuda(visible)); });
  if (visible == 0) CHECK(m.find("no CUDA device is visible") != std::string::npos);
  else CHECK(m.find("requested, but this program sees " + std::to_string(visible)) != std::string::npos);
}
