// Plan files: save -> load -> run equals the original (no model code
// needed), refit takes new weights without a trace, and corrupt, truncated,
// other-version or hostile files are a frost::Error.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <frost/frost.hpp>
#include <string>

#include "../examples/research_model.hpp"
#include "support.hpp"

using namespace frost;
using T = Tensor<float>;

namespace {

bool close(const T& a, const T& b, double tol = 1e-5) {
  return a.shape() == b.shape() && (a - b).abs().max().item() <= tol * (1.0 + b.abs().max().item());
}

using test::temp_path;

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// The plan file with its metadata edited by `edit`.
std::vector<std::uint8_t> with_metadata(const std::string& path,
                                        const std::function<void(std::map<std::string, std::string>&)>& edit) {
  const auto f = SafetensorsFile::open(path);
  std::map<std::string, std::string> meta = f.metadata();
  edit(meta);
  std::vector<detail::safetensors::OutEntry> entries;
  for (const auto& n : f.names()) {
    const auto& info = f.info(n);
    detail::safetensors::OutEntry e;
    e.name = n;
    e.dtype = info.dtype;
    e.shape = info.shape;
    f.get_any(n).visit([&](const auto& t) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(t.data());
      e.data.assign(p, p + t.numel() * static_cast<std::int64_t>(sizeof(*t.data())));
    });
    entries.push_back(std::move(e));
  }
  return detail::safetensors::serialize(entries, meta);
}
/// The plan file with its "frost.plan" JSON edited by `edit`.
std::vector<std::uint8_t> with_plan_json(const std::string& path, const std::function<void(std::string&)>& edit) {
  return with_metadata(path, [&](std::map<std::string, std::string>& meta) { edit(meta["frost.plan"]); });
}

void replace_first(std::string& s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("jit::Plan::save / load: the loaded plan runs without the model and equals the original") {
  manual_seed(21);
  auto model = nn::make<guide::AdaptiveResNet>();
  model->eval();
  const auto x = T::randn({2, 3, 16, 16}) * 0.1f + 3.0f;
  auto plan = jit::freeze(model, x);
  const auto path = temp_path("adaptive.frost");
  plan.save(path);
  auto loaded = jit::Plan<float>::load(path);
  std::remove(path.c_str());
  CHECK(close(loaded.run(x), plan.run(x), 0));
  CHECK(loaded.graph().guards.size() == plan.graph().guards.size());
  CHECK(loaded.summary() == plan.summary());
  // The guard travels with the file.
  CHECK_THROWS_AS(loaded.run(T::randn({2, 3, 16, 16}) * 0.1f), jit::GuardFailure);
  CHECK_THROWS_WITH_AS(jit::Plan<double>::load([&] { plan.save(path); return path; }()),
                       doctest::Contains("not float64"), Error);
  std::remove(path.c_str());
}

TEST_CASE("jit::Plan::save / load: linear weights' GEMM panels are made again on load, never saved") {
  manual_seed(25);
  auto model = guide::make_mlp();
  model->eval();
  for (std::int64_t rows : {32, 1}) {  // the GEMM kernel's panels, matrix-vector panels
    INFO(rows << " rows");
    const auto x = T::randn({rows, 784});
    auto plan = jit::freeze(model, x);
    jit::FreezeOptions off;
    off.prepare_weights = false;
    auto plain = jit::freeze<float>(jit::trace(model, x), off);
    const auto path = temp_path("panels.frost"), plain_path = temp_path("plain.frost");
    plan.save(path);
    plain.save(plain_path);
    // Same tensors in both files: the panels (as large as the weights) are not among them.
    CHECK(SafetensorsFile::open(path).names().size() == SafetensorsFile::open(plain_path).names().size());
    auto loaded = jit::Plan<float>::load(path);
    CHECK(close(loaded.run(x), plan.run(x), 0));
    CHECK(loaded.summary() == plan.summary());
    // A panel buffer of the wrong size is rejected, not filled past its end.
    write_bytes(path, with_plan_json(path, [](std::string& j) {
      const auto at = j.find("\"kind\":3");
      REQUIRE(at != std::string::npos);
      const auto n = j.find("\"numel\":", at);
      REQUIRE(n != std::string::npos);
      j.insert(n + 8, "1");  // numel 1xxxx: ten times and more
    }));
    CHECK_THROWS_AS(jit::Plan<float>::load(path), Error);
    std::remove(path.c_str());
    std::remove(plain_path.c_str());
  }
}

TEST_CASE("jit::Plan::refit: new weights without tracing again, folded constants recomputed") {
  manual_seed(22);
  auto model = nn::make<guide::ResearchModelBN>();
  model->eval();
  const auto x = T::randn({2, 3, 32, 32});
  auto plan = jit::freeze(model, x);
  // Train a little (weights and batch-norm statistics change), then refit.
  model->train();
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    const auto y = model(T::randn({4, 3, 32, 32}));
    (y * y).mean().backward();
    opt.step();
  }
  model->eval();
  const T eager = [&] { InferenceMode im; return model(x); }();
  CHECK_FALSE(close(plan.run(x), eager, 1e-4));
  plan.refit(model);
  CHECK(close(plan.run(x), eager));
  // From a weights file, into a plan loaded from disk.
  const auto weights = temp_path("weights.safetensors"), pfile = temp_path("bn.frost");
  plan.save(pfile);
  auto loaded = jit::Plan<float>::load(pfile);
  for (auto& p : model->parameters()) {
    NoGradGuard ng;
    p.mul_(0.5f);
  }
  save_safetensors(*model, weights);
  loaded.refit(weights);
  const T eager2 = [&] { InferenceMode im; return model(x); }();
  CHECK(close(loaded.run(x), eager2));
  std::remove(weights.c_str());
  std::remove(pfile.c_str());
  // Weights of another shape are an error that names the tensor.
  auto other = nn::make<guide::ResearchModel>();
  CHECK_THROWS_WITH_AS(plan.refit(other), doctest::Contains("missing"), Error);
}

