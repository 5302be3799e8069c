// The JSON half of plan files (see plan_io.hpp). Reading never trusts the
// file: every field is type-checked, every list bounded, every enum range
// checked here; validate_plan then checks that what it describes is safe to run.
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "plan_io.hpp"

namespace frost::jit::detail {

namespace plan_json {

using nlohmann::json;

inline json slot(const Slot& s) {
  return json::array({s.buf, s.offset, std::vector<std::int64_t>(s.shape.begin(), s.shape.end()),
                      std::vector<std::int64_t>(s.strides.begin(), s.strides.end())});
}

/// A double as JSON: JSON has no inf or NaN (nlohmann writes them as null),
/// so those are written as the strings "inf", "-inf" and "nan".
inline json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

inline std::string hex(const std::vector<unsigned char>& v) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : v) s += d[c >> 4], s += d[c & 15];
  return s;
}

/// Typed, bounded access to a parsed document; errors name the file and the field.
struct Reader {
  const std::string& source;
  template <class... A>
  [[noreturn]] void bad(const A&... parts) const {
    frost::detail::fail("frost::jit::Plan::load: ", source, ": ", parts...);
  }
  const json& at(const json& o, const char* key) const {
    if (!o.is_object()) bad("expected an object holding '", key, "'");
    auto it = o.find(key);
    if (it == o.end()) bad("missing field '", key, "'");
    return *it;
  }
  std::int64_t i64(const json& v, const char* what) const {
    if (!v.is_number_integer()) bad("'", what, "' must be an integer");
    return v.get<std::int64_t>();
  }
  std::int64_t i64_in(const json& v, const char* what, std::int64_t lo, std::int64_t hi) const {
    const auto x = i64(v, what);
    if (x < lo || x > hi) bad("'", what, "' = ", x, " is outside [", lo, ", ", hi, "]");
    return x;
  }
  double f64(const json& v, const char* what) const {
    if (v.is_string()) {  // the non-finite values, as number() writes them
      const auto& t = v.get_ref<const std::string&>();
      if (t == "inf") return std::numeric_limits<double>::infinity();
      if (t == "-inf") return -std::numeric_limits<double>::infinity();
      if (t == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    if (!v.is_number()) bad("'", what, "' must be a number (or \"inf\", \"-inf\", \"nan\")");
    return v.get<double>();
  }
  bool boolean(const json& v, const char* what) const {
    if (!v.is_boolean()) bad("'", what, "' must be true or false");
    return v.get<bool>();
  }
  std::string str(const json& v, const char* what) const {
    if (!v.is_string()) bad("'", what, "' must be a string");
    return v.get<std::string>();
  }
  const json& arr(const json& v, const char* what, std::size_t max) const {
    if (!v.is_array()) bad("'", what, "' must be an array");
    if (v.size() > max) bad("'", what, "' has ", v.size(), " entries, more than ", max);
    return v;
  }
  Shape shape(const json& v, const char* what) const {
    const json& a = arr(v, what, kMaxDims);
    Shape s;
    for (const auto& e : a) s.push_back(i64(e, what));
    return s;
  }
  Slot slot(const json& v) const {
    const json& a = arr(v, "slot", 4);
    if (a.size() != 4) bad("a slot is [buffer, offset, shape, strides]");
    return Slot{static_cast<int>(i64_in(a[0], "slot buffer", -1, 1 << 30)), i64_in(a[1], "slot offset", 0, kMaxPlanElements),
                shape(a[2], "slot shape"), shape(a[3], "slot strides")};
  }
  std::vector<unsigned char> unhex(const json& v) const {
    const std::string s = str(v, "guard values");
    if (s.size() % 2) bad("guard values must be hex pairs");
    std::vector<unsigned char> out(s.size() / 2);
    auto nib = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      bad("guard values must be lowercase hex");
    };
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<unsigned char>(nib(s[2 * i]) * 16 + nib(s[2 * i + 1]));
    return out;
  }
};

inline DType dtype(const Reader& r, const json& v) {
  return static_cast<DType>(r.i64_in(v, "dtype", 0, kDTypeCount - 1));
}

}  // namespace plan_json

