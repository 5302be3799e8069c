// A frozen plan's linear step as one cuBLASLt matmul with its bias (and
// ReLU or tanh-approximate GELU) epilogue: the bias add and activation happen
// in the GEMM's write-out, no second pass over the output. (cuBLASLt's GELU
// is the tanh approximation, so the exact GELU keeps its own pass.) Row-major y = x W^T is
// column-major y^T = W x^T, so W is cuBLASLt's A and x its B.
#pragma once
#include <cublasLt.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <frost/core/functors.hpp>

#include "check.cuh"
#include "lt_key.hpp"

namespace frost::cuda_detail {

/// Owns the descriptors of one call.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

/// A cached heuristic answer: the algorithm, or that cuBLASLt has none (the
/// caller's plain path then runs without asking again).
struct LtChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

/// One device's answers, per LtKey. The heuristic costs more host time than
/// a small GEMM takes on the device, and an eager linear asked it on every call.
class LtCache {
 public:
  bool find(const LtKey& key, LtChoice& out) {
    std::lock_guard<std::mutex> g(m_);
    const auto it = map_.find(key);
    if (it == map_.end()) return false;
    out = it->second;
    return true;
  }
  void put(const LtKey& key, const LtChoice& c) {
    std::lock_guard<std::mutex> g(m_);
    map_[key] = c;
  }

 private:
  std::mutex m_;
  std::unordered_map<LtKey, LtChoice, LtKeyHash> map_;
};

/// Whether cuBLASLt's epilogues compute act: none, relu, gelu_tanh.
inline bool lt_epilogue_takes(UnaryOp act) {
  return act == UnaryOp::copy || act == UnaryOp::relu || act == UnaryOp::gelu_tanh;
}

/// cuBLASLt's best algorithm for c's matmul, told each operand's alignment
/// (from key) and the workspace it may use; found = false when it has none.
inline LtChoice lt_heuristic(cublasLtHandle_t lt, LtCall& c, const LtKey& key, std::size_t workspace_bytes,
                             const char* op) {
  FROST_CUDA(cublasLtMatmulPreferenceCreate(&c.pref), op);
  FROST_CUDA(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                  sizeof workspace_bytes),
             op);
  // The heuristic assumes 256-byte-aligned operands unless told otherwise;
  // a plan's arena aligns its buffers to 64 bytes and a slot may start
  // anywhere in one, so each operand's own alignment is declared.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> operands[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
  for (const auto& [attr, align] : operands)
    FROST_CUDA(cublasLtMatmulPreferenceSetAttribute(c.pref, attr, &align, sizeof align), op);
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  // NOT_SUPPORTED or nothing found: no algorithm for this epilogue (the
  // caller's plain path runs, and the answer is cached). Anything else is a
  // real error in what was asked, not a reason to fall back quietly.
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &best, &found);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return {};
  check(s, "cublasLtMatmulAlgoGetHeuristic", op);
  if (found == 0) return {};
  return {true, best.algo};
}

/// y[m, n] = act(x[m, k] op(w) + bias) in float with a bias and an act
/// lt_epilogue_takes; false when cuBLASLt has no algorithm for it (the caller falls back).
/// The heuristic is asked once per LtKey; `cache` keeps its answer.
inline bool lt_linear(cublasLtHandle_t lt, LtCache& cache, cudaStream_t stream, void* workspace,
                      std::size_t workspace_bytes, bool tf32, std::int64_t m, std::int64_t n, std::int64_t k,
                      const float* x, std::int64_t ldx, const float* w, std::int64_t ldw, bool packed,
                      const float* bias, float* y, UnaryOp act) {
  const char* op = "linear (cuBLASLt)";
  // The epilogue reads the bias in 16-byte vectors: another one takes the plain path.
  if (alignment_of(bias) < 16) return false;
  const LtKey key(m, n, k, x, ldx, w, ldw, packed, y, act, tf32, workspace_bytes);
  LtChoice choice;
  const bool cached = cache.find(key, choice);
  if (cached && !choice.found) return false;
  LtCall c;
  FROST_CUDA(cublasLtMatmulDescCreate(&c.op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
  const cublasOperation_t ta = packed ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  FROST_CUDA(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), op);
  FROST_CUDA(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), op);
  const cublasLtEpilogue_t epi = act == UnaryOp::relu        ? CUBLASLT_EPILOGUE_RELU_BIAS
                                 : act == UnaryOp::gelu_tanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                             : CUBLASLT_EPILOGUE_BIAS;
  FROST_CUDA(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), op);
  const void* bp = bias;
  FROST_CUDA(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp), op);
  // Column-major views: packed w [k, n] is n x k (ld ldw); w [n, k] is k x n, transposed.
  FROST_CUDA(packed ? cublasLtMatrixLayoutCreate(&c.a, CUDA_R_32F, n, k, ldw)
                    : cublasLtMatrixLayoutCreate(&c.a, CUDA_R_32F, k, n, ldw),
             op);
  FROST_CUDA(cublasLtMatrixLayoutCreate(&c.b, CUDA_R_32F, k, m, ldx), op);
  FROST_CUDA(cublasLtMatrixLayoutCreate(&c.d, CUDA_R_32F, n, m, n), op);
  if (!cached) {
    choice = lt_heuristic(lt, c, key, workspace_bytes, op);
    cache.put(key, choice);
    if (!choice.found) return false;
  }
  const float one = 1, zero = 0;
  const cublasStatus_t s = cublasLtMatmul(lt, c.op, &one, w, c.a, x, c.b, &zero, y, c.d, y, c.d, &choice.algo,
                                          workspace, workspace_bytes, stream);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
    cache.put(key, LtChoice{});
    return false;
  }
  check(s, "cublasLtMatmul", op);
  return true;
}

}  // namespace frost::cuda_detail