TEST_CASE("jit::Plan::load: corrupt, truncated, other-version and hostile files are errors") {
  auto mlp = guide::make_mlp();
  mlp->eval();
  auto plan = jit::freeze(mlp, T::randn({2, 784}));
  const auto path = temp_path("mlp.frost"), bad = temp_path("bad.frost");
  plan.save(path);
  const auto good = read_bytes(path);
  auto expect_error = [&](const std::vector<std::uint8_t>& bytes, const char* what) {
    write_bytes(bad, bytes);
    CHECK_THROWS_WITH_AS(jit::Plan<float>::load(bad), doctest::Contains(what), Error);
  };
  // Truncated anywhere: the safetensors layer or the plan check rejects it.
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, std::size_t{100}, good.size() / 2, good.size() - 1}) {
    write_bytes(bad, std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)));
    CHECK_THROWS_AS(jit::Plan<float>::load(bad), Error);
  }
  // A plain weights file is not a plan.
  save_safetensors(*mlp, bad);
  CHECK_THROWS_WITH_AS(jit::Plan<float>::load(bad), doctest::Contains("expected 'frost.plan'"), Error);
  // Another format version.
  {
    auto f = SafetensorsFile::open(path);
    auto meta = f.metadata();
    meta["format_version"] = "99";
    std::vector<detail::safetensors::OutEntry> none;
    write_bytes(bad, detail::safetensors::serialize(none, meta));
    CHECK_THROWS_WITH_AS(jit::Plan<float>::load(bad), doctest::Contains("version 99"), Error);
  }
  // Hostile edits of the plan JSON.
  expect_error(with_plan_json(path, [](std::string& j) { j = "{not json"; }), "not valid JSON");
  expect_error(with_plan_json(path, [](std::string& j) { replace_first(j, "\"arena_bytes\":", "\"arena_bytes\":-5,\"x\":"); }),
               "arena_bytes");
  // A window past its buffer: the output slot's offset pushed out of range.
  expect_error(with_plan_json(path, [](std::string& j) { replace_first(j, "\"outputs\":[[", "\"outputs\":[[0,999999999,[1],[1]],["); }),
               "");
  // A step kind that does not exist.
  expect_error(with_plan_json(path, [](std::string& j) {
                 const auto at = j.find("\"kind\":", j.find("\"steps\""));
                 REQUIRE(at != std::string::npos);
                 j.insert(at + 7, "99");  // "kind":<n> becomes "kind":99<n>
               }),
               "step kind");
  // A step of a kind only float32 / float64 have (the MLP's first, a linear) made int32.
  expect_error(with_plan_json(path, [](std::string& j) {
                 const std::regex first(R"((\"steps\":\[\{\"conv\":\[[^\]]*\],\"dtype\":)0)");
                 REQUIRE(std::regex_search(j, first));
                 j = std::regex_replace(j, first, "$017", std::regex_constants::format_first_only);
               }),
               "step needs float32 or float64, not int32");
  // A conv + pool step frozen to pool in the conv's pass (no scratch) whose
  // prepared filters are taken away: this build cannot pool it in one pass,
  // and the run says so before any kernel runs.
  {
    auto rm = nn::make<guide::ResearchModel>();
    rm->eval();
    const auto x = T::randn({2, 3, 32, 32});
    auto p2 = jit::freeze(rm, x);
    const auto rm_path = temp_path("rm.frost");
    p2.save(rm_path);
    write_bytes(bad, with_plan_json(rm_path, [](std::string& j) {
                  const std::regex bank(R"(,\[\d+,0,\[36,128,64\],\[8192,64,1\]\])");
                  REQUIRE(std::regex_search(j, bank));
                  j = std::regex_replace(j, bank, "");
                }));
    auto loaded = jit::Plan<float>::load(bad);
    CHECK_THROWS_WITH_AS(loaded.run(x), doctest::Contains("freeze the model again here"), Error);
    std::remove(rm_path.c_str());
  }
  // The arena too small for its buffers.
  expect_error(with_plan_json(path, [](std::string& j) { replace_first(j, "\"arena_bytes\":", "\"arena_bytes\":64,\"y\":"); }),
               "");
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("jit::Plan: allow_tf32 is kept by the plan, its file and refit; a bad flag in a file is an error") {
  manual_seed(23);
  auto model = nn::make<guide::ResearchModel>();
  model->eval();
  const auto x = T::randn({2, 3, 32, 32});
  model->train();
  auto plan = jit::freeze(model, {.allow_tf32 = true}, x);
  CHECK(model->is_training());  // traced in evaluation mode, the mode restored
  model->eval();
  CHECK(plan.options().allow_tf32);
  CHECK(plan.summary().find("TF32 allowed on CUDA") != std::string::npos);
  // No effect on the CPU: the same numbers as a plan without it.
  CHECK(close(plan.run(x), jit::freeze(model, x).run(x), 0));
  CHECK(jit::freeze(model, x).summary().find("TF32") == std::string::npos);

  const auto path = temp_path("tf32.frost");
  plan.save(path);
  auto loaded = jit::Plan<float>::load(path);
  CHECK(loaded.options().allow_tf32);
  CHECK(loaded.summary() == plan.summary());
  loaded.refit(model);
  CHECK(loaded.options().allow_tf32);
  // Files without the key (older ones) load with it off; anything but 0 / 1 is refused.
  write_bytes(path, with_metadata(path, [](auto& meta) { meta.erase("frost.allow_tf32"); }));
  CHECK_FALSE(jit::Plan<float>::load(path).options().allow_tf32);
  plan.save(path);
  write_bytes(path, with_metadata(path, [](auto& meta) { meta["frost.allow_tf32"] = "yes"; }));
  CHECK_THROWS_WITH_AS(jit::Plan<float>::load(path), doctest::Contains("'frost.allow_tf32' is 'yes', expected '0' or '1'"),
                       Error);
  std::remove(path.c_str());
}