FROST_PLAN_IO_INLINE std::string plan_to_json(const PlanParts& p) {
  using plan_json::json;
  using plan_json::slot;
  const Graph& g = p.g;
  json buffers = json::array();
  for (std::size_t b = 0; b < g.buffers.size(); ++b) {
    const Buffer& x = g.buffers[b];
    buffers.push_back({{"kind", static_cast<int>(x.kind)}, {"dtype", static_cast<int>(x.dtype)}, {"numel", x.numel},
                       {"input", x.input_index}, {"name", x.name}, {"param", x.param}, {"offset", p.offsets[b]},
                       {"data", x.kind == BufferKind::constant && x.data != nullptr}});
  }
  json steps = json::array();
  for (const auto& s : g.steps) {
    json in = json::array(), out = json::array(), prog = json::array();
    for (const auto& x : s.in) in.push_back(slot(x));
    for (const auto& x : s.out) out.push_back(slot(x));
    for (const auto& e : s.program) prog.push_back(json::array({e.binary, e.op, e.a, e.b, e.dst, plan_json::number(e.p0), plan_json::number(e.p1)}));
    const auto& a = s.gemm;
    const auto& c = s.conv;
    const auto& q = s.pool;
    steps.push_back({{"kind", static_cast<int>(s.kind)}, {"dtype", static_cast<int>(s.dtype)}, {"in", in}, {"out", out},
                     {"op", s.op}, {"p0", plan_json::number(s.p0)}, {"p1", plan_json::number(s.p1)}, {"i0", s.i0}, {"seed", s.seed}, {"rng_offset", s.rng_offset},
                     {"gemm", json::array({a.trans_a, a.trans_b, a.m, a.n, a.k, a.lda, a.sa, a.ldb, a.sb, a.ldc, a.sc, a.batch, plan_json::number(a.alpha), plan_json::number(a.beta)})},
                     {"conv", json::array({c.batch, c.in_channels, c.in_h, c.in_w, c.out_channels, c.kernel_h, c.kernel_w, c.out_h, c.out_w,
                                           c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.dilation_h, c.dilation_w, c.groups})},
                     {"pool", json::array({q.batch, q.channels, q.in_h, q.in_w, q.out_h, q.out_w, q.kernel_h, q.kernel_w, q.stride_h,
                                           q.stride_w, q.pad_h, q.pad_w, q.dilation_h, q.dilation_w, q.ceil_mode,
                                           q.count_include_pad, q.divisor_override})},
                     {"program", prog}, {"guard", s.guard}, {"note", s.note}});
  }
  json guards = json::array();
  for (const auto& gd : g.guards)
    guards.push_back({{"how", static_cast<int>(gd.how)}, {"outcome", gd.outcome}, {"expected", plan_json::hex(gd.expected)},
                      {"where", gd.where}});
  json shapes = json::array();
  for (const auto& s : g.input_shapes) shapes.push_back(std::vector<std::int64_t>(s.begin(), s.end()));
  json outputs = json::array();
  for (const auto& o : g.outputs) outputs.push_back(slot(o));
  return json{{"dtype", static_cast<int>(g.dtype)}, {"arena_bytes", p.arena_bytes}, {"buffers", buffers},
              {"inputs", g.inputs}, {"input_shapes", shapes}, {"outputs", outputs}, {"steps", steps},
              {"guards", guards}, {"report", p.report}}
      .dump();
}

