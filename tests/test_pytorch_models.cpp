// Models exported from PyTorch (tests/reference/export_models.py): their
// safetensors state dicts load unchanged into the same architecture written
// in frost, and frost reproduces PyTorch's outputs to 1e-5. Also module-level
// save/load round trips and rejected files.
#include "support.hpp"

#include <cstdio>
#include <fstream>

using namespace frost;
using namespace frost::test;
using T = Tensor<float>;

namespace {

std::string data_path(const std::string& name) { return test_data_path(name + ".safetensors"); }

T io(const std::string& model, const std::string& name) {
  return SafetensorsFile::open(data_path(model + "_io")).get<float>(name);
}

nn::Sequential make_cnn() {
  return nn::Sequential(nn::Conv2d(3, 8, 3, {.padding = 1}), nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(8, 16, 3, {.stride = 2}), nn::BatchNorm2d(16), nn::ReLU(),
                        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(16, 5));
}

}  // namespace

TEST_CASE("PyTorch models: a CNN with batch norm reproduces PyTorch's eval output") {
  auto cnn = make_cnn();
  load_safetensors(*cnn, data_path("cnn"));
  CHECK(cnn->state_dict().index_at("1.num_batches_tracked").item() == 3);
  cnn->eval();
  check_close(cnn(io("cnn", "input")), io("cnn", "output"), 1e-5, 1e-5);
}

TEST_CASE("PyTorch models: a two-layer batch-first LSTM reproduces output and final states") {
  auto lstm = nn::LSTM(4, 6, {.num_layers = 2, .batch_first = true});
  load_safetensors(*lstm, data_path("lstm"));
  auto [out, h, c] = lstm(io("lstm", "input"));
  check_close(out, io("lstm", "output"), 1e-5, 1e-5);
  check_close(h, io("lstm", "h_n"), 1e-5, 1e-5);
  check_close(c, io("lstm", "c_n"), 1e-5, 1e-5);
}

TEST_CASE("PyTorch models: MultiheadAttention with a key padding mask reproduces output and weights") {
  auto mha = nn::MultiheadAttention(8, 2, {.batch_first = true});
  load_safetensors(*mha, data_path("mha"));
  mha->eval();
  auto [out, w] = mha(io("mha", "query"), io("mha", "key"), io("mha", "value"),
                      {.key_padding_mask = io("mha", "key_padding_mask")});
  check_close(out, io("mha", "output"), 1e-5, 1e-5);
  check_close(w, io("mha", "weights"), 1e-5, 1e-5);
}

TEST_CASE("PyTorch models: MultiheadAttention with kdim/vdim, bias_kv, zero attention and both masks") {
  auto mha = nn::MultiheadAttention(8, 2, {.batch_first = true, .add_bias_kv = true, .add_zero_attn = true, .kdim = 5, .vdim = 6});
  // PyTorch's names: separate projection weights, bias_k / bias_v, no in_proj_weight.
  CHECK(mha->state_dict().keys() == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
                                 "out_proj.weight", "out_proj.bias"});
  load_safetensors(*mha, data_path("mha_kv"));
  mha->eval();
  auto [out, w] = mha(io("mha_kv", "query"), io("mha_kv", "key"), io("mha_kv", "value"),
                      {.key_padding_mask = io("mha_kv", "key_padding_mask"), .attn_mask = io("mha_kv", "attn_mask")});
  check_close(out, io("mha_kv", "output"), 1e-5, 1e-5);
  check_close(w, io("mha_kv", "weights"), 1e-5, 1e-5);
  CHECK(w.shape() == Shape{2, 3, 6});  // 4 keys + bias_k + the zero slot
  CHECK_THROWS_WITH_AS(mha(io("mha_kv", "query"), io("mha_kv", "query"), io("mha_kv", "value")),
                       doctest::Contains("kdim = 5"), Error);
}

TEST_CASE("PyTorch models: save_safetensors writes PyTorch's names and dtypes and reloads exactly") {
  manual_seed(5);
  auto a = make_cnn();
  a(T::randn({2, 3, 12, 12}));  // running statistics move away from the defaults
  const std::string path = "frost_test_cnn.safetensors";
  save_safetensors(*a, path);
  const auto f = SafetensorsFile::open(path);
  CHECK(f.info("1.num_batches_tracked").dtype == "I64");
  CHECK(f.info("0.weight").dtype == "F32");
  CHECK(f.info("9.weight").shape == Shape{5, 16});
  CHECK(f.metadata().at("format") == "pt");
  auto b = make_cnn();
  load_safetensors(*b, path);
  a->eval();
  b->eval();
  const auto x = T::randn({1, 3, 12, 12});
  CHECK(a(x).to_vector() == b(x).to_vector());

  // A different architecture: every problem is listed, nothing is loaded.
  auto lin = nn::Linear(3, 4);
  const auto before = lin->weight.to_vector();
  CHECK_THROWS_WITH_AS(load_safetensors(*lin, path), doctest::Contains("missing keys: weight; bias;"), Error);
  CHECK(lin->weight.to_vector() == before);

  // A truncated file is rejected before anything is loaded.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 9));
  }
  auto c = make_cnn();
  CHECK_THROWS_AS(load_safetensors(*c, path), Error);
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(load_safetensors(*c, path), doctest::Contains("frost_test_cnn.safetensors"), Error);
}

TEST_CASE("PyTorch models: a float64 model loads a float32 file; dtype kinds must match") {
  auto cnn = nn::SequentialT<double>(nn::Conv2dT<double>(3, 8, 3, {.padding = 1}), nn::BatchNorm2dT<double>(8));
  load_safetensors(*cnn, data_path("cnn"), /*strict=*/false);
  const auto f = SafetensorsFile::open(data_path("cnn"));
  check_close(cnn->state_dict().at("0.weight"), f.get<double>("0.weight"), 0, 0);
  nn::StateDict<float> sd;
  sd.insert("1.num_batches_tracked", T::zeros({}));
  auto bn = nn::Sequential(nn::Identity(), nn::BatchNorm2d(8));
  CHECK_THROWS_WITH_AS(bn->load_state_dict(sd, false),
                       doctest::Contains("1.num_batches_tracked (float32 in the state dict, int64 in the module)"), Error);
}
