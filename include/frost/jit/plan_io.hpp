// A plan as one safetensors file: the constants as tensors ("b<buffer id>"),
// the graph, guards, memory plan and pass report as JSON in the metadata
// ("frost.plan"), with the format version beside it. The JSON half is in
// plan_io_json.hpp: inline in header-only mode, compiled once into
// frost::compiled otherwise (as the safetensors header code is).
#pragma once
#include <string>
#include <vector>

#include "../io/safetensors.hpp"
#include "graph.hpp"

#if defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#define FROST_PLAN_IO_INLINE
#else
#define FROST_PLAN_IO_INLINE inline
#endif

namespace frost::jit::detail {

inline constexpr const char* kPlanFormat = "frost.plan";
// 2: a one-row linear's prepared weight is gemv_rows.hpp's kilobyte rows
// and a flag, one element more than version 1's panels (prepared buffers
// are made again on load, but their sizes are in the saved graph).
// 3: a one-row linear may write over its input (writes_over_input), which
// version 2's runner would read as it wrote.
inline constexpr int kPlanVersion = 3;

/// Everything a plan is, apart from its workspaces.
struct PlanParts {
  Graph g;
  std::vector<std::int64_t> offsets;  // arena byte offset per buffer (-1: none)
  std::int64_t arena_bytes = 0;
  std::vector<std::string> report;
};

/// The "frost.plan" metadata JSON of `p` (constants are referenced, not embedded).
FROST_PLAN_IO_INLINE std::string plan_to_json(const PlanParts& p);
/// Parses the JSON and takes the constants from `f` (tensors named prefix + "b<id>"); structure
/// only (validate_plan checks safety).
FROST_PLAN_IO_INLINE PlanParts plan_from_json(const std::string& text, const SafetensorsFile& f,
                                              const std::string& prefix = "");

inline std::string constant_tensor_name(std::size_t buffer) { return "b" + std::to_string(buffer); }

}  // namespace frost::jit::detail

#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#include "plan_io_json.hpp"
#endif