FROST_PLAN_IO_INLINE PlanParts plan_from_json(const std::string& text, const SafetensorsFile& f, const std::string& prefix) {
  using plan_json::json;
  const plan_json::Reader r{f.source()};
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) r.bad("the plan metadata is not valid JSON");
  constexpr std::size_t kMaxList = 1 << 20;
  PlanParts p;
  Graph& g = p.g;
  g.dtype = plan_json::dtype(r, r.at(doc, "dtype"));
  p.arena_bytes = r.i64_in(r.at(doc, "arena_bytes"), "arena_bytes", 0, kMaxPlanElements);
  for (const auto& b : r.arr(r.at(doc, "buffers"), "buffers", kMaxList)) {
    Buffer x;
    x.kind = static_cast<BufferKind>(r.i64_in(r.at(b, "kind"), "buffer kind", 0, 3));
    x.dtype = plan_json::dtype(r, r.at(b, "dtype"));
    x.numel = r.i64_in(r.at(b, "numel"), "numel", 0, kMaxPlanElements);
    x.input_index = static_cast<int>(r.i64_in(r.at(b, "input"), "input", -1, 1 << 20));
    x.name = r.str(r.at(b, "name"), "name");
    x.param = r.boolean(r.at(b, "param"), "param");
    p.offsets.push_back(r.i64_in(r.at(b, "offset"), "offset", -1, kMaxPlanElements));
    if (r.boolean(r.at(b, "data"), "data")) {
      if (x.kind != BufferKind::constant) r.bad("only constants carry data");
      const std::string tn = prefix + constant_tensor_name(g.buffers.size());
      const SafetensorsInfo& info = f.info(tn);
      if (info.shape != Shape{x.numel}) r.bad("tensor '", tn, "' has shape ", info.shape.str(), ", expected [", x.numel, "]");
      // Stored in the buffer's own dtype: anything else is a corrupt file, not a conversion to make.
      if (info.dtype != frost::detail::safetensors::dtype_string(x.dtype))
        r.bad("tensor '", tn, "' is ", info.dtype, ", the buffer ", dtype_name(x.dtype));
      x.data = visit_dtype(x.dtype, [&](auto tag) { return f.get<decltype(tag)>(tn).impl()->storage; });
    }
    g.buffers.push_back(std::move(x));
  }
  for (const auto& i : r.arr(r.at(doc, "inputs"), "inputs", kMaxList))
    g.inputs.push_back(static_cast<int>(r.i64_in(i, "input", 0, 1 << 30)));
  for (const auto& s : r.arr(r.at(doc, "input_shapes"), "input_shapes", kMaxList)) g.input_shapes.push_back(r.shape(s, "input shape"));
  for (const auto& o : r.arr(r.at(doc, "outputs"), "outputs", kMaxList)) g.outputs.push_back(r.slot(o));
  for (const auto& s : r.arr(r.at(doc, "steps"), "steps", kMaxList)) {
    Step x;
    x.kind = static_cast<StepKind>(r.i64_in(r.at(s, "kind"), "step kind", 0, static_cast<int>(kLastStepKind)));
    x.dtype = plan_json::dtype(r, r.at(s, "dtype"));
    for (const auto& e : r.arr(r.at(s, "in"), "in", 1 + 3 * kMaxChainLayers)) x.in.push_back(r.slot(e));
    for (const auto& e : r.arr(r.at(s, "out"), "out", 16)) x.out.push_back(r.slot(e));
    x.op = static_cast<int>(r.i64_in(r.at(s, "op"), "op", 0, 255));
    x.p0 = r.f64(r.at(s, "p0"), "p0");
    x.p1 = r.f64(r.at(s, "p1"), "p1");
    x.i0 = r.i64_in(r.at(s, "i0"), "i0", -kMaxPlanElements, kMaxPlanElements);
    x.seed = static_cast<std::uint64_t>(r.at(s, "seed").is_number_unsigned() ? r.at(s, "seed").get<std::uint64_t>()
                                                                            : static_cast<std::uint64_t>(r.i64(r.at(s, "seed"), "seed")));
    x.rng_offset = static_cast<std::uint64_t>(r.at(s, "rng_offset").is_number_unsigned() ? r.at(s, "rng_offset").get<std::uint64_t>()
                                                                                        : static_cast<std::uint64_t>(r.i64(r.at(s, "rng_offset"), "rng_offset")));
    const json& gm = r.arr(r.at(s, "gemm"), "gemm", 14);
    if (gm.size() != 14) r.bad("'gemm' needs 14 entries");
    x.gemm = {r.boolean(gm[0], "trans_a"), r.boolean(gm[1], "trans_b"), r.i64(gm[2], "m"), r.i64(gm[3], "n"),
              r.i64(gm[4], "k"), r.i64(gm[5], "lda"), r.i64(gm[6], "sa"), r.i64(gm[7], "ldb"), r.i64(gm[8], "sb"),
              r.i64(gm[9], "ldc"), r.i64(gm[10], "sc"), r.i64(gm[11], "batch"), r.f64(gm[12], "alpha"), r.f64(gm[13], "beta")};
    const json& cv = r.arr(r.at(s, "conv"), "conv", 16);
    if (cv.size() != 16) r.bad("'conv' needs 16 entries");
    std::int64_t c[16];
    for (int i = 0; i < 16; ++i) c[i] = r.i64_in(cv[static_cast<std::size_t>(i)], "conv", -1, kMaxPlanElements);
    x.conv = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]};
    const json& pl = r.arr(r.at(s, "pool"), "pool", 17);
    if (pl.size() != 17) r.bad("'pool' needs 17 entries");
    std::int64_t q[14];
    for (int i = 0; i < 14; ++i) q[i] = r.i64_in(pl[static_cast<std::size_t>(i)], "pool", -1, kMaxPlanElements);
    Pool2dParams& pp = x.pool;
    std::int64_t* fields[] = {&pp.batch, &pp.channels, &pp.in_h, &pp.in_w, &pp.out_h, &pp.out_w, &pp.kernel_h,
                              &pp.kernel_w, &pp.stride_h, &pp.stride_w, &pp.pad_h, &pp.pad_w, &pp.dilation_h, &pp.dilation_w};
    for (int i = 0; i < 14; ++i) *fields[i] = q[i];
    pp.ceil_mode = r.boolean(pl[14], "ceil_mode");
    pp.count_include_pad = r.boolean(pl[15], "count_include_pad");
    pp.divisor_override = r.i64_in(pl[16], "divisor_override", 0, kMaxPlanElements);
    for (const auto& e : r.arr(r.at(s, "program"), "program", 8)) {
      const json& a = r.arr(e, "instruction", 7);
      if (a.size() != 7) r.bad("an instruction has 7 fields");
      x.program.push_back({r.boolean(a[0], "binary"), static_cast<std::uint8_t>(r.i64_in(a[1], "op", 0, 255)),
                           static_cast<std::uint8_t>(r.i64_in(a[2], "a", 0, 15)),
                           static_cast<std::uint8_t>(r.i64_in(a[3], "b", 0, 15)),
                           static_cast<std::uint8_t>(r.i64_in(a[4], "dst", 0, 15)), r.f64(a[5], "p0"), r.f64(a[6], "p1")});
    }
    x.guard = static_cast<int>(r.i64_in(r.at(s, "guard"), "guard", -1, 1 << 30));
    x.note = r.str(r.at(s, "note"), "note");
    g.steps.push_back(std::move(x));
  }
  for (const auto& e : r.arr(r.at(doc, "guards"), "guards", kMaxList)) {
    Guard gd;
    gd.how = static_cast<frost::detail::HostRead>(r.i64_in(r.at(e, "how"), "how", 0, 2));
    gd.outcome = r.boolean(r.at(e, "outcome"), "outcome");
    gd.expected = r.unhex(r.at(e, "expected"));
    gd.where = r.str(r.at(e, "where"), "where");
    g.guards.push_back(std::move(gd));
  }
  for (const auto& l : r.arr(r.at(doc, "report"), "report", 64)) p.report.push_back(r.str(l, "report"));
  return p;
}

}  // namespace frost::jit::detail