namespace {
/// Linear layers over views a GEMM cannot read as they are: a row with a
/// column stride, a broadcast row (strides {0, 1}); and one it can, a
/// transposed input.
struct StridedLinears : nn::Module {
  nn::Linear fc = register_module("fc", nn::Linear(8, 3));
  T forward(const T& x) {  // x [8, 4]
    const T xt = x.t();    // [4, 8], strides {1, 4}: read as a transposed matrix
    return fc(xt) + fc(xt.narrow(0, 1, 1)) + fc(xt.narrow(0, 3, 1).contiguous().expand({4, 8}));
  }
};
}  // namespace

TEST_CASE("jit: a linear over a strided or broadcast row equals eager (the trace copies it dense); the loader "
          "rejects a linear input a GEMM cannot read") {
  manual_seed(29);
  auto model = nn::make<StridedLinears>();
  const auto x = T::randn({8, 4});
  for (bool quantized : {false, true}) {
    auto plan = jit::freeze(model, {.quantize_linear = quantized}, x);
    CHECK(close(plan.run(x), model(x), quantized ? 3e-2 : 1e-5));
    int copies = 0, linears = 0;
    for (const auto& s : plan.graph().steps) {
      copies += s.kind == jit::StepKind::copy && s.note.find("made dense") != std::string::npos;
      if (s.kind == jit::StepKind::linear || s.kind == jit::StepKind::quantized_linear) {
        ++linears;
        CHECK(jit::linear_input_ok(s.in[0]));
      }
    }
    CHECK(linears == 3);
    CHECK(copies == 2);  // the strided row and the broadcast one; the transposed input is read as it is
  }
  const auto path = temp_path("strided.frost");
  jit::freeze(model, x).save(path);
  CHECK(close(jit::Plan<float>::load(path).run(x), model(x)));
  // The transposed input's columns overlapping (stride 2 < its 4 rows).
  write_bytes(path, with_plan_json(path, [](std::string& j) { replace_first(j, "[4,8],[1,4]]", "[4,8],[1,2]]"); }));
  CHECK_THROWS_WITH_AS(jit::Plan<float>::load(path), doctest::Contains("is neither rows nor a transposed matrix"), Error);
  std::remove(path.c_str());
}

