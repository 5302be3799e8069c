// nn::Module: registration and PyTorch's dotted names, containers, modes,
// apply, zero_grad, state dicts, and every way the guide defines a model.
#include "support.hpp"

#include <frost/nn/nn.hpp>
#include <sstream>

using namespace frost;
using namespace frost::test;
using T = Tensor<float>;

namespace {

struct Block : nn::Module {
  nn::Linear fc = register_module("fc", nn::Linear(4, 4));
  T scale = register_buffer("scale", T::full({4}, 2.0f));
  T forward(const T& x) { return fc(x) * scale; }
};

struct Net : nn::Module {
  nn::Sequential features =
      register_module("features", nn::Sequential(nn::Linear(3, 4), nn::ReLU(), nn::ModuleHolder<Block>()));
  nn::Linear head = register_module("head", nn::Linear(4, 2, false));
  T forward(const T& x) { return head(features(x)); }
};

std::vector<std::string> names_of(const auto& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("nn::Module: dotted names follow PyTorch's") {
  Net net;
  CHECK(names_of(net.named_parameters()) ==
        std::vector<std::string>{"features.0.weight", "features.0.bias", "features.2.fc.weight", "features.2.fc.bias",
                                 "head.weight"});
  CHECK(names_of(net.named_buffers()) == std::vector<std::string>{"features.2.scale"});
  CHECK(names_of(net.named_children()) == std::vector<std::string>{"features", "head"});
  CHECK(names_of(net.named_modules()) ==
        std::vector<std::string>{"", "features", "features.0", "features.1", "features.2", "features.2.fc", "head"});
  CHECK(net.parameters().size() == 5);
  CHECK(net.parameters(false).empty());
  for (const auto& p : net.parameters()) CHECK(p.requires_grad());
  // PyTorch's order: a module's own parameters and buffers, then its children.
  CHECK(net.state_dict().keys() == std::vector<std::string>{"features.0.weight", "features.0.bias",
                                                            "features.2.scale", "features.2.fc.weight",
                                                            "features.2.fc.bias", "head.weight"});
  // The handle a member keeps and the registry share the tensor.
  CHECK(net.head->weight.is_same(net.named_parameters().back().second));
  CHECK(net.forward(T::randn({5, 3})).shape() == Shape{5, 2});
}

TEST_CASE("nn::Module: train/eval recurse, apply visits every module, as<> finds layer types") {
  auto net = nn::make<Net>();
  CHECK(net->is_training());
  net->eval();
  for (auto* m : net->modules()) CHECK_FALSE(m->is_training());
  net->train();
  for (auto* m : net->modules()) CHECK(m->is_training());

  int linears = 0, visited = 0;
  net->apply([&](nn::Module& m) {
    ++visited;
    if (auto* lin = m.as<nn::Linear>()) {
      ++linears;
      NoGradGuard ng;
      lin->weight.fill_(0.5f);
      if (lin->bias.defined()) lin->bias.zero_();
    }
  });
  CHECK(visited == 7);
  CHECK(linears == 3);
  CHECK(net->head->weight.to_vector() == std::vector<float>(8, 0.5f));
  CHECK(net->as<nn::Linear>() == nullptr);
  CHECK(net->features[1].as<nn::ReLU>() != nullptr);
}

TEST_CASE("nn::Module: zero_grad drops or zeroes gradients") {
  auto lin = nn::Linear(3, 2);
  lin(T::randn({4, 3})).sum().backward();
  CHECK(lin->weight.grad().defined());
  lin->zero_grad(false);
  CHECK(lin->weight.grad().to_vector() == std::vector<float>(6, 0.0f));
  lin->zero_grad();
  CHECK_FALSE(lin->weight.grad().defined());
}

TEST_CASE("nn::Module: state_dict round trip and load_state_dict errors") {
  manual_seed(1);
  Net a;
  manual_seed(2);
  Net b;
  const auto x = T::randn({2, 3});
  CHECK(closeness(a.forward(x).to_vector(), b.forward(x).to_vector(), 0, 0) > 1);
  b.load_state_dict(a.state_dict());
  CHECK(a.forward(x).to_vector() == b.forward(x).to_vector());
  // The state dict shares memory with the module, as in PyTorch.
  auto sd = a.state_dict();
  CHECK(sd.at("head.weight").data() == a.head->weight.data());

  nn::StateDict<float> partial;
  partial.insert("head.weight", T::zeros({2, 4}));
  partial.insert("extra.bias", T::zeros({3}));
  CHECK_THROWS_WITH_AS(b.load_state_dict(partial), doctest::Contains("missing keys: features.0.weight;"), Error);
  CHECK_THROWS_WITH_AS(b.load_state_dict(partial), doctest::Contains("unexpected keys: extra.bias;"), Error);
  const auto before = b.head->weight.to_vector();
  b.load_state_dict(partial, /*strict=*/false);
  CHECK(b.head->weight.to_vector() == std::vector<float>(8, 0.0f));
  CHECK(before != b.head->weight.to_vector());

  nn::StateDict<float> wrong;
  wrong.insert("head.weight", T::zeros({4, 2}));
  CHECK_THROWS_WITH_AS(b.load_state_dict(wrong, false),
                       doctest::Contains("size or dtype mismatch: head.weight ([4, 2] in the state dict, [2, 4] in the module)"),
                       Error);
  nn::StateDict<float> dtype;
  dtype.insert("head.weight", IndexTensor::zeros({2, 4}));
  CHECK_THROWS_WITH_AS(b.load_state_dict(dtype, false), doctest::Contains("int64 in the state dict, float32 in the module"),
                       Error);
  CHECK_THROWS_WITH_AS(partial.insert("head.weight", T::zeros({1})), doctest::Contains("duplicate key 'head.weight'"),
                       Error);
}

TEST_CASE("nn::Module: registration errors") {
  nn::Module m;
  m.register_parameter("w", T::zeros({2}));
  CHECK_THROWS_WITH_AS(m.register_buffer("w", T::zeros({2})), doctest::Contains("'w' is already registered"), Error);
  CHECK_THROWS_WITH_AS(m.register_parameter("a.b", T::zeros({2})), doctest::Contains("contain no '.'"), Error);
  auto x = T::zeros({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(m.register_parameter("y", x * 2.0f), doctest::Contains("has history"), Error);
  // An undefined tensor is PyTorch's None: nothing is registered.
  m.register_parameter("none", T());
  CHECK(m.parameters().size() == 1);
  CHECK_THROWS_WITH_AS(nn::Linear(3, 2)(T::zeros({4, 5})),
                       doctest::Contains("input of shape [4, 5] does not end in in_features = 3"), Error);
}

// ---- the guide's ways of writing a model ----------------------------------

struct MultiBranch : nn::Module {
  nn::ModuleList branches = register_module("branches", nn::ModuleList());
  explicit MultiBranch(int n) {
    for (int i = 0; i < n; ++i) branches->push_back(nn::Linear(8, 3));
  }
  T forward(const T& x) {
    std::vector<T> outs;
    for (const auto& b : *branches) outs.push_back(b(x));
    return cat(outs, 1);
  }
};

struct Heads : nn::Module {
  nn::ModuleDict heads = register_module("heads", nn::ModuleDict());
  Heads() {
    heads->insert("cls", nn::Linear(4, 3));
    heads->insert("reg", nn::Linear(4, 1));
  }
  T forward(const T& x, const std::string& task) { return (*heads)[task](x); }
};

struct Stack : nn::Module {
  std::vector<nn::Linear> layers;
  explicit Stack(const std::vector<std::pair<int, int>>& cfg) {
    for (std::size_t i = 0; i < cfg.size(); ++i)
      layers.push_back(add_module("fc_" + std::to_string(i), nn::Linear(cfg[i].first, cfg[i].second)));
  }
  T forward(T x) {
    for (auto& l : layers) x = l(x).relu();
    return x;
  }
};

struct DynamicModel : nn::Module {
  nn::ModuleList layers = register_module("layers", nn::ModuleList(nn::Linear(10, 10)));
  void add_layer() { layers->push_back(nn::Linear(10, 10)); }
  T forward(T x) {
    for (const auto& l : *layers) x = l(x);
    return x;
  }
};

struct TrainEvalPaths : nn::Module {
  nn::Linear body = register_module("body", nn::Linear(4, 4));
  nn::Linear aux = register_module("aux", nn::Linear(4, 2));
  nn::Linear main_head = register_module("main_head", nn::Linear(4, 2));
  T forward(const T& x) {
    auto h = body(x).relu();
    if (is_training()) return aux(h) + main_head(h);
    return main_head(h);
  }
};

struct DataBranch : nn::Module {
  nn::Linear big = register_module("big", nn::Linear(2, 2));
  nn::Linear small = register_module("small", nn::Linear(2, 2));
  float threshold = 0.0f;
  T forward(const T& x) {
    if (x.mean() > threshold) return big(x);
    return small(x);
  }
};

TEST_CASE("nn: ModuleList, ModuleDict, add_module in a loop") {
  MultiBranch mb(3);
  CHECK(mb.forward(T::randn({2, 8})).shape() == Shape{2, 9});
  CHECK(names_of(mb.named_parameters())[4] == "branches.2.weight");

  Heads h;
  CHECK(h.forward(T::randn({5, 4}), "reg").shape() == Shape{5, 1});
  CHECK(h.heads->keys() == std::vector<std::string>{"cls", "reg"});
  CHECK(h.state_dict().contains("heads.cls.bias"));
  CHECK_THROWS_WITH_AS(h.forward(T::randn({5, 4}), "seg"), doctest::Contains("no key 'seg' (keys: cls, reg)"), Error);

  Stack s({{3, 8}, {8, 8}, {8, 2}});
  CHECK(names_of(s.named_children()) == std::vector<std::string>{"fc_0", "fc_1", "fc_2"});
  CHECK(s.forward(T::randn({1, 3})).shape() == Shape{1, 2});
}

TEST_CASE("nn: a layer appended at run time joins the next forward and the state dict") {
  auto m = nn::make<DynamicModel>();
  const auto x = T::randn({3, 10});
  auto y1 = m(x);
  m->add_layer();
  auto y2 = m(x);
  CHECK(m->parameters().size() == 4);
  CHECK(m->state_dict().contains("layers.1.weight"));
  const auto l1 = m->layers[1].as<nn::Linear>();
  check_close(y2, l1->forward(y1), 1e-6, 1e-5);
  y2.sum().backward();
  CHECK(l1->weight.grad().defined());
}

TEST_CASE("nn: training and evaluation paths, and a branch on data") {
  TrainEvalPaths m;
  const auto x = T::randn({3, 4});
  auto train_out = m.forward(x);
  train_out.sum().backward();
  CHECK(m.aux->weight.grad().defined());
  m.eval();
  m.zero_grad();
  m.forward(x).sum().backward();
  CHECK_FALSE(m.aux->weight.grad().defined());

  DataBranch d;
  check_close(d.forward(T::ones({1, 2})), d.big(T::ones({1, 2})));
  check_close(d.forward(-T::ones({1, 2})), d.small(-T::ones({1, 2})));
}

TEST_CASE("nn: Sequential forwards in order; printing follows PyTorch") {
  auto seq = nn::Sequential(nn::Linear(3, 4), nn::Tanh(), nn::Linear(4, 1), nn::Flatten(0));
  const auto x = T::randn({2, 3});
  auto* l0 = seq[0].as<nn::Linear>();
  auto* l2 = seq[2].as<nn::Linear>();
  check_close(seq(x), l2->forward(l0->forward(x).tanh()).flatten(0));
  std::ostringstream os;
  os << seq;
  CHECK(os.str() ==
        "Sequential(\n  (0): Linear(in_features=3, out_features=4, bias=True)\n  (1): Tanh()\n"
        "  (2): Linear(in_features=4, out_features=1, bias=True)\n  (3): Flatten(start_dim=0, end_dim=-1)\n)");
  CHECK_THROWS_WITH_AS(seq[7], doctest::Contains("index 7 is out of range for 4 modules"), IndexError);
  CHECK(seq[-1].as<nn::Flatten>() != nullptr);  // from the end, as in PyTorch
  CHECK(seq[-4].as<nn::Linear>() == l0);
  CHECK_THROWS_WITH_AS(seq[-5], doctest::Contains("index -5 is out of range for 4 modules"), IndexError);
}

TEST_CASE("nn: a layer used twice is one module: listed, visited and optimised once, saved under both names") {
  nn::Linear lin(3, 3);
  nn::Sequential seq(lin, nn::ReLU(), lin);
  CHECK(seq->children().size() == 2);
  std::vector<std::string> names;
  for (const auto& [n, m] : seq->named_modules()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"", "0", "1"});
  int visits = 0;
  seq->apply([&](nn::Module& m) { visits += m.as<nn::Linear>() != nullptr; });
  CHECK(visits == 1);  // an init that rescales weights rescales them once
  CHECK(seq->parameters().size() == 2);
  const auto sd = seq->state_dict();
  CHECK(sd.contains("0.weight"));
  CHECK(sd.contains("2.weight"));
}

TEST_CASE("nn: Linear, Bilinear and activations in double pass gradchecks") {
  nn::LinearT<double> lin(3, 2);
  CHECK(gradcheck([&](const std::vector<TD>& in) { return nn::functional::linear(in[0], in[1], in[2]); },
                  {TD::randn({4, 3}), lin->weight, lin->bias}));
  CHECK(gradcheck([&](const std::vector<TD>& in) { return nn::functional::linear(in[0], in[1], in[2]); },
                  {TD::randn({2, 4, 3}), lin->weight, lin->bias}));
  nn::BilinearT<double> bil(3, 2, 4);
  CHECK(gradcheck([&](const std::vector<TD>& in) { return nn::functional::bilinear(in[0], in[1], in[2], in[3]); },
                  {TD::randn({5, 3}), TD::randn({5, 2}), bil->weight, bil->bias}));
  // Bilinear against the definition.
  const auto x1 = TD::randn({2, 3}), x2 = TD::randn({2, 2});
  auto y = bil(x1, x2);
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 4; ++o) {
      double s = bil->bias.data()[o];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) s += x1.data()[n * 3 + i] * bil->weight.data()[(o * 3 + i) * 2 + j] * x2.data()[n * 2 + j];
      CHECK(y.data()[n * 4 + o] == doctest::Approx(s).epsilon(1e-12));
    }
  // Default init bounds: +-1/sqrt(in_features).
  nn::LinearT<double> wide(100, 50);
  CHECK(wide->weight.abs().max().item() <= 0.1);
  CHECK(wide->weight.abs().max().item() > 0.09);
  nn::LeakyReLUT<double> lr(0.2);
  CHECK(lr(TD::from({-1.0, 2.0})).to_vector() == std::vector<double>{-0.2, 2.0});
  CHECK(nn::SoftmaxT<double>(1)(TD::zeros({1, 4})).to_vector() == std::vector<double>(4, 0.25));
}
