// Plan<T>'s file side (plan.hpp): save, load (every part checked first),
// refit from a module or a weights file, and the traced graph a file keeps.
#pragma once
#include <map>
#include <string>

#include "plan.hpp"

namespace frost::jit {

template <FloatScalar T>
void Plan<T>::save(const std::string& path) const {
  std::vector<frost::detail::safetensors::OutEntry> entries;
  auto add_constants = [&](const Graph& g, const char* prefix) {
    for (std::size_t b = 0; b < g.buffers.size(); ++b) {
      const Buffer& buf = g.buffers[b];
      if (buf.kind != BufferKind::constant || !buf.data) continue;
      frost::detail::safetensors::OutEntry e;
      e.name = prefix + detail::constant_tensor_name(b);
      e.dtype = frost::detail::safetensors::dtype_string(buf.dtype);  // a view of a literal
      e.shape = Shape{buf.numel};
      e.data.resize(buf.data->nbytes);
      if (!e.data.empty()) std::memcpy(e.data.data(), buf.data->data, e.data.size());
      entries.push_back(std::move(e));
    }
  };
  add_constants(g_, "");
  std::map<std::string, std::string> meta{{"format", detail::kPlanFormat},
                                          {"format_version", std::to_string(detail::kPlanVersion)},
                                          {"frost.plan", detail::plan_to_json({g_, offsets_, arena_bytes_, report_})},
                                          {"frost.allow_tf32", opt_.allow_tf32 ? "1" : "0"},
                                          {"frost.quantize_linear", opt_.quantize_linear ? "1" : "0"}};
  if (source_) {
    add_constants(*source_, "source.");
    meta["frost.source"] = detail::plan_to_json({*source_, std::vector<std::int64_t>(source_->buffers.size(), -1), 0, {}});
  }
  frost::detail::safetensors::write_file(frost::detail::safetensors::serialize(entries, meta), path);
}

template <FloatScalar T>
Plan<T> Plan<T>::from_file(const SafetensorsFile& f) {
  const auto& meta = f.metadata();
  auto get = [&](const char* key) -> const std::string& {
    auto it = meta.find(key);
    FROST_CHECK(it != meta.end(), "frost::jit::Plan::load: ", f.source(), ": not a frost plan (no '", key,
                "' in the metadata)");
    return it->second;
  };
  FROST_CHECK(get("format") == detail::kPlanFormat, "frost::jit::Plan::load: ", f.source(), ": format is '",
              get("format"), "', expected '", detail::kPlanFormat, "'");
  FROST_CHECK(get("format_version") == std::to_string(detail::kPlanVersion), "frost::jit::Plan::load: ", f.source(),
              ": written with plan format version ", get("format_version"), ", this frost reads version ",
              detail::kPlanVersion);
  detail::PlanParts p = detail::plan_from_json(get("frost.plan"), f);
  FROST_CHECK(p.g.dtype == dtype_of<T>(), "frost::jit::Plan::load: ", f.source(), ": the plan is for ",
              dtype_name(p.g.dtype), " tensors, not ", dtype_name<T>());
  detail::validate_plan(p.g, p.offsets, p.arena_bytes, "frost::jit::Plan::load: " + f.source());
  detail::make_prepared<T>(p.g);  // never saved: this build's form
  Plan plan;
  plan.g_ = std::move(p.g);
  plan.offsets_ = std::move(p.offsets);
  plan.arena_bytes_ = p.arena_bytes;
  plan.report_ = std::move(p.report);
  // The options refit freezes again with (absent in older files: off).
  auto flag = [&](const char* key) {
    const auto it = meta.find(key);
    if (it == meta.end()) return false;
    FROST_CHECK(it->second == "0" || it->second == "1", "frost::jit::Plan::load: ", f.source(), ": '", key, "' is '",
                it->second, "', expected '0' or '1'");
    return it->second == "1";
  };
  plan.opt_.allow_tf32 = flag("frost.allow_tf32");
  plan.opt_.quantize_linear = flag("frost.quantize_linear");
  if (meta.count("frost.source")) {
    // The traced graph's constants are stored under "source.b<id>".
    plan.source_ = std::make_shared<const Graph>(load_source(f, meta.at("frost.source")));
  }
  return plan;
}

template <FloatScalar T>
template <class M>
  requires(!std::is_convertible_v<const M&, std::string>)
void Plan<T>::refit(const M& module) {
  const auto& m = module_ref(module);
  std::map<std::string, Ref<StorageImpl>> by_name;
  std::map<std::string, std::pair<DType, std::int64_t>> meta;
  auto add = [&](const std::string& name, const auto& t) {
    using U = std::remove_cvref_t<decltype(*t.data())>;
    const auto c = t.detach().cpu().contiguous().clone();  // a module trained on a GPU refits too
    by_name[name] = c.impl()->storage;
    meta[name] = {dtype_of<U>(), c.numel()};
  };
  for (const auto& [n, t] : m.named_parameters()) add(n, t);
  for (const auto& [n, t] : m.named_buffers()) add(n, t);
  for (const auto& [n, t] : m.named_index_buffers()) add(n, t);
  refit_with(by_name, meta, "the module");
}

template <FloatScalar T>
void Plan<T>::refit(const std::string& path) {
  const auto f = SafetensorsFile::open(path);
  std::map<std::string, Ref<StorageImpl>> by_name;
  std::map<std::string, std::pair<DType, std::int64_t>> meta;
  // Each weight in the dtype the plan holds it in (a file's F16 / F32 / F64
  // weights convert to a float plan's, its integers to an index buffer's
  // int64 or a mask's bool); a name the plan lacks is left alone.
  std::map<std::string, DType> want;
  if (source_)
    for (const auto& b : source_->buffers)
      if (b.kind == BufferKind::constant && b.param) want[b.name] = b.dtype;
  for (const auto& name : f.names()) {
    const auto& info = f.info(name);
    const bool floating = info.dtype == "F16" || info.dtype == "BF16" || info.dtype == "F32" || info.dtype == "F64";
    const auto it = want.find(name);
    const DType dt = it != want.end() ? it->second : floating ? dtype_of<T>() : DType::int64;
    visit_dtype(dt, [&](auto tag) {
      auto t = f.get<decltype(tag)>(name);
      by_name[name] = t.impl()->storage;
      meta[name] = {dt, t.numel()};
    });
  }
  refit_with(by_name, meta, path);
}

template <FloatScalar T>
Graph Plan<T>::load_source(const SafetensorsFile& f, const std::string& json) {
  detail::PlanParts p = detail::plan_from_json(json, f, "source.");
  // The traced graph is only frozen again (constant folding runs its
  // constant steps), so it is checked like a plan, in its traced form.
  detail::validate_plan(p.g, p.offsets, p.arena_bytes, "frost::jit::Plan::load: " + f.source() + " (traced graph)",
                        /*traced=*/true);
  return std::move(p.g);
}

template <FloatScalar T>
void Plan<T>::refit_with(const std::map<std::string, Ref<StorageImpl>>& by_name,
                         const std::map<std::string, std::pair<DType, std::int64_t>>& meta, const std::string& from) {
  FROST_CHECK(source_ != nullptr, "frost::jit::Plan::refit: this plan has no traced graph to freeze again");
  Graph g = *source_;
  std::string missing;
  for (auto& b : g.buffers) {
    if (b.kind != BufferKind::constant || !b.param) continue;
    auto it = by_name.find(b.name);
    if (it == by_name.end()) {
      missing += (missing.empty() ? "" : ", ") + b.name;
      continue;
    }
    const auto& [dt, n] = meta.at(b.name);
    FROST_CHECK(dt == b.dtype && n == b.numel, "frost::jit::Plan::refit: '", b.name, "' from ", from, " is ",
                dtype_name(dt), " with ", n, " elements; the plan was traced with ", dtype_name(b.dtype), " and ",
                b.numel, " elements");
    b.data = it->second;
  }
  FROST_CHECK(missing.empty(), "frost::jit::Plan::refit: ", from, " is missing the plan's ", missing);
  const Device d = device_;
  Plan next = refrozen(std::move(g), d);
  FROST_CHECK(next.g_.steps.size() == g_.steps.size() && next.arena_bytes_ == arena_bytes_,
              "frost::jit::Plan::refit: the new weights change the frozen plan's structure (", next.g_.steps.size(),
              " steps instead of ", g_.steps.size(), "); freeze the module again");
  *this = std::move(next);
  place_on(d);  // the new constants go where the old ones were
}

}  // namespace frost::jit