TEST_CASE("jit::Plan::save / load: max over a dim, a non-finite constant, softmax over a dim of 1 and scatter_add "
          "with a larger src load back and equal eager; a gather index past its input is rejected") {
  manual_seed(31);
  // Created during the trace (as constants of the plan), not captured.
  const auto idx = [] { return IndexTensor::from({0, 2, 1, 0, 2, 2}, {2, 3}); };
  const auto src = [] { return T::arange(12).reshape({3, 4}); };  // larger than the index, as PyTorch allows
  const std::vector<std::pair<std::string, std::function<T(const T&)>>> fs = {
      {"max", [](const T& x) { return x.max(1).values + x.min(1, true).values.squeeze(1); }},
      {"logsumexp", [](const T& x) { return x.logsumexp({1}); }},  // masks its infinite maximum: an inf constant
      {"softmax", [](const T& x) { return x.narrow(0, 0, 1).softmax(0) + x.narrow(0, 1, 1).log_softmax(0); }},
      {"scatter_add", [&](const T& x) { return x.scatter_add(1, idx(), src()); }},
  };
  const auto x = T::randn({2, 5});
  const auto path = temp_path("reductions.frost");
  for (const auto& [name, f] : fs) {
    INFO(name);
    auto plan = jit::freeze<float>(jit::trace(f, x));
    plan.save(path);
    if (name == "logsumexp")  // JSON has no inf: written as a string
      CHECK(SafetensorsFile::open(path).metadata().at("frost.plan").find("\"inf\"") != std::string::npos);
    auto loaded = jit::Plan<float>::load(path);
    CHECK(close(loaded.run(x), f(x)));
    CHECK(close(loaded.run(x), plan.run(x), 0));
  }
  // A gather whose index reaches past its input in a dim it does not index:
  // the input's window edited from rows 0-1 of x to row 0 alone.
  auto gather = [&](const T& x) { return x.narrow(0, 0, 2).gather(1, idx()); };
  const auto x3 = T::randn({3, 5});
  jit::freeze<float>(jit::trace(gather, x3)).save(path);
  CHECK(close(jit::Plan<float>::load(path).run(x3), gather(x3)));
  write_bytes(path, with_plan_json(path, [](std::string& j) { replace_first(j, "[2,5],[5,1]]", "[1,5],[5,1]]"); }));
  CHECK_THROWS_WITH_AS(jit::Plan<float>::load(path), doctest::Contains("exceeds the input [1, 5] at dim 0"), Error);
  std::remove(path.c_str());
}
